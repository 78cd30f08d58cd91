"""Teen Patti 20-20 at a live table: a fixed deal plan, no decisions, no options."""

from __future__ import annotations

from controller.games.live.fixed_plan import FixedPlanGame
from controller.games.options import GameOptions
from controller.games.teen_patti.rules import TEEN_PATTI_20_20
from controller.money import PayTables


class Options(GameOptions):
    """Teen Patti 20-20 has no live options."""


def build(options: Options, paytables: PayTables) -> FixedPlanGame:
    """The table's live game (the registry's live factory)."""
    return FixedPlanGame(TEEN_PATTI_20_20, paytables)


__all__ = ["Options", "build"]
