"""Mahjong Pai Gow: two tiles per position against a rotating banker.

The package: ``rules`` (pure rules, no numpy), ``live`` (options and live step machine),
``par_sheet`` (the par sheet, numpy; loaded only by ``tablectl analyze``).
"""

from __future__ import annotations

from typing import Final

from controller.games.mahjong_pai_gow import rules
from controller.games.spec import GameSpec

SPEC: Final = GameSpec(
    facts=rules.FACTS,
    deal_plan=rules.MAHJONG_PAI_GOW.deal_plan,
    rules=rules.MAHJONG_PAI_GOW,
    live=f"{__name__}.live",
    par_sheet=f"{__name__}.par_sheet",
)
"""The game, as the registry knows it."""

__all__ = ["SPEC"]
