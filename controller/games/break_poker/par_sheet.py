"""Break Poker par sheet on rank multisets (numpy; the rules are in ``rules``).

Suits play no part in Break Poker, so every seven-card hand is judged by its multiset of ranks
(the joker counted as its own "rank" with one copy). The 154,143,080 seven-card hands of the
53-card deck fall into 67,600 rank multisets; a multiset with ``c_r`` cards of rank ``r``
stands for ``prod(C(copies_r, c_r))`` hands.

* **Break Bonus**: the best Lucky Break of each multiset, weighted by its number of hands.
* **Main bet and Dealer Break Bonus** (house way for player and dealer): for every player
  multiset ``P`` the dealer's multisets ``D`` are weighted by the hands they stand for from
  the 46 remaining cards, ``prod(C(copies_r - p_r, d_r))``, summed per dealer house-way
  setting (its low and high hand) and compared with the player's house-way setting. All
  counts are integers; the totals are exact.

The house way here is the same rule as :func:`controller.games.break_poker.house_way`, in the
equivalent "best score" form: over the legal settings take the highest house-way step, then
the highest low hand, then the highest high hand (docs/rules/break-poker.md shows why the seven
steps reduce to this; the tests check the two agree). It runs vectorised over all 210 splits
of all multisets at once.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

import numpy as np
import numpy.typing as npt

from controller.analysis import (
    AnalysisReport,
    BetReport,
    Method,
    exact_row,
    iterate_with_progress,
    sampled_bet,
)
from controller.errors import RulesError
from controller.games.break_poker.hands import (
    JOKER_RANK,
    RANKS,
    BreakBonusHand,
    HighKey,
    LowKey,
    Qualifier,
    break_bonus_hand,
    high_key,
    house_way_step,
    is_lucky_break,
    low_key,
    low_outranks_high,
    qualifies,
)
from controller.games.break_poker.live import Options
from controller.games.break_poker.rules import DEFAULT_PAYTABLES, GAME_ID
from controller.money import Odds, PayTables

IntArray = npt.NDArray[np.int64]

HAND_SIZE: Final = 7
_CHUNK: Final = 4096


# --------------------------------------------------------------------------------------------
# Decks of rank multisets


@dataclass(frozen=True, slots=True)
class DeckSpec:
    """A deck described by how many cards of each rank it holds (suits do not matter).

    Attributes:
        copies: ``(rank, copies)`` for every rank present; rank 0 is the joker.
    """

    copies: tuple[tuple[int, int], ...]

    @classmethod
    def full(cls) -> DeckSpec:
        """52 cards and one joker."""
        return cls((*((rank, 4) for rank in RANKS), (JOKER_RANK, 1)))

    @classmethod
    def of(cls, copies: Mapping[int, int], joker: bool) -> DeckSpec:
        """A reduced deck: ``{rank: copies}`` (at most 4 each) and optionally the joker.

        Raises:
            RulesError: A rank outside 2-14 or a count outside 1-4.
        """
        for rank, count in copies.items():
            if rank not in RANKS or not 1 <= count <= 4:
                raise RulesError(
                    f"a deck holds 1-4 cards of a rank 2-14, got {count} of rank {rank}",
                    rank=rank,
                    count=count,
                )
        items = tuple(sorted(copies.items()))
        return cls(items + (((JOKER_RANK, 1),) if joker else ()))

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks (slots) of the deck, in order; 0 is the joker."""
        return tuple(rank for rank, _ in self.copies)

    @property
    def counts(self) -> tuple[int, ...]:
        """Copies of each rank, in :attr:`ranks` order."""
        return tuple(count for _, count in self.copies)

    @property
    def size(self) -> int:
        """Number of cards."""
        return sum(self.counts)


def _multisets(limits: Sequence[int], total: int) -> list[tuple[int, ...]]:
    """Every count vector with ``0 <= c_i <= limits[i]`` summing to ``total``."""
    result: list[tuple[int, ...]] = []
    suffix = [0] * (len(limits) + 1)
    for index in range(len(limits) - 1, -1, -1):
        suffix[index] = suffix[index + 1] + limits[index]

    def extend(index: int, left: int, prefix: list[int]) -> None:
        if index == len(limits):
            if left == 0:
                result.append(tuple(prefix))
            return
        low = max(0, left - suffix[index + 1])
        for count in range(low, min(limits[index], left) + 1):
            prefix.append(count)
            extend(index + 1, left - count, prefix)
            prefix.pop()

    extend(0, total, [])
    return result


