"""Teen Patti 20-20 par sheet: exact counting and Monte Carlo (numpy)."""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from controller.analysis import (
    AnalysisReport,
    BetReport,
    Method,
    chunk_sizes,
    exact_or_sampled,
    exact_row,
    iterate_with_progress,
    sampled_bet,
)
from controller.games.teen_patti.rules import (
    _ACE,
    _LEVEL_SHIFT,
    CARDS_PER_HAND,
    DEFAULT_PAYTABLES,
    GAME_ID,
    SixCardBonus,
    TeenPattiHand,
    _strength_table,
)
from controller.games.three_card import counting
from controller.games.three_card import hands as three_card

IntArray = npt.NDArray[np.int64]

_strength_array: Final = counting.lazy_strength_array(_strength_table)
"""The strength table as a numpy array (for vectorised lookups)."""


@functools.cache
def _straight_top_by_mask() -> IntArray:
    """For each 13-bit rank mask (bit 0 = deuce), the top rank (2-14) of its best straight.

    0 when the mask holds no five-card straight. The wheel (A-2-3-4-5) has top 5.
    """
    table = np.zeros(1 << 13, dtype=np.int64)
    windows = [(0b11111 << low, low + 6) for low in range(8, -1, -1)]
    windows.append((0b1000000001111, 5))
    for mask in range(1 << 13):
        for window, top in windows:
            if mask & window == window:
                table[mask] = top
                break
    return table


