"""The proof of issue 5: no result lost, none doubled, through crashes, outages and unplugging.

Real processes: Mosquitto (persistence on), the controller (``python -m controller.cli run
--config FILE``), the scanner simulator (its own process on TCP) and an independent MQTT 5
consumer with a persistent session. Faults at seeded random moments: SIGKILL the controller
and restart it, stop and restart the broker, SIGKILL and restart the simulator.

Quick form (in ``make test``): 16 rounds, 5 faults (one of each kind). Full form::

    TABLECTL_CHAOS_ROUNDS=200 .venv/bin/pytest tests/chaos -s

``TABLECTL_CHAOS_SEED`` picks another seed (default 1). The figures are printed (``-s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from tests.chaos.harness import ChaosRun, Consumer, check
from tests.conftest import MosquittoBroker

ROUNDS = int(os.environ.get("TABLECTL_CHAOS_ROUNDS", "16"))
SEED = int(os.environ.get("TABLECTL_CHAOS_SEED", "1"))


async def test_no_result_lost_or_doubled_through_chaos(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    consumer = Consumer(mosquitto.host, mosquitto.port)
    consumer_task = asyncio.create_task(consumer.run(), name="chaos-consumer")
    run = ChaosRun(tmp_path, mosquitto, rounds=ROUNDS, seed=SEED)
    try:
        async with asyncio.timeout(10):
            await consumer.subscribed.wait()
        await run.drive(limit_seconds=30 + ROUNDS * 3)
        if not mosquitto.running:
            mosquitto.start()
        # Everything journalled must reach the consumer (the last run flushed its outbox; a
        # run killed at the very end leaves a backlog that a restart would send).
        last = run.controller.last_seq()
        async with asyncio.timeout(30):
            while consumer.events_upto() < last:
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # stragglers: duplicates still in flight
    finally:
        run.controller.kill()
        run.scanner.kill()
        consumer_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer_task
    figures = check(run, consumer)
    print()
    print(figures.text())
    assert not figures.problems, "\n".join(figures.problems)
    assert figures.rounds >= ROUNDS
    assert figures.started >= 1
    assert {"controller", "broker", "scanner"} <= set(figures.faults)
    assert {"controller-betting", "controller-dealing"} & set(figures.faults)
