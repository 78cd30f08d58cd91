"""Three-card hand machinery shared by Teen Patti 20-20 and Three Card Mulligan.

The two games rank three-card hands differently (category order, the order of sequences), but
everything around the ranking is the same, and lives here:

* a strength is an ``int``, ``level << LEVEL_SHIFT | within``: a higher int beats a lower one
  and equal ints tie; ``within`` is often :func:`kickers`;
* a game's ranking is a pure ``strength_of_ranks(ranks, suited) -> int``
  (:data:`StrengthOfRanks`); :func:`lazy_strength_table` turns it into a lookup table over
  every ordered triple of standard card codes (52**3 entries, built on first use from the
  22,100 hands) (its numpy form, for the par sheets, is in
  :mod:`controller.games.three_card.counting`);
* checking that pieces are three distinct standard cards and naming the plain categories
  (flush, pair, high card) for people;
* :class:`Ranking`: a game's ranking with everything built on it (strength of codes and of
  hands, category, description, summary), so each game writes only what differs.

Everything here is pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import enum
import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, Self, TypeVar

from controller.cards import JOKER_CODE, RANK_NAMES, Card, Piece
from controller.errors import RulesError
from controller.games.base import HandSummary, checked_cards


class RankedCategory(enum.StrEnum):
    """Hand categories (or bonus outcomes) listed high to low; ``level`` 0 is the lowest.

    A subclass lists its members and names itself for errors (:meth:`noun`).
    """

    @classmethod
    def noun(cls) -> str:
        """What a member is called in an error message."""
        return "category"

    @property
    def level(self) -> int:
        """0 for the lowest member; a higher level beats a lower one."""
        return _levels(type(self))[self]

    @classmethod
    def from_level(cls, level: int) -> Self:
        """The member with a given level.

        Raises:
            RulesError: No member has that level.
        """
        ordered: tuple[Self, ...] = _by_level(cls)
        if not 0 <= level < len(ordered):
            raise RulesError(f"no {cls.noun()} has level {level}", level=level)
        return ordered[level]


_Ranked = TypeVar("_Ranked", bound=RankedCategory)


@functools.cache
def _by_level(cls: type[_Ranked]) -> tuple[_Ranked, ...]:
    return tuple(reversed(cls))


@functools.cache
def _levels(cls: type[RankedCategory]) -> dict[RankedCategory, int]:
    return {member: level for level, member in enumerate(_by_level(cls))}


StrengthOfRanks = Callable[[Iterable[int], bool], int]
"""A game's ranking: ``(ranks 2-14 in any order, all one suit?) -> strength``."""

CARDS_PER_HAND: Final = 3
LEVEL_SHIFT: Final = 12
"""A strength's category level sits above this many bits of within-category value."""
ACE: Final = 14
TRIPLES: Final = 52**3
"""Size of a strength table: one entry per ordered triple of card codes (repeats included)."""

PLURAL_RANK_NAMES: Final = {
    rank: ("sixes" if rank == 6 else f"{name}s") for rank, name in RANK_NAMES.items()
}


def kickers(*ranks: int) -> int:
    """Ranks compared in order, packed so that a higher first rank always wins."""
    value = 0
    for rank in ranks:
        value = value * 15 + rank
    return value


def plain_strength(high: int, mid: int, low: int, suited: bool) -> tuple[str, int]:
    """Category and within-category value of a hand that is neither trips nor a sequence.

    Both games rank these alike: a flush by its ranks high to low, a pair by the pair then the
    kicker, a high-card hand by its ranks high to low.

    Args:
        high: The highest rank.
        mid: The middle rank.
        low: The lowest rank.
        suited: Whether the three cards are of one suit.

    Returns:
        ``("flush" | "pair" | "high_card", within)``.
    """
    if suited:
        return "flush", kickers(high, mid, low)
    if high == mid:
        return "pair", kickers(high, low)
    if mid == low:
        return "pair", kickers(mid, high)
    return "high_card", kickers(high, mid, low)


def triple_index(a: Any, b: Any, c: Any) -> Any:
    """Index of the ordered triple ``(a, b, c)`` of card codes in a strength table.

    Works on ints and, element-wise, on numpy integer arrays.
    """
    return a * 2704 + b * 52 + c


