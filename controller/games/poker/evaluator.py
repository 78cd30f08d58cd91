"""Standard high-poker hand evaluation: five and seven cards, single hands and numpy batches.

A hand's **strength** is an int from 1 (7-5-4-3-2 offsuit, the worst five-card hand) to 7462
(a royal flush): one value per equivalence class of five-card hands, so a higher strength
wins and equal strengths chop. :func:`category_of` and :func:`describe` read a strength back.

How it works (all tables are built at import from first principles, in well under a second;
nothing is downloaded):

* Every card code (``(rank - 2) * 4 + suit``, see :mod:`controller.cards`) has an additive key:
  a rank part and a suit part. The rank parts (:data:`RANK_KEYS`) are chosen so that any
  multiset of at most seven ranks, four of each at most, has a distinct sum; the suit part is a
  3-bit counter per suit in the low 12 bits.
* Adding the keys of a hand's cards gives, in one integer, the rank multiset (a perfect hash
  looked up in a table of the best non-flush hand of every multiset) and the suit counts (a
  4096-entry table names the suit with five or more cards, if any).
* A flush is looked up by the 13-bit rank mask of its suit in an 8192-entry table (which for
  six or seven suited cards already holds the best five of them).
* Seven cards cannot hold both a flush and a full house or better, so the flush, when there
  is one, is the hand.

The single-hand functions are plain Python on lists and dicts; the batch functions do the same
lookups with numpy over an ``(N, 5)`` or ``(N, 7)`` array of codes, with a dense table built on
first use.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from controller.cards import Card
from controller.errors import RulesError
from controller.games.poker.hands import (
    _CATEGORY_START,
    _CLASSES,
    CLASSES,
    HandCategory,
    _straight_ranks,
    category_of,
)

RANK_KEYS: Final[tuple[int, ...]] = (
    0,
    1,
    5,
    22,
    98,
    453,
    2031,
    8698,
    22854,
    83661,
    262349,
    636345,
    1479181,
)
"""Additive key of each rank index (deuce 0 ... ace 12): distinct sums for every multiset of up to
seven ranks with at most four of each (the constants of Kenneth Shackleton's SKPokerEval, checked
at import)."""

_SUIT_BITS: Final = 12
_SUIT_MASK: Final = (1 << _SUIT_BITS) - 1


def _rank_key(ranks: Iterable[int]) -> int:
    return sum(RANK_KEYS[rank - 2] for rank in ranks)


def _mask(ranks: Iterable[int]) -> int:
    mask = 0
    for rank in ranks:
        mask |= 1 << (rank - 2)
    return mask


# Five cards: non-flush rank multisets -> strength; flush rank masks -> strength.
_RANK5: Final[dict[int, int]] = {}
_FLUSH5: Final[list[int]] = [0] * 8192
for _strength, (_cls, _five) in enumerate(_CLASSES, start=1):
    if _cls.category in (HandCategory.FLUSH, HandCategory.STRAIGHT_FLUSH):
        _FLUSH5[_mask(_five)] = _strength
    else:
        _RANK5[_rank_key(_five)] = _strength

# Seven cards: the best five of any 5, 6 or 7 suited ranks (every mask of five bits or more).
_FLUSH7: Final[list[int]] = list(_FLUSH5)
for _bits in (6, 7):
    for _combo in itertools.combinations(range(13), _bits):
        _m = sum(1 << r for r in _combo)
        _FLUSH7[_m] = max(_FLUSH7[_m & ~(1 << r)] for r in _combo)


def _multisets(size: int) -> npt.NDArray[np.int64]:
    """Every vector of 13 rank counts (each 0-4) summing to ``size``, in order of their keys.

    Grown one card at a time: each vector of one card fewer with one more of a rank it holds
    fewer than four of, kept once per key. Only the keys of the grown vectors are formed (an
    ``(N, 13)`` array), not the vectors themselves (``(N, 13, 13)``: 25 MB for seven cards).
    """
    keys_arr = np.asarray(RANK_KEYS, dtype=np.int64)
    counts = np.zeros((1, 13), dtype=np.int8)
    keys = np.zeros(1, dtype=np.int64)
    for _ in range(size):
        parent, rank = np.nonzero(counts < 4)
        keys, first = np.unique(keys[parent] + keys_arr[rank], return_index=True)
        counts = counts[parent[first]]
        counts[np.arange(len(first)), rank[first]] += 1
    return counts.astype(np.int64)


def _rank7_table() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Keys and best non-flush strength of every 7-rank multiset, built from the 5-rank table.

    A multiset's best five is the best of its sub-multisets one rank smaller; going 5 -> 6 -> 7
    with numpy lookups takes a few tens of milliseconds.
    """
    keys_arr = np.asarray(RANK_KEYS, dtype=np.int64)
    five_keys = np.fromiter(_RANK5.keys(), dtype=np.int64, count=len(_RANK5))
    five_vals = np.fromiter(_RANK5.values(), dtype=np.int64, count=len(_RANK5))
    order = np.argsort(five_keys)
    prev_keys, prev_vals = five_keys[order], five_vals[order]
    for size in (6, 7):
        counts = _multisets(size)
        keys = counts @ keys_arr
        best = np.zeros(len(keys), dtype=np.int64)
        for rank in range(13):
            present = counts[:, rank] > 0
            child = keys[present] - keys_arr[rank]
            position = np.searchsorted(prev_keys, child)
            best[present] = np.maximum(best[present], prev_vals[position])
        order = np.argsort(keys)
        prev_keys, prev_vals = keys[order], best[order]
        if len(np.unique(prev_keys)) != len(prev_keys):  # pragma: no cover - constants checked
            raise RulesError("rank keys collide", size=size)
    return prev_keys, prev_vals


