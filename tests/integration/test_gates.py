"""No new round opens while the broker is unreachable or the betting system is offline.

The table says why it waits (``table_status``), and opens the next round once it can.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from controller.app import run_table
from controller.settings import load_settings
from simulators.table import Simulation, simulated_scanner

pytestmark = pytest.mark.hil


def journal_kinds(path: Path) -> list[tuple[str, dict[str, Any]]]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return [
            (k, json.loads(b)) for k, b in db.execute("SELECT kind, body FROM entries ORDER BY seq")
        ]


async def wait_for(predicate, limit: float = 30) -> None:
    async with asyncio.timeout(limit):
        while not predicate():
            await asyncio.sleep(0.05)


async def test_no_round_opens_while_the_broker_is_down(mosquitto, tmp_path):
    journal = tmp_path / "j.sqlite"
    sim = Simulation(seed=2, deal_delay=0.0)
    async with simulated_scanner("teen-patti-20-20", sim) as url:
        settings = load_settings(
            None,
            table_id="gate-1",
            device={"url": url},
            mqtt={
                "urls": [mosquitto.url],
                "reconnect_min_seconds": 0.1,
                "reconnect_max_seconds": 0.3,
            },
            journal={"path": journal},
            rounds={"betting_seconds": 0.1, "pause_seconds": 1.0, "gate_grace_seconds": 0.2},
        )
        table = asyncio.create_task(run_table(settings, rounds=2))
        try:
            await wait_for(lambda: any(k == "round_result" for k, _ in journal_kinds(journal)))
            mosquitto.stop()  # during the pause after round 1
            await wait_for(
                lambda: any(
                    k == "table_status" and b["state"] == "waiting"
                    for k, b in journal_kinds(journal)
                )
            )
            await asyncio.sleep(1.0)
            opened = [b for k, b in journal_kinds(journal) if k == "round_opened"]
            assert len(opened) == 1, "no round opens while the broker is unreachable"
            mosquitto.start()
            async with asyncio.timeout(60):
                await table
        finally:
            table.cancel()
    kinds = [(k, b.get("state")) for k, b in journal_kinds(journal)]
    waiting = kinds.index(("table_status", "waiting"))
    ready = kinds.index(("table_status", "ready"))
    second_open = [i for i, (k, _) in enumerate(kinds) if k == "round_opened"][1]
    assert waiting < ready < second_open
    statuses = [b for k, b in journal_kinds(journal) if k == "table_status"]
    assert statuses[0]["detail"] == "broker unreachable"


async def test_no_round_opens_while_the_betting_system_is_offline(mosquitto, tmp_path):
    journal = tmp_path / "j.sqlite"
    sim = Simulation(seed=2, deal_delay=0.0)

    async def betting_status(state: str) -> None:
        async with aiomqtt.Client(mosquitto.host, mosquitto.port, identifier="bet-status") as c:
            await c.publish("betting/status", json.dumps({"state": state}), qos=1, retain=True)

    await betting_status("offline")
    async with simulated_scanner("teen-patti-20-20", sim) as url:
        settings = load_settings(
            None,
            table_id="gate-2",
            device={"url": url},
            mqtt={"urls": [mosquitto.url]},
            journal={"path": journal},
            rounds={
                "betting_seconds": 0.1,
                "pause_seconds": 0,
                "gate_grace_seconds": 0.2,
                "wait_for_betting_system": True,
            },
        )
        table = asyncio.create_task(run_table(settings, rounds=1))
        try:
            await wait_for(
                lambda: any(
                    k == "table_status" and b["detail"] == "betting system offline"
                    for k, b in journal_kinds(journal)
                )
            )
            await asyncio.sleep(1.0)
            assert not any(k == "round_opened" for k, _ in journal_kinds(journal))
            await betting_status("online")
            async with asyncio.timeout(60):
                summaries = await table
        finally:
            table.cancel()
    assert len(summaries) == 1
    assert summaries[0].phase.value == "settled"
