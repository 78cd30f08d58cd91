"""Teen Patti 20-20 rules: three-card hands A and B and the side bets (par sheet: ``par_sheet``).

The rules are those of docs/rules/teen-patti-20-20.md (restated from the operator's sheet,
with the team's binding decisions). In short:

* Three-card ranking, high to low: trail of aces, trail (2-K), straight flush, straight,
  flush, pair, high card. Sequences rank A-K-Q, A-2-3, K-Q-J, Q-J-10, ..., 4-3-2, for
  straights and straight flushes alike. Suits never decide.
* The 6 Card Bonus takes the best five of the six dealt cards under standard five-card poker
  (A-2-3-4-5 is the lowest straight, no wrap-around) and pays three of a kind or better.

Everything here is pure: no I/O, no clock, no numpy.

Hand strength is an ``int``: ``category_level << 12 | within_category``; a higher int beats a
lower one and equal ints tie. A table over every ordered triple of card codes (52**3 entries,
built once on first use from the 22,100 three-card hands) makes :func:`rank_codes` a list
lookup.
"""

from __future__ import annotations

import functools
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from controller.cards import Card, Deck, Piece
from controller.errors import RulesError
from controller.games.base import DealPlan, Declared, GameFacts, GameResult, Slot, pay_odds
from controller.games.three_card import hands as three_card
from controller.money import BetResult, Odds, PayTables

GAME_ID: Final = "teen-patti-20-20"
BET_IDS: Final = (
    "player_a",
    "player_b",
    "tie",
    "pair_plus_a",
    "pair_plus_b",
    "six_card_bonus",
)
HAND_LABELS: Final = ("A", "B")
CARDS_PER_HAND: Final = three_card.CARDS_PER_HAND

_LEVEL_SHIFT: Final = three_card.LEVEL_SHIFT
_ACE: Final = three_card.ACE

PLURAL_RANK_NAMES: Final = three_card.PLURAL_RANK_NAMES


class TeenPattiHand(three_card.RankedCategory):
    """Categories of a three-card Teen Patti hand, listed high to low (level 0: high card)."""

    TRAIL_OF_ACES = "trail_of_aces"
    TRAIL = "trail"
    STRAIGHT_FLUSH = "straight_flush"
    STRAIGHT = "straight"
    FLUSH = "flush"
    PAIR = "pair"
    HIGH_CARD = "high_card"

    @classmethod
    def noun(cls) -> str:
        """What a member is called in an error message."""
        return "Teen Patti hand category"


class SixCardBonus(three_card.RankedCategory):
    """Outcomes of the 6 Card Bonus (best five of six cards), listed high to low."""

    ROYAL_FLUSH = "royal_flush"
    STRAIGHT_FLUSH = "straight_flush"
    FOUR_OF_A_KIND = "four_of_a_kind"
    FULL_HOUSE = "full_house"
    FLUSH = "flush"
    STRAIGHT = "straight"
    THREE_OF_A_KIND = "three_of_a_kind"
    NO_BONUS = "no_bonus"


# --------------------------------------------------------------------------------------------
# Three-card evaluator


def _sequence_value(high: int, mid: int, low: int) -> int:
    """Rank of a three-card sequence (ranks given high to low), or 0 if not a sequence.

    A-K-Q is 12, A-2-3 is 11, K-Q-J is 10, and so on down to 4-3-2 at 1.
    """
    if (high, mid, low) == (_ACE, 13, 12):
        return 12
    if (high, mid, low) == (_ACE, 3, 2):
        return 11
    if high - 1 == mid and mid - 1 == low:
        return high - 3
    return 0


def strength_of_ranks(ranks: Iterable[int], suited: bool) -> int:
    """Teen Patti's ranking: the shared :data:`~controller.games.three_card.hands.StrengthOfRanks`.

    ``ranks``: the three ranks (2-14), any order; ``suited``: all of one suit. Returns
    ``level << 12 | within``: compare as plain ints; equal means a tie.
    """
    high, mid, low = sorted(ranks, reverse=True)
    hand: TeenPattiHand
    if high == low:
        hand = TeenPattiHand.TRAIL_OF_ACES if high == _ACE else TeenPattiHand.TRAIL
        within = high
    elif sequence := _sequence_value(high, mid, low):
        hand = TeenPattiHand.STRAIGHT_FLUSH if suited else TeenPattiHand.STRAIGHT
        within = sequence
    else:
        category, within = three_card.plain_strength(high, mid, low, suited)
        hand = TeenPattiHand(category)
    return hand.level << _LEVEL_SHIFT | within


def category_of_strength(strength: int) -> TeenPattiHand:
    """The category a strength belongs to."""
    return TeenPattiHand.from_level(strength >> _LEVEL_SHIFT)


