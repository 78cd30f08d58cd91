"""Hand evaluators and exact par sheets: how fast, beside treys, phevaluator and eval7.

Run: ``.venv/bin/python bench/evaluators.py [--quick] [--no-analysis] [--games ID ...]``

Prints hands per second for the 3-card (Teen Patti, if its module exists), 5-card and 7-card
evaluators, single hands and numpy batches, with the reference libraries measured in the same
run on the same hands; then the wall time of every game's exact analysis. The target is printed
next to each figure. Figures only: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.analysis import Method
from controller.cards import Card
from controller.games.poker import evaluator as poker
from controller.games.registry import ANALYZERS, analyzer_for


def rate(function: Callable[[], object], count: int, repeats: int = 3) -> float:
    """Best-of-``repeats`` hands per second of ``function`` (which evaluates ``count`` hands)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - started)
    return count / best


def line(label: str, per_second: float, target: str) -> None:
    print(f"  {label:<44} {per_second:>14,.0f} hands/s   {target}")


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


def bench_three(rng: random.Random, count: int) -> None:
    print("3-card (Teen Patti)")
    try:
        teen_patti = importlib.import_module("controller.games.teen_patti.rules")
        rank_hand = teen_patti.rank_hand
    except (ImportError, AttributeError) as exc:
        print(f"  skipped: controller.games.teen_patti.rank_hand not importable ({exc})")
        return
    hands = [rng.sample(range(52), 3) for _ in range(count)]
    card_hands = [[Card(code) for code in hand] for hand in hands]
    line(
        "rank_hand(cards), checked",
        rate(single_loop(rank_hand, card_hands, star=False), count),
        "(no target in the brief)",
    )
    rank_codes = getattr(teen_patti, "rank_codes", None)
    if rank_codes is not None:
        line(
            "rank_codes(a, b, c), fast path",
            rate(single_loop(rank_codes, hands, star=True), count),
            "(no target in the brief)",
        )


def bench_poker(size: int, rng: random.Random, count: int, batch_count: int) -> None:
    import treys
    from phevaluator import evaluate_cards

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eval7 uses deprecated pyparsing names
        import eval7

    print(f"{size}-card")
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
    measured = {
        "treys": rate(run_treys, count),
        "phevaluator": rate(single_loop(evaluate_cards, hands, star=True), count),
        "eval7": rate(single_loop(eval7.evaluate, eval7_hands, star=False), count),
    }
    mine = rate(single_loop(ours, hands, star=False), count)
    for name, value in measured.items():
        line(f"{name} (single)", value, "reference")
    verdict = "met" if mine >= measured["phevaluator"] else "MISSED"
    line(
        f"evaluate{size} (single)",
        mine,
        f"target >= phevaluator ({measured['phevaluator']:,.0f}): {verdict}",
    )
    generator = np.random.default_rng(rng.getrandbits(64))
    batch_hands = np.argpartition(generator.random((batch_count, 52)), size, axis=1)[:, :size]
    batch_hands = batch_hands.astype(np.int8)
    batch = poker.evaluate7_batch if size == 7 else poker.evaluate5_batch
    batch(batch_hands[:10])  # build the dense tables outside the timing
    per_second = rate(lambda: batch(batch_hands), len(batch_hands))
    verdict = "met" if per_second > measured["eval7"] else "MISSED"
    line(
        f"evaluate{size}_batch ({len(batch_hands):,} hands)",
        per_second,
        f"target > eval7 ({measured['eval7']:,.0f}): {verdict}",
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
    bench_three(rng, count)
    bench_poker(5, rng, count, batch_count)
    bench_poker(7, rng, count, batch_count)
    if not args.no_analysis:
        bench_analysis(args.games)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
