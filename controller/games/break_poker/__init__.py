"""Break Poker: seven cards set into a two-card low and a five-card high hand.

The package: ``rules`` (pure rules, no numpy), ``live`` (options and live step machine),
``par_sheet`` (the par sheet, numpy; loaded only by ``tablectl analyze``), ``hands`` (hand
strengths on ranks).
"""

from __future__ import annotations

from typing import Final

from controller.games.break_poker import rules
from controller.games.spec import GameSpec

SPEC: Final = GameSpec(
    facts=rules.FACTS,
    deal_plan=rules.BREAK_POKER.deal_plan,
    rules=rules.BREAK_POKER,
    live=f"{__name__}.live",
    par_sheet=f"{__name__}.par_sheet",
)
"""The game, as the registry knows it."""

__all__ = ["SPEC"]