def _describe_special(category: TeenPattiHand, ranks: list[int]) -> str | None:
    if category is TeenPattiHand.TRAIL_OF_ACES:
        return "trail of aces"
    if category is TeenPattiHand.TRAIL:
        return f"trail of {PLURAL_RANK_NAMES[ranks[0]]}"
    if category in (TeenPattiHand.STRAIGHT_FLUSH, TeenPattiHand.STRAIGHT):
        label = "straight flush" if category is TeenPattiHand.STRAIGHT_FLUSH else "straight"
        high, mid, low = ranks
        order = (_ACE, 2, 3) if (high, mid, low) == (_ACE, 3, 2) else (high, mid, low)
        return three_card.describe_sequence(label, order)
    return None


RANKING: Final = three_card.Ranking(
    "Teen Patti", {}, strength_of_ranks, category_of_strength, _describe_special
)
"""Teen Patti's ranking and the hand functions built on it (shared three-card machinery)."""

_strength_table: Final = RANKING.strength_table
"""Strength by ``a * 2704 + b * 52 + c`` for every ordered triple of distinct codes (-1 on a
repeat), built on first call."""
_check_hand: Final = RANKING.check
"""Check that cards are three distinct standard cards (RulesError: wrong count, a tile, the
joker or a repeated card)."""
rank_codes: Final = RANKING.strength_of_codes
"""Strength of three distinct standard card codes (0-51), without validation (-1: a repeat)."""
rank_hand: Final = RANKING.rank_hand
"""The strength of a three-card hand: higher beats lower, equal ties; suits never matter."""
hand_category: Final = RANKING.hand_category
"""The category of a three-card hand."""
describe_hand: Final = RANKING.describe_hand
"""A sentence for people: ``"pair of kings, queen kicker"``, ``"straight, ace-two-three"``."""
evaluate_hand: Final = RANKING.evaluate_hand
"""Category and description of a three-card hand."""


# --------------------------------------------------------------------------------------------
# Six-card bonus: best five of six under standard five-card poker

_FIVE_HIGH_CARD, _FIVE_PAIR, _FIVE_TWO_PAIR = 0, 1, 2
_FIVE_TRIPS, _FIVE_STRAIGHT, _FIVE_FLUSH = 3, 4, 5
_FIVE_FULL_HOUSE, _FIVE_QUADS, _FIVE_STRAIGHT_FLUSH, _FIVE_ROYAL = 6, 7, 8, 9

_FIVE_TO_BONUS: Final = {
    _FIVE_ROYAL: SixCardBonus.ROYAL_FLUSH,
    _FIVE_STRAIGHT_FLUSH: SixCardBonus.STRAIGHT_FLUSH,
    _FIVE_QUADS: SixCardBonus.FOUR_OF_A_KIND,
    _FIVE_FULL_HOUSE: SixCardBonus.FULL_HOUSE,
    _FIVE_FLUSH: SixCardBonus.FLUSH,
    _FIVE_STRAIGHT: SixCardBonus.STRAIGHT,
    _FIVE_TRIPS: SixCardBonus.THREE_OF_A_KIND,
}


def _straight_top(ordered: tuple[int, ...]) -> int:
    """The top rank of five distinct ranks (high first) if they make a straight, else 0."""
    if ordered[0] - ordered[4] == 4:
        return ordered[0]
    if ordered == (_ACE, 5, 4, 3, 2):
        return 5
    return 0


def five_card_key(cards: Sequence[Card]) -> tuple[int, tuple[int, ...]]:
    """Standard five-card poker value: (category 0-9, tie-break ranks); higher is better.

    Categories: 0 high card, 1 pair, 2 two pair, 3 three of a kind, 4 straight, 5 flush,
    6 full house, 7 four of a kind, 8 straight flush, 9 royal flush. A-2-3-4-5 is the lowest
    straight (five high); there is no wrap-around.
    """
    ranks = [card.rank for card in cards]
    counts = Counter(ranks)
    groups = sorted(counts.items(), key=lambda item: (item[1], item[0]), reverse=True)
    shape = tuple(count for _, count in groups)
    ordered = tuple(rank for rank, _ in groups)
    flush = len({card.suit for card in cards}) == 1
    top = _straight_top(ordered) if len(counts) == 5 else 0
    if top and flush:
        return (_FIVE_ROYAL if top == _ACE else _FIVE_STRAIGHT_FLUSH, (top,))
    if shape == (4, 1):
        return (_FIVE_QUADS, ordered)
    if shape == (3, 2):
        return (_FIVE_FULL_HOUSE, ordered)
    if flush:
        return (_FIVE_FLUSH, ordered)
    if top:
        return (_FIVE_STRAIGHT, (top,))
    if shape == (3, 1, 1):
        return (_FIVE_TRIPS, ordered)
    if shape == (2, 2, 1):
        return (_FIVE_TWO_PAIR, ordered)
    if shape == (2, 1, 1, 1):
        return (_FIVE_PAIR, ordered)
    return (_FIVE_HIGH_CARD, ordered)