def six_card_bonus_levels(codes: npt.NDArray[np.integer[Any]]) -> IntArray:
    """Vectorised 6 Card Bonus: the :attr:`SixCardBonus.level` of each row of six codes.

    Args:
        codes: Integer array of shape (n, 6) with distinct standard card codes per row.

    Returns:
        Array of n levels (0 no bonus ... 7 royal flush).
    """
    codes = np.asarray(codes, dtype=np.int64)
    ranks = codes >> 2
    suits = codes & 3
    rank_counts = (ranks[:, :, None] == np.arange(13)).sum(axis=1)
    suit_counts = (suits[:, :, None] == np.arange(4)).sum(axis=1)
    weights = np.int64(1) << np.arange(13, dtype=np.int64)
    rank_mask = ((rank_counts > 0) * weights).sum(axis=1)
    flush_suit = suit_counts.argmax(axis=1)
    is_flush = suit_counts.max(axis=1) >= 5
    in_flush_suit = suits == flush_suit[:, None]
    flush_mask = np.where(in_flush_suit, np.int64(1) << ranks, 0).sum(axis=1)
    straights = _straight_top_by_mask()
    flush_top = np.where(is_flush, straights[flush_mask], 0)
    top = straights[rank_mask]
    most = rank_counts.max(axis=1)
    at_least_pairs = (rank_counts >= 2).sum(axis=1)
    full_house = (most == 3) & (at_least_pairs >= 2)
    levels = np.select(
        [
            flush_top == _ACE,
            flush_top > 0,
            most == 4,
            full_house,
            is_flush,
            top > 0,
            most == 3,
        ],
        [bonus.level for bonus in SixCardBonus if bonus is not SixCardBonus.NO_BONUS],
        default=0,
    )
    return np.asarray(levels, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# Exact counting


@dataclass(frozen=True, slots=True)
class MainCounts:
    """Ordered (A, B) deals of two disjoint three-card hands, by main result.

    Attributes:
        a_wins: Deals where hand A is stronger.
        ties: Deals where the hands are equal.
        b_wins: Deals where hand B is stronger.
    """

    a_wins: int
    ties: int
    b_wins: int

    @property
    def total(self) -> int:
        """Every ordered deal."""
        return self.a_wins + self.ties + self.b_wins


def hands_of(deck_codes: Sequence[int]) -> tuple[IntArray, IntArray]:
    """Every three-card hand of a deck (codes ascending) and its strength.

    Returns:
        ``(hands, strengths)``: arrays of shape (n, 3) and (n,).
    """
    return counting.hands_and_strengths(deck_codes, _strength_array())


def _grouped_below_and_equal(groups: IntArray, strengths: IntArray) -> tuple[IntArray, IntArray]:
    """For each entry, how many entries of its own group have a lower / equal strength.

    ``equal`` counts the entry itself.
    """
    span = np.int64(1 << 20)
    keys = groups * span + strengths
    ordered = np.sort(keys)
    starts = np.searchsorted(ordered, groups * span, side="left")
    below = np.searchsorted(ordered, keys, side="left") - starts
    equal = np.searchsorted(ordered, keys, side="right") - starts - below
    return below, equal


def count_main_outcomes(deck_codes: Sequence[int]) -> MainCounts:
    """Count every ordered (A, B) deal of disjoint hands from a deck by who wins.

    For each hand A, the hands B disjoint from it that are lower (or equal) are all lower
    hands minus those sharing a card with A, by inclusion-exclusion over A's three single
    cards, its three pairs of cards and A itself.
    """
    hands, strengths = hands_of(deck_codes)
    n_cards = len(set(deck_codes))
    count = len(strengths)
    if count == 0:
        return MainCounts(0, 0, 0)
    index = np.arange(count)
    below, equal = _grouped_below_and_equal(np.zeros(count, dtype=np.int64), strengths)
    below = below.copy()
    equal = equal.copy()
    singles = hands.T.reshape(-1)
    s_below, s_equal = _grouped_below_and_equal(singles, np.tile(strengths, 3))
    pair_ids = np.concatenate(
        [
            hands[:, 0] * 52 + hands[:, 1],
            hands[:, 0] * 52 + hands[:, 2],
            hands[:, 1] * 52 + hands[:, 2],
        ]
    )
    p_below, p_equal = _grouped_below_and_equal(pair_ids, np.tile(strengths, 3))
    owner = np.tile(index, 3)
    below -= np.bincount(owner, weights=s_below, minlength=count).astype(np.int64)
    equal -= np.bincount(owner, weights=s_equal, minlength=count).astype(np.int64)
    below += np.bincount(owner, weights=p_below, minlength=count).astype(np.int64)
    equal += np.bincount(owner, weights=p_equal, minlength=count).astype(np.int64)
    equal -= 1  # A itself, the one hand sharing all three cards
    disjoint = math.comb(n_cards - CARDS_PER_HAND, CARDS_PER_HAND)
    a_wins = int(below.sum())
    ties = int(equal.sum())
    return MainCounts(a_wins, ties, count * disjoint - a_wins - ties)


def count_hand_categories(deck_codes: Sequence[int]) -> dict[TeenPattiHand, int]:
    """How many three-card hands of a deck fall in each category (high to low)."""
    _, strengths = hands_of(deck_codes)
    levels = np.bincount(strengths >> _LEVEL_SHIFT, minlength=len(TeenPattiHand))
    return {hand: int(levels[hand.level]) for hand in TeenPattiHand}


def _has_straight(ranks: Iterable[int]) -> int:
    mask = 0
    for rank in ranks:
        mask |= 1 << (rank - 2)
    return int(_straight_top_by_mask()[mask])


def count_six_card_bonus(ranks: Sequence[int], suits: int) -> dict[SixCardBonus, int]:
    """Count six-card sets of a deck (``ranks`` x ``suits`` cards) by 6 Card Bonus outcome.

    Counts by patterns instead of dealing: a set with five or six cards of one suit is a
    flush or straight flush decided by those suited ranks alone (no quads or full house fit
    beside them); every other set is decided by its rank multiset, whose number of suit
    assignments without five of a suit is counted directly.

    Args:
        ranks: The distinct ranks in the deck (2-14).
        suits: How many suits (1-4) each rank comes in.
    """
    counts = dict.fromkeys(SixCardBonus, 0)
    rank_list = sorted(set(ranks))
    n_ranks = len(rank_list)

    def suited(chosen: Sequence[int]) -> SixCardBonus:
        top = _has_straight(chosen)
        if top == _ACE:
            return SixCardBonus.ROYAL_FLUSH
        return SixCardBonus.STRAIGHT_FLUSH if top else SixCardBonus.FLUSH

    # Six cards of one suit.
    for chosen in itertools.combinations(rank_list, 6):
        counts[suited(chosen)] += suits
    # Exactly five of one suit, the sixth card of another suit (any rank).
    for chosen in itertools.combinations(rank_list, 5):
        counts[suited(chosen)] += suits * n_ranks * (suits - 1)
    # At most four of any suit: the rank multiset decides.
    for multiset in itertools.combinations_with_replacement(rank_list, 6):
        shape = Counter(multiset)
        if max(shape.values()) > suits:
            continue
        assignments = _unsuited_assignments(shape, suits)
        if assignments > 0:
            counts[_unsuited_outcome(shape)] += assignments
    return counts


def _unsuited_assignments(shape: Counter[int], suits: int) -> int:
    """Suit assignments of a six-card rank multiset with no five cards of one suit."""
    assignments = math.prod(math.comb(suits, copies) for copies in shape.values())
    if len(shape) == 6:
        assignments -= suits + suits * 6 * (suits - 1)
    elif len(shape) == 5:
        assignments -= suits * (suits - 1)
    return assignments


def _unsuited_outcome(shape: Counter[int]) -> SixCardBonus:
    """The 6 Card Bonus outcome of a rank multiset with no five cards of one suit."""
    sizes = sorted(shape.values(), reverse=True)
    if sizes[0] == 4:
        return SixCardBonus.FOUR_OF_A_KIND
    if sizes[0] == 3 and sizes[1] >= 2:
        return SixCardBonus.FULL_HOUSE
    if _has_straight(shape):
        return SixCardBonus.STRAIGHT
    if sizes[0] == 3:
        return SixCardBonus.THREE_OF_A_KIND
    return SixCardBonus.NO_BONUS


# --------------------------------------------------------------------------------------------
# Par sheet


def _exact_report(progress: bool) -> AnalysisReport:
    started = time.perf_counter()
    paytables = DEFAULT_PAYTABLES
    deck = list(range(52))
    steps = ["main bets", "pair plus", "six card bonus"]
    main = MainCounts(0, 0, 0)
    categories: dict[TeenPattiHand, int] = {}
    bonus: dict[SixCardBonus, int] = {}
    for step in iterate_with_progress(steps, len(steps), "teen-patti exact", progress):
        if step == "main bets":
            main = count_main_outcomes(deck)
        elif step == "pair plus":
            categories = count_hand_categories(deck)
        else:
            bonus = count_six_card_bonus(list(range(2, 15)), 4)
    deals = main.total
    hands = sum(categories.values())
    per_hand = deals // hands
    bets: dict[str, BetReport] = {}
    for bet, wins, losses in (
        ("player_a", main.a_wins, main.b_wins),
        ("player_b", main.b_wins, main.a_wins),
    ):
        bets[bet] = BetReport(
            [
                exact_row("win", paytables[bet]["win"], wins, deals),
                exact_row("tie", 0, main.ties, deals),
                exact_row("lose", -1, losses, deals),
            ]
        )
    bets["tie"] = BetReport(
        [
            exact_row("tie", paytables["tie"]["tie"], main.ties, deals),
            exact_row("lose", -1, main.a_wins + main.b_wins, deals),
        ]
    )
    for bet in ("pair_plus_a", "pair_plus_b"):
        rows = []
        for hand, number in categories.items():
            pays = -1 if hand is TeenPattiHand.HIGH_CARD else paytables[bet][hand.value]
            rows.append(exact_row(hand.value, pays, number * per_hand, deals))
        bets[bet] = BetReport(rows)
    sets = sum(bonus.values())
    bets["six_card_bonus"] = BetReport(
        [
            exact_row(
                outcome.value,
                -1 if outcome is SixCardBonus.NO_BONUS else paytables["six_card_bonus"][outcome],
                number,
                sets,
            )
            for outcome, number in bonus.items()
        ]
    )
    best = max(bets, key=lambda bet: Fraction(bets[bet].rtp or 0))
    return AnalysisReport(
        game=GAME_ID,
        method=Method.EXACT,
        bets=bets,
        seconds=time.perf_counter() - started,
        notes=[
            f"main bets and pair plus: all {deals:,} ordered deals of two disjoint hands",
            f"6 card bonus: all {sets:,} six-card sets (counts are sets)",
            f"highest return: {best} at {float(bets[best].rtp or 0) * 100:.4f}%; "
            "the operator's sheet states a maximum of 97.50%",
        ],
    )


def _monte_carlo_report(samples: int, seed: int, progress: bool) -> AnalysisReport:
    started = time.perf_counter()
    paytables = DEFAULT_PAYTABLES
    rng = np.random.default_rng(seed)
    table = _strength_array()
    sizes = chunk_sizes(samples)
    main_counts = np.zeros(3, dtype=np.int64)  # A wins, tie, B wins
    category_counts = {"A": np.zeros(7, dtype=np.int64), "B": np.zeros(7, dtype=np.int64)}
    bonus_counts = np.zeros(len(SixCardBonus), dtype=np.int64)
    for size in iterate_with_progress(sizes, len(sizes), "teen-patti monte carlo", progress):
        dealt = rng.random((size, 52)).argsort(axis=1)[:, :6]
        a = table[three_card.triple_index(dealt[:, 0], dealt[:, 2], dealt[:, 4])]
        b = table[three_card.triple_index(dealt[:, 1], dealt[:, 3], dealt[:, 5])]
        main_counts += [int((a > b).sum()), int((a == b).sum()), int((a < b).sum())]
        category_counts["A"] += np.bincount(a >> _LEVEL_SHIFT, minlength=7)
        category_counts["B"] += np.bincount(b >> _LEVEL_SHIFT, minlength=7)
        bonus_counts += np.bincount(six_card_bonus_levels(dealt), minlength=len(SixCardBonus))

    a_wins, ties, b_wins = (int(value) for value in main_counts)
    bets: dict[str, BetReport] = {}
    for bet, wins, losses in (("player_a", a_wins, b_wins), ("player_b", b_wins, a_wins)):
        bets[bet] = sampled_bet(
            [
                ("win", paytables[bet]["win"], wins),
                ("tie", Fraction(0), ties),
                ("lose", Fraction(-1), losses),
            ]
        )
    bets["tie"] = sampled_bet(
        [
            ("tie", paytables["tie"]["tie"], ties),
            ("lose", Fraction(-1), a_wins + b_wins),
        ]
    )
    for label, bet in (("A", "pair_plus_a"), ("B", "pair_plus_b")):
        bets[bet] = sampled_bet(
            [
                (
                    hand.value,
                    Fraction(-1) if hand is TeenPattiHand.HIGH_CARD else paytables[bet][hand.value],
                    int(category_counts[label][hand.level]),
                )
                for hand in TeenPattiHand
            ]
        )
    bets["six_card_bonus"] = sampled_bet(
        [
            (
                outcome.value,
                Fraction(-1)
                if outcome is SixCardBonus.NO_BONUS
                else paytables["six_card_bonus"][outcome.value],
                int(bonus_counts[outcome.level]),
            )
            for outcome in SixCardBonus
        ]
    )
    return AnalysisReport(
        game=GAME_ID,
        method=Method.MONTE_CARLO,
        bets=bets,
        seconds=time.perf_counter() - started,
        notes=[f"numpy default_rng(seed={seed}); each round deals six cards A1 B1 A2 B2 A3 B3"],
        samples=samples,
    )


def analyze(*, method: Method, samples: int, seed: int, progress: bool) -> AnalysisReport:
    """Teen Patti 20-20 par sheet.

    Args:
        method: ``EXACT`` enumerates every ordered deal (main bets, Pair Plus) and every
            six-card set (6 Card Bonus) by counting; ``MONTE_CARLO`` deals ``samples`` rounds.
        samples: Rounds to deal for Monte Carlo (at least 2).
        seed: Seed of the Monte Carlo generator.
        progress: Show a progress bar on stderr.

    Raises:
        RulesError: Monte Carlo with fewer than two samples.
    """
    return exact_or_sampled(
        GAME_ID,
        method=method,
        samples=samples,
        seed=seed,
        progress=progress,
        exact=_exact_report,
        monte_carlo=_monte_carlo_report,
    )