_RANK7_KEYS, _RANK7_VALUES = _rank7_table()
_RANK7: Final[dict[int, int]] = dict(zip(_RANK7_KEYS.tolist(), _RANK7_VALUES.tolist(), strict=True))

# Per-card combined key: rank key above the 12 suit bits, one 3-bit counter per suit.
_CARD_KEY: Final[list[int]] = [
    (RANK_KEYS[code >> 2] << _SUIT_BITS) + (1 << (3 * (code & 3))) for code in range(52)
]
_RANK_BIT: Final[list[int]] = [1 << (code >> 2) for code in range(52)]


def _flush_suit_table(minimum: int) -> list[int]:
    table = [-1] * 4096
    for field in range(4096):
        for suit in range(4):
            if (field >> (3 * suit)) & 7 >= minimum:
                table[field] = suit
    return table


_FLUSH_SUIT: Final[list[int]] = _flush_suit_table(5)
"""Suit counters (12 bits) -> the suit with five or more cards, or -1."""


# --------------------------------------------------------------------------------------------
# Single hands.


def _bad_hand(codes: object, size: int, exc: Exception) -> RulesError:
    return RulesError(
        f"a {size}-card hand needs {size} distinct card codes 0-51, got {codes!r}",
        cards=repr(codes),
        expected=size,
        detail=str(exc),
    )


def evaluate5(codes: Sequence[int]) -> int:
    """The strength of five cards (1 worst ... 7462 royal flush).

    This is the fast path: it trusts that the codes are five distinct cards (0-51). Use
    :func:`hand_strength` for cards that come from outside.

    Raises:
        RulesError: Not five codes, or codes that form no hand.
    """
    try:
        a, b, c, d, e = codes
        key = _CARD_KEY[a] + _CARD_KEY[b] + _CARD_KEY[c] + _CARD_KEY[d] + _CARD_KEY[e]
        if _FLUSH_SUIT[key & _SUIT_MASK] < 0:
            return _RANK5[key >> _SUIT_BITS]
        return _FLUSH5[_RANK_BIT[a] | _RANK_BIT[b] | _RANK_BIT[c] | _RANK_BIT[d] | _RANK_BIT[e]]
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise _bad_hand(codes, 5, exc) from exc


