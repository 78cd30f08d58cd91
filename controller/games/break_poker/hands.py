"""Break Poker hand strengths on ranks (used by ``rules`` and ``par_sheet`` of this package).

Everything here works on rank values: 2-14 (ace 14) for the standard cards and ``0`` for the
joker (``Card.rank`` gives 0 for the joker). Suits never matter in Break Poker, so the card-level
API in :mod:`controller.games.break_poker.rules` and the rank-multiset par sheet both build on these
functions.

Keys are tuples compared as tuples; a higher key beats a lower one, equal keys copy (tie):

* two-card (low) hand: ``(1, pair_rank)`` or ``(0, high, low)``;
* three-card (high) hand: ``(3, trips_rank)``, ``(2, straight_top)`` (A-2-3 has top 3,
  Q-K-A top 14), ``(1, pair_rank, kicker)`` or ``(0, high, middle, low)``.

The first element is the category, so the same tuples also decide the Decisions' "outrank"
rule across a two-card and a three-card hand (see :func:`low_outranks_high`).
"""

from __future__ import annotations

import enum
import functools
from typing import Final

JOKER_RANK: Final = 0
ACE: Final = 14
RANKS: Final = tuple(range(2, 15))
"""The standard ranks, 2 to ace."""

LowKey = tuple[int, ...]
HighKey = tuple[int, ...]


class LowCategory(enum.IntEnum):
    """Two-card (low) hand categories; a higher value beats a lower one."""

    HIGH_CARD = 0
    PAIR = 1


class HighCategory(enum.IntEnum):
    """Three-card (high) hand categories; a higher value beats a lower one."""

    HIGH_CARD = 0
    PAIR = 1
    STRAIGHT = 2
    THREE_OF_A_KIND = 3


class BreakBonusHand(enum.IntEnum):
    """The best Lucky Break of seven cards, as the Break Bonus table lists it (higher = better).

    The value orders the lines of the table from "no Lucky Break" up to "five aces".
    """

    NONE = 0
    PAIR_STRAIGHT = 1
    PAIR_QKA = 2
    PAIR_TRIPS = 3
    FIVE_OF_A_KIND = 4
    FIVE_ACES = 5

    @property
    def outcome(self) -> str:
        """The pay-table outcome name (``"five_aces"``, ..., ``"no_lucky_break"``)."""
        return _BONUS_OUTCOMES[self]


_BONUS_OUTCOMES: Final = {
    BreakBonusHand.NONE: "no_lucky_break",
    BreakBonusHand.PAIR_STRAIGHT: "pair_straight",
    BreakBonusHand.PAIR_QKA: "pair_qka",
    BreakBonusHand.PAIR_TRIPS: "pair_trips",
    BreakBonusHand.FIVE_OF_A_KIND: "five_of_a_kind",
    BreakBonusHand.FIVE_ACES: "five_aces",
}


class HouseWayStep(enum.IntEnum):
    """The house way's steps; a higher value is tried first (step 1 is ``PAIR_TRIPS``)."""

    HIGH_CARDS = 0
    """Step 7: no pair low, no pair high."""
    NO_PAIR_PAIR = 1
    """Step 6: no-pair low, pair high."""
    PAIR_PAIR = 2
    """Step 5: pair low, pair high."""
    NO_PAIR_STRAIGHT = 3
    """Step 4: no-pair low, straight high."""
    NO_PAIR_TRIPS = 4
    """Step 3: no-pair low, three of a kind high."""
    PAIR_STRAIGHT = 5
    """Step 2: pair low, straight high."""
    PAIR_TRIPS = 6
    """Step 1: pair low, three of a kind high."""

    @property
    def number(self) -> int:
        """The step's number on the rule page (1-7)."""
        return 7 - self.value


def house_way_step(low: LowKey, high: HighKey) -> HouseWayStep:
    """Which house-way step a (legal) setting with these hands belongs to.

    A pair low with a high-card high hand is never legal, so it has no step; it is reported as
    step 7 (:attr:`HouseWayStep.HIGH_CARDS`), and callers only ask for legal settings.
    """
    low_pair = low[0] == LowCategory.PAIR
    category = high[0]
    if category == HighCategory.THREE_OF_A_KIND:
        return HouseWayStep.PAIR_TRIPS if low_pair else HouseWayStep.NO_PAIR_TRIPS
    if category == HighCategory.STRAIGHT:
        return HouseWayStep.PAIR_STRAIGHT if low_pair else HouseWayStep.NO_PAIR_STRAIGHT
    if category == HighCategory.PAIR:
        return HouseWayStep.PAIR_PAIR if low_pair else HouseWayStep.NO_PAIR_PAIR
    return HouseWayStep.HIGH_CARDS


def natural_high_key(a: int, b: int, c: int) -> HighKey:
    """The key of a three-card hand of standard ranks (no joker)."""
    high, middle, low = sorted((a, b, c), reverse=True)
    if high == low:
        return (HighCategory.THREE_OF_A_KIND, high)
    if high == middle:
        return (HighCategory.PAIR, high, low)
    if middle == low:
        return (HighCategory.PAIR, middle, high)
    if high - middle == 1 and middle - low == 1:
        return (HighCategory.STRAIGHT, high)
    if (high, middle, low) == (ACE, 3, 2):
        return (HighCategory.STRAIGHT, 3)
    return (HighCategory.HIGH_CARD, high, middle, low)


