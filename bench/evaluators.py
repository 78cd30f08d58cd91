"""Hand evaluators and exact par sheets: how fast, beside treys, phevaluator and eval7.

Run: ``.venv/bin/python bench/evaluators.py [--quick] [--rounds N] [--no-analysis]
[--games ID ...]``

Prints hands per second for the 3-card (Teen Patti), 5-card and 7-card evaluators, single
hands and numpy batches, with the reference libraries measured in the same run on the same
hands; then the wall time of every game's exact analysis. The target is printed next to each
figure. Figures only: nothing here asserts a speed.

How it measures (issue 26): every contender is timed once per round, ``--rounds`` rounds
(default 5), the order rotated each round so no library always runs first or last; each
figure is the median of the rounds with its spread (min-max and the half-range as a share of
the median). A comparison is made round by round (the two figures of one round were taken
moments apart, under the same load) and the median of those ratios is the verdict. Like is
compared with like: a single-hand evaluator with the single-hand calls of the peers
(phevaluator's ``evaluate_cards`` and its sized ``evaluate_5cards``/``evaluate_7cards``), the
numpy batch with the fastest peer (none of them has a batch: the fastest single-hand loop).
"""

from __future__ import annotations

import argparse
import importlib
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.analysis import Method
from controller.cards import Card
from controller.games.poker import evaluator as poker
from controller.games.registry import ANALYZERS, analyzer_for


def seconds(function: Callable[[], object]) -> float:
    """Wall time of one call of ``function``."""
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


@dataclass
class Figures:
    """Hands per second of each contender, one figure a round."""

    rates: dict[str, list[float]] = field(default_factory=dict)

    def median(self, name: str) -> float:
        return statistics.median(self.rates[name])

    def spread(self, name: str) -> str:
        values = self.rates[name]
        low, high = min(values), max(values)
        half = (high - low) / 2 / statistics.median(values) * 100
        return f"({low:,.0f}-{high:,.0f}, +/-{half:.0f} %)"

    def ratio(self, mine: str, other: str) -> tuple[float, float, float]:
        """Median, min and max over the rounds of ``mine`` / ``other`` (same round)."""
        ratios = [a / b for a, b in zip(self.rates[mine], self.rates[other], strict=True)]
        return statistics.median(ratios), min(ratios), max(ratios)


def alternated(contenders: dict[str, tuple[Callable[[], object], int]], rounds: int) -> Figures:
    """Time every contender once a round, the order rotated round by round."""
    figures = Figures({name: [] for name in contenders})
    names = list(contenders)
    for round_no in range(rounds):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            function, count = contenders[name]
            figures.rates[name].append(count / seconds(function))
    return figures


def line(label: str, figures: Figures, name: str, target: str) -> None:
    print(
        f"  {label:<40} {figures.median(name):>13,.0f} hands/s {figures.spread(name):<32} {target}"
    )


def verdict(figures: Figures, mine: str, other: str, label: str) -> str:
    median, low, high = figures.ratio(mine, other)
    met = "met" if median >= 1 else "MISSED"
    return f"{median:.2f}x {label} (rounds {low:.2f}-{high:.2f}x): {met}"


def single_loop(
    evaluate: Callable[..., Any], hands: Sequence[Any], star: bool
) -> Callable[[], None]:
    if star:

        def run_star() -> None:
            for hand in hands:
                evaluate(*hand)

        return run_star

    def run() -> None:
        for hand in hands:
            evaluate(hand)

    return run


def bench_three(rng: random.Random, count: int, rounds: int) -> None:
    print("3-card (Teen Patti)")
    try:
        teen_patti = importlib.import_module("controller.games.teen_patti.rules")
        rank_hand = teen_patti.rank_hand
    except (ImportError, AttributeError) as exc:
        print(f"  skipped: controller.games.teen_patti.rank_hand not importable ({exc})")
        return
    hands = [rng.sample(range(52), 3) for _ in range(count)]
    card_hands = [[Card(code) for code in hand] for hand in hands]
    contenders: dict[str, tuple[Callable[[], object], int]] = {
        "rank_hand": (single_loop(rank_hand, card_hands, star=False), count)
    }
    rank_codes = getattr(teen_patti, "rank_codes", None)
    if rank_codes is not None:
        contenders["rank_codes"] = (single_loop(rank_codes, hands, star=True), count)
    figures = alternated(contenders, rounds)
    line("rank_hand(cards), checked", figures, "rank_hand", "(no target in the brief)")
    if rank_codes is not None:
        line("rank_codes(a, b, c), fast path", figures, "rank_codes", "(no target in the brief)")


