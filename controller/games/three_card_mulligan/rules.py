"""Three Card Mulligan rules: ranking, the round's deal plan, settlement of both paths.

The rules are those of docs/rules/three-card-mulligan.md (restated from the inventor's page,
with the team's binding decisions and this module's own decisions). In short:

* Three-card ranking, high to low: straight flush, three of a kind, straight, flush, pair,
  high card. The ace is high, and low only in A-2-3 (the lowest straight); Q-K-A is the
  highest straight. Suits never break ties. (This is *not* the Teen Patti order, which lives
  in :mod:`controller.games.teen_patti.rules`; only the machinery around the ranking is shared,
  in :mod:`controller.games.three_card.hands`.)
* The round deals the player's three (face up), the dealer's three (hidden), then, if at least
  one online player chose to mulligan, the player's mulligan hand, then the dealer's cards are
  revealed and, if they are below king-high, the dealer's mulligan hand is dealt.
* The result covers both paths of the shared hand: the original hand against the dealer's
  final hand ("stayed") and the mulligan hand against it ("mulliganed").

Hand strength is an ``int``: ``level << 12 | within``; a higher int beats a lower one and
equal ints tie. A table over every ordered triple of card codes (52**3 entries, built on
first use from the 22,100 hands) makes :func:`strength_of_codes` a list lookup.

Everything here is pure: no I/O, no clock, no numpy (the par sheet is in ``par_sheet``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

from controller.cards import Card, Deck, Piece
from controller.errors import IllegalAction, PieceRefused, RulesError
from controller.games.base import (
    DealPlan,
    Declared,
    Face,
    GameFacts,
    GameResult,
    HandSummary,
    Slot,
    pay_odds,
)
from controller.games.three_card import hands as three_card
from controller.money import BetResult, Odds, PayTables

GAME_ID: Final = "three-card-mulligan"
BET_IDS: Final = ("ante", "mulligan", "pair_plus", "pair_plus_mulligan")
CARDS_PER_HAND: Final = three_card.CARDS_PER_HAND

PLAYER: Final = "P"
"""Hand label of the player's original (shared) hand."""
DEALER: Final = "D"
"""Hand label of the dealer's first hand (hidden until the reveal)."""
PLAYER_MULLIGAN: Final = "PM"
"""Hand label of the player's mulligan hand."""
DEALER_MULLIGAN: Final = "DM"
"""Hand label of the dealer's mulligan hand."""

_LEVEL_SHIFT: Final = three_card.LEVEL_SHIFT
_ACE: Final = three_card.ACE
_KING: Final = 13

PLURAL_RANK_NAMES: Final = three_card.PLURAL_RANK_NAMES


class MulliganHand(three_card.RankedCategory):
    """Categories of a three-card hand in Three Card Mulligan, listed high to low."""

    STRAIGHT_FLUSH = "straight_flush"
    THREE_OF_A_KIND = "three_of_a_kind"
    STRAIGHT = "straight"
    FLUSH = "flush"
    PAIR = "pair"
    HIGH_CARD = "high_card"

    @classmethod
    def noun(cls) -> str:
        """What a member is called in an error message."""
        return "Three Card Mulligan category"


class Path(enum.StrEnum):
    """The two ways an online player can play the shared hand."""

    STAYED = "stayed"
    MULLIGANED = "mulliganed"


# --------------------------------------------------------------------------------------------
# Three-card evaluator


def _straight_top(high: int, mid: int, low: int) -> int:
    """Top rank of a three-card straight (ranks high to low): 14 for Q-K-A, 3 for A-2-3; else 0."""
    if (high, mid, low) == (_ACE, 3, 2):
        return 3
    if high - 1 == mid and mid - 1 == low:
        return high
    return 0


def strength_of_ranks(ranks: Iterable[int], suited: bool) -> int:
    """Three Card Mulligan's ranking (a :data:`~controller.games.three_card.hands.StrengthOfRanks`).

    Takes the three ranks (2-14, any order) and whether they share a suit; gives
    ``level << 12 | within``, compared as plain ints (equal: a tie).
    """
    high, mid, low = sorted(ranks, reverse=True)
    hand: MulliganHand
    if high == low:
        hand, within = MulliganHand.THREE_OF_A_KIND, high
    elif top := _straight_top(high, mid, low):
        hand = MulliganHand.STRAIGHT_FLUSH if suited else MulliganHand.STRAIGHT
        within = top
    else:
        category, within = three_card.plain_strength(high, mid, low, suited)
        hand = MulliganHand(category)
    return hand.level << _LEVEL_SHIFT | within


