"""Hold'em live equity: time to compute every seat's win probability, by street and players.

Run: ``.venv/bin/python bench/equity.py [--repeats N] [--samples N] [--deals N]``

For 2, 6 and 9 players, on random deals (seeded), times
:func:`controller.games.texas_holdem.equity.win_probabilities` pre-flop, after the flop, the
turn and the river, and prints the median and worst time next to the target: under 100 ms for
every street. Pre-flop is Monte Carlo, and every seat's figure must be within 0.5 percentage
points of the exact one, with one standard error at most 0.5 pp too: the error is measured
against an exact pre-flop enumeration of the same deal (slow, done once per deal outside the
timing), and a deal is "ok" only when both hold (``--exact-deals`` deals of 6 and of 9
players). Figures only: nothing here asserts a speed; the exit status is 1 if a target was
missed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.cards import Card
from controller.games.texas_holdem import equity
from controller.games.texas_holdem.equity import DEFAULT_SAMPLES, win_probabilities

TARGET_MS = 100.0
TARGET_PP = 0.5
STREETS = (("preflop", 0), ("flop", 3), ("turn", 4), ("river", 5))


def deal(players: int, seed: int) -> tuple[dict[str, list[Card]], list[Card]]:
    cards = [Card(code) for code in range(52)]
    random.Random(seed).shuffle(cards)
    hole = {f"seat{i + 1}": cards[2 * i : 2 * i + 2] for i in range(players)}
    return hole, cards[2 * players : 2 * players + 5]


def exact_preflop(hole: dict[str, list[Card]]) -> dict[str, float]:
    """Exact pre-flop win probabilities (all C(52 - 2n, 5) boards; seconds, not ms)."""
    saved = equity.EXACT_LIMIT
    equity.EXACT_LIMIT = 10**9  # type: ignore[misc]
    try:
        report = win_probabilities(hole, [])
    finally:
        equity.EXACT_LIMIT = saved  # type: ignore[misc]
    return {seat: e.win for seat, e in report.seats.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timings per deal and street")
    parser.add_argument("--deals", type=int, default=5, help="random deals per player count")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="pre-flop MC runs")
    parser.add_argument("--no-exact", action="store_true", help="skip the exact pre-flop check")
    parser.add_argument(
        "--exact-deals", type=int, default=5, help="deals of 6 and of 9 checked against exact"
    )
    args = parser.parse_args()
    missed = 0

    win_probabilities(*deal(2, 0))  # build the evaluator tables before timing
    print(f"equity timings, median and worst over {args.deals} deals x {args.repeats} runs")
    print(
        f"{'players':>7} {'street':>8} {'method':>12} {'runouts':>9} "
        f"{'median ms':>10} {'worst ms':>9}  target"
    )
    for players in (2, 6, 9):
        for street, board_size in STREETS:
            times = []
            method = ""
            runouts = 0
            for number in range(args.deals):
                hole, board = deal(players, 1000 * players + number)
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    report = win_probabilities(
                        hole,
                        board[:board_size],
                        samples=args.samples if board_size == 0 else None,
                    )
                    times.append((time.perf_counter() - started) * 1000)
                    method, runouts = report.method, report.runouts
            median, worst = statistics.median(times), max(times)
            verdict = "ok" if worst < TARGET_MS else "MISSED"
            missed += verdict == "MISSED"
            print(
                f"{players:>7} {street:>8} {method:>12} {runouts:>9} "
                f"{median:>10.1f} {worst:>9.1f}  < {TARGET_MS:.0f} ms {verdict}"
            )
    if args.no_exact:
        return 1 if missed else 0
    print(
        f"\npre-flop Monte Carlo ({args.samples} run-outs) against exact enumeration, "
        f"target: max |error| <= {TARGET_PP} pp and 1 s.e. <= {TARGET_PP} pp"
    )
    print(f"{'players':>7} {'deal':>4} {'max |error| pp':>15} {'1 s.e. pp':>10} {'exact s':>8}")
    for players in (6, 9):
        for number in range(args.exact_deals):
            hole, _ = deal(players, 1000 * players + number)
            started = time.perf_counter()
            exact = exact_preflop(hole)
            exact_seconds = time.perf_counter() - started
            sampled = win_probabilities(hole, [], samples=args.samples)
            error = max(abs(sampled.seats[s].win - exact[s]) for s in exact) * 100
            se = sampled.standard_error * 100
            verdict = "ok" if se <= TARGET_PP and error <= TARGET_PP else "MISSED"
            missed += verdict == "MISSED"
            print(
                f"{players:>7} {number:>4} {error:>15.3f} {se:>10.3f} {exact_seconds:>8.1f}  "
                f"{verdict}"
            )
    print("all targets met" if not missed else f"{missed} target(s) MISSED")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
