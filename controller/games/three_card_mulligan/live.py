"""Live form of Three Card Mulligan (shared player hand) as a step machine.

Steps: ``P1 P2 P3`` (up), ``D1 D2 D3`` (hidden), the ``mulligan`` decision window (did any
online player choose to mulligan?), ``PM1-PM3`` (up) only if someone did, the reveal of the
dealer's hand ``D``, ``DM1-DM3`` (up) when the dealer's first hand is below king-high, finish.

The rules (ranking, the dealer's rule, both paths' settlement) are
:mod:`controller.games.three_card_mulligan.rules`; this module only sequences them. The result JSON
is documented in ``docs/live-play.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from pydantic import Field

from controller.cards import Piece
from controller.errors import PieceRefused, RulesError
from controller.games.base import Declared
from controller.games.live._common import (
    NoCarryOver,
    RevealsHands,
    bet_lines,
    cards_wire,
    expect_deal,
    expect_window,
    read_choice,
    summaries_wire,
)
from controller.games.live.base import JSON, DealStep, DecisionStep, FinishStep, RevealStep, Step
from controller.games.options import GameOptions
from controller.games.three_card_mulligan import rules
from controller.games.three_card_mulligan.rules import MulliganRound, Path
from controller.money import BetResult, PayTables

WINDOW: Final = "mulligan"
CHOICES: Final = ("stay", "mulligan")
DEFAULT_DECISION: Final[Mapping[str, str]] = {"choice": "stay"}
DECISION_SECONDS_OPTION: Final = "decision_seconds"
"""The option that sets how long each decision window stays open (``run --decision-seconds``)."""


@dataclass
class MulliganLiveRound(RevealsHands, NoCarryOver):
    """One round of Three Card Mulligan at the table.

    Attributes:
        paytables: The table's pay tables.
        decision_seconds: How long the mulligan window stays open.
        state: The rules' round (cards dealt and the decision).
        revealed: Hands whose reveal was published.
    """

    game_id: ClassVar[str] = rules.GAME_ID

    paytables: PayTables
    decision_seconds: float
    state: MulliganRound = field(default_factory=rules.THREE_CARD_MULLIGAN.new_round)
    revealed: set[str] = field(default_factory=set)

    def _dealer_reveal_due(self) -> bool:
        if rules.DEALER in self.revealed or self.state.player_mulligan is None:
            return False
        return self.state.dealer_revealed

    def next_step(self) -> Step:
        """Next card, the decision window, the dealer's reveal, or the finish."""
        state = self.state
        step = state.step
        if step is rules.Step.DECIDE:
            player = state.hands().get(rules.PLAYER, ())
            return DecisionStep(
                window=WINDOW,
                kind="mulligan",
                seconds=self.decision_seconds,
                seat=None,
                options=CHOICES,
                info={
                    "player": [str(card) for card in player],
                    "house_way": "stay" if rules.house_way_stays(player) else "mulligan",
                },
                default=dict(DEFAULT_DECISION),
            )
        if self._dealer_reveal_due():
            dealer = state.hands()[rules.DEALER]
            return RevealStep(rules.DEALER, tuple(str(card) for card in dealer))
        if step is rules.Step.DEAL:
            slot = state.next_slot
            assert slot is not None
            return DealStep(len(state.cards), slot)
        return FinishStep()

    def apply_card(self, index: int, piece: Piece) -> None:
        """Accept a card for the waiting slot.

        Raises:
            RulesError: No card is awaited at ``index`` (or the piece is not a free card).
        """
        expect_deal(self.next_step(), index, rules.GAME_ID)
        try:
            self.state = self.state.deal(piece)
        except PieceRefused as exc:
            raise RulesError(exc.message, game=rules.GAME_ID, index=index) from exc

    def apply_decision(self, window: str, decision: JSON) -> JSON:
        """Apply the window's outcome: ``{"choice": "stay" | "mulligan"}``.

        Raises:
            IllegalAction: Not the open window, a malformed decision or an unknown choice.
        """
        expect_window(self.next_step(), window, rules.GAME_ID)
        choice = read_choice(decision, CHOICES, window)
        self.state = self.state.decide(choice == "mulligan")
        return {"choice": choice}

    def result(self) -> JSON:
        """The ``round_result`` body (both paths; see ``docs/live-play.md``).

        Raises:
            RulesError: The round is not finished.
        """
        if not isinstance(self.next_step(), FinishStep):
            raise RulesError(
                "the round is not finished", game=rules.GAME_ID, dealt=len(self.state.cards)
            )
        outcome = self.state.result(self.paytables)
        hands = self.state.hands()
        dealt = outcome.mulliganed is not None
        paths: dict[str, Any] = {Path.STAYED.value: {"winner": outcome.winner(Path.STAYED)}}
        if dealt:
            mulliganed_bets = outcome.bets(Path.MULLIGANED)
            paths[Path.MULLIGANED.value] = {"winner": outcome.winner(Path.MULLIGANED)}
        else:
            refund = BetResult.refund("not dealt")
            mulliganed_bets = dict.fromkeys(rules.BET_IDS, refund)
            paths[Path.MULLIGANED.value] = "not_dealt"
        return {
            "cards": cards_wire(hands),
            "winner": outcome.winner(Path.STAYED),
            "hands": summaries_wire(outcome.hands),
            "bets": [
                *bet_lines(outcome.bets(Path.STAYED), path=Path.STAYED.value, default=True),
                *bet_lines(mulliganed_bets, path=Path.MULLIGANED.value),
            ],
            "details": {
                "mulligan_chosen": bool(self.state.player_mulligan),
                "mulligan_path": "dealt" if dealt else "not_dealt",
                "dealer_stands": outcome.dealer_final == rules.DEALER,
                "dealer_final": outcome.dealer_final,
                "paths": paths,
            },
        }


@dataclass(frozen=True)
class MulliganLiveGame(Declared):
    """Three Card Mulligan as a :class:`controller.games.live.base.LiveGame`.

    Attributes:
        paytables: Merged pay tables.
        decision_seconds: The mulligan window's length.
    """

    facts = rules.FACTS

    paytables: PayTables
    decision_seconds: float = 10.0

    def new_round(self, table_state: JSON) -> MulliganLiveRound:
        """A fresh round (nothing carries over)."""
        return MulliganLiveRound(self.paytables, self.decision_seconds)


class Options(GameOptions):
    """Three Card Mulligan.

    Attributes:
        decision_seconds: How long the stay/mulligan window stays open.
    """

    decision_seconds: float = Field(10.0, gt=0, le=600)


def build(options: Options, paytables: PayTables) -> MulliganLiveGame:
    """The table's live game (the registry's live factory)."""
    return MulliganLiveGame(paytables, options.decision_seconds)


__all__ = ["CHOICES", "WINDOW", "MulliganLiveGame", "MulliganLiveRound", "read_choice"]


def page_hands(
    hands: list[tuple[str, list[str]]], seats: tuple[str, ...]
) -> list[tuple[str, list[str]]]:
    """The hands a page reserves: the plan's, and the mulligan hands dealt only when called.

    (:meth:`controller.games.spec.GameSpec.page_hands`.)
    """
    named = {hand for hand, _ in hands}
    extra = [("PM", ["PM1", "PM2", "PM3"]), ("DM", ["DM1", "DM2", "DM3"])]
    return hands + [(hand, slots) for hand, slots in extra if hand not in named]