def category_of_strength(strength: int) -> MulliganHand:
    """The category a strength belongs to."""
    return MulliganHand.from_level(strength >> _LEVEL_SHIFT)


def _describe_special(category: MulliganHand, ranks: list[int]) -> str | None:
    if category is MulliganHand.THREE_OF_A_KIND:
        return f"three {PLURAL_RANK_NAMES[ranks[0]]}"
    if category in (MulliganHand.STRAIGHT_FLUSH, MulliganHand.STRAIGHT):
        label = "straight flush" if category is MulliganHand.STRAIGHT_FLUSH else "straight"
        order = (_ACE, 2, 3) if ranks == [_ACE, 3, 2] else tuple(reversed(ranks))
        return three_card.describe_sequence(label, order)
    return None


RANKING: Final = three_card.Ranking(
    "Three Card Mulligan",
    {"game": GAME_ID},
    strength_of_ranks,
    category_of_strength,
    _describe_special,
)
"""Three Card Mulligan's ranking and the hand functions built on it (shared machinery)."""

_strength_table: Final = RANKING.strength_table
"""Strength by ``a * 2704 + b * 52 + c`` for every ordered triple of distinct codes (-1 on a
repeat), built on first call."""
_check_hand: Final = RANKING.check
"""Check that cards are three distinct standard cards (RulesError: wrong count, a tile, the
joker or a repeated card)."""
strength_of_codes: Final = RANKING.strength_of_codes
"""Strength of three distinct standard card codes (0-51), without validation (-1: a repeat)."""
rank_hand: Final = RANKING.rank_hand
"""The strength of a three-card hand: higher beats lower, equal ties; suits never matter."""
hand_category: Final = RANKING.hand_category
"""The category of a three-card hand."""
describe_hand: Final = RANKING.describe_hand
"""A sentence for people: ``"pair of kings, queen kicker"``, ``"straight, ace-two-three"``."""
evaluate_hand: Final = RANKING.evaluate_hand
"""Category and description of a three-card hand."""


STAY_THRESHOLD: Final = strength_of_ranks((_KING, 10, 2), suited=False)
"""The weakest hand the house way stays with: K-10-2 of mixed suits.

The house way stays with every hand at least this strong: K-10-x, K-J-x, K-Q-x, every
ace-high hand, and any pair, flush, straight, three of a kind or straight flush. It mulligans
K-9-x and below, and every queen-high or lower high-card hand.
"""

DEALER_STANDS_THRESHOLD: Final = strength_of_ranks((_KING, 3, 2), suited=False)
"""The weakest hand the dealer stands on: K-3-2 of mixed suits (the lowest king-high)."""


def house_way_stays(cards: Sequence[Piece]) -> bool:
    """Whether the house-way player stays with ``cards``: K-10-x or better.

    See :data:`STAY_THRESHOLD` for how every hand is treated.

    Raises:
        RulesError: Not three distinct standard cards.
    """
    return rank_hand(cards) >= STAY_THRESHOLD


def dealer_stands(cards: Sequence[Piece]) -> bool:
    """Whether the dealer stands on ``cards``: king-high or better (queen-high mulligans).

    Raises:
        RulesError: Not three distinct standard cards.
    """
    return rank_hand(cards) >= DEALER_STANDS_THRESHOLD


# --------------------------------------------------------------------------------------------
# Pay tables


_ANTE_BONUS: Final = {
    MulliganHand.STRAIGHT_FLUSH: Fraction(6),
    MulliganHand.THREE_OF_A_KIND: Fraction(4),
    MulliganHand.STRAIGHT: Fraction(3, 2),
}