# --------------------------------------------------------------------------------------------
# Tables over ranks (0 = joker, 2-14)


@dataclass(frozen=True, slots=True)
class _KeyTables:
    low_keys: tuple[LowKey, ...]
    high_keys: tuple[HighKey, ...]
    low_ord: IntArray
    """[15, 15] -> ordinal of the low key (ordinals increase with strength)."""
    high_ord: IntArray
    """[15, 15, 15] -> ordinal of the high key."""
    score: IntArray
    """[n_low, n_high] -> house-way score of a setting, -1 if illegal."""
    tier: IntArray
    """[n_low, n_high] -> Break Bonus line (BreakBonusHand value) of a setting."""
    lucky: npt.NDArray[np.bool_]
    """[n_low, n_high] -> Lucky Break."""


_ALL_RANKS: Final = (JOKER_RANK, *RANKS)


@functools.cache
def _tables() -> _KeyTables:
    lows = sorted({low_key(a, b) for a in _ALL_RANKS for b in _ALL_RANKS})
    highs = sorted({high_key(a, b, c) for a in _ALL_RANKS for b in _ALL_RANKS for c in _ALL_RANKS})
    low_index = {key: index for index, key in enumerate(lows)}
    high_index = {key: index for index, key in enumerate(highs)}
    low_ord = np.zeros((15, 15), dtype=np.int64)
    for a, b in itertools.product(_ALL_RANKS, repeat=2):
        low_ord[a, b] = low_index[low_key(a, b)]
    high_ord = np.zeros((15, 15, 15), dtype=np.int64)
    for a, b, c in itertools.product(_ALL_RANKS, repeat=3):
        high_ord[a, b, c] = high_index[high_key(a, b, c)]
    n_low, n_high = len(lows), len(highs)
    score = np.full((n_low, n_high), -1, dtype=np.int64)
    tier = np.zeros((n_low, n_high), dtype=np.int64)
    lucky = np.zeros((n_low, n_high), dtype=np.bool_)
    for (i, low), (j, high) in itertools.product(enumerate(lows), enumerate(highs)):
        tier[i, j] = break_bonus_hand(low, high)
        lucky[i, j] = is_lucky_break(low, high)
        if not low_outranks_high(low, high):
            score[i, j] = (int(house_way_step(low, high)) * n_low + i) * n_high + j
    return _KeyTables(tuple(lows), tuple(highs), low_ord, high_ord, score, tier, lucky)


@functools.cache
def _qualifying(qualifier: Qualifier) -> npt.NDArray[np.bool_]:
    """[n_low, n_high] -> a dealer with this setting qualifies under ``qualifier``."""
    tables = _tables()
    return np.array(
        [[qualifies(high, low, qualifier) for high in tables.high_keys] for low in tables.low_keys],
        dtype=np.bool_,
    )