def bench_poker(size: int, rng: random.Random, count: int, batch_count: int, rounds: int) -> None:
    import treys
    from phevaluator import evaluate_5cards, evaluate_7cards, evaluate_cards

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eval7 uses deprecated pyparsing names
        import eval7

    print(f"{size}-card, median of {rounds} rounds (min-max, +/- half-range)")
    hands = [rng.sample(range(52), size) for _ in range(count)]
    treys_eval = treys.Evaluator()
    treys_cards = [treys.Card.new(str(Card(code))) for code in range(52)]
    treys_hands = [[treys_cards[c] for c in hand] for hand in hands]
    eval7_cards = [eval7.Card(str(Card(code))) for code in range(52)]
    eval7_hands = [[eval7_cards[c] for c in hand] for hand in hands]

    def run_treys() -> None:
        for hand in treys_hands:
            treys_eval.evaluate(hand[:2], hand[2:])

    ours = poker.evaluate7 if size == 7 else poker.evaluate5
    sized = evaluate_7cards if size == 7 else evaluate_5cards
    generator = np.random.default_rng(rng.getrandbits(64))
    batch_hands = np.argpartition(generator.random((batch_count, 52)), size, axis=1)[:, :size]
    batch_hands = batch_hands.astype(np.int8)
    batch = poker.evaluate7_batch if size == 7 else poker.evaluate5_batch
    batch(batch_hands[:10])  # build the dense tables outside the timing
    peers: dict[str, tuple[Callable[[], object], int]] = {
        "treys": (run_treys, count),
        "phevaluator": (single_loop(evaluate_cards, hands, star=True), count),
        f"phevaluator evaluate_{size}cards": (single_loop(sized, hands, star=True), count),
        "eval7": (single_loop(eval7.evaluate, eval7_hands, star=False), count),
    }
    contenders: dict[str, tuple[Callable[[], object], int]] = {
        **peers,
        "ours": (single_loop(ours, hands, star=False), count),
        "ours batch": (lambda: batch(batch_hands), len(batch_hands)),
    }
    figures = alternated(contenders, rounds)
    for name in peers:
        line(f"{name} (single)", figures, name, "reference")
    phe = max(("phevaluator", f"phevaluator evaluate_{size}cards"), key=figures.median)
    line(
        f"evaluate{size} (single)",
        figures,
        "ours",
        "target >= phevaluator: " + verdict(figures, "ours", phe, phe),
    )
    fastest = max(peers, key=figures.median)
    line(
        f"evaluate{size}_batch ({len(batch_hands):,} hands)",
        figures,
        "ours batch",
        "target > fastest peer (no peer has a batch: its loop): "
        + verdict(figures, "ours batch", fastest, fastest),
    )


def bench_analysis(games: Sequence[str]) -> None:
    print("exact analysis (tablectl analyze GAME --exact)")
    for game in games:
        try:
            analyze = analyzer_for(game)
        except (ImportError, AttributeError) as exc:
            print(f"  {game:<24} skipped: module not available ({exc})")
            continue
        started = time.perf_counter()
        try:
            analyze(method=Method.EXACT, samples=0, seed=1, progress=False)
        except NotImplementedError as exc:
            print(f"  {game:<24} skipped: exact analysis not implemented ({exc})")
            continue
        seconds = time.perf_counter() - started
        print(f"  {game:<24} {seconds:>10.2f} s   target: minutes at most on 2 cores")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer hands")
    parser.add_argument("--rounds", type=int, default=5, help="timings of every contender")
    parser.add_argument("--no-analysis", action="store_true", help="skip the exact analyses")
    parser.add_argument("--games", nargs="*", default=list(ANALYZERS), help="games to analyse")
    args = parser.parse_args(argv)
    count = 20_000 if args.quick else 100_000
    batch_count = 200_000 if args.quick else 2_000_000
    rng = random.Random(12345)
    started = time.perf_counter()
    importlib.reload(poker)
    print(
        "table build (import of controller.games.poker.evaluator): "
        f"{time.perf_counter() - started:.3f} s"
        "   target < 1 s"
    )
    bench_three(rng, count, args.rounds)
    bench_poker(5, rng, count, batch_count, args.rounds)
    bench_poker(7, rng, count, batch_count, args.rounds)
    if not args.no_analysis:
        bench_analysis(args.games)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
