"""Poker hand classes: the 7462 five-card values, their categories and their names (pure).

A hand's **strength** is an int from 1 (7-5-4-3-2 offsuit, the worst five-card hand) to 7462
(a royal flush): one value per equivalence class of five-card hands. :func:`category_of` and
:func:`describe` read a strength back; :mod:`controller.games.poker.evaluator` computes it.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from controller.cards import RANK_NAMES
from controller.errors import RulesError

NUM_CLASSES: Final = 7462
"""How many distinct five-card hand values there are; the best strength."""


class HandCategory(enum.IntEnum):
    """The nine categories, in order of value. A royal flush is a straight flush."""

    HIGH_CARD = 0
    ONE_PAIR = 1
    TWO_PAIR = 2
    THREE_OF_A_KIND = 3
    STRAIGHT = 4
    FLUSH = 5
    FULL_HOUSE = 6
    FOUR_OF_A_KIND = 7
    STRAIGHT_FLUSH = 8

    @property
    def id(self) -> str:
        """The machine name (``"full_house"``), as used in par sheets and on the wire."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class HandClass:
    """One equivalence class of five-card hands.

    Attributes:
        category: The hand's category.
        ranks: The ranks (2-14) that decide ties, most significant first: the straight's top
            (5 for the wheel), quad rank then kicker, trips then pair, the five flush or
            high-card ranks, trips then kickers, high pair, low pair, kicker, pair then kickers.
    """

    category: HandCategory
    ranks: tuple[int, ...]


# --------------------------------------------------------------------------------------------
# The 7462 classes, weakest first.

_STRAIGHT_TOPS: Final = tuple(range(5, 15))  # 5 = the wheel A-2-3-4-5


def _straight_ranks(top: int) -> tuple[int, ...]:
    if top == 5:
        return (5, 4, 3, 2, 14)
    return tuple(range(top, top - 5, -1))


def _distinct_fives() -> list[tuple[int, ...]]:
    """Every set of five distinct ranks that is not a straight, weakest first."""
    straights = {frozenset(_straight_ranks(top)) for top in _STRAIGHT_TOPS}
    sets = [
        tuple(sorted(combo, reverse=True))
        for combo in itertools.combinations(range(2, 15), 5)
        if frozenset(combo) not in straights
    ]
    return sorted(sets)


def _build_classes() -> list[tuple[HandClass, tuple[int, ...]]]:
    """Every class with its five ranks (as a multiset), weakest first."""
    ranks = range(2, 15)
    out: list[tuple[HandClass, tuple[int, ...]]] = []

    Items = Iterable[tuple[tuple[int, ...], tuple[int, ...]]]

    def add(category: HandCategory, items: Items) -> None:
        for key, five in sorted(items):
            out.append((HandClass(category, key), five))

    fives = _distinct_fives()
    add(HandCategory.HIGH_CARD, ((five, five) for five in fives))
    add(
        HandCategory.ONE_PAIR,
        (
            ((pair, *kickers), (pair, pair, *kickers))
            for pair in ranks
            for kickers in (
                tuple(sorted(c, reverse=True))
                for c in itertools.combinations([r for r in ranks if r != pair], 3)
            )
        ),
    )
    add(
        HandCategory.TWO_PAIR,
        (
            ((high, low, kicker), (high, high, low, low, kicker))
            for high in ranks
            for low in ranks
            if low < high
            for kicker in ranks
            if kicker not in (high, low)
        ),
    )
    add(
        HandCategory.THREE_OF_A_KIND,
        (
            ((trips, *kickers), (trips, trips, trips, *kickers))
            for trips in ranks
            for kickers in (
                tuple(sorted(c, reverse=True))
                for c in itertools.combinations([r for r in ranks if r != trips], 2)
            )
        ),
    )
    add(HandCategory.STRAIGHT, (((top,), _straight_ranks(top)) for top in _STRAIGHT_TOPS))
    add(HandCategory.FLUSH, ((five, five) for five in fives))
    add(
        HandCategory.FULL_HOUSE,
        (
            ((trips, pair), (trips, trips, trips, pair, pair))
            for trips in ranks
            for pair in ranks
            if pair != trips
        ),
    )
    add(
        HandCategory.FOUR_OF_A_KIND,
        (
            ((quad, kicker), (quad, quad, quad, quad, kicker))
            for quad in ranks
            for kicker in ranks
            if kicker != quad
        ),
    )
    add(HandCategory.STRAIGHT_FLUSH, (((top,), _straight_ranks(top)) for top in _STRAIGHT_TOPS))
    return out


_CLASSES: Final = _build_classes()
CLASSES: Final[tuple[HandClass, ...]] = (
    HandClass(HandCategory.HIGH_CARD, ()),
    *(cls for cls, _ in _CLASSES),
)
"""Strength -> its class; index 0 is a placeholder (no hand has strength 0)."""
assert len(CLASSES) == NUM_CLASSES + 1

_CATEGORY_START: Final[tuple[int, ...]] = tuple(
    min(i for i in range(1, NUM_CLASSES + 1) if CLASSES[i].category is category)
    for category in HandCategory
)
"""The weakest strength of each category."""

_CATEGORY_OF: Final[tuple[HandCategory, ...]] = tuple(cls.category for cls in CLASSES)


def category_of(strength: int) -> HandCategory:
    """The category of a strength.

    Raises:
        RulesError: Not a strength (1-7462).
    """
    if not 1 <= strength <= NUM_CLASSES:
        raise RulesError(f"strength {strength} is not 1-{NUM_CLASSES}", strength=strength)
    return _CATEGORY_OF[strength]


def category_start(category: HandCategory) -> int:
    """The weakest strength of a category."""
    return _CATEGORY_START[category]


def _plural(rank: int) -> str:
    name = RANK_NAMES[rank]
    return name + ("es" if name == "six" else "s")


def describe(strength: int) -> str:
    """The hand's value for people: ``"full house, kings full of nines"``.

    Raises:
        RulesError: Not a strength (1-7462).
    """
    category = category_of(strength)
    ranks = CLASSES[strength].ranks
    names = [RANK_NAMES[rank] for rank in ranks]
    if category is HandCategory.STRAIGHT_FLUSH:
        if ranks[0] == 14:
            return "royal flush"
        return f"straight flush, {names[0]} high"
    if category is HandCategory.FOUR_OF_A_KIND:
        return f"four of a kind, {_plural(ranks[0])}, {names[1]} kicker"
    if category is HandCategory.FULL_HOUSE:
        return f"full house, {_plural(ranks[0])} full of {_plural(ranks[1])}"
    if category is HandCategory.FLUSH:
        return f"flush, {', '.join(names)}"
    if category is HandCategory.STRAIGHT:
        return f"straight, {names[0]} high"
    if category is HandCategory.THREE_OF_A_KIND:
        return f"three of a kind, {_plural(ranks[0])}, kickers {', '.join(names[1:])}"
    if category is HandCategory.TWO_PAIR:
        return f"two pair, {_plural(ranks[0])} and {_plural(ranks[1])}, {names[2]} kicker"
    if category is HandCategory.ONE_PAIR:
        return f"one pair, {_plural(ranks[0])}, kickers {', '.join(names[1:])}"
    return f"high card, {', '.join(names)}"
