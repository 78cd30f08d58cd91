"""Live form of Break Poker (shared seven-card player hand) as a step machine.

Steps: ``P1-P7`` (up: the shared player hand is on the felt), ``D1-D7`` (hidden), the
``setting`` window (players set the shared hand in the betting system; ``{"choice":
"close"}`` closes it early, the deadline's ``{}`` closes it on time), the reveal of the
dealer's hand, finish. The result lists the main bet's outcome for every legal setting of the
player hand (:func:`controller.games.break_poker.round_result`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Final

from pydantic import Field

from controller.cards import Card, Piece
from controller.errors import IllegalAction, RulesError
from controller.games.base import Declared
from controller.games.break_poker import rules
from controller.games.live._common import (
    NoCarryOver,
    RevealsHands,
    bet_lines,
    cards_wire,
    expect_deal,
    expect_window,
    summaries_wire,
)
from controller.games.live.base import JSON, DealStep, DecisionStep, FinishStep, RevealStep, Step
from controller.games.options import GameOptions
from controller.money import PayTables

WINDOW: Final = "setting"
OPTIONS: Final = ("close",)
PLAYER: Final = "player"
DEALER: Final = "dealer"
DECISION_SECONDS_OPTION: Final = "setting_seconds"
"""The option that sets how long each decision window stays open (``run --decision-seconds``)."""


@dataclass
class BreakPokerLiveRound(RevealsHands, NoCarryOver):
    """One round of Break Poker at the table.

    Attributes:
        paytables: The table's pay tables.
        setting_seconds: How long the setting window stays open.
        qualifier: The reading of the dealer's qualification (``dealer_qualifier``).
        dealt: Cards dealt so far, in plan order.
        closed: Whether the setting window has closed.
        revealed: Hands whose reveal was published.
    """

    game_id: ClassVar[str] = rules.GAME_ID

    paytables: PayTables
    setting_seconds: float
    qualifier: rules.Qualifier = rules.Qualifier.K32
    dealt: list[Card] = field(default_factory=list)
    closed: bool = False
    revealed: set[str] = field(default_factory=set)

    def _hands(self) -> dict[str, list[Card]]:
        hands: dict[str, list[Card]] = {PLAYER: [], DEALER: []}
        for slot, card in zip(rules.DEAL_PLAN.slots, self.dealt, strict=False):
            hands[slot.hand].append(card)
        return hands

    def next_step(self) -> Step:
        """Next card, the setting window, the dealer's reveal, or the finish."""
        if len(self.dealt) < len(rules.DEAL_PLAN):
            return DealStep(len(self.dealt), rules.DEAL_PLAN.slots[len(self.dealt)])
        if not self.closed:
            player = self._hands()[PLAYER]
            house = rules.house_way(player)
            return DecisionStep(
                window=WINDOW,
                kind="setting",
                seconds=self.setting_seconds,
                seat=None,
                options=OPTIONS,
                info={
                    "player": [str(card) for card in player],
                    "house_way": house.to_wire(),
                    "settings": len(rules.legal_settings(player)),
                },
                default={},
            )
        if DEALER not in self.revealed:
            return RevealStep(DEALER, tuple(str(card) for card in self._hands()[DEALER]))
        return FinishStep()

    def apply_card(self, index: int, piece: Piece) -> None:
        """Accept a card for the waiting slot.

        Raises:
            RulesError: No card is awaited at ``index``, or the piece is not a card.
        """
        expect_deal(self.next_step(), index, rules.GAME_ID)
        if not isinstance(piece, Card):
            raise RulesError("a tile cannot be in Break Poker", game=rules.GAME_ID, index=index)
        self.dealt.append(piece)

    def apply_decision(self, window: str, decision: JSON) -> JSON:
        """Close the setting window: ``{"choice": "close"}`` early, ``{}`` at the deadline.

        Raises:
            IllegalAction: Not the open window, or anything else in the decision.
        """
        expect_window(self.next_step(), window, rules.GAME_ID)
        if not isinstance(decision, Mapping):
            raise IllegalAction("decision", "a decision is a JSON object", window=window)
        if dict(decision) not in ({}, {"choice": "close"}):
            raise IllegalAction(
                "decision",
                f"the setting window only takes {{'choice': 'close'}} (or {{}}), got "
                f"{dict(decision)!r}; players set their hands in the betting system",
                game=rules.GAME_ID,
                window=window,
            )
        self.closed = True
        return dict(decision)

    def result(self) -> JSON:
        """The ``round_result`` body (see ``docs/live-play.md``).

        Raises:
            RulesError: The round is not finished.
        """
        if not isinstance(self.next_step(), FinishStep):
            raise RulesError("the round is not finished", game=rules.GAME_ID)
        hands = self._hands()
        outcome = rules.round_result(hands[PLAYER], hands[DEALER], self.paytables, self.qualifier)
        judged = rules.judged_round(outcome)
        details = outcome.to_details()
        main, break_bonus, dealer_break_bonus = rules.BET_IDS
        return {
            "cards": cards_wire(hands),
            "winner": judged.winner,
            "hands": summaries_wire(judged.hands),
            "bets": [
                *(
                    line
                    for setting, settled in outcome.main.items()
                    for line in bet_lines(
                        {main: settled},
                        setting=setting,
                        default=setting == outcome.default_setting_id,
                    )
                ),
                *bet_lines(
                    {
                        break_bonus: outcome.break_bonus,
                        dealer_break_bonus: outcome.dealer_break_bonus,
                    }
                ),
            ],
            "details": {key: value for key, value in details.items() if key != "main_by_setting"}
            | {"house_way": outcome.house_way.to_wire()},
        }


@dataclass(frozen=True)
class BreakPokerLiveGame(Declared):
    """Break Poker as a :class:`controller.games.live.base.LiveGame`.

    Attributes:
        paytables: Merged pay tables.
        setting_seconds: The setting window's length.
        qualifier: The reading of the dealer's qualification.
    """

    facts = rules.FACTS

    paytables: PayTables
    setting_seconds: float = 20.0
    qualifier: rules.Qualifier = rules.Qualifier.K32

    def new_round(self, table_state: JSON) -> BreakPokerLiveRound:
        """A fresh round (nothing carries over)."""
        return BreakPokerLiveRound(self.paytables, self.setting_seconds, self.qualifier)


class Options(GameOptions):
    """Break Poker.

    Attributes:
        setting_seconds: How long the setting window stays open (unless closed early).
        dealer_qualifier: How the dealer's qualification is read: ``"k32"`` (default, the
            rule as written: high hand K-3-2 or better, ace high) or ``"needs_king"`` (the
            published par table's reading: a high-card dealer without a king does not
            qualify, so A-Q-J does not). The par sheet takes the same option
            (``tablectl analyze break-poker --option dealer_qualifier=needs_king``).
    """

    setting_seconds: float = Field(20.0, gt=0, le=600)
    dealer_qualifier: rules.Qualifier = rules.Qualifier.K32


def build(options: Options, paytables: PayTables) -> BreakPokerLiveGame:
    """The table's live game (the registry's live factory)."""
    return BreakPokerLiveGame(paytables, options.setting_seconds, options.dealer_qualifier)


__all__ = ["OPTIONS", "WINDOW", "BreakPokerLiveGame", "BreakPokerLiveRound"]
