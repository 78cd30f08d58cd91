"""Mahjong Pai Gow: two-tile ranking, deal plan, settlement, banker rotation, par sheet.

The rules are those of docs/rules/mahjong-pai-gow.md (restated from a game-analysis page,
with the team's binding decisions and this module's own decisions). In short:

* 20 tiles: two each of the dots 1-9 and two windows (value 10).
* Pairs are the highest hands: windows, then 9-9 down to 1-1. Any other hand scores its two
  values added, windows counting nothing, tens dropped (0-9). Equal points are decided by the
  higher of each hand's highest tile (the window counts ten, the highest tile). Equal still,
  or both hands on zero points: the banker wins. A pair beats any non-pair.
* Each player position plays against the banker; bets ``player`` (a position against the
  banker) and ``banker`` (the banker's side against a position). A winner is paid 0.95:1;
  the banker's commission can instead be charged on the banker's net win for the round.

Everything here is pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from controller.cards import WINDOW_VALUE, Deck, Piece, Tile
from controller.errors import ConfigError, PieceRefused, RulesError
from controller.games.base import (
    DealPlan,
    Declared,
    GameFacts,
    GameResult,
    HandSummary,
    Slot,
    pay_odds,
)
from controller.money import BetResult, Odds, PayTables

GAME_ID: Final = "mahjong-pai-gow"
BET_IDS: Final = ("player", "banker")
BANKER: Final = "B"
"""Hand label of the banker."""
TILES_PER_HAND: Final = 2
DEFAULT_POSITIONS: Final = 4
DEFAULT_COMMISSION: Final = Fraction(1, 20)


class HandKind(enum.StrEnum):
    """The two kinds of hand."""

    PAIR = "pair"
    POINTS = "points"


class Reason(enum.StrEnum):
    """Why a position's hand was decided the way it was."""

    PAIR = "pair"
    """At least one hand is a pair and the hands differ: the higher pair, or the pair, wins."""
    POINTS = "points"
    """Different points."""
    HIGHEST_TILE = "highest_tile"
    """Equal points, decided by the higher highest tile."""
    TIE = "tie"
    """Equal points and equal highest tiles, or equal pairs: the banker wins."""
    ZERO = "zero"
    """Both hands on zero points: the banker wins."""


class Winner(enum.StrEnum):
    """Who wins a position."""

    PLAYER = "player"
    BANKER = "banker"


class CommissionMode(enum.StrEnum):
    """How the banker's commission is charged."""

    PER_BET = "per_bet"
    """Every winning bet is paid at the pay table's odds (0.95:1). The default."""
    ON_NET = "on_net"
    """The banker's side is paid 1:1 per position and commission is charged on the net win of
    the round (:func:`banker_round_net`). Player bets are still paid per bet."""


# --------------------------------------------------------------------------------------------
# Ranking


@dataclass(frozen=True, slots=True, order=True)
class HandKey:
    """A hand's value: compare with ``>``; equal keys are a tie (the banker wins).

    Attributes:
        pair: 1 for a pair, 0 otherwise (a pair beats any non-pair).
        value: The pair's tile value (windows 10), or the points 0-9.
        highest: The highest tile's value (window 10) for a non-pair with points; 0 for a
            pair and for a zero-point hand (all zero-point hands are equally bad).
    """

    pair: int
    value: int
    highest: int


def _check_hand(tiles: Sequence[Piece], hand: str = "") -> tuple[Tile, Tile]:
    where = f"hand {hand} " if hand else "a Mahjong Pai Gow hand "
    if len(tiles) != TILES_PER_HAND:
        raise RulesError(
            f"{where}needs exactly {TILES_PER_HAND} tiles, got {len(tiles)}",
            game=GAME_ID,
            hand=hand,
            tiles=[str(tile) for tile in tiles],
        )
    for tile in tiles:
        if not isinstance(tile, Tile):
            raise RulesError(
                f"{where}holds {tile}, which is not a Mahjong Pai Gow tile",
                game=GAME_ID,
                hand=hand,
                piece=str(tile),
            )
    first, second = tiles
    assert isinstance(first, Tile)
    assert isinstance(second, Tile)
    return first, second


def key_of_values(first: int, second: int) -> HandKey:
    """The key of a hand given its two tile values (1-9, window 10)."""
    if first == second:
        return HandKey(1, first, 0)
    points = (first % WINDOW_VALUE + second % WINDOW_VALUE) % 10
    if points == 0:
        return HandKey(0, 0, 0)
    return HandKey(0, points, max(first, second))