@functools.cache
def high_key(a: int, b: int, c: int) -> HighKey:
    """The key of a three-card (high) hand; rank 0 is the joker.

    The joker is whichever of an ace, the missing card of a three of a kind, or the missing
    card of a straight makes the best hand (Decisions).
    """
    ranks = [a, b, c]
    if JOKER_RANK not in ranks:
        return natural_high_key(a, b, c)
    ranks.remove(JOKER_RANK)
    x, y = ranks
    if JOKER_RANK in (x, y):
        # Only one joker exists; two are not a hand of this game. Read the second as an ace.
        return natural_high_key(ACE, ACE, y if x == JOKER_RANK else x)
    options = [natural_high_key(x, y, ACE)]
    for z in RANKS:
        key = natural_high_key(x, y, z)
        if key[0] in (HighCategory.THREE_OF_A_KIND, HighCategory.STRAIGHT):
            options.append(key)
    return max(options)


@functools.cache
def low_key(a: int, b: int) -> LowKey:
    """The key of a two-card (low) hand; the joker (rank 0) is an ace."""
    high, low = sorted((a or ACE, b or ACE), reverse=True)
    if high == low:
        return (LowCategory.PAIR, high)
    return (LowCategory.HIGH_CARD, high, low)


def low_outranks_high(low: LowKey, high: HighKey) -> bool:
    """Whether a low hand outranks the high hand, which makes a setting illegal.

    Decisions: category first (a three of a kind or straight outranks any two-card hand, a
    pair outranks a high-card hand), then the pair rank, then the cards in order. The two-card
    hand runs out of cards first, so a low hand equal to the high hand's first two cards is
    "equal" and allowed.
    """
    return low > high[: len(low)]


def is_lucky_break(low: LowKey, high: HighKey) -> bool:
    """A pair low and a three of a kind or straight high."""
    return low[0] == LowCategory.PAIR and high[0] >= HighCategory.STRAIGHT


def break_bonus_hand(low: LowKey, high: HighKey) -> BreakBonusHand:
    """The Break Bonus line of one setting (``NONE`` if it is no Lucky Break)."""
    if not is_lucky_break(low, high):
        return BreakBonusHand.NONE
    if high[0] == HighCategory.THREE_OF_A_KIND:
        if low[1] == high[1]:
            return BreakBonusHand.FIVE_ACES if low[1] == ACE else BreakBonusHand.FIVE_OF_A_KIND
        return BreakBonusHand.PAIR_TRIPS
    if high[1] == ACE:
        return BreakBonusHand.PAIR_QKA
    return BreakBonusHand.PAIR_STRAIGHT


QUALIFYING_HIGH: Final[HighKey] = natural_high_key(13, 3, 2)
"""K-3-2: the lowest high hand with which the dealer qualifies."""

KING: Final = 13


class Qualifier(enum.StrEnum):
    """How the dealer's qualification is read (the ``dealer_qualifier`` game option).

    ``K32``, the default, is the rule as written: the dealer's high hand is at least K-3-2,
    ace high (so A-Q-J qualifies). ``NEEDS_KING`` is the reading behind the published par
    table (main bet edge 2.48%): a dealer whose high hand is only a high card qualifies only
    if the setting holds a king, so an ace-high hand without a king does not qualify; a pair,
    straight or three of a kind in the high hand qualifies as written.
    docs/rules/break-poker.md shows the computation.
    """

    K32 = "k32"
    NEEDS_KING = "needs_king"


def qualifies(
    high: HighKey, low: LowKey | None = None, qualifier: Qualifier = Qualifier.K32
) -> bool:
    """Whether a dealer's setting qualifies.

    Args:
        high: The dealer's high hand.
        low: The dealer's low hand (read only by :attr:`Qualifier.NEEDS_KING`, where a king
            in the low hand counts; ``None``: the high hand alone).
        qualifier: The reading of the qualification rule.
    """
    if high < QUALIFYING_HIGH:
        return False
    if qualifier is Qualifier.K32 or high[0] != HighCategory.HIGH_CARD:
        return True
    return KING in high[1:] or (low is not None and KING in low[1:])


RANK_WORDS: Final = {
    2: "2",
    3: "3",
    4: "4",
    5: "5",
    6: "6",
    7: "7",
    8: "8",
    9: "9",
    10: "10",
    11: "J",
    12: "Q",
    13: "K",
    14: "A",
}


def describe_low(key: LowKey) -> str:
    """Words for people: ``"pair A-A"``, ``"K-9 high"``."""
    if key[0] == LowCategory.PAIR:
        word = RANK_WORDS[key[1]]
        return f"pair {word}-{word}"
    return "-".join(RANK_WORDS[rank] for rank in key[1:]) + " high"


def describe_high(key: HighKey) -> str:
    """Words for people: ``"three of a kind 5-5-5"``, ``"straight Q-K-A"``, ``"pair K-K-9"``."""
    category = key[0]
    if category == HighCategory.THREE_OF_A_KIND:
        word = RANK_WORDS[key[1]]
        return f"three of a kind {word}-{word}-{word}"
    if category == HighCategory.STRAIGHT:
        top = key[1]
        ranks = (ACE, 2, 3) if top == 3 else (top - 2, top - 1, top)
        return "straight " + "-".join(RANK_WORDS[rank] for rank in ranks)
    if category == HighCategory.PAIR:
        word = RANK_WORDS[key[1]]
        return f"pair {word}-{word}-{RANK_WORDS[key[2]]}"
    return "-".join(RANK_WORDS[rank] for rank in key[1:]) + " high"


def low_category_name(key: LowKey) -> str:
    """Machine name of a low hand's category (``"pair"``, ``"high_card"``)."""
    return LowCategory(key[0]).name.lower()


def high_category_name(key: HighKey) -> str:
    """Machine name of a high hand's category (``"three_of_a_kind"``, ``"straight"``...)."""
    return HighCategory(key[0]).name.lower()