def ranks_and_suited(codes: Sequence[int]) -> tuple[list[int], bool]:
    """The ranks (2-14) of standard card codes, and whether they all share one suit."""
    return [code // 4 + 2 for code in codes], len({code % 4 for code in codes}) == 1


def build_strength_table(strength_of_ranks: StrengthOfRanks) -> list[int]:
    """Strength by :func:`triple_index` for every ordered triple of distinct codes.

    Triples that repeat a card hold -1.

    Args:
        strength_of_ranks: The game's ranking.
    """
    table = [-1] * TRIPLES
    for combo in itertools.combinations(range(52), CARDS_PER_HAND):
        strength = strength_of_ranks(*ranks_and_suited(combo))
        for a, b, c in itertools.permutations(combo):
            table[a * 2704 + b * 52 + c] = strength
    return table


def lazy_strength_table(strength_of_ranks: StrengthOfRanks) -> Callable[[], list[int]]:
    """A function returning :func:`build_strength_table` of a ranking, built on first call."""

    @functools.cache
    def strength_table() -> list[int]:
        return build_strength_table(strength_of_ranks)

    return strength_table


def check_three_cards(
    cards: Sequence[Piece],
    hand: str,
    game_name: str,
    context: Mapping[str, Any],
) -> tuple[Card, ...]:
    """Check that ``cards`` are three distinct standard cards.

    Args:
        cards: The pieces of the hand.
        hand: The hand's label, or ``""`` when it has none.
        game_name: The game's name for people (``"Teen Patti"``), used in messages.
        context: Extra error context put first (e.g. ``{"game": GAME_ID}``).

    Raises:
        RulesError: Wrong count, a tile, the joker or a repeated card.
    """
    where = f"hand {hand} " if hand else f"a {game_name} hand "
    return checked_cards(
        cards,
        CARDS_PER_HAND,
        where,
        without_joker=f"{game_name} is played without one",
        **context,
        hand=hand,
    )


class HandChecker(Protocol):
    """A game's hand check: :func:`check_three_cards` with the game's name and context."""

    def __call__(self, cards: Sequence[Piece], hand: str = "") -> tuple[Card, ...]:
        """The three cards, checked.

        Raises:
            RulesError: Wrong count, a tile, the joker or a repeated card.
        """
        ...


def hand_checker(game_name: str, context: Mapping[str, Any]) -> HandChecker:
    """A game's :class:`HandChecker`: a fast path for good hands, else :func:`check_three_cards`.

    Args:
        game_name: The game's name for people, used in messages.
        context: Extra error context put first (e.g. ``{"game": GAME_ID}``).
    """

    def check(cards: Sequence[Piece], hand: str = "") -> tuple[Card, ...]:
        if len(cards) == CARDS_PER_HAND:
            a, b, c = cards
            if isinstance(a, Card) and isinstance(b, Card) and isinstance(c, Card):
                x, y, z = a.code, b.code, c.code
                if x != y != z != x and x < JOKER_CODE and y < JOKER_CODE and z < JOKER_CODE:
                    return (a, b, c)
        return check_three_cards(cards, hand, game_name, context)

    return check


def describe_plain(category: str, ranks: Sequence[int]) -> str:
    """Words for a flush, a pair or a high-card hand (the categories both games share).

    Args:
        category: ``"flush"``, ``"pair"``; anything else reads as high card.
        ranks: The three ranks, high to low.
    """
    names = [RANK_NAMES[rank] for rank in ranks]
    if category == "flush":
        return f"flush, {', '.join(names)}"
    if category == "pair":
        pair = ranks[1]
        kicker = ranks[2] if ranks[0] == pair else ranks[0]
        return f"pair of {PLURAL_RANK_NAMES[pair]}, {RANK_NAMES[kicker]} kicker"
    return f"{names[0]} high, {names[1]}, {names[2]}"


def describe_sequence(label: str, order: Iterable[int]) -> str:
    """``"straight, ace-two-three"``: a sequence's label and its ranks in the order given."""
    return f"{label}, {'-'.join(RANK_NAMES[rank] for rank in order)}"


C = TypeVar("C", bound=str)
"""A game's category type (a ``StrEnum``)."""


@dataclass(frozen=True)
class Ranking(Generic[C]):
    """A three-card game's ranking, and the hand functions built on it.

    Attributes:
        game_name: The game's name for people (``"Teen Patti"``), used in messages.
        context: Extra error context (e.g. ``{"game": GAME_ID}``).
        strength_of_ranks: The game's ranking (:data:`StrengthOfRanks`).
        category_of_strength: A strength's category.
        describe_special: Words for the game's own categories (trips, sequences) given the
            category and the ranks high to low; ``None`` for a plain category (flush, pair,
            high card), which :func:`describe_plain` names.
    """

    game_name: str
    context: Mapping[str, Any]
    strength_of_ranks: StrengthOfRanks
    category_of_strength: Callable[[int], C]
    describe_special: Callable[[C, list[int]], str | None]
    strength_table: Callable[[], list[int]] = field(init=False, repr=False)
    check: HandChecker = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "strength_table", lazy_strength_table(self.strength_of_ranks))
        object.__setattr__(self, "check", hand_checker(self.game_name, self.context))

    def strength_of_codes(self, a: int, b: int, c: int) -> int:
        """Strength of three distinct standard card codes (0-51), without validation.

        Returns:
            The strength, or -1 when a code repeats.
        """
        return self.strength_table()[a * 2704 + b * 52 + c]

    def rank_hand(self, cards: Sequence[Piece]) -> int:
        """The strength of a three-card hand: higher beats lower, equal ties.

        Raises:
            RulesError: Not three distinct standard cards.
        """
        a, b, c = self.check(cards)
        return self.strength_of_codes(a.code, b.code, c.code)

    def hand_category(self, cards: Sequence[Piece]) -> C:
        """The category of a three-card hand.

        Raises:
            RulesError: Not three distinct standard cards.
        """
        return self.category_of_strength(self.rank_hand(cards))

    def describe_hand(self, cards: Sequence[Piece]) -> str:
        """A sentence for people: ``"pair of kings, queen kicker"``.

        Raises:
            RulesError: Not three distinct standard cards.
        """
        checked = self.check(cards)
        category = self.hand_category(checked)
        ranks = sorted((card.rank for card in checked), reverse=True)
        special = self.describe_special(category, ranks)
        return special if special is not None else describe_plain(category, ranks)

    def evaluate_hand(self, cards: Sequence[Piece], hand: str = "") -> HandSummary:
        """Category and description of a three-card hand.

        Raises:
            RulesError: Not three distinct standard cards.
        """
        checked = self.check(cards, hand)
        return HandSummary(str(self.hand_category(checked)), self.describe_hand(checked))
