"""Texas Hold'em: the seats play each other; the table deals, runs the actions and the pots.

The package: ``rules`` (pure rules, no numpy), ``live`` (options and live step machine),
``par_sheet`` (the par sheet, numpy; loaded only by ``tablectl analyze``), ``equity`` (win
probabilities, numpy; loaded at the first equity).
"""

from __future__ import annotations

from typing import Final

from controller.games.spec import GameSpec
from controller.games.texas_holdem import rules

SPEC: Final = GameSpec(
    facts=rules.FACTS,
    deal_plan=rules.deal_plan(range(1, rules.DEMO_SEATS + 1)),
    rules=None,
    live=f"{__name__}.live",
    par_sheet=f"{__name__}.par_sheet",
)
"""The game, as the registry knows it."""

__all__ = ["SPEC"]
