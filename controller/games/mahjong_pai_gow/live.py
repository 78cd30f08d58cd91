"""Live form of Mahjong Pai Gow as a step machine: bank offers, deal, settlement.

Steps: the bank is offered in rotation (:class:`controller.games.mahjong_pai_gow.BankerRotation`)
with one ``bank-offer-<pos>`` window per position asked (``accept`` / ``decline``, default
``accept``); the position that accepts holds the bank and plays the banker box ``B``, and an
information step (``bank``: who banks, the offers) announces it. These are the round's
opening (``before_betting``): players bet against a banker already chosen. Then two tiles to
each *other* position in the table's dealing order, then the banker's two; finish. When every
position declines the round is void ("no banker"): no tile is dealt and the result refunds
every bet (see ``docs/live-play.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import Field, model_validator

from controller.cards import Piece, Tile
from controller.errors import IllegalAction, RulesError
from controller.games.base import DealPlan, Declared, Slot
from controller.games.live._common import (
    bet_lines,
    cards_wire,
    expect_deal,
    expect_window,
    read_choice,
    summary_wire,
)
from controller.games.live.base import JSON, DealStep, DecisionStep, FinishStep, InfoStep, Step
from controller.games.mahjong_pai_gow import rules
from controller.games.mahjong_pai_gow.rules import BankerRotation, CommissionMode
from controller.games.options import GameOptions
from controller.money import BetResult, PayTables

CHOICES: Final = ("accept", "decline")
NO_BANKER: Final = "no banker"
BANKING: Final = "position holds the bank"
DECISION_SECONDS_OPTION: Final = "bank_seconds"
"""The option that sets how long each decision window stays open (``run --decision-seconds``)."""


def offer_window(position: str) -> str:
    """The window id of the bank offer to ``position``."""
    return f"bank-offer-{position}"


@dataclass
class MahjongLiveRound:
    """One round of Mahjong Pai Gow at the table.

    Attributes:
        paytables: The table's pay tables.
        commission: How the banker's commission is charged.
        dealing_order: The positions in the table's dealing order.
        bank_seconds: How long each bank offer stays open.
        rotation: The rotation before this round's offers.
        declined: Positions that declined the bank this round, in order.
        banker: The position that accepted, once one has.
        announced: Whether the banker was announced (the ``bank`` information step).
        dealt: Tiles dealt so far, in plan order.
    """

    paytables: PayTables
    commission: CommissionMode
    dealing_order: tuple[str, ...]
    bank_seconds: float
    rotation: BankerRotation
    declined: list[str] = field(default_factory=list)
    banker: str | None = None
    announced: bool = False
    dealt: list[Tile] = field(default_factory=list)

    def _offered(self) -> str | None:
        """The position the bank is offered to now (``None``: taken, or everyone declined)."""
        if self.banker is not None:
            return None
        return self.rotation.next(set(self.declined))

    @property
    def voided(self) -> bool:
        """Whether every position declined the bank."""
        return self.banker is None and self._offered() is None

    @property
    def playing(self) -> tuple[str, ...]:
        """The positions dealt this round (every one but the banker's), in dealing order."""
        return tuple(position for position in self.dealing_order if position != self.banker)

    def plan(self) -> DealPlan:
        """Two tiles to each playing position in dealing order, then the banker's two."""
        return DealPlan(
            tuple(
                Slot(f"{hand}{suffix}", hand)
                for hand in (*self.playing, rules.BANKER)
                for suffix in ("a", "b")
            )
        )

    def next_step(self) -> Step:
        """A bank offer, the banker's announcement, the next tile, or the finish."""
        offered = self._offered()
        if offered is not None:
            return DecisionStep(
                window=offer_window(offered),
                kind="bank",
                seconds=self.bank_seconds,
                seat=offered,
                options=CHOICES,
                info={
                    "position": offered,
                    "order": list(self.rotation.order()),
                    "declined": list(self.declined),
                    "previous_banker": self.rotation.current,
                },
                default={"choice": "accept"},
                before_betting=True,
            )
        if self.banker is None:
            return FinishStep()
        if not self.announced:
            return InfoStep(
                kind="bank",
                data={
                    "banker": self.banker,
                    "offers": self._offers(),
                    "previous_banker": self.rotation.current,
                },
                secure=False,
                before_betting=True,
            )
        plan = self.plan()
        if len(self.dealt) < len(plan):
            return DealStep(len(self.dealt), plan.slots[len(self.dealt)])
        return FinishStep()

    def apply_card(self, index: int, piece: Piece) -> None:
        """Accept a tile for the waiting slot.

        Raises:
            RulesError: No tile is awaited at ``index``, or the piece is not a tile.
        """
        expect_deal(self.next_step(), index, rules.GAME_ID, piece="tile")
        if not isinstance(piece, Tile):
            raise RulesError("a card cannot be in Mahjong Pai Gow", game=rules.GAME_ID)
        self.dealt.append(piece)

    def apply_decision(self, window: str, decision: JSON) -> JSON:
        """Accept or decline the bank: ``{"choice": "accept" | "decline"}``.

        Raises:
            IllegalAction: Not the open offer, malformed, or not a choice offered.
        """
        step = expect_window(self.next_step(), window, rules.GAME_ID)
        assert step.seat is not None
        if isinstance(decision, Mapping) and "position" in decision:
            if decision["position"] != step.seat:
                raise IllegalAction(
                    "decision",
                    f"the bank is offered to {step.seat}, not {decision['position']!r}",
                    game=rules.GAME_ID,
                    window=window,
                )
            decision = {key: value for key, value in decision.items() if key != "position"}
        choice = read_choice(decision, CHOICES, window)
        if choice == "accept":
            self.banker = step.seat
        else:
            self.declined.append(step.seat)
        return {"choice": choice, "position": step.seat}

    def mark_info_published(self) -> None:
        """The banker was announced.

        Raises:
            RulesError: No announcement is due (no banker yet, or announced already).
        """
        if self.banker is None or self.announced:
            raise RulesError("no banker announcement is due", game=rules.GAME_ID)
        self.announced = True

    def _offers(self) -> list[dict[str, str]]:
        """The offers made this round, in order: the declines, then the acceptance."""
        offers = [{"position": position, "choice": "decline"} for position in self.declined]
        if self.banker is not None:
            offers.append({"position": self.banker, "choice": "accept"})
        return offers

    def mark_revealed(self, hand: str) -> None:
        """Nothing is hidden in this game.

        Raises:
            RulesError: Always (no reveal is ever due).
        """
        raise RulesError("nothing is hidden in Mahjong Pai Gow", game=rules.GAME_ID, hand=hand)

    def result(self) -> JSON:
        """The ``round_result`` body (see ``docs/live-play.md``).

        Raises:
            RulesError: The round is not finished.
        """
        if not isinstance(self.next_step(), FinishStep):
            raise RulesError("the round is not finished", game=rules.GAME_ID)
        details: dict[str, Any] = {
            "banker": self.banker,
            "offers": self._offers(),
            "commission": self.commission.value,
            "dealing_order": list(self.dealing_order),
        }
        if self.banker is None:
            refund = dict.fromkeys(rules.BET_IDS, BetResult.refund(NO_BANKER))
            return {
                "cards": {},
                "winner": "void",
                "hands": {},
                "bets": [
                    line
                    for position in self.dealing_order
                    for line in bet_lines(refund, position=position)
                ],
                "details": details | {"voided": True, "reason": NO_BANKER},
            }
        hands = self.plan().group(self.dealt)
        results = rules.resolve_positions(hands, self.playing)
        beaten = [label for label in self.playing if results[label].winner is rules.Winner.PLAYER]
        bets: list[JSON] = []
        for position in self.dealing_order:
            if position == self.banker:
                settled: Mapping[str, BetResult] = dict.fromkeys(
                    rules.BET_IDS, BetResult.refund(BANKING)
                )
            else:
                settled = rules.settle_position(results[position], self.paytables, self.commission)
            bets.extend(bet_lines(settled, position=position))
        return {
            "cards": cards_wire(hands),
            "winner": "+".join(beaten) if beaten else rules.BANKER,
            "hands": {label: _summary(tiles, label) for label, tiles in hands.items()},
            "bets": bets,
            "details": details
            | {
                "voided": False,
                "positions": {
                    label: {"winner": r.winner.value, "reason": r.reason.value}
                    for label, r in results.items()
                },
            },
        }

    def table_state_after(self) -> JSON:
        """The banker rotation: ``{"banker": position | null}`` (unchanged when all declined).

        Raises:
            RulesError: The round is not finished.
        """
        if not isinstance(self.next_step(), FinishStep):
            raise RulesError("the round is not finished", game=rules.GAME_ID)
        after = self.rotation.advance(set(self.declined))
        return {"banker": after.current}


def _summary(tiles: Sequence[Piece], label: str) -> dict[str, str]:
    return summary_wire(rules.evaluate_hand(tiles, label))


@dataclass(frozen=True)
class MahjongLiveGame(Declared):
    """Mahjong Pai Gow as a :class:`controller.games.live.base.LiveGame`.

    Attributes:
        paytables: Merged pay tables.
        positions: The player positions in table order (``P1`` ... ``Pn``).
        dealing_order: The order tiles are dealt to positions (a permutation of
            ``positions``; default: table order).
        commission: Per bet (default) or on the banker's net.
        bank_seconds: How long each bank offer stays open.
    """

    facts = rules.FACTS

    paytables: PayTables
    positions: tuple[str, ...] = rules.position_labels(rules.DEFAULT_POSITIONS)
    dealing_order: tuple[str, ...] = ()
    commission: CommissionMode = CommissionMode.PER_BET
    bank_seconds: float = 10.0

    def new_round(self, table_state: JSON) -> MahjongLiveRound:
        """A fresh round; ``table_state`` carries ``{"banker": position | null}``.

        Raises:
            RulesError: ``table_state`` names a banker who is not a position of this table.
        """
        current = table_state.get("banker") if isinstance(table_state, Mapping) else None
        if current is not None and current not in self.positions:
            raise RulesError(
                f"table state names banker {current!r}, not one of {list(self.positions)}",
                game=rules.GAME_ID,
                banker=current,
            )
        return MahjongLiveRound(
            paytables=self.paytables,
            commission=self.commission,
            dealing_order=self.dealing_order or self.positions,
            bank_seconds=self.bank_seconds,
            rotation=BankerRotation(self.positions, current),
        )


class Options(GameOptions):
    """Mahjong Pai Gow.

    Attributes:
        positions: Player positions ``P1``..``Pn`` (2-9; one of them banks each round).
        commission: ``per_bet`` (every winning bet paid 0.95:1) or ``on_net`` (the banker's
            side paid 1:1 per position, commission on the banker's net for the round).
        bank_seconds: How long each bank offer stays open.
        dealing_order: The positions in the order the dealer serves them (default: table
            order ``P1``..``Pn``); a permutation of every position.
    """

    positions: int = Field(4, ge=2, le=9)
    commission: Literal["per_bet", "on_net"] = "per_bet"
    bank_seconds: float = Field(10.0, gt=0, le=600)
    dealing_order: tuple[str, ...] | None = None

    @model_validator(mode="after")
    def _check(self) -> Options:
        if self.dealing_order is not None:
            labels = [f"P{index}" for index in range(1, self.positions + 1)]
            if sorted(self.dealing_order) != sorted(labels):
                raise ValueError(f"dealing_order must list each of {labels} exactly once")
        return self


def deal_plan_for(options: Options) -> DealPlan:
    """Every slot a round at this table can deal (each position's and the banker's tiles).

    The banker's position is not dealt in a round; its slots still exist: what a
    multi-reader table binds its readers to.
    """
    return rules.deal_plan(options.positions)


def build(options: Options, paytables: PayTables) -> MahjongLiveGame:
    """The table's live game (the registry's live factory)."""
    return MahjongLiveGame(
        paytables=paytables,
        positions=rules.position_labels(options.positions),
        dealing_order=options.dealing_order or (),
        commission=CommissionMode(options.commission),
        bank_seconds=options.bank_seconds,
    )


__all__ = ["CHOICES", "NO_BANKER", "MahjongLiveGame", "MahjongLiveRound", "offer_window"]


def page_hands(
    hands: list[tuple[str, list[str]]], seats: tuple[str, ...]
) -> list[tuple[str, list[str]]]:
    """The hands a page shows: the table's positions once seen (two tiles each), the banker.

    (:meth:`controller.games.spec.GameSpec.page_hands`; without seats the default plan's.)
    """
    if not seats:
        return hands
    return [(pos, [f"{pos}a", f"{pos}b"]) for pos in seats] + [("B", ["Ba", "Bb"])]