def evaluate7(codes: Sequence[int]) -> int:
    """The strength of the best five of seven cards (1 worst ... 7462 royal flush).

    This is the fast path: it trusts that the codes are seven distinct cards (0-51). Use
    :func:`hand_strength` for cards that come from outside.

    Raises:
        RulesError: Not seven codes, or codes that form no hand.
    """
    try:
        a, b, c, d, e, f, g = codes
        key = (
            _CARD_KEY[a]
            + _CARD_KEY[b]
            + _CARD_KEY[c]
            + _CARD_KEY[d]
            + _CARD_KEY[e]
            + _CARD_KEY[f]
            + _CARD_KEY[g]
        )
        suit = _FLUSH_SUIT[key & _SUIT_MASK]
        if suit < 0:
            return _RANK7[key >> _SUIT_BITS]
        mask = 0
        for code in codes:
            if code & 3 == suit:
                mask |= _RANK_BIT[code]
        return _FLUSH7[mask]
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise _bad_hand(codes, 7, exc) from exc


def _check_cards(cards: Sequence[Card]) -> list[int]:
    codes = [card.code for card in cards]
    if len(codes) not in (5, 6, 7):
        raise RulesError(
            f"a poker hand is 5 to 7 cards, got {len(codes)}",
            cards=[str(card) for card in cards],
        )
    if any(code > 51 for code in codes):
        raise RulesError(
            "the joker has no value in standard poker", cards=[str(card) for card in cards]
        )
    if len(set(codes)) != len(codes):
        raise RulesError(
            "the same card appears twice in one hand", cards=[str(card) for card in cards]
        )
    return codes


def hand_strength(cards: Sequence[Card]) -> int:
    """The strength of the best five of 5, 6 or 7 cards, after checking them.

    Raises:
        RulesError: Not 5-7 cards, a joker, or a card twice.
    """
    codes = _check_cards(cards)
    if len(codes) == 7:
        return evaluate7(codes)
    return max(evaluate5(combo) for combo in itertools.combinations(codes, 5))


def best_five(cards: Sequence[Card]) -> tuple[Card, ...]:
    """The five cards that make the hand's value, most significant first.

    Order: for straights from the top (the wheel's ace last); otherwise by group size then
    rank (quads then kicker, trips then pair, pairs high to low then kicker, high cards high to
    low). Of several five-card sets with the same value, the first in input order is returned.

    Raises:
        RulesError: Not 5-7 cards, a joker, or a card twice.
    """
    codes = _check_cards(cards)
    best: tuple[int, ...] = ()
    best_strength = 0
    for combo in itertools.combinations(codes, 5):
        strength = evaluate5(combo)
        if strength > best_strength:
            best, best_strength = combo, strength
    hand = [Card(code) for code in best]
    category = category_of(best_strength)
    if category in (HandCategory.STRAIGHT, HandCategory.STRAIGHT_FLUSH):
        top = CLASSES[best_strength].ranks[0]
        order = _straight_ranks(top)
        return tuple(sorted(hand, key=lambda card: order.index(card.rank)))
    counts = {rank: sum(1 for card in hand if card.rank == rank) for rank in {c.rank for c in hand}}
    return tuple(sorted(hand, key=lambda card: (-counts[card.rank], -card.rank, card.code)))


# --------------------------------------------------------------------------------------------
# Batches (numpy).

IntArray = npt.NDArray[np.integer]


@dataclass(frozen=True, slots=True)
class _BatchTables:
    card_key: npt.NDArray[np.int64]
    rank_bit: npt.NDArray[np.int64]
    flush_suit: npt.NDArray[np.int8]
    rank5: npt.NDArray[np.int16]
    rank7: npt.NDArray[np.int16]
    flush5: npt.NDArray[np.int16]
    flush7: npt.NDArray[np.int16]


_BATCH: list[_BatchTables] = []


