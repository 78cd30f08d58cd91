"""Hardware in the loop: simulator on a real pty → serial driver → orchestrator → journal →
a real Mosquitto → an independent subscriber.

Expected payouts below are read off the rule sheet (shared/rules/teen-patti-20-20.md), not
produced by the code under test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from controller.app import run_table
from controller.broker import parse_broker_url
from controller.cards import parse_cards
from controller.games.teen_patti.rules import TEEN_PATTI_20_20
from controller.mqtt.memory import MemoryClient, forget_brokers
from controller.settings import load_settings
from simulators.scanner import FaultPlan
from simulators.table import Simulation, simulated_scanner
from tests.support.settlement import group as bet_group

pytestmark = pytest.mark.hil


class Recorder:
    """A subscriber that records every message of a table, decoded.

    On a real broker it is an aiomqtt client; on the fast tier's in-process broker
    (``memory://NAME``, controller/mqtt/memory.py) a client of that broker.
    """

    def __init__(self, broker_url: str, table: str) -> None:
        address = parse_broker_url(broker_url)
        self.address, self.table = address, table
        self.messages: list[tuple[str, dict[str, Any], bool]] = []
        self.ready = asyncio.Event()
        self.results: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    def _client(self) -> Any:
        if self.address.url.startswith("memory://"):
            return MemoryClient(self.address.host, identifier=f"rec-{os.getpid()}")
        return aiomqtt.Client(self.address.host, self.address.port, identifier=f"rec-{os.getpid()}")

    async def run(self) -> None:
        async with self._client() as c:
            await c.subscribe(f"tables/{self.table}/#", qos=1)
            self.ready.set()
            async for message in c.messages:
                body = json.loads(message.payload) if message.payload else {}
                topic = str(message.topic)
                self.messages.append((topic, body, bool(message.retain)))
                if topic.endswith("/results"):
                    await self.results.put(body)

    def on(self, suffix: str) -> list[dict[str, Any]]:
        return [
            body for topic, body, _ in self.messages if topic == f"tables/{self.table}/{suffix}"
        ]


@pytest.fixture(
    params=[
        pytest.param("pty+mosquitto", marks=pytest.mark.infra),
        pytest.param("memory", marks=pytest.mark.fast),
    ]
)
def wire(request: pytest.FixtureRequest) -> Iterator[tuple[str, str | None]]:
    """How the table is wired: a real pty and Mosquitto, or the fast tier's in-memory null
    modem and broker (``make test-fast``). Yields ``(broker URL, memory scanner name)``."""
    if request.param == "memory":
        name = f"hil-{uuid.uuid4().hex[:8]}"
        yield f"memory://{name}", name
        forget_brokers()
        return
    yield request.getfixturevalue("mosquitto").url, None


def settings_for(broker_url: str, table: str, journal: Path, device_url: str, **rounds: Any) -> Any:
    return load_settings(
        None,
        table_id=table,
        game="teen-patti-20-20",
        device={"url": device_url},
        mqtt={"urls": [broker_url]},
        journal={"path": journal},
        rounds={"betting_seconds": 0.2, "pause_seconds": 0, **rounds},
    )


async def test_scripted_round_with_misreads_refusals_and_settlement(wire, tmp_path):
    # Physical scans in order: a duplicate ace of spades and a joker must be refused.
    script = ["As", "Kd", "As", "JK", "Ah", "Kc", "Ad", "Kh"]
    # Scan #1 (Kd) misreads once; scan #5 (Kc) misreads twice -> a pit-boss alert.
    sim = Simulation(cards=tuple(script), misreads_at={1: 1, 5: 2}, deal_delay=0.0)
    broker_url, memory = wire
    recorder = Recorder(broker_url, "hil-1")
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        rec_task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        async with simulated_scanner("teen-patti-20-20", sim, memory=memory) as url:
            settings = settings_for(
                broker_url, "hil-1", tmp_path / "j.sqlite", url, rescan_alert_after=2
            )
            summaries = await run_table(settings, rounds=1)
        result = await recorder.results.get()
        await asyncio.sleep(0.2)
        rec_task.cancel()

    assert len(summaries) == 1
    data = result["data"]
    assert result["table"] == "hil-1"
    assert data["game"] == "teen-patti-20-20"
    assert data["cards"] == {"A": ["As", "Ah", "Ad"], "B": ["Kd", "Kc", "Kh"]}
    assert data["winner"] == "A"
    bets = bet_group(data["bets"])
    # Trail of aces beats a trail of kings. Player A wins 0.95:1, Pair Plus A (trail of
    # aces) 50:1, Pair Plus B (trail) 40:1; AAA+KKK makes a full house for the 6 Card Bonus
    # (20:1); no tie.
    assert bets["player_a"]["outcome"] == "win"
    assert bets["player_a"]["payout"] == "1.95"
    assert bets["player_b"] == {"outcome": "lose", "payout": "0"} | (
        {"reason": bets["player_b"]["reason"]} if "reason" in bets["player_b"] else {}
    )
    assert bets["tie"]["outcome"] == "lose"
    assert bets["pair_plus_a"]["payout"] == "51"
    assert bets["pair_plus_b"]["payout"] == "41"
    assert bets["six_card_bonus"]["payout"] == "21"

    events = recorder.on("events")
    kinds = [event["kind"] for event in events]
    seqs = [event["seq"] for event in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "events must have no gaps"
    dealt = [(e["data"]["slot"], e["data"]["card"]) for e in events if e["kind"] == "card_dealt"]
    assert dealt == [
        ("A1", "As"),
        ("B1", "Kd"),
        ("A2", "Ah"),
        ("B2", "Kc"),
        ("A3", "Ad"),
        ("B3", "Kh"),
    ]
    rescans = [e["data"] for e in events if e["kind"] == "rescan_requested"]
    assert [(r["slot"], r["attempt"]) for r in rescans] == [("B1", 1), ("B2", 1), ("B2", 2)]
    refused = [e["data"] for e in events if e["kind"] == "card_refused"]
    assert [(r["slot"], r["card"]) for r in refused] == [("A2", "As"), ("A2", "JK")]
    assert "duplicate" in refused[0]["reason"]
    assert "joker" in refused[1]["reason"]
    assert kinds.count("pit_alert") == 1
    assert kinds[0] == "round_opened" and kinds[-1] == "round_result"
    assert kinds.index("betting_closed") < kinds.index("card_dealt")

    # The journal holds the same entries, delivered, before anything was published.
    with sqlite3.connect(tmp_path / "j.sqlite") as db:
        rows = db.execute("SELECT seq, kind, delivered_at FROM entries ORDER BY seq").fetchall()
    assert [row[1] for row in rows] == kinds
    assert all(row[2] is not None for row in rows)

    # The retained round snapshot shows the finished round's public cards.
    snapshots = recorder.on("round")
    assert snapshots, "a retained round snapshot is published"


async def test_seeded_rounds_results_follow_the_rules(wire, tmp_path):
    sim = Simulation(seed=11, deal_delay=0.0, faults=FaultPlan(misread_rate=0.2))
    broker_url, memory = wire
    recorder = Recorder(broker_url, "hil-2")
    async with asyncio.timeout(90), asyncio.TaskGroup() as group:
        rec_task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        async with simulated_scanner("teen-patti-20-20", sim, memory=memory) as url:
            settings = settings_for(broker_url, "hil-2", tmp_path / "j.sqlite", url)
            await run_table(settings, rounds=5)
        results = [await recorder.results.get() for _ in range(5)]
        rec_task.cancel()

    assert len({r["round"] for r in results}) == 5
    for message in results:
        data = message["data"]
        hands = {hand: parse_cards(cards) for hand, cards in data["cards"].items()}
        assert len(set(hands["A"]) | set(hands["B"])) == 6
        expected = TEEN_PATTI_20_20.settle(
            TEEN_PATTI_20_20.resolve(hands), TEEN_PATTI_20_20.default_paytables
        )
        assert bet_group(data["bets"]) == {
            bet: outcome.to_wire() for bet, outcome in expected.items()
        }
    rescans = [e for e in recorder.on("events") if e["kind"] == "rescan_requested"]
    assert rescans, "a 20% misread rate over 30 cards produces rescans"


def _tablectl(*args: str) -> list[str]:
    return [sys.executable, "-m", "controller.cli", *args]


async def test_cli_runs_n_rounds_and_exits_zero(mosquitto, tmp_path):
    recorder = Recorder(mosquitto.url, "cli-1")
    async with asyncio.timeout(90), asyncio.TaskGroup() as group:
        rec_task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        process = await asyncio.create_subprocess_exec(
            *_tablectl(
                "run",
                "--simulate",
                "--game",
                "teen-patti-20-20",
                "--rounds",
                "3",
                "--seed",
                "5",
                "--broker",
                mosquitto.url,
                "--table-id",
                "cli-1",
                "--journal",
                str(tmp_path / "cli.sqlite"),
                "--betting-seconds",
                "0.1",
                "--pause-seconds",
                "0",
                "--deal-delay",
                "0",
            ),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        results = [await recorder.results.get() for _ in range(3)]
        rec_task.cancel()
    assert [r["data"]["round_no"] for r in results] == [1, 2, 3]
    statuses = recorder.on("status")
    assert statuses[0]["state"] == "online"
    assert statuses[-1]["state"] == "offline"


async def test_sigint_during_betting_voids_and_refunds(mosquitto, tmp_path):
    recorder = Recorder(mosquitto.url, "cli-2")
    async with asyncio.timeout(60), asyncio.TaskGroup() as group:
        rec_task = group.create_task(recorder.run(), name="recorder")
        await recorder.ready.wait()
        process = await asyncio.create_subprocess_exec(
            *_tablectl(
                "run",
                "--simulate",
                "--broker",
                mosquitto.url,
                "--table-id",
                "cli-2",
                "--journal",
                str(tmp_path / "cli.sqlite"),
                "--betting-seconds",
                "60",
            ),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        while not any(e["kind"] == "round_opened" for e in recorder.on("events")):
            await asyncio.sleep(0.05)
        process.send_signal(signal.SIGINT)
        _, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        voided = await recorder.results.get()
        rec_task.cancel()
    assert voided["kind"] == "round_voided"
    assert set(voided["data"]["bets"]) == set(TEEN_PATTI_20_20.bet_ids)
    assert all(b == {"outcome": "refund", "payout": "1"} for b in voided["data"]["bets"].values())
    assert not any(e["kind"] == "betting_closed" for e in recorder.on("events"))
