"""The fast par-sheet paths count what the plain ones count (issue 26, docs/performance.md).

* Break Poker's exact main bet keeps running products of the dealer-weight rows that
  consecutive players share; here it is checked against the plain product of every row
  (the code it replaced) on reduced decks, for both qualifier readings.
* Break Poker's Monte Carlo deals with numpy in chunks: a count that does not fill the last
  chunk deals exactly what was asked, the same for the same seed.
* Hold'em's exact counts walk small prefix lists instead of arrays of every hand: the
  strength histograms equal the batch evaluator's over every hand, and the whole exact
  sheet peaks under 100 MiB (a subprocess, its own VmHWM: ``ru_maxrss`` would count the
  forked copy of the test runner before the exec).
"""

from __future__ import annotations

import itertools
import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from controller.games.break_poker import par_sheet as par
from controller.games.break_poker.hands import Qualifier
from controller.games.poker.evaluator import evaluate5_batch, evaluate7_batch
from controller.games.texas_holdem import par_sheet as holdem

ROOT = Path(__file__).resolve().parents[2]


def _heads_up_by_every_row(table: par.MultisetTable, qualifier: Qualifier) -> par.HeadsUpCounts:
    """The main bet counted as before issue 26: every player multiplies all its rows."""
    deck = table.deck
    signatures = par._signatures(table, qualifier)
    order = np.argsort(signatures.index, kind="stable")
    sorted_index = signatures.index[order]
    starts = np.flatnonzero(np.r_[True, sorted_index[1:] != sorted_index[:-1]])
    dealer_counts = table.counts[order]
    factors = np.zeros((len(deck.counts), max(deck.counts) + 1, len(order)), dtype=np.int64)
    for slot, limit in enumerate(deck.counts):
        for taken in range(limit + 1):
            lookup = np.array([math.comb(limit - taken, k) for k in range(8)], dtype=np.int64)
            factors[slot, taken] = lookup[dealer_counts[:, slot]]
    slots = np.arange(len(deck.counts))
    main = [0] * par.MainOutcome.COUNT
    bonus = [0] * par.DealerBonusOutcome.COUNT
    combined = signatures.outcome.astype(np.int64) * 2 + signatures.dealer_lucky[None, :]
    for player in range(len(table)):
        weights = factors[slots, table.counts[player]].prod(axis=0)
        per_signature = np.add.reduceat(weights, starts)
        codes = np.bincount(combined[signatures.index[player]], weights=per_signature, minlength=12)
        ways = int(table.ways[player])
        exact = [round(value) for value in codes.tolist()]
        for code in range(par.MainOutcome.COUNT):
            main[code] += ways * (exact[2 * code] + exact[2 * code + 1])
        lucky = sum(exact[1::2])
        line = (
            par.DealerBonusOutcome.BOTH
            if table.bonus[player] > 0
            else par.DealerBonusOutcome.DEALER_ONLY
        )
        bonus[line] += ways * lucky
        bonus[par.DealerBonusOutcome.NONE] += ways * (sum(exact) - lucky)
    return par.HeadsUpCounts(tuple(main), tuple(bonus))


@pytest.mark.parametrize("qualifier", list(Qualifier))
@pytest.mark.parametrize(
    ("copies", "joker"),
    [
        ({14: 4, 13: 3, 12: 2, 2: 4, 5: 2, 9: 1}, True),
        ({14: 4, 13: 4, 11: 1, 10: 4, 3: 3, 2: 2, 7: 1}, False),
    ],
)
def test_break_poker_exact_equals_the_product_of_every_row(
    copies: dict[int, int], joker: bool, qualifier: Qualifier
) -> None:
    table = par.judge_multisets(par.DeckSpec.of(copies, joker=joker))
    counts = par.heads_up_counts(table, qualifier=qualifier)
    assert counts == _heads_up_by_every_row(table, qualifier)
    size = table.deck.size
    assert counts.total == math.comb(size, 7) * math.comb(size - 7, 7)


def test_break_poker_monte_carlo_deals_what_was_asked_across_chunks() -> None:
    table = par.full_table()
    samples = par._SAMPLE_CHUNK + 3
    counts = par.monte_carlo_counts(table, samples, random.Random(11))
    assert counts.total == samples == sum(counts.dealer_bonus)
    assert counts == par.monte_carlo_counts(table, samples, random.Random(11))
    assert counts != par.monte_carlo_counts(table, samples, random.Random(12))


@pytest.mark.slow
def test_holdem_five_card_histogram_equals_the_batch_evaluator_over_every_hand() -> None:
    hands = np.array(list(itertools.combinations(range(52), 5)), dtype=np.int8)
    expected = np.bincount(evaluate5_batch(hands), minlength=7463)
    assert np.array_equal(holdem._count_five(), expected)


def test_holdem_seven_card_histogram_equals_the_batch_evaluator_on_a_restricted_deck() -> None:
    sevens = np.array(list(itertools.combinations(range(26, 52), 7)), dtype=np.int8)
    expected = np.bincount(evaluate7_batch(sevens), minlength=7463)
    assert np.array_equal(holdem._count_seven(False, lowest=26), expected)


@pytest.mark.infra
def test_holdem_exact_sheet_peaks_under_100_mib() -> None:
    script = (
        "from controller.analysis import Method\n"
        "from controller.games.texas_holdem.par_sheet import analyze\n"
        "analyze(method=Method.EXACT, samples=0, seed=1, progress=False)\n"
        "import pathlib\n"
        "status = pathlib.Path('/proc/self/status').read_text().splitlines()\n"
        "print(next(line.split()[1] for line in status if line.startswith('VmHWM:')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    peak_mib = int(done.stdout.split()[-1]) / 1024
    assert peak_mib <= 100, f"the exact Hold'em sheet peaked at {peak_mib:.0f} MiB"
