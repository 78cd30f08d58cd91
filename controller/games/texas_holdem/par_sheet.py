"""Texas Hold'em par sheet: the showdown categories of five and seven cards (numpy)."""

from __future__ import annotations

import itertools
import time
from fractions import Fraction
from math import comb

import numpy as np
import numpy.typing as npt

from controller.analysis import (
    AnalysisReport,
    BetReport,
    Method,
    OutcomeRow,
    iterate_with_progress,
)
from controller.errors import RulesError
from controller.games.poker.evaluator import (
    categories_of,
    evaluate5_batch,
    evaluate7_batch,
)
from controller.games.poker.hands import HandCategory
from controller.games.texas_holdem.rules import (
    GAME_ID,
)

# --------------------------------------------------------------------------------------------
# Par sheet: hand categories over every 5-card and 7-card hand.


def _colex_combinations(n: int, k: int) -> npt.NDArray[np.int8]:
    """All k-subsets of range(n) as rows, in colex order.

    The first C(m, k) rows are the k-subsets of range(m), for every m <= n.
    """
    rows: npt.NDArray[np.int8] = np.zeros((1, 0), dtype=np.int8)
    for size in range(1, k + 1):
        parts = []
        for top in range(size - 1, n):
            prefix = rows[: comb(top, size - 1)]
            column = np.full((len(prefix), 1), top, dtype=np.int8)
            parts.append(np.hstack([prefix, column]))
        rows = np.vstack(parts) if parts else np.zeros((0, size), dtype=np.int8)
    return rows


def _count_hands(size: int, above: int, progress: bool, lowest: int = 0) -> npt.NDArray[np.int64]:
    """Strength histogram over all ``size``-card hands of the codes ``lowest``-51.

    Each hand is its ``size - above`` lowest cards, enumerated one set at a time, plus
    ``above`` cards higher than the highest of them. With the cards numbered downwards
    (51 - code), the sets of ``above`` cards higher than a card are a prefix of one colex
    list, so their summed keys are computed once and reused for every set of lowest cards.
    The list is small (C(52, 4) rows for seven cards, C(52, 3) for five) and each batch at
    most that long: the exact sheet holds no array of all the hands (docs/performance.md).
    """
    from controller.games.poker import evaluator as poker

    tables = poker._batch_tables()
    rank_table = tables.rank7 if size == 7 else tables.rank5
    flush_table = tables.flush7 if size == 7 else tables.flush5
    card_key = tables.card_key
    highs = 51 - _colex_combinations(52 - lowest, above)
    high_keys = card_key[highs[:, 0]]
    for column in range(1, above):
        high_keys += card_key[highs[:, column]]
    counts = np.zeros(7463, dtype=np.int64)
    low_sets = itertools.combinations(range(lowest, 52), size - above)
    total = comb(52 - lowest, size - above)
    for low in iterate_with_progress(low_sets, total, f"{size}-card hands", progress):
        rows = comb(51 - low[-1], above)
        if rows == 0:
            continue
        keys = high_keys[:rows] + int(sum(int(card_key[code]) for code in low))
        suit = tables.flush_suit[keys & 4095]
        result = rank_table[keys >> 12]
        flushed = np.flatnonzero(suit >= 0)
        if flushed.size:
            flush_suit = suit[flushed]
            sub = highs[flushed]
            masks = np.where((sub & 3) == flush_suit[:, None], tables.rank_bit[sub], 0).sum(axis=1)
            for code in low:
                masks |= np.where(flush_suit == (code & 3), tables.rank_bit[code], 0)
            result[flushed] = flush_table[masks]
        counts += np.bincount(result, minlength=7463)
    return counts


def _count_five() -> npt.NDArray[np.int64]:
    """Strength histogram over all C(52,5) five-card hands: two lowest cards + three above."""
    return _count_hands(5, 3, False)


def _count_seven(progress: bool, lowest: int = 0) -> npt.NDArray[np.int64]:
    """Strength histogram over all seven-card hands of the codes ``lowest``-51.

    By default that is all C(52,7) hands; a higher ``lowest`` restricts the deck (for tests).
    Each hand is its three lowest cards plus four above them (:func:`_count_hands`).
    """
    return _count_hands(7, 4, progress, lowest)


def _category_counts(strength_counts: npt.NDArray[np.int64]) -> list[int]:
    categories = categories_of(np.arange(1, 7463))
    return [int(strength_counts[1:][categories == category].sum()) for category in HandCategory]


def _exact_bet(counts: list[int], total: int) -> BetReport:
    rows = [
        OutcomeRow(category.id, Fraction(0), Fraction(count, total), count)
        for category, count in zip(HandCategory, counts, strict=True)
    ]
    return BetReport(rows, rtp=Fraction(1))


def _monte_carlo_bet(counts: list[int], samples: int) -> BetReport:
    rows = [
        OutcomeRow(category.id, Fraction(0), count / samples)
        for category, count in zip(HandCategory, counts, strict=True)
    ]
    return BetReport(rows, rtp=1.0, rtp_se=0.0)


def _sample_counts(samples: int, seed: int, size: int, progress: bool) -> list[int]:
    """Category counts of ``samples`` random ``size``-card hands from a seeded generator."""
    import random

    rng = np.random.default_rng(random.Random(f"{seed}:{size}").getrandbits(64))
    counts = np.zeros(9, dtype=np.int64)
    chunk = 100_000
    batches = range(0, samples, chunk)
    for start in iterate_with_progress(batches, len(batches), f"{size}-card samples", progress):
        n = min(chunk, samples - start)
        hands = np.argpartition(rng.random((n, 52)), size, axis=1)[:, :size]
        strengths = evaluate7_batch(hands) if size == 7 else evaluate5_batch(hands)
        counts += np.bincount(categories_of(strengths), minlength=9)
    return [int(c) for c in counts]


def analyze(*, method: Method, samples: int, seed: int, progress: bool) -> AnalysisReport:
    """Hand-category frequencies of five-card hands and of the best five of seven.

    There is no wager in these tables (Hold'em is played player against player), so every
    outcome pays ``0`` and the return is 1.

    Args:
        method: Exact enumeration of all C(52,5) and C(52,7) hands, or Monte Carlo.
        samples: Hands per bet for Monte Carlo.
        seed: Monte Carlo seed.
        progress: Show a progress bar on stderr.
    """
    started = time.perf_counter()
    notes = [
        "no wager: categories_5 / categories_7 are hand-category frequencies; pays 0, rtp 1",
        "categories_7 classifies the best five of seven cards",
    ]
    if method is Method.EXACT:
        bets = {
            "categories_5": _exact_bet(_category_counts(_count_five()), comb(52, 5)),
            "categories_7": _exact_bet(_category_counts(_count_seven(progress)), comb(52, 7)),
        }
        report = AnalysisReport(GAME_ID, method, bets, notes=notes)
    else:
        if samples < 1:
            raise RulesError("Monte Carlo needs at least one sample", samples=samples)
        bets = {
            "categories_5": _monte_carlo_bet(_sample_counts(samples, seed, 5, progress), samples),
            "categories_7": _monte_carlo_bet(_sample_counts(samples, seed, 7, progress), samples),
        }
        report = AnalysisReport(GAME_ID, method, bets, notes=notes, samples=samples)
    report.seconds = time.perf_counter() - started
    return report