def hand_key(tiles: Sequence[Piece]) -> HandKey:
    """The key of a two-tile hand.

    Raises:
        RulesError: Not two tiles.
    """
    first, second = _check_hand(tiles)
    return key_of_values(first.value, second.value)


def describe_hand(tiles: Sequence[Piece]) -> str:
    """A sentence for people: ``"pair of windows"``, ``"5 points, 9 high"``, ``"0 points"``.

    Raises:
        RulesError: Not two tiles.
    """
    key = hand_key(tiles)
    if key.pair:
        return "pair of windows" if key.value == WINDOW_VALUE else f"pair of {key.value}s"
    if key.value == 0:
        return "0 points"
    high = "window" if key.highest == WINDOW_VALUE else str(key.highest)
    unit = "point" if key.value == 1 else "points"
    return f"{key.value} {unit}, {high} high"


def evaluate_hand(tiles: Sequence[Piece], hand: str = "") -> HandSummary:
    """Kind (``pair``/``points``) and description of a hand.

    Raises:
        RulesError: Not two tiles.
    """
    _check_hand(tiles, hand)
    kind = HandKind.PAIR if hand_key(tiles).pair else HandKind.POINTS
    return HandSummary(kind.value, describe_hand(tiles))


def compare(player: HandKey, banker: HandKey) -> tuple[Winner, Reason]:
    """Who wins a position, and why. Ties and zero against zero go to the banker."""
    if player.pair or banker.pair:
        if player == banker:
            return Winner.BANKER, Reason.TIE
        return (Winner.PLAYER if player > banker else Winner.BANKER), Reason.PAIR
    if player.value != banker.value:
        return (Winner.PLAYER if player > banker else Winner.BANKER), Reason.POINTS
    if player.value == 0:
        return Winner.BANKER, Reason.ZERO
    if player.highest != banker.highest:
        return (Winner.PLAYER if player > banker else Winner.BANKER), Reason.HIGHEST_TILE
    return Winner.BANKER, Reason.TIE


# --------------------------------------------------------------------------------------------
# Deal plan, round, settlement