def _default_paytables() -> dict[str, dict[str, Odds]]:
    ante = {hand.value: _ANTE_BONUS.get(hand, Fraction(1)) for hand in MulliganHand}
    pair_plus = {
        MulliganHand.STRAIGHT_FLUSH.value: Fraction(40),
        MulliganHand.THREE_OF_A_KIND.value: Fraction(30),
        MulliganHand.STRAIGHT.value: Fraction(6),
        MulliganHand.FLUSH.value: Fraction(3),
        MulliganHand.PAIR.value: Fraction(1),
    }
    return {
        "ante": dict(ante),
        "mulligan": dict(ante),
        "pair_plus": dict(pair_plus),
        "pair_plus_mulligan": dict(pair_plus),
    }


DEFAULT_PAYTABLES: Final = _default_paytables()
"""Bet id -> outcome (the player's hand category) -> profit per unit staked.

``ante`` and ``mulligan`` pay on a player win by the player's final hand (every category has
an entry; "anything else" is 1:1 for flush, pair and high card). ``pair_plus`` and
``pair_plus_mulligan`` pay by the category of the hand they were placed on; a category without
an entry (high card) loses.
"""


def _odds(paytables: PayTables, bet: str, outcome: str) -> Odds:
    return pay_odds(GAME_ID, paytables, bet, outcome)


def _main_bet(
    player_strength: int, dealer_strength: int, paytables: PayTables, bet: str
) -> BetResult:
    """Ante or Mulligan: paid by the player's final hand on a win, lost below, pushed on a tie."""
    if player_strength > dealer_strength:
        category = category_of_strength(player_strength).value
        return BetResult.win(_odds(paytables, bet, category), category)
    if player_strength == dealer_strength:
        return BetResult.push("tie")
    return BetResult.lose("dealer higher")


def _pair_plus(strength: int, paytables: PayTables, bet: str) -> BetResult:
    category = category_of_strength(strength).value
    table = paytables.get(bet)
    if table is None:
        raise RulesError(f"pay table has no bet {bet!r}", game=GAME_ID, bet=bet)
    if category in table:
        return BetResult.win(table[category], category)
    return BetResult.lose(category)


# --------------------------------------------------------------------------------------------
# Settlement of a round


@dataclass(frozen=True, slots=True)
class MulliganResult:
    """The judgement and settlement of a round, for both paths of the shared hand.

    Attributes:
        hands: Summary of every dealt hand, by label (``P``, ``D``, and ``PM``/``DM`` if dealt).
        strengths: The strength of every dealt hand, by label.
        dealer_final: ``"D"`` when the dealer stood, ``"DM"`` when the dealer mulliganed.
        stayed: Bets of a player who stayed: ``ante``, ``pair_plus``.
        mulliganed: Bets of a player who mulliganed: ``ante``, ``mulligan``, ``pair_plus``
            (on the original hand) and ``pair_plus_mulligan`` (on the mulligan hand); ``None``
            when no mulligan hand was dealt (nobody chose it).
    """

    hands: Mapping[str, HandSummary]
    strengths: Mapping[str, int]
    dealer_final: str
    stayed: Mapping[str, BetResult]
    mulliganed: Mapping[str, BetResult] | None

    def winner(self, path: Path) -> str:
        """``"player"``, ``"dealer"`` or ``"tie"`` on a path.

        Raises:
            RulesError: The mulligan path was not dealt.
        """
        player = PLAYER if path is Path.STAYED else PLAYER_MULLIGAN
        if player not in self.strengths:
            raise RulesError("no mulligan hand was dealt in this round", game=GAME_ID)
        mine, dealer = self.strengths[player], self.strengths[self.dealer_final]
        if mine > dealer:
            return "player"
        return "tie" if mine == dealer else "dealer"

    def bets(self, path: Path) -> Mapping[str, BetResult]:
        """The settlement of a path's bets.

        Raises:
            RulesError: The mulligan path was not dealt.
        """
        if path is Path.STAYED:
            return self.stayed
        if self.mulliganed is None:
            raise RulesError("no mulligan hand was dealt in this round", game=GAME_ID)
        return self.mulliganed

    def game_result(self) -> GameResult:
        """The round as a :class:`GameResult`.

        ``winner`` is the stayed path's winner; ``details`` holds ``dealer_final`` and, per
        path, its ``winner`` and its bets in wire form.
        """
        paths: dict[str, object] = {}
        for path in Path:
            if path is Path.MULLIGANED and self.mulliganed is None:
                continue
            paths[path.value] = {
                "winner": self.winner(path),
                "bets": {bet: result.to_wire() for bet, result in self.bets(path).items()},
            }
        return GameResult(
            winner=self.winner(Path.STAYED),
            hands=dict(self.hands),
            details={"dealer_final": self.dealer_final, "paths": paths},
        )


