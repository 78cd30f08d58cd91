"""The garbage-collection policy of ``tablectl run``: collections between cards."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from controller import collector


@pytest.fixture
def collector_taken_over() -> Iterator[None]:
    """The automatic collector off for one test (as after ``take_over``), then restored."""
    threshold = gc.get_threshold()
    gc.disable()
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.enable()


def test_nothing_is_collected_while_the_automatic_collector_runs() -> None:
    assert gc.isenabled()
    assert collector.collect_if_due() is None


def test_a_young_generation_over_its_threshold_is_collected(collector_taken_over: None) -> None:
    gc.collect()
    gc.set_threshold(50, 1000, 1000)
    garbage = []
    for _ in range(200):  # reference cycles: only the cyclic collector frees them
        cycle: list[object] = []
        cycle.append(cycle)
        garbage.append(cycle)
    del garbage, cycle
    assert gc.get_count()[0] >= 50
    assert collector.collect_if_due() == 0
    assert gc.get_count()[0] < 50
    assert collector.collect_if_due() is None  # nothing due any more


def test_the_oldest_due_generation_is_the_one_collected(collector_taken_over: None) -> None:
    gc.collect()
    gc.set_threshold(10, 2, 1000)
    for _ in range(3):
        gc.collect(0)  # each young collection counts towards the middle generation
        for _ in range(20):
            cycle: list[object] = []
            cycle.append(cycle)
        del cycle
    assert gc.get_count()[1] >= 2
    assert collector.collect_if_due() == 1


@pytest.mark.infra
def test_take_over_freezes_the_start_up_heap_and_turns_the_collector_off() -> None:
    code = (
        "import gc\n"
        "from controller import collector\n"
        "collector.take_over()\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 1000)\n"
    )
    assert _printed(code) == ["False", "True"]


@pytest.mark.infra
def test_taken_over_for_a_block_gives_the_automatic_collector_back() -> None:
    """``run --simulate`` takes the collector over for its table only (a lingering studio and
    a program that ran the command in its own process get the automatic collector back)."""
    code = (
        "import gc\n"
        "from controller import collector\n"
        "with collector.taken_over():\n"
        "    inside = (gc.isenabled(), gc.get_freeze_count() > 1000)\n"
        "print(*inside, gc.isenabled(), gc.get_freeze_count())\n"
        "gc.disable()\n"  # a process that had taken it over already keeps it so
        "with collector.taken_over():\n"
        "    pass\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 1000)\n"
    )
    assert _printed(code) == ["False", "True", "True", "0", "False", "True"]


def _printed(code: str) -> list[str]:
    """What ``code`` prints, run in a fresh interpreter (the collector is the process's)."""
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return run.stdout.split()


def test_a_simulated_table_collects_between_cards_and_gives_the_collector_back() -> None:
    """What ``run --simulate`` plays its table in: the collector taken over, then restored.

    Left automatic, the demo's first full collection (its whole start-up heap, 39 ms) landed
    about 100 s after the start (docs/performance.md, "The demo").
    """
    import argparse
    import asyncio

    from controller.cli.run import _played

    async def table() -> tuple[bool, bool]:
        return gc.isenabled(), gc.get_freeze_count() > 0

    args = argparse.Namespace(no_archive=True)
    assert gc.isenabled()
    assert asyncio.run(_played(args, None, table())) == (False, True)  # type: ignore[arg-type]
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