def position_labels(positions: int) -> tuple[str, ...]:
    """``P1`` ... ``Pn``.

    Raises:
        ConfigError: Fewer than one position, or more than the tiles allow (9).
    """
    most = (20 // TILES_PER_HAND) - 1
    if not 1 <= positions <= most:
        raise ConfigError(
            f"Mahjong Pai Gow needs 1 to {most} player positions (20 tiles, two per hand "
            f"and two for the banker), got {positions}",
            field="positions",
            value=positions,
        )
    return tuple(f"P{index}" for index in range(1, positions + 1))


def deal_plan(positions: int = DEFAULT_POSITIONS) -> DealPlan:
    """Two tiles to each position in table order, then the banker's two, all face up.

    Slots ``P1a P1b P2a P2b ... Ba Bb``; hands ``P1`` ... ``Pn`` and ``B``.

    Raises:
        ConfigError: A position count the tiles cannot serve.
    """
    slots = [
        Slot(f"{hand}{suffix}", hand)
        for hand in (*position_labels(positions), BANKER)
        for suffix in ("a", "b")
    ]
    return DealPlan(tuple(slots))


@dataclass(frozen=True, slots=True)
class PositionResult:
    """One position against the banker.

    Attributes:
        winner: Player or banker.
        reason: What decided it.
    """

    winner: Winner
    reason: Reason


def _check_round(hands: Mapping[str, Sequence[Piece]], positions: Sequence[str]) -> None:
    expected = {*positions, BANKER}
    if set(hands) != expected:
        raise RulesError(
            f"Mahjong Pai Gow needs hands {sorted(expected)}, got {sorted(hands)}",
            game=GAME_ID,
            hands=sorted(hands),
        )
    deck = Deck.mahjong_pai_gow()
    seen: list[Piece] = []
    for label in (*positions, BANKER):
        for tile in _check_hand(hands[label], label):
            try:
                deck.check_can_add(seen, tile)
            except PieceRefused as exc:
                raise RulesError(
                    f"hand {label}: {exc.message}; a set holds two of each tile",
                    game=GAME_ID,
                    hand=label,
                    piece=str(tile),
                ) from exc
            seen.append(tile)


def resolve_positions(
    hands: Mapping[str, Sequence[Piece]], positions: Sequence[str]
) -> dict[str, PositionResult]:
    """Judge every position against the banker.

    Raises:
        RulesError: A hand missing or extra, not two tiles, or a third tile of one value.
    """
    _check_round(hands, positions)
    banker = hand_key(hands[BANKER])
    results: dict[str, PositionResult] = {}
    for label in positions:
        winner, reason = compare(hand_key(hands[label]), banker)
        results[label] = PositionResult(winner, reason)
    return results


def _odds(paytables: PayTables, bet: str) -> Odds:
    return pay_odds(GAME_ID, paytables, bet, "win")


def settle_position(
    result: PositionResult,
    paytables: PayTables,
    mode: CommissionMode = CommissionMode.PER_BET,
) -> dict[str, BetResult]:
    """Settle the ``player`` and ``banker`` bets of one position.

    With :attr:`CommissionMode.ON_NET` the ``banker`` bet's win is gross (1:1, reason
    ``"win before commission"``): its commission comes from :func:`banker_round_net`.

    Raises:
        RulesError: A needed pay-table entry is missing.
    """
    reason = result.reason.value
    if result.winner is Winner.PLAYER:
        return {
            "player": BetResult.win(_odds(paytables, "player"), reason),
            "banker": BetResult.lose(reason),
        }
    if mode is CommissionMode.ON_NET:
        banker = BetResult.win(Fraction(1), f"{reason}; win before commission")
    else:
        banker = BetResult.win(_odds(paytables, "banker"), reason)
    return {"player": BetResult.lose(reason), "banker": banker}


@dataclass(frozen=True, slots=True)
class BankerNet:
    """The banker's result for a round with commission on the net win.

    Attributes:
        gross: Sum of the stakes won from positions the banker beat minus the stakes paid to
            positions that beat the banker (the banker pays a winning position 1:1; the
            house's cut of a winning player bet is charged to the player).
        commission: ``rate * gross`` when the gross is a win, else 0.
        net: ``gross - commission``.
    """

    gross: Fraction
    commission: Fraction
    net: Fraction


def banker_round_net(
    results: Mapping[str, PositionResult | Winner],
    stakes: Mapping[str, Fraction | int],
    rate: Fraction = DEFAULT_COMMISSION,
) -> BankerNet:
    """The banker's net for the round, commission charged once on the net win.

    Args:
        results: Each position's result (or just its winner).
        stakes: The stake the banker covers on each position (a missing position stakes 0).
        rate: The commission rate (5% by default).

    Raises:
        RulesError: A stake on a position without a result, a negative stake or rate.
    """
    if not 0 <= rate < 1:
        raise RulesError(f"commission rate {rate} must be in [0, 1)", game=GAME_ID, rate=str(rate))
    gross = Fraction(0)
    for position, stake in stakes.items():
        amount = Fraction(stake)
        if amount < 0:
            raise RulesError(
                f"stake {amount} on {position} is negative", game=GAME_ID, position=position
            )
        if position not in results:
            raise RulesError(
                f"a stake on {position}, which has no result", game=GAME_ID, position=position
            )
        outcome = results[position]
        winner = outcome.winner if isinstance(outcome, PositionResult) else outcome
        gross += amount if winner is Winner.BANKER else -amount
    commission = rate * gross if gross > 0 else Fraction(0)
    return BankerNet(gross, commission, gross - commission)


# --------------------------------------------------------------------------------------------
# Banker rotation


@dataclass(frozen=True, slots=True)
class BankerRotation:
    """Who is offered the bank next.

    The bank is offered in table order to the position after the one that banked last (the
    first position when nobody has banked yet). A position that declines passes the offer on
    to the next; the last to be asked is the current banker itself. When every position
    declines there is no banker: :meth:`next` returns ``None`` and the round cannot open (the
    dealer never banks, the house does not play); the orchestrator keeps the table in
    betting-closed idle and offers the bank again for the next round.

    Attributes:
        positions: The positions in table order.
        current: The position that banked last, or ``None``.
    """

    positions: tuple[str, ...]
    current: str | None = None

    def __post_init__(self) -> None:
        if not self.positions:
            raise ConfigError("banker rotation needs at least one position", field="positions")
        if len(set(self.positions)) != len(self.positions):
            raise ConfigError(
                f"banker rotation positions repeat: {list(self.positions)}", field="positions"
            )
        if self.current is not None and self.current not in self.positions:
            raise ConfigError(
                f"current banker {self.current!r} is not one of {list(self.positions)}",
                field="current",
                value=self.current,
            )

    def order(self) -> tuple[str, ...]:
        """The order the bank is offered in this round."""
        start = 0 if self.current is None else self.positions.index(self.current) + 1
        count = len(self.positions)
        return tuple(self.positions[(start + step) % count] for step in range(count))

    def next(self, declined: AbstractSet[str] = frozenset()) -> str | None:
        """The position that takes the bank: the first in :meth:`order` not in ``declined``.

        Raises:
            RulesError: ``declined`` names a position that is not at the table.
        """
        unknown = set(declined) - set(self.positions)
        if unknown:
            raise RulesError(
                f"declined by positions not at the table: {sorted(unknown)}",
                game=GAME_ID,
                positions=sorted(unknown),
            )
        for position in self.order():
            if position not in declined:
                return position
        return None

    def advance(self, declined: AbstractSet[str] = frozenset()) -> BankerRotation:
        """The rotation after this round's offer: the taker becomes ``current``.

        When everyone declined, the rotation is unchanged.
        """
        taker = self.next(declined)
        return self if taker is None else BankerRotation(self.positions, taker)


# --------------------------------------------------------------------------------------------
# The game


def _default_paytables() -> dict[str, dict[str, Odds]]:
    return {"player": {"win": Fraction(19, 20)}, "banker": {"win": Fraction(19, 20)}}


DEFAULT_PAYTABLES: Final = _default_paytables()


FACTS: Final = GameFacts(
    id=GAME_ID,
    name="Mahjong Pai Gow",
    new_deck=Deck.mahjong_pai_gow,
    bet_ids=BET_IDS,
    new_paytables=_default_paytables,
)
"""What the game is: its id, name, deck, bet types and pay tables."""


class MahjongPaiGow(Declared):
    """Mahjong Pai Gow at a live-dealer table: a banker box and ``positions`` player boxes.

    Args:
        positions: Number of player positions (default 4).
        commission: How the banker's commission is charged (per bet by default).
    """

    facts = FACTS

    def __init__(
        self,
        positions: int = DEFAULT_POSITIONS,
        commission: CommissionMode = CommissionMode.PER_BET,
    ) -> None:
        self.positions = position_labels(positions)
        self.commission = commission

    @property
    def deal_plan(self) -> DealPlan:
        """``P1a P1b ... Pna Pnb Ba Bb``, all face up."""
        return deal_plan(len(self.positions))

    def resolve(self, hands: Mapping[str, Sequence[Piece]]) -> GameResult:
        """Judge every position against the banker.

        Returns:
            ``winner``: ``"B"`` when the banker wins every position, else the positions that
            beat the banker joined by ``+`` (``"P1+P3"``). ``details["positions"]`` maps each
            position to ``{"winner": "player"|"banker", "reason": ...}``.

        Raises:
            RulesError: A hand missing or extra, not two tiles, or a third tile of one value.
        """
        results = resolve_positions(hands, self.positions)
        beaten = [label for label, result in results.items() if result.winner is Winner.PLAYER]
        return GameResult(
            winner="+".join(beaten) if beaten else BANKER,
            hands={
                label: evaluate_hand(hands[label], label) for label in (*self.positions, BANKER)
            },
            details={
                "positions": {
                    label: {"winner": result.winner.value, "reason": result.reason.value}
                    for label, result in results.items()
                }
            },
        )

    def settle_positions(
        self, result: GameResult, paytables: PayTables
    ) -> dict[str, dict[str, BetResult]]:
        """Settle the ``player`` and ``banker`` bets of every position.

        Raises:
            RulesError: The result lacks a position, or a pay-table entry is missing.
        """
        try:
            details = result.details["positions"]
            positions = {
                label: PositionResult(
                    Winner(details[label]["winner"]), Reason(details[label]["reason"])
                )
                for label in self.positions
            }
        except (KeyError, TypeError, ValueError):
            raise RulesError(
                "result does not hold every position's winner and reason", game=GAME_ID
            ) from None
        return {
            label: settle_position(position, paytables, self.commission)
            for label, position in positions.items()
        }


MAHJONG_PAI_GOW: Final = MahjongPaiGow()