def round_result(
    player: Sequence[Piece],
    dealer: Sequence[Piece],
    player_mulligan: Sequence[Piece] | None = None,
    dealer_mulligan: Sequence[Piece] | None = None,
    paytables: PayTables = DEFAULT_PAYTABLES,
) -> MulliganResult:
    """Judge a round and settle every bet on both paths.

    Args:
        player: The shared original hand.
        dealer: The dealer's first hand.
        player_mulligan: The player's mulligan hand, or ``None`` if nobody mulliganed.
        dealer_mulligan: The dealer's mulligan hand: required when the dealer's first hand is
            below king-high, refused otherwise.
        paytables: Pay tables (defaults, or merged with a table's overrides).

    Returns:
        Both paths' settlements (the mulligan path only when its hand was dealt).

    Raises:
        RulesError: A hand is malformed, a card is in two hands, or the dealer's mulligan hand
            is missing when the dealer must mulligan (or present when the dealer stands).
    """
    hands: dict[str, tuple[Card, ...]] = {
        PLAYER: _check_hand(player, PLAYER),
        DEALER: _check_hand(dealer, DEALER),
    }
    if player_mulligan is not None:
        hands[PLAYER_MULLIGAN] = _check_hand(player_mulligan, PLAYER_MULLIGAN)
    strengths = {label: rank_hand(cards) for label, cards in hands.items()}
    stands = strengths[DEALER] >= DEALER_STANDS_THRESHOLD
    if stands and dealer_mulligan is not None:
        raise RulesError(
            f"the dealer stands on {describe_hand(hands[DEALER])}; "
            "no dealer mulligan hand is dealt",
            game=GAME_ID,
            hand=DEALER_MULLIGAN,
        )
    if not stands:
        if dealer_mulligan is None:
            raise RulesError(
                f"the dealer must mulligan {describe_hand(hands[DEALER])} (below king-high), "
                "but no dealer mulligan hand was given",
                game=GAME_ID,
                hand=DEALER_MULLIGAN,
            )
        hands[DEALER_MULLIGAN] = _check_hand(dealer_mulligan, DEALER_MULLIGAN)
        strengths[DEALER_MULLIGAN] = rank_hand(hands[DEALER_MULLIGAN])
    seen: dict[Card, str] = {}
    for label, cards in hands.items():
        for card in cards:
            if card in seen:
                raise RulesError(
                    f"{card} is dealt to both hand {seen[card]} and hand {label}",
                    game=GAME_ID,
                    piece=str(card),
                    hands=[seen[card], label],
                )
            seen[card] = label
    dealer_final = DEALER if stands else DEALER_MULLIGAN
    dealer_strength = strengths[dealer_final]
    stayed = {
        "ante": _main_bet(strengths[PLAYER], dealer_strength, paytables, "ante"),
        "pair_plus": _pair_plus(strengths[PLAYER], paytables, "pair_plus"),
    }
    mulliganed: dict[str, BetResult] | None = None
    if PLAYER_MULLIGAN in strengths:
        mine = strengths[PLAYER_MULLIGAN]
        mulliganed = {
            "ante": _main_bet(mine, dealer_strength, paytables, "ante"),
            "mulligan": _main_bet(mine, dealer_strength, paytables, "mulligan"),
            "pair_plus": stayed["pair_plus"],
            "pair_plus_mulligan": _pair_plus(mine, paytables, "pair_plus_mulligan"),
        }
    return MulliganResult(
        hands={label: evaluate_hand(cards, label) for label, cards in hands.items()},
        strengths=strengths,
        dealer_final=dealer_final,
        stayed=stayed,
        mulliganed=mulliganed,
    )


# --------------------------------------------------------------------------------------------
# The round's deal plan, which depends on decisions


class Step(enum.StrEnum):
    """What a round is waiting for."""

    DEAL = "deal"
    """A card for :attr:`MulliganRound.next_slot`."""
    DECIDE = "decide"
    """The players' stay/mulligan decision window (:meth:`MulliganRound.decide`)."""
    COMPLETE = "complete"
    """Every needed card is dealt: the result can be computed."""