@dataclass(frozen=True, slots=True)
class BonusHand:
    """The 6 Card Bonus judgement of six cards.

    Attributes:
        category: The bonus outcome (``no_bonus`` below three of a kind).
        best_five: The best five cards, highest-value choice among the six.
        five_card_category: The plain poker category of the best five (0-9), also below trips.
    """

    category: SixCardBonus
    best_five: tuple[Card, ...]
    five_card_category: int


def six_card_bonus(cards: Sequence[Piece]) -> BonusHand:
    """The best five of six cards and the 6 Card Bonus outcome it gives.

    Raises:
        RulesError: Not six distinct standard cards.
    """
    if len(cards) != 2 * CARDS_PER_HAND:
        raise RulesError(
            f"the 6 Card Bonus needs 6 cards, got {len(cards)}", cards=[str(card) for card in cards]
        )
    checked: list[Card] = []
    for card in cards:
        if not isinstance(card, Card) or card.is_joker:
            raise RulesError(
                f"the 6 Card Bonus cannot use {card}: not a standard card", piece=str(card)
            )
        if card in checked:
            raise RulesError(f"the 6 Card Bonus cards repeat {card}", piece=str(card))
        checked.append(card)
    best = max((tuple(five) for five in itertools.combinations(checked, 5)), key=five_card_key)
    level = five_card_key(best)[0]
    return BonusHand(_FIVE_TO_BONUS.get(level, SixCardBonus.NO_BONUS), best, level)


# --------------------------------------------------------------------------------------------
# The game


@functools.cache
def _deal_plan() -> DealPlan:
    slots = []
    for index in range(1, CARDS_PER_HAND + 1):
        for hand in HAND_LABELS:
            slots.append(Slot(f"{hand}{index}", hand))
    return DealPlan(tuple(slots))


def _default_paytables() -> dict[str, dict[str, Odds]]:
    pair_plus = {
        TeenPattiHand.TRAIL_OF_ACES.value: Fraction(50),
        TeenPattiHand.TRAIL.value: Fraction(40),
        TeenPattiHand.STRAIGHT_FLUSH.value: Fraction(30),
        TeenPattiHand.STRAIGHT.value: Fraction(6),
        TeenPattiHand.FLUSH.value: Fraction(3),
        TeenPattiHand.PAIR.value: Fraction(1),
    }
    return {
        "player_a": {"win": Fraction(19, 20)},
        "player_b": {"win": Fraction(19, 20)},
        "tie": {"tie": Fraction(50)},
        "pair_plus_a": dict(pair_plus),
        "pair_plus_b": dict(pair_plus),
        "six_card_bonus": {
            SixCardBonus.ROYAL_FLUSH.value: Fraction(1000),
            SixCardBonus.STRAIGHT_FLUSH.value: Fraction(200),
            SixCardBonus.FOUR_OF_A_KIND.value: Fraction(100),
            SixCardBonus.FULL_HOUSE.value: Fraction(20),
            SixCardBonus.FLUSH.value: Fraction(15),
            SixCardBonus.STRAIGHT.value: Fraction(10),
            SixCardBonus.THREE_OF_A_KIND.value: Fraction(7),
        },
    }


DEFAULT_PAYTABLES: Final = _default_paytables()


def _odds(paytables: PayTables, bet: str, outcome: str) -> Odds:
    return pay_odds(GAME_ID, paytables, bet, outcome)


FACTS: Final = GameFacts(
    id=GAME_ID,
    name="Teen Patti 20-20",
    new_deck=Deck.standard,
    bet_ids=BET_IDS,
    new_paytables=_default_paytables,
)
"""What the game is: its id, name, deck, bet types and pay tables."""


