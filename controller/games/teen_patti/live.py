"""Teen Patti 20-20 at a live table: a fixed deal plan, no decisions, no options."""

from __future__ import annotations

from controller.games.live.fixed_plan import FixedPlanGame
from controller.games.spec import GameOptions
from controller.games.teen_patti.rules import TEEN_PATTI_20_20
from controller.money import PayTables


class TeenPattiOptions(GameOptions):
    """Teen Patti 20-20 has no live options."""


def build(options: TeenPattiOptions, paytables: PayTables) -> FixedPlanGame:
    """The table's live game (the registry's live factory)."""
    return FixedPlanGame(TEEN_PATTI_20_20, paytables)


__all__ = ["TeenPattiOptions", "build"]
