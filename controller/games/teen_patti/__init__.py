"""Teen Patti 20-20: two three-card hands, A and B, and five side bets.

The package: ``rules`` (pure rules, no numpy), ``live`` (options and live step machine),
``par_sheet`` (the par sheet, numpy; loaded only by ``tablectl analyze``).
"""

from __future__ import annotations

from typing import Final

from controller.games.spec import GameSpec
from controller.games.teen_patti import rules

SPEC: Final = GameSpec(
    facts=rules.FACTS,
    deal_plan=rules.TEEN_PATTI_20_20.deal_plan,
    rules=rules.TEEN_PATTI_20_20,
    live=f"{__name__}.live",
    par_sheet=f"{__name__}.par_sheet",
)
"""The game, as the registry knows it."""

__all__ = ["SPEC"]
