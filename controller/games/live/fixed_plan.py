"""Live form of a game with a fixed deal plan and no decisions (Teen Patti 20-20).

Wraps any :class:`controller.games.base.TableGame`: deal every slot of its plan in order,
reveal nothing (or each hidden hand at the end), then judge and settle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.cards import Deck, Piece
from controller.errors import IllegalAction, RulesError
from controller.games.base import Face, TableGame
from controller.games.live._common import NoCarryOver, bet_lines
from controller.games.live.base import JSON, DealStep, FinishStep, RevealStep, Step
from controller.money import PayTables


@dataclass
class FixedPlanRound(NoCarryOver):
    """One round of a fixed-plan game."""

    game: TableGame
    paytables: PayTables
    dealt: list[Piece] = field(default_factory=list)
    revealed: set[str] = field(default_factory=set)

    def _hidden_hands(self) -> list[str]:
        return list(
            dict.fromkeys(s.hand for s in self.game.deal_plan.slots if s.face is Face.HIDDEN)
        )

    def next_step(self) -> Step:
        """The next slot, then a reveal of each hidden hand, then the finish."""
        plan = self.game.deal_plan
        if len(self.dealt) < len(plan):
            return DealStep(len(self.dealt), plan.slots[len(self.dealt)])
        hands = plan.group(self.dealt)
        for hand in self._hidden_hands():
            if hand not in self.revealed:
                return RevealStep(hand, tuple(str(piece) for piece in hands[hand]))
        return FinishStep()

    def apply_card(self, index: int, piece: Piece) -> None:
        """Accept the piece for slot ``index``."""
        if index != len(self.dealt) or index >= len(self.game.deal_plan):
            raise RulesError(
                "card for a slot that is not waiting", index=index, waiting=len(self.dealt)
            )
        self.dealt.append(piece)

    def apply_decision(self, window: str, decision: JSON) -> JSON:
        """This game has no decisions."""
        raise IllegalAction("decision", f"{self.game.id} has no decision windows", window=window)

    def mark_revealed(self, hand: str) -> None:
        """Record that ``hand`` was revealed."""
        self.revealed.add(hand)

    def result(self) -> JSON:
        """Judge and settle."""
        if not isinstance(self.next_step(), FinishStep):
            raise RulesError("the round is not finished", dealt=len(self.dealt))
        hands = self.game.deal_plan.group(self.dealt)
        outcome = self.game.resolve(hands)
        settlement = self.game.settle(outcome, self.paytables)
        return {
            "cards": {hand: [str(piece) for piece in pieces] for hand, pieces in hands.items()},
            "winner": outcome.winner,
            "hands": {
                hand: {"category": summary.category, "description": summary.description}
                for hand, summary in outcome.hands.items()
            },
            "bets": bet_lines(settlement),
            "details": dict(outcome.details),
        }


@dataclass(frozen=True)
class FixedPlanGame:
    """A :class:`controller.games.live.base.LiveGame` for a fixed-plan game."""

    game: TableGame
    paytables: PayTables

    @property
    def id(self) -> str:
        """The game id."""
        return self.game.id

    @property
    def deck(self) -> Deck:
        """The game's deck."""
        return self.game.deck

    @property
    def bet_ids(self) -> tuple[str, ...]:
        """The game's bet types."""
        return self.game.bet_ids

    def new_round(self, table_state: Mapping[str, Any]) -> FixedPlanRound:
        """A fresh round."""
        return FixedPlanRound(self.game, self.paytables)