class TeenPatti2020(Declared):
    """Teen Patti 20-20: two three-card hands, A and B, dealt A1 B1 A2 B2 A3 B3 face up."""

    facts = FACTS

    @property
    def deal_plan(self) -> DealPlan:
        """A1 B1 A2 B2 A3 B3, all face up."""
        return _deal_plan()

    def resolve(self, hands: Mapping[str, Sequence[Piece]]) -> GameResult:
        """Judge hands A and B and the 6 Card Bonus.

        Args:
            hands: ``{"A": three cards, "B": three cards}``.

        Returns:
            Winner ``"A"``, ``"B"`` or ``"tie"``; both hands' summaries; details holding
            ``six_card_bonus`` (``category``, ``best_five``) and both ``strengths``.

        Raises:
            RulesError: Hands missing or extra, wrong card count, a joker or tile, or a card
                dealt twice.
        """
        if set(hands) != set(HAND_LABELS):
            raise RulesError(
                f"Teen Patti needs hands A and B, got {sorted(hands)}",
                game=GAME_ID,
                hands=sorted(hands),
            )
        checked = {label: _check_hand(hands[label], label) for label in HAND_LABELS}
        repeated = set(checked["A"]) & set(checked["B"])
        if repeated:
            names = sorted(str(card) for card in repeated)
            raise RulesError(
                f"{', '.join(names)} dealt to both hands A and B",
                game=GAME_ID,
                cards=names,
            )
        strengths = {label: rank_hand(cards) for label, cards in checked.items()}
        if strengths["A"] > strengths["B"]:
            winner = "A"
        elif strengths["B"] > strengths["A"]:
            winner = "B"
        else:
            winner = "tie"
        bonus = six_card_bonus(checked["A"] + checked["B"])
        return GameResult(
            winner=winner,
            hands={label: evaluate_hand(cards, label) for label, cards in checked.items()},
            details={
                "six_card_bonus": {
                    "category": bonus.category.value,
                    "best_five": [str(card) for card in bonus.best_five],
                },
                "strengths": dict(strengths),
            },
        )

    def settle(self, result: GameResult, paytables: PayTables) -> dict[str, BetResult]:
        """Settle every bet, in :attr:`bet_ids` order.

        Player A/B win at their pay table's ``win`` odds, are pushed (reason ``"tie"``) on a
        tie and lose otherwise. Tie wins on a tie. Pair Plus A/B pay by their own hand's
        category whatever the main result (a high card loses, reason ``"high_card"``). The
        6 Card Bonus pays by its category (``"no_bonus"`` loses).

        Raises:
            RulesError: The result lacks a hand or the bonus, or a needed pay-table entry is
                missing.
        """
        if result.winner not in ("A", "B", "tie"):
            raise RulesError(
                f"winner must be A, B or tie, got {result.winner!r}",
                game=GAME_ID,
                winner=result.winner,
            )
        settled = _settle_main(result.winner, paytables)
        settled.update(_settle_pair_plus(result, paytables))
        settled["six_card_bonus"] = _settle_six_card_bonus(result, paytables)
        return {bet: settled[bet] for bet in BET_IDS}


def _settle_main(winner: str | None, paytables: PayTables) -> dict[str, BetResult]:
    """Player A/B and Tie."""
    settled: dict[str, BetResult] = {}
    for label, bet in (("A", "player_a"), ("B", "player_b")):
        if winner == label:
            settled[bet] = BetResult.win(_odds(paytables, bet, "win"), "win")
        elif winner == "tie":
            settled[bet] = BetResult.push("tie")
        else:
            settled[bet] = BetResult.lose("lose")
    if winner == "tie":
        settled["tie"] = BetResult.win(_odds(paytables, "tie", "tie"), "tie")
    else:
        settled["tie"] = BetResult.lose("lose")
    return settled


def _settle_pair_plus(result: GameResult, paytables: PayTables) -> dict[str, BetResult]:
    """Pair Plus A/B, by their own hand's category."""
    settled: dict[str, BetResult] = {}
    for label, bet in (("A", "pair_plus_a"), ("B", "pair_plus_b")):
        try:
            category = TeenPattiHand(result.hands[label].category)
        except (KeyError, ValueError):
            raise RulesError(
                f"result has no Teen Patti category for hand {label}", game=GAME_ID, hand=label
            ) from None
        if category is TeenPattiHand.HIGH_CARD:
            settled[bet] = BetResult.lose(category.value)
        else:
            settled[bet] = BetResult.win(_odds(paytables, bet, category.value), category.value)
    return settled


def _settle_six_card_bonus(result: GameResult, paytables: PayTables) -> BetResult:
    """The 6 Card Bonus, by its category."""
    try:
        bonus = SixCardBonus(result.details["six_card_bonus"]["category"])
    except (KeyError, TypeError, ValueError):
        raise RulesError("result has no 6 Card Bonus category", game=GAME_ID) from None
    if bonus is SixCardBonus.NO_BONUS:
        return BetResult.lose(bonus.value)
    return BetResult.win(_odds(paytables, "six_card_bonus", bonus.value), bonus.value)


TEEN_PATTI_20_20: Final = TeenPatti2020()
