"""The archive process's garbage collector settings (controller/archive/collector.py).

Each case runs in a fresh interpreter: the collector's settings are the whole process's,
and the test process keeps its own.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from controller.archive.collector import YOUNG_THRESHOLD, tune_for_ingest

PROBE = """
import gc, json, sys
from controller.archive.collector import tune_for_ingest
before = gc.get_threshold()
held = [[n] for n in range(1000)]  # alive at start: frozen with the rest
tune_for_ingest(*map(int, sys.argv[1:]))
cycle = []
cycle.append(cycle)  # garbage made after the tuning is still collected
del cycle
print(json.dumps({"before": before, "after": gc.get_threshold(),
                  "frozen": gc.get_freeze_count(), "collected": gc.collect()}))
"""


def _probe(*args: int) -> dict[str, list[int] | int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, args)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, list[int] | int] = json.loads(out.stdout)
    return result


@pytest.mark.infra
def test_the_archive_freezes_its_start_and_collects_young_objects_less_often():
    seen = _probe()
    before, after = seen["before"], seen["after"]
    assert isinstance(before, list) and isinstance(after, list)
    assert after == [YOUNG_THRESHOLD, before[1], before[2]] and after != before
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 1000
    assert isinstance(seen["collected"], int) and seen["collected"] >= 1


@pytest.mark.infra
def test_a_young_threshold_can_be_given():
    after = _probe(20_000)["after"]
    assert isinstance(after, list) and after[0] == 20_000


def test_a_threshold_below_the_default_is_refused():
    with pytest.raises(ValueError, match="below CPython's default"):
        tune_for_ingest(100)