def _split_positions() -> tuple[IntArray, IntArray]:
    highs, lows = [], []
    for high in itertools.combinations(range(HAND_SIZE), 3):
        rest = [index for index in range(HAND_SIZE) if index not in high]
        for low in itertools.combinations(rest, 2):
            highs.append(high)
            lows.append(low)
    return np.array(lows, dtype=np.int64), np.array(highs, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# Judging every multiset of a deck


@dataclass(frozen=True)
class MultisetTable:
    """Every seven-card rank multiset of a deck, judged.

    Attributes:
        deck: The deck.
        counts: ``[N, slots]`` cards of each rank (in ``deck.ranks`` order).
        ranks: ``[N, 7]`` the seven ranks, sorted (joker 0 first).
        ways: ``[N]`` how many hands (suit choices) each multiset stands for.
        low: ``[N]`` ordinal of the house-way low hand (see ``low_keys``).
        high: ``[N]`` ordinal of the house-way high hand.
        bonus: ``[N]`` best Lucky Break (``BreakBonusHand`` value).
        low_keys: The low key of each ordinal.
        high_keys: The high key of each ordinal.
    """

    deck: DeckSpec
    counts: IntArray
    ranks: IntArray
    ways: IntArray
    low: IntArray
    high: IntArray
    bonus: IntArray
    low_keys: tuple[LowKey, ...]
    high_keys: tuple[HighKey, ...]

    def __len__(self) -> int:
        return len(self.ways)

    def house_way_keys(self, index: int) -> tuple[LowKey, HighKey]:
        """The low and high keys of the house-way setting of multiset ``index``."""
        return self.low_keys[int(self.low[index])], self.high_keys[int(self.high[index])]

    @functools.cached_property
    def index_of(self) -> dict[tuple[int, ...], int]:
        """Multiset index by its sorted rank tuple."""
        return {tuple(int(rank) for rank in row): index for index, row in enumerate(self.ranks)}


def judge_multisets(deck: DeckSpec) -> MultisetTable:
    """Judge every seven-card rank multiset of ``deck``: house way and best Lucky Break.

    Raises:
        RulesError: The deck has fewer than seven cards.
    """
    if deck.size < HAND_SIZE:
        raise RulesError(f"a deck of {deck.size} cards cannot deal seven", size=deck.size)
    tables = _tables()
    vectors = _multisets(deck.counts, HAND_SIZE)
    counts = np.array(vectors, dtype=np.int64)
    slot_ranks = np.array(deck.ranks, dtype=np.int64)
    flat = np.repeat(np.tile(slot_ranks, len(counts)), counts.ravel())
    ranks = np.sort(flat.reshape(len(counts), HAND_SIZE), axis=1)
    ways = np.ones(len(counts), dtype=np.int64)
    for slot, limit in enumerate(deck.counts):
        ways *= np.array([math.comb(limit, k) for k in range(limit + 1)])[counts[:, slot]]
    low_pos, high_pos = _split_positions()
    n_high = tables.score.shape[1]
    low_out = np.empty(len(counts), dtype=np.int64)
    high_out = np.empty(len(counts), dtype=np.int64)
    bonus = np.empty(len(counts), dtype=np.int64)
    for start in range(0, len(counts), _CHUNK):
        block = ranks[start : start + _CHUNK]
        lows = tables.low_ord[block[:, low_pos[:, 0]], block[:, low_pos[:, 1]]]
        highs = tables.high_ord[
            block[:, high_pos[:, 0]], block[:, high_pos[:, 1]], block[:, high_pos[:, 2]]
        ]
        best = tables.score[lows, highs].max(axis=1)
        if (best < 0).any():
            raise RulesError("a multiset without a legal setting", deck=str(deck))
        low_out[start : start + len(block)] = (best // n_high) % tables.score.shape[0]
        high_out[start : start + len(block)] = best % n_high
        bonus[start : start + len(block)] = tables.tier[lows, highs].max(axis=1)
    return MultisetTable(
        deck=deck,
        counts=counts,
        ranks=ranks,
        ways=ways,
        low=low_out,
        high=high_out,
        bonus=bonus,
        low_keys=tables.low_keys,
        high_keys=tables.high_keys,
    )


@functools.cache
def full_table() -> MultisetTable:
    """:func:`judge_multisets` of the full 53-card deck (built once)."""
    return judge_multisets(DeckSpec.full())


# --------------------------------------------------------------------------------------------
# Exact counts


def break_bonus_counts(table: MultisetTable) -> dict[BreakBonusHand, int]:
    """Number of seven-card hands of the deck for each Break Bonus line."""
    result = dict.fromkeys(BreakBonusHand, 0)
    for line in BreakBonusHand:
        result[line] = int(table.ways[table.bonus == int(line)].sum())
    return result


class MainOutcome:
    """Codes of the main bet's outcomes (house way against house way)."""

    NOT_QUALIFIED = 0
    PLAYER_LUCKY_BREAK = 1
    BOTH_HANDS_WIN = 2
    SPLIT = 3
    DEALER_LUCKY_BREAK = 4
    DEALER_BOTH = 5
    COUNT = 6


class DealerBonusOutcome:
    """Codes of the Dealer Break Bonus outcomes."""

    NONE = 0
    DEALER_ONLY = 1
    BOTH = 2
    COUNT = 3


@dataclass(frozen=True, slots=True)
class _Signatures:
    index: IntArray
    """[N] signature (house-way low, high) of each multiset."""
    outcome: npt.NDArray[np.int8]
    """[S, S] main outcome code, player signature x dealer signature."""
    dealer_lucky: npt.NDArray[np.bool_]
    """[S] the signature is a Lucky Break."""


def _signatures(table: MultisetTable, qualifier: Qualifier) -> _Signatures:
    tables = _tables()
    n_high = len(table.high_keys)
    unique, index = np.unique(table.low * n_high + table.high, return_inverse=True)
    low = unique // n_high
    high = unique % n_high
    lucky = tables.lucky[low, high]
    qualified = _qualifying(qualifier)[low, high]
    p_low, d_low = low[:, None], low[None, :]
    p_high, d_high = high[:, None], high[None, :]
    p_lucky, d_lucky = lucky[:, None], lucky[None, :]
    outcome = np.full((len(unique), len(unique)), MainOutcome.SPLIT, dtype=np.int8)
    outcome[(d_low >= p_low) & (d_high >= p_high)] = MainOutcome.DEALER_BOTH
    outcome[(p_low > d_low) & (p_high > d_high)] = MainOutcome.BOTH_HANDS_WIN
    outcome[p_lucky & ~d_lucky] = MainOutcome.PLAYER_LUCKY_BREAK
    outcome[d_lucky & ~p_lucky] = MainOutcome.DEALER_LUCKY_BREAK
    outcome[:, ~qualified] = MainOutcome.NOT_QUALIFIED
    return _Signatures(index.ravel().astype(np.int64), outcome, lucky)


@dataclass(frozen=True, slots=True)
class HeadsUpCounts:
    """Exact counts over every (player seven, dealer seven) deal of a deck.

    Attributes:
        main: Deals per :class:`MainOutcome` code.
        dealer_bonus: Deals per :class:`DealerBonusOutcome` code.
    """

    main: tuple[int, ...]
    dealer_bonus: tuple[int, ...]

    @property
    def total(self) -> int:
        """Number of deals."""
        return sum(self.main)


def _weight_dtype(table: MultisetTable) -> type[np.int16] | type[np.int64]:
    """The narrowest integer type that holds every dealer weight of ``table``'s deck.

    A dealer weight (the hands a dealer multiset stands for among the cards the player left)
    is at most what the multiset stands for in the whole deck, ``table.ways``; at most
    4**7 = 16,384 for the full deck, so int16 there (a quarter of int64's memory traffic).
    """
    largest = int(table.ways.max()) if len(table) else 0
    return np.int16 if largest < 2**15 else np.int64


def heads_up_counts(
    table: MultisetTable, *, progress: bool = False, qualifier: Qualifier = Qualifier.K32
) -> HeadsUpCounts:
    """Count every deal of seven player and seven dealer cards, by outcome (exact).

    Both hands are set by the house way; the Dealer Break Bonus looks at the dealer's house
    way and the best Lucky Break of the player's seven cards; the dealer's qualification is
    read by ``qualifier``.

    For each player multiset ``P`` the dealer weights are the product over the deck's slots
    of the rows ``C(copies - p_r, d_r)``. The players come in lexicographic order of their
    counts, so consecutive players share their leading counts: the running products of the
    rows are kept per slot and only the slots from the first count that changed are
    multiplied again (about 4 rows a player instead of 14; integers, so the counts are the
    same as multiplying all the rows each time).

    Raises:
        RulesError: The deck has fewer than 14 cards.
    """
    deck = table.deck
    if deck.size < 2 * HAND_SIZE:
        raise RulesError(f"a deck of {deck.size} cards cannot deal two hands", size=deck.size)
    signatures = _signatures(table, qualifier)
    order = np.argsort(signatures.index, kind="stable")
    sorted_index = signatures.index[order]
    starts = np.flatnonzero(np.r_[True, sorted_index[1:] != sorted_index[:-1]])
    dealer_counts = table.counts[order]
    dtype = _weight_dtype(table)
    # factors[slot, p, d] = C(copies - p, d_count) over the dealer multisets (sorted).
    n_slots = len(deck.counts)
    max_copies = max(deck.counts)
    factors = np.zeros((n_slots, max_copies + 1, len(order)), dtype=dtype)
    for slot, limit in enumerate(deck.counts):
        for taken in range(limit + 1):
            left = limit - taken
            lookup = np.array([math.comb(left, k) for k in range(HAND_SIZE + 1)], dtype=dtype)
            factors[slot, taken] = lookup[dealer_counts[:, slot]]
    # running[k] = product of the rows of slots 0..k-1 for the current player's counts.
    running = np.empty((n_slots + 1, len(order)), dtype=dtype)
    running[0] = 1
    previous: list[int] = [-1] * n_slots
    player_counts: list[list[int]] = table.counts.tolist()
    n_codes = MainOutcome.COUNT * 2
    main = [0] * MainOutcome.COUNT
    bonus = [0] * DealerBonusOutcome.COUNT
    combined = signatures.outcome.astype(np.int64) * 2 + signatures.dealer_lucky[None, :]
    player_signature = signatures.index.tolist()
    player_ways = table.ways.tolist()
    player_bonus = table.bonus.tolist()
    items = iterate_with_progress(range(len(table)), len(table), f"{GAME_ID} main bet", progress)
    for player in items:
        counts = player_counts[player]
        changed = 0
        while changed < n_slots and counts[changed] == previous[changed]:
            changed += 1
        for slot in range(changed, n_slots):
            np.multiply(running[slot], factors[slot, counts[slot]], out=running[slot + 1])
        previous = counts
        # Sums per dealer signature: at most C(46, 7) = 53,524,680 each, so int32 holds them.
        per_signature = np.add.reduceat(running[n_slots], starts, dtype=np.int32)
        codes = np.bincount(
            combined[player_signature[player]], weights=per_signature, minlength=n_codes
        )
        ways = player_ways[player]
        exact = [round(value) for value in codes.tolist()]
        for code in range(MainOutcome.COUNT):
            main[code] += ways * (exact[2 * code] + exact[2 * code + 1])
        lucky = sum(exact[1::2])
        total = sum(exact)
        dealer_line = (
            DealerBonusOutcome.BOTH if player_bonus[player] > 0 else DealerBonusOutcome.DEALER_ONLY
        )
        bonus[dealer_line] += ways * lucky
        bonus[DealerBonusOutcome.NONE] += ways * (total - lucky)
    return HeadsUpCounts(tuple(main), tuple(bonus))


# --------------------------------------------------------------------------------------------
# Monte Carlo


_SAMPLE_CHUNK: Final = 100_000
"""Deals drawn at once by :func:`monte_carlo_counts` (a few MB of arrays)."""


def _multiset_lookup(table: MultisetTable) -> tuple[IntArray, IntArray, IntArray]:
    """How a dealt card finds its multiset: (slot of each card code, sorted keys, order).

    A multiset's key is the sum of ``8 ** slot`` over its cards (a slot holds at most 7 of
    seven cards, so keys are distinct); ``keys[i]`` is the key of multiset ``order[i]``.
    """
    slot_of_rank = {rank: slot for slot, rank in enumerate(table.deck.ranks)}
    code_slot = np.array(
        [slot_of_rank[JOKER_RANK if code == 52 else code // 4 + 2] for code in range(53)],
        dtype=np.int64,
    )
    powers = 8 ** np.arange(len(table.deck.ranks), dtype=np.int64)
    keys = table.counts @ powers
    order = np.argsort(keys)
    return powers[code_slot], keys[order], order


def monte_carlo_counts(
    table: MultisetTable,
    samples: int,
    rng: random.Random,
    *,
    progress: bool = False,
    qualifier: Qualifier = Qualifier.K32,
) -> HeadsUpCounts:
    """Deal ``samples`` random (player, dealer) pairs from the full deck and count outcomes.

    The dealer's qualification is read by ``qualifier``. The deals are drawn with numpy, in
    chunks: a generator seeded from ``rng`` shuffles the first 14 places of every deck of a
    chunk (a partial Fisher-Yates shuffle, one column at a time); the player takes the first
    seven cards, the dealer the next seven. The same ``rng`` state gives the same counts.

    Raises:
        RulesError: ``table`` is not the full deck's.
    """
    if table.deck != DeckSpec.full():
        raise RulesError("Monte Carlo deals from the full 53-card deck only", deck=str(table.deck))
    signatures = _signatures(table, qualifier)
    card_key, keys, order = _multiset_lookup(table)
    generator = np.random.default_rng(rng.getrandbits(64))
    main = np.zeros(MainOutcome.COUNT, dtype=np.int64)
    bonus = np.zeros(DealerBonusOutcome.COUNT, dtype=np.int64)
    cards = 2 * HAND_SIZE
    chunks = range(0, samples, _SAMPLE_CHUNK)
    for start in iterate_with_progress(chunks, len(chunks), f"{GAME_ID} samples", progress):
        n = min(_SAMPLE_CHUNK, samples - start)
        decks = np.tile(np.arange(53, dtype=np.int8), (n, 1))
        rows = np.arange(n)
        for place in range(cards):
            picked = generator.integers(place, 53, size=n)
            chosen = decks[rows, picked]
            decks[rows, picked] = decks[:, place]
            decks[:, place] = chosen
        dealt_keys = card_key[decks[:, :cards]]
        player = order[np.searchsorted(keys, dealt_keys[:, :HAND_SIZE].sum(axis=1))]
        dealer = order[np.searchsorted(keys, dealt_keys[:, HAND_SIZE:].sum(axis=1))]
        player_sig = signatures.index[player]
        dealer_sig = signatures.index[dealer]
        main += np.bincount(signatures.outcome[player_sig, dealer_sig], minlength=MainOutcome.COUNT)
        lucky = signatures.dealer_lucky[dealer_sig]
        both = lucky & (table.bonus[player] > 0)
        bonus[DealerBonusOutcome.NONE] += int(n - lucky.sum())
        bonus[DealerBonusOutcome.BOTH] += int(both.sum())
        bonus[DealerBonusOutcome.DEALER_ONLY] += int(lucky.sum() - both.sum())
    return HeadsUpCounts(tuple(int(count) for count in main), tuple(int(count) for count in bonus))


# --------------------------------------------------------------------------------------------
# The report

BONUS_NAMES: Final = {
    BreakBonusHand.FIVE_ACES: "five aces",
    BreakBonusHand.FIVE_OF_A_KIND: "five of a kind (2-K)",
    BreakBonusHand.PAIR_TRIPS: "pair + three of a kind",
    BreakBonusHand.PAIR_QKA: "pair + Q-K-A",
    BreakBonusHand.PAIR_STRAIGHT: "pair + other straight",
    BreakBonusHand.NONE: "no Lucky Break",
}

MAIN_NAMES: Final = {
    MainOutcome.PLAYER_LUCKY_BREAK: "win (player Lucky Break)",
    MainOutcome.BOTH_HANDS_WIN: "win (both hands)",
    MainOutcome.SPLIT: "push (split)",
    MainOutcome.DEALER_BOTH: "lose (dealer beats or copies both)",
    MainOutcome.DEALER_LUCKY_BREAK: "lose (dealer Lucky Break)",
    MainOutcome.NOT_QUALIFIED: "dealer does not qualify (push)",
}

DEALER_BONUS_NAMES: Final = {
    DealerBonusOutcome.BOTH: "dealer and player Lucky Break",
    DealerBonusOutcome.DEALER_ONLY: "dealer Lucky Break only",
    DealerBonusOutcome.NONE: "no dealer Lucky Break",
}


QUALIFIER_NOTES: Final = {
    Qualifier.K32: "dealer_qualifier=k32: high hand below K-3-2, ace high, as the rule reads",
    Qualifier.NEEDS_KING: "dealer_qualifier=needs_king: below K-3-2, or a high-card setting "
    "without a king (A-Q-J does not qualify), the published table's reading",
}


def _main_pays(paytables: PayTables) -> dict[int, Odds]:
    win = paytables["main"]["win"]
    return {
        MainOutcome.PLAYER_LUCKY_BREAK: win,
        MainOutcome.BOTH_HANDS_WIN: win,
        MainOutcome.SPLIT: Fraction(0),
        MainOutcome.DEALER_BOTH: Fraction(-1),
        MainOutcome.DEALER_LUCKY_BREAK: Fraction(-1),
        MainOutcome.NOT_QUALIFIED: Fraction(0),
    }


def _dealer_bonus_pays(paytables: PayTables) -> dict[int, Odds]:
    table = paytables["dealer_break_bonus"]
    return {
        DealerBonusOutcome.BOTH: table["both_lucky_break"],
        DealerBonusOutcome.DEALER_ONLY: table["dealer_lucky_break"],
        DealerBonusOutcome.NONE: Fraction(-1),
    }


def break_bonus_report(table: MultisetTable, paytables: PayTables) -> BetReport:
    """The Break Bonus par sheet, exact."""
    counts = break_bonus_counts(table)
    total = sum(counts.values())
    rows = []
    for line in sorted(BreakBonusHand, reverse=True):
        pays = (
            Fraction(-1) if line is BreakBonusHand.NONE else paytables["break_bonus"][line.outcome]
        )
        rows.append(exact_row(BONUS_NAMES[line], pays, counts[line], total))
    return BetReport(rows)


def _exact_report(
    counts: Sequence[int], names: Mapping[int, str], pays: Mapping[int, Odds]
) -> BetReport:
    total = sum(counts)
    return BetReport([exact_row(names[code], pays[code], counts[code], total) for code in names])


def _sampled_report(
    counts: Sequence[int], names: Mapping[int, str], pays: Mapping[int, Odds]
) -> BetReport:
    return sampled_bet((names[code], pays[code], counts[code]) for code in names)


PAR_SHEET_OPTIONS: Final = ("dealer_qualifier",)
"""The game options (``game_options``) this par sheet reads; ``tablectl analyze --option``."""


def analyze(
    *,
    method: Method,
    samples: int,
    seed: int,
    progress: bool,
    options: Options | None = None,
) -> AnalysisReport:
    """The Break Poker par sheet.

    ``break_bonus`` is always exact. ``main`` and ``dealer_break_bonus`` (house way for the
    player too) are exact with :attr:`Method.EXACT`, and estimated from ``samples`` deals
    (seeded) with :attr:`Method.MONTE_CARLO`. ``options`` (the table's validated game
    options; default: every default) selects the dealer's qualifier (``dealer_qualifier``).

    Raises:
        RulesError: Monte Carlo asked with fewer than two samples.
    """
    started = time.perf_counter()
    qualifier = (options or Options()).dealer_qualifier
    table = full_table()
    notes = [
        "suits play no part: hands are counted as rank multisets times suit choices",
        "break_bonus: exact over all C(53,7) = 154,143,080 seven-card hands; best Lucky Break "
        "the seven cards can form",
        "main: player and dealer both set by the house way; a non-qualifying dealer "
        f"({QUALIFIER_NOTES[qualifier]}) is its own line (push)",
        "dealer_break_bonus: dealer's house way (a Lucky Break whenever one exists); "
        "'player has one too' = best Lucky Break of the player's seven cards",
    ]
    bets = {"main": BetReport([]), "break_bonus": break_bonus_report(table, DEFAULT_PAYTABLES)}
    main_pays = _main_pays(DEFAULT_PAYTABLES)
    bonus_pays = _dealer_bonus_pays(DEFAULT_PAYTABLES)
    used_samples: int | None = None
    if method is Method.EXACT:
        counts = heads_up_counts(table, progress=progress, qualifier=qualifier)
        notes.append(
            f"main, dealer_break_bonus: exact over all {counts.total:,} "
            "(player seven, dealer seven) deals"
        )
        bets["main"] = _exact_report(counts.main, MAIN_NAMES, main_pays)
        bets["dealer_break_bonus"] = _exact_report(
            counts.dealer_bonus, DEALER_BONUS_NAMES, bonus_pays
        )
    else:
        if samples < 2:
            raise RulesError("Monte Carlo needs at least 2 samples", samples=samples)
        counts = monte_carlo_counts(
            table, samples, random.Random(seed), progress=progress, qualifier=qualifier
        )
        used_samples = samples
        notes.append(
            f"main, dealer_break_bonus: Monte Carlo, {samples:,} deals, seed {seed}; "
            "break_bonus stays exact"
        )
        bets["main"] = _sampled_report(counts.main, MAIN_NAMES, main_pays)
        bets["dealer_break_bonus"] = _sampled_report(
            counts.dealer_bonus, DEALER_BONUS_NAMES, bonus_pays
        )
    ordered = {bet: bets[bet] for bet in ("main", "break_bonus", "dealer_break_bonus")}
    return AnalysisReport(
        game=GAME_ID,
        method=method,
        bets=ordered,
        seconds=time.perf_counter() - started,
        notes=notes,
        samples=used_samples,
    )