def _slots(hand: str, prefix: str, face: Face) -> tuple[Slot, ...]:
    return tuple(Slot(f"{prefix}{index}", hand, face) for index in range(1, CARDS_PER_HAND + 1))


PLAYER_SLOTS: Final = _slots(PLAYER, "P", Face.UP)
DEALER_SLOTS: Final = _slots(DEALER, "D", Face.HIDDEN)
PLAYER_MULLIGAN_SLOTS: Final = _slots(PLAYER_MULLIGAN, "PM", Face.UP)
DEALER_MULLIGAN_SLOTS: Final = _slots(DEALER_MULLIGAN, "DM", Face.UP)


def deal_plan(player_mulligan: bool, dealer_mulligan: bool) -> DealPlan:
    """The slots of a round in dealing order, once both decisions are known.

    P1 P2 P3 (up), D1 D2 D3 (hidden), then PM1-PM3 (up) if any player mulliganed, then the
    dealer's reveal, then DM1-DM3 (up) if the dealer's first hand is below king-high.
    """
    slots = PLAYER_SLOTS + DEALER_SLOTS
    if player_mulligan:
        slots += PLAYER_MULLIGAN_SLOTS
    if dealer_mulligan:
        slots += DEALER_MULLIGAN_SLOTS
    return DealPlan(slots)


def next_slot(cards: Sequence[Card], player_mulligan: bool | None) -> Slot | Step:
    """The slot the next card fills, or what the round waits for instead.

    Args:
        cards: The cards dealt so far, in dealing order.
        player_mulligan: ``None`` while the decision window has not closed, then whether at
            least one player chose to mulligan.

    Returns:
        A :class:`Slot`, :attr:`Step.DECIDE` or :attr:`Step.COMPLETE`.

    Raises:
        RulesError: More cards than the plan allows, or a mulligan hand before the decision.
    """
    dealt = len(cards)
    base = len(PLAYER_SLOTS) + len(DEALER_SLOTS)
    if dealt < base:
        if player_mulligan is not None:
            raise RulesError(
                "the stay/mulligan decision came before the first six cards",
                game=GAME_ID,
                dealt=dealt,
            )
        return (PLAYER_SLOTS + DEALER_SLOTS)[dealt]
    if player_mulligan is None:
        if dealt > base:
            raise RulesError(
                "cards dealt after the first six before the stay/mulligan decision",
                game=GAME_ID,
                dealt=dealt,
            )
        return Step.DECIDE
    plan = deal_plan(player_mulligan, not dealer_stands(cards[len(PLAYER_SLOTS) : base]))
    if dealt < len(plan):
        return plan.slots[dealt]
    if dealt > len(plan):
        raise RulesError(
            f"{dealt} cards dealt but this round's plan has {len(plan)} slots",
            game=GAME_ID,
            dealt=dealt,
            slots=len(plan),
        )
    return Step.COMPLETE


