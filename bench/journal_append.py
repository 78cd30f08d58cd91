"""The card's hot path in the journal: ``Journal.append`` of one ``card_dealt`` entry.

    .venv/bin/python bench/journal_append.py               # 3000 cards per figure
    .venv/bin/python bench/journal_append.py --cards 10000

Two ways to append, each timed three ways: ``typed body`` (what the orchestrator does since the
journal's entries are typed: ``Journal.record(CardDealtData(...))``, the body validated at
construction and dumped by pydantic-core) and ``dict body`` (``Journal.append("card_dealt",
{...})``, what main's orchestrator did, dumped with ``json``). Each figure is the median and
p99 of one call, in microseconds:

* ``append (synchronous=FULL)``: what the orchestrator pays per card (fsync included), on a
  journal in a temporary directory of the working disk.
* ``append (synchronous=OFF)``: the same without the fsync, so the CPU cost of building the
  body, serialising it, hashing and the SQLite insert is not drowned by the disk.
* ``body only``: building the body and its stored JSON text, without SQLite.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import structlog

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.journal import CardDealtData, Journal, body_text  # noqa: E402

SLOTS = [("A1", "A"), ("B1", "B"), ("A2", "A"), ("B2", "B"), ("A3", "A"), ("B3", "B")]


def _card(n: int) -> dict[str, object]:
    slot, hand = SLOTS[n % len(SLOTS)]
    return {"slot": slot, "hand": hand, "index": n % 6, "card": "As", "face": "up"}


def _typed_card(n: int) -> CardDealtData:
    slot, hand = SLOTS[n % len(SLOTS)]
    return CardDealtData(slot=slot, hand=hand, index=n % 6, card="As", face="up")


def _append_raw(journal: Journal, n: int) -> None:
    journal.append("card_dealt", _card(n), round_id="bench-000001")


def _append_typed(journal: Journal, n: int) -> None:
    journal.record(_typed_card(n), round_id="bench-000001")


def _figures(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"median {statistics.median(ordered) * 1e6:8.1f} us   p99 {p99 * 1e6:8.1f} us"


def _time_appends(
    cards: int, *, fsync: bool, append: Callable[[Journal, int], None]
) -> list[float]:
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp, Journal.open(Path(tmp) / "j.sqlite") as j:
        if not fsync:
            j._connection().execute("PRAGMA synchronous=OFF")
        for n in range(200):  # warm up
            append(j, n)
        samples = []
        for n in range(cards):
            start = time.perf_counter()
            append(j, n)
            samples.append(time.perf_counter() - start)
        return samples


def _time_body(cards: int, build: Callable[[int], str]) -> list[float]:
    samples = []
    for n in range(cards):
        start = time.perf_counter()
        build(n)
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cards", type=int, default=3000)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    paths: dict[str, tuple[Callable[[Journal, int], None], Callable[[int], str]]] = {
        "typed body": (_append_typed, lambda n: body_text(_typed_card(n))),
        "dict body": (
            _append_raw,
            lambda n: json.dumps(_card(n), separators=(",", ":"), ensure_ascii=False),
        ),
    }
    for name, (append, build) in paths.items():
        print(f"{name}:")
        full = _time_appends(args.cards, fsync=True, append=append)
        print(f"  append (synchronous=FULL)  {_figures(full)}")
        off = _time_appends(args.cards, fsync=False, append=append)
        print(f"  append (synchronous=OFF)   {_figures(off)}")
        print(f"  body only                  {_figures(_time_body(args.cards * 10, build))}")


if __name__ == "__main__":
    main()