def _batch_tables() -> _BatchTables:
    """The dense numpy tables (about 29 MB), built on first use (~0.1 s)."""
    if _BATCH:
        return _BATCH[0]
    five_keys = np.fromiter(_RANK5.keys(), dtype=np.int64, count=len(_RANK5))
    five_vals = np.fromiter(_RANK5.values(), dtype=np.int64, count=len(_RANK5))
    rank5 = np.zeros(int(five_keys.max()) + 1, dtype=np.int16)
    rank5[five_keys] = five_vals
    rank7 = np.zeros(int(_RANK7_KEYS.max()) + 1, dtype=np.int16)
    rank7[_RANK7_KEYS] = _RANK7_VALUES
    tables = _BatchTables(
        card_key=np.asarray(_CARD_KEY, dtype=np.int64),
        rank_bit=np.asarray(_RANK_BIT, dtype=np.int64),
        flush_suit=np.asarray(_FLUSH_SUIT, dtype=np.int8),
        rank5=rank5,
        rank7=rank7,
        flush5=np.asarray(_FLUSH5, dtype=np.int16),
        flush7=np.asarray(_FLUSH7, dtype=np.int16),
    )
    _BATCH.append(tables)
    return tables


def _check_batch(hands: npt.ArrayLike, size: int) -> npt.NDArray[np.intp]:
    array = np.asarray(hands)
    if array.ndim != 2 or array.shape[1] != size:
        raise RulesError(
            f"a batch of {size}-card hands is an (N, {size}) array, got shape {array.shape}",
            shape=array.shape,
        )
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise RulesError(f"card codes must be integers, got {array.dtype}", dtype=str(array.dtype))
    if array.size and (int(array.min()) < 0 or int(array.max()) > 51):
        raise RulesError(
            "card codes must be 0-51",
            low=int(array.min()),
            high=int(array.max()),
        )
    return array.astype(np.intp, copy=False)


def _batch(hands: npt.ArrayLike, size: int) -> npt.NDArray[np.int16]:
    array = _check_batch(hands, size)
    tables = _batch_tables()
    if len(array) == 0:
        return np.zeros(0, dtype=np.int16)
    card_key = tables.card_key
    key = card_key[array[:, 0]]
    for column in range(1, size):
        key += card_key[array[:, column]]
    suit = tables.flush_suit[key & _SUIT_MASK]
    rank_table = tables.rank7 if size == 7 else tables.rank5
    rank_key = key >> _SUIT_BITS
    if int(rank_key.max()) >= len(rank_table):
        row = int(np.argmax(rank_key))
        raise RulesError(
            f"hand {row} of the batch is not {size} distinct cards",
            row=row,
            codes=array[row].tolist(),
        )
    result: npt.NDArray[np.int16] = rank_table[rank_key]
    flushed = np.flatnonzero(suit >= 0)
    if flushed.size:
        sub = array[flushed]
        in_suit = (sub & 3) == suit[flushed, None]
        masks = np.where(in_suit, tables.rank_bit[sub], 0).sum(axis=1)
        flush_table = tables.flush7 if size == 7 else tables.flush5
        result[flushed] = flush_table[masks]
    bad = result == 0
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise RulesError(
            f"hand {row} of the batch is not {size} distinct cards",
            row=row,
            codes=array[row].tolist(),
        )
    return result


def evaluate5_batch(hands: npt.ArrayLike) -> npt.NDArray[np.int16]:
    """The strengths of many five-card hands: an ``(N, 5)`` array of codes -> ``(N,)`` int16.

    Like :func:`evaluate5`, it trusts that each row holds distinct cards; a row that forms no
    hand at all (five of a rank) is reported.

    Raises:
        RulesError: Wrong shape, codes outside 0-51, or a row that is not a hand.
    """
    return _batch(hands, 5)


def evaluate7_batch(hands: npt.ArrayLike) -> npt.NDArray[np.int16]:
    """The strengths of many seven-card hands: an ``(N, 7)`` array of codes -> ``(N,)`` int16.

    Like :func:`evaluate7`, it trusts that each row holds distinct cards; a row that forms no
    hand at all (five of a rank) is reported.

    Raises:
        RulesError: Wrong shape, codes outside 0-51, or a row that is not a hand.
    """
    return _batch(hands, 7)


def categories_of(strengths: IntArray) -> npt.NDArray[np.int8]:
    """The category (``HandCategory`` value) of each strength in an array."""
    starts = np.asarray(_CATEGORY_START[1:], dtype=np.int64)
    return np.searchsorted(starts, np.asarray(strengths), side="right").astype(np.int8)
