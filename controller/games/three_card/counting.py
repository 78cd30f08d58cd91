"""Numpy forms of the three-card machinery, for the par sheets (never loaded by live play).

* :func:`lazy_strength_array`: a game's strength table
  (:func:`controller.games.three_card.hands.lazy_strength_table`) as a numpy array;
* :func:`hands_and_strengths`: every hand of a deck with its strength.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from controller.games.three_card.hands import CARDS_PER_HAND, triple_index

IntArray = npt.NDArray[np.int64]


def lazy_strength_array(strength_table: Callable[[], list[int]]) -> Callable[[], IntArray]:
    """A function returning the table of ``strength_table`` as a numpy array (built once)."""

    @functools.cache
    def strength_array() -> IntArray:
        return np.asarray(strength_table(), dtype=np.int64)

    return strength_array


def hands_and_strengths(codes: Iterable[int], strengths: IntArray) -> tuple[IntArray, IntArray]:
    """Every three-card hand of a deck (codes ascending) and its strength.

    Args:
        codes: The deck's standard card codes (repeats are ignored).
        strengths: A game's strength table as a numpy array.

    Returns:
        ``(hands, strengths)``: arrays of shape (n, 3) and (n,).
    """
    ordered = sorted(set(codes))
    hands = np.asarray(list(itertools.combinations(ordered, CARDS_PER_HAND)), dtype=np.int64)
    hands = hands.reshape(-1, CARDS_PER_HAND)
    return hands, strengths[triple_index(hands[:, 0], hands[:, 1], hands[:, 2])]
