"""Three Card Mulligan: player against dealer, each may mulligan the three-card hand.

The package: ``rules`` (pure rules, no numpy), ``live`` (options and live step machine),
``par_sheet`` (the par sheet, numpy; loaded only by ``tablectl analyze``).
"""

from __future__ import annotations

from typing import Final

from controller.games.spec import GameSpec
from controller.games.three_card_mulligan import rules

SPEC: Final = GameSpec(
    facts=rules.FACTS,
    deal_plan=rules.THREE_CARD_MULLIGAN.deal_plan,
    rules=rules.THREE_CARD_MULLIGAN,
    live=f"{__name__}.live",
    par_sheet=f"{__name__}.par_sheet",
)
"""The game, as the registry knows it."""

__all__ = ["SPEC"]