@dataclass(frozen=True, slots=True)
class MulliganRound:
    """A round's cards and decision, as an immutable state machine.

    ``deal`` and ``decide`` return the next state; an illegal action raises and leaves this
    state as it was.

    Attributes:
        cards: Cards dealt so far, in dealing order.
        player_mulligan: ``None`` until the decision window closes; then whether at least one
            online player chose to mulligan (a player who sent nothing stays).
    """

    cards: tuple[Card, ...] = ()
    player_mulligan: bool | None = None
    deck: Deck = field(default_factory=Deck.standard, compare=False, repr=False)

    @property
    def step(self) -> Step:
        """What the round waits for."""
        following = next_slot(self.cards, self.player_mulligan)
        return Step.DEAL if isinstance(following, Slot) else following

    @property
    def next_slot(self) -> Slot | None:
        """The slot the next card fills, or ``None`` when the round waits for something else."""
        following = next_slot(self.cards, self.player_mulligan)
        return following if isinstance(following, Slot) else None

    @property
    def dealer_revealed(self) -> bool:
        """Whether the dealer's first hand is turned over: every player card is dealt."""
        if self.player_mulligan is None:
            return False
        needed = len(PLAYER_SLOTS) + len(DEALER_SLOTS)
        if self.player_mulligan:
            needed += len(PLAYER_MULLIGAN_SLOTS)
        return len(self.cards) >= needed

    @property
    def dealer_mulligans(self) -> bool | None:
        """Whether the dealer must mulligan; ``None`` while the dealer's hand is incomplete."""
        base = len(PLAYER_SLOTS) + len(DEALER_SLOTS)
        if len(self.cards) < base:
            return None
        return not dealer_stands(self.cards[len(PLAYER_SLOTS) : base])

    def plan(self) -> DealPlan:
        """The slots known so far: the first six until the decision, then the whole plan."""
        if self.player_mulligan is None:
            return DealPlan(PLAYER_SLOTS + DEALER_SLOTS)
        return deal_plan(self.player_mulligan, bool(self.dealer_mulligans))

    def hands(self) -> dict[str, tuple[Card, ...]]:
        """The cards dealt so far, by hand label."""
        grouped: dict[str, list[Card]] = {}
        plan = deal_plan(True, True) if self.player_mulligan else deal_plan(False, True)
        for slot, card in zip(plan.slots, self.cards, strict=False):
            grouped.setdefault(slot.hand, []).append(card)
        return {label: tuple(cards) for label, cards in grouped.items()}

    def deal(self, piece: Piece) -> MulliganRound:
        """The state after the next card.

        Raises:
            IllegalAction: The round waits for the decision, or is complete.
            PieceRefused: Not a card of the deck, or already dealt in this round.
        """
        following = next_slot(self.cards, self.player_mulligan)
        if not isinstance(following, Slot):
            reason = (
                "waiting for the stay/mulligan decision"
                if following is Step.DECIDE
                else "every card of the round is dealt"
            )
            raise IllegalAction("deal", reason, game=GAME_ID, piece=str(piece))
        self.deck.check_can_add(self.cards, piece)
        if not isinstance(piece, Card):  # pragma: no cover - check_can_add refuses tiles
            raise PieceRefused(str(piece), "not a playing card", game=GAME_ID)
        return MulliganRound((*self.cards, piece), self.player_mulligan, self.deck)

    def decide(self, any_mulligan: bool) -> MulliganRound:
        """The state after the decision window: whether at least one player mulliganed.

        Raises:
            IllegalAction: The first six cards are not all dealt, or the decision is made.
        """
        if self.player_mulligan is not None:
            raise IllegalAction("decide", "the decision is already made", game=GAME_ID)
        if next_slot(self.cards, None) is not Step.DECIDE:
            raise IllegalAction(
                "decide",
                f"the decision comes after six cards; {len(self.cards)} dealt",
                game=GAME_ID,
            )
        return MulliganRound(self.cards, any_mulligan, self.deck)

    def result(self, paytables: PayTables = DEFAULT_PAYTABLES) -> MulliganResult:
        """Judge and settle the complete round.

        Raises:
            IllegalAction: The round is not complete.
        """
        if self.step is not Step.COMPLETE:
            raise IllegalAction("result", f"the round waits for {self.step.value}", game=GAME_ID)
        hands = self.hands()
        return round_result(
            hands[PLAYER],
            hands[DEALER],
            hands.get(PLAYER_MULLIGAN),
            hands.get(DEALER_MULLIGAN),
            paytables,
        )


FACTS: Final = GameFacts(
    id=GAME_ID,
    name="Three Card Mulligan",
    new_deck=Deck.standard,
    bet_ids=BET_IDS,
    new_paytables=_default_paytables,
)
"""What the game is: its id, name, deck, bet types and pay tables."""


class ThreeCardMulligan(Declared):
    """Three Card Mulligan: the shared-hand live-dealer form."""

    facts = FACTS

    @property
    def deal_plan(self) -> DealPlan:
        """The part of the plan fixed before any decision: P1 P2 P3 (up), D1 D2 D3 (hidden).

        What follows depends on decisions: see :class:`MulliganRound` and :func:`deal_plan`.
        """
        return DealPlan(PLAYER_SLOTS + DEALER_SLOTS)

    def new_round(self) -> MulliganRound:
        """An empty round."""
        return MulliganRound(deck=self.deck)


THREE_CARD_MULLIGAN: Final = ThreeCardMulligan()
