"""The outbox against a real Mosquitto, observed by an independent subscriber."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from controller.broker import free_port
from controller.journal import Journal
from controller.mqtt.settings import MqttSettings
from controller.publisher import Publisher

ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ["5", "3.1.1"]


class Subscriber:
    """Records every message of a table (QoS 1); reconnects, optionally to a kept session."""

    def __init__(self, host: str, port: int, table: str, *, persistent: bool = False) -> None:
        self.host, self.port, self.table = host, port, table
        self.persistent = persistent
        self.identifier = f"sub-{uuid.uuid4().hex[:8]}"
        self.received: list[tuple[str, dict[str, Any], bool, int]] = []
        self.ready = asyncio.Event()
        self.changed = asyncio.Event()

    async def run(self) -> None:
        while True:
            try:
                async with aiomqtt.Client(
                    self.host,
                    self.port,
                    identifier=self.identifier,
                    clean_session=not self.persistent,
                    timeout=2,
                ) as client:
                    await client.subscribe(f"tables/{self.table}/#", qos=1)
                    self.ready.set()
                    async for message in client.messages:
                        body = json.loads(message.payload) if message.payload else {}
                        self.received.append(
                            (str(message.topic), body, bool(message.retain), message.qos)
                        )
                        self.changed.set()
            except aiomqtt.MqttError:
                await asyncio.sleep(0.05)

    @contextlib.asynccontextmanager
    async def listening(self) -> AsyncIterator[Subscriber]:
        """Subscribed for the ``async with`` block (it returns once subscribed)."""
        async with asyncio.TaskGroup() as group:
            task = group.create_task(self.run(), name=f"subscriber {self.table}")
            await self.ready.wait()
            try:
                yield self
            finally:
                task.cancel()

    def on(self, leaf: str) -> list[dict[str, Any]]:
        return [b for t, b, _, _ in self.received if t == f"tables/{self.table}/{leaf}"]

    async def wait_until(self, predicate: Any, seconds: float = 15.0) -> None:
        async with asyncio.timeout(seconds):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


def settings_for(url: str, protocol: str, **extra: Any) -> MqttSettings:
    return MqttSettings(
        urls=[url] if isinstance(url, str) else url,
        protocol=protocol,
        reconnect_min_seconds=0.05,
        reconnect_max_seconds=0.3,
        publish_timeout=1.0,
        connect_timeout=2.0,
        **extra,
    )


def card(journal: Journal, n: int, *, face: str = "up", round_id: str = "r-1") -> None:
    journal.append(
        "card_dealt",
        {"slot": f"S{n}", "hand": "A", "index": n, "card": f"C{n}", "face": face},
        round_id=round_id,
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_entries_arrive_in_order_at_qos1_and_are_marked_delivered(
    mosquitto_session, journal, make_publisher, protocol
):
    broker = mosquitto_session
    table = f"order-{protocol.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    sub = Subscriber(broker.host, broker.port, table)
    settings = settings_for(broker.url, protocol)
    async with (
        asyncio.timeout(30),
        sub.listening(),
        make_publisher(settings, table, journal, version="9.9", connect_within=5) as publisher,
    ):
        journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
        for n in range(1, 60):
            card(journal, n, face="hidden" if n == 7 else "up")
            if n % 10 == 0:
                await asyncio.sleep(0)  # let some go out live, the rest as a backlog
        assert await publisher.flush(10)
        await sub.wait_until(lambda: len(sub.on("events")) >= 60)

    events = sub.on("events")
    assert [e["seq"] for e in events] == list(range(1, 61))
    assert all(e["session"] == 1 and e["table"] == table for e in events)
    assert all(not e["delayed"] for e in events)
    assert {qos for topic, _, _, qos in sub.received if topic.endswith("/events")} == {1}
    hidden = events[7]
    assert (hidden["data"]["slot"], hidden["data"]["card"]) == ("S7", None)
    secure = sub.on("secure/events")
    assert [(s["seq"], s["data"]["card"]) for s in secure] == [(8, "C7")]
    assert journal.undelivered() == []
    assert all(entry.delivered_at is not None for entry in journal.entries())
    snapshots = sub.on("round")
    assert snapshots[-1]["data"]["last_seq"] == 60
    assert len(snapshots[-1]["data"]["cards"]) == 59
    statuses = sub.on("status")
    assert [s["state"] for s in statuses] == ["online", "offline"]
    assert statuses[0]["game"] == "g"
    assert statuses[0]["version"] == "9.9"
    assert statuses[1]["reason"] == "stopped"
    journal.close()

    # A consumer arriving later gets the retained status and round snapshot.
    late = Subscriber(broker.host, broker.port, table)
    async with asyncio.timeout(10), late.listening():
        await late.wait_until(lambda: late.on("status") and late.on("round"))
    assert all(retained for t, _, retained, _ in late.received)
    assert late.on("status")[0]["state"] == "offline"
    assert late.on("round")[0]["data"]["last_seq"] == 60


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_broker_restart_mid_stream_loses_nothing(
    mosquitto, journal, make_publisher, protocol
):
    table = f"restart-{protocol.replace('.', '')}"
    sub = Subscriber(mosquitto.host, mosquitto.port, table, persistent=True)
    settings = settings_for(mosquitto.url, protocol)
    while_down: list[int] = []
    async with (
        asyncio.timeout(45),
        sub.listening(),
        make_publisher(settings, table, journal, connect_within=5) as publisher,
    ):
        journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
        for n in range(1, 20):
            card(journal, n)
            await asyncio.sleep(0.002)
        await asyncio.to_thread(mosquitto.stop)
        for n in range(20, 35):
            card(journal, n)
            while_down.append(journal.last_seq)
            await asyncio.sleep(0.01)
        assert not publisher.connected.is_set()
        assert not await publisher.flush(0.2)
        await asyncio.to_thread(mosquitto.start)
        assert await publisher.wait_connected(10)
        for n in range(35, 45):
            card(journal, n)
            await asyncio.sleep(0.002)
        assert await publisher.flush(20)
        await sub.wait_until(lambda: {e["seq"] for e in sub.on("events")} >= set(range(1, 46)))

    events = sub.on("events")
    first_seen: dict[int, dict[str, Any]] = {}
    for event in events:
        first_seen.setdefault(event["seq"], event)
    assert list(first_seen) == list(range(1, 46)), "in order and no gap after de-duplication"
    for event in events:  # duplicates are the same message
        assert event["data"] == first_seen[event["seq"]]["data"]
    assert all(e["delayed"] for e in events if e["seq"] in while_down)
    assert not any(e["delayed"] for e in events if e["seq"] > max(while_down))
    assert publisher.connections >= 2
    assert journal.undelivered() == []


async def test_undelivered_entries_of_a_previous_run_go_out_delayed(
    mosquitto_session, tmp_path, make_publisher
):
    broker = mosquitto_session
    table = f"resume-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:  # a run that never reached a broker
        journal.append("round_opened", {"round_no": 4, "game": "g"}, round_id="r-4")
        card(journal, 1, round_id="r-4")
        card(journal, 2, face="hidden", round_id="r-4")
    journal = Journal.open(path)
    assert journal.session == 2
    sub = Subscriber(broker.host, broker.port, table)
    async with (
        asyncio.timeout(20),
        sub.listening(),
        make_publisher(settings_for(broker.url, "5"), table, journal) as publisher,
    ):
        assert await publisher.flush(5)
        card(journal, 3, round_id="r-4")
        assert await publisher.flush(5)
        await sub.wait_until(lambda: len(sub.on("events")) >= 4)
    events = sub.on("events")
    assert [(e["seq"], e["session"], e["delayed"]) for e in events] == [
        (1, 1, True),
        (2, 1, True),
        (3, 1, True),
        (4, 2, False),
    ]
    snapshot = sub.on("round")[-1]["data"]
    assert snapshot["round_no"] == 4
    assert [c["card"] for c in snapshot["cards"]] == ["C1", None, "C3"]
    journal.close()


async def test_snapshot_after_restart_includes_delivered_part_of_the_round(
    mosquitto_session, tmp_path, make_publisher
):
    broker = mosquitto_session
    table = f"snap-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "j.sqlite"
    with Journal.open(path) as journal:
        journal.append("round_opened", {"round_no": 9, "game": "g"}, round_id="r-9")
        card(journal, 1, round_id="r-9")
        journal.mark_delivered_many([1, 2])  # published by the previous run
        card(journal, 2, round_id="r-9")
    journal = Journal.open(path)
    sub = Subscriber(broker.host, broker.port, table)
    async with (
        asyncio.timeout(20),
        sub.listening(),
        make_publisher(settings_for(broker.url, "5"), table, journal) as publisher,
    ):
        assert await publisher.flush(5)
        await sub.wait_until(lambda: sub.on("round"))
    assert [e["seq"] for e in sub.on("events")] == [3]
    snapshot = sub.on("round")[-1]["data"]
    assert snapshot["round_no"] == 9
    assert [c["card"] for c in snapshot["cards"]] == ["C1", "C2"]
    journal.close()


async def test_last_will_is_published_when_the_controller_dies(mosquitto_session, tmp_path):
    broker = mosquitto_session
    table = f"will-{uuid.uuid4().hex[:6]}"
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from controller.journal import Journal
        from controller.mqtt.settings import MqttSettings
        from controller.publisher import Publisher

        async def main():
            journal = Journal.open({str(tmp_path / "j.sqlite")!r})
            publisher = Publisher(MqttSettings(urls=[{broker.url!r}], protocol="5"),
                                  {table!r}, journal, game="g", version="1")
            task = asyncio.ensure_future(publisher.run())
            await publisher.wait_connected(10)
            sys.stderr.write("UP\\n")
            sys.stderr.flush()
            await task

        asyncio.run(main())
        """
    )
    sub = Subscriber(broker.host, broker.port, table)
    async with asyncio.timeout(30), sub.listening():
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stderr is not None
        while (line := await process.stderr.readline()) != b"UP\n":
            assert line, "the publisher process ended before connecting"
        await sub.wait_until(lambda: sub.on("status"))
        process.kill()
        await process.wait()
        await sub.wait_until(lambda: len(sub.on("status")) >= 2)
    online, offline = sub.on("status")
    assert (online["state"], online["session"]) == ("online", 1)
    assert offline == {
        "schema_version": "3",
        "journal": online["journal"],
        "state": "offline",
        "table": table,
        "session": 1,
        "game": "g",
        "version": "1",
        "at": None,
        "reason": "connection lost",
    }


async def test_fails_over_to_the_next_url(mosquitto_session, journal, make_publisher):
    dead = f"mqtt://127.0.0.1:{free_port()}"
    table = f"failover-{uuid.uuid4().hex[:6]}"
    settings = settings_for([dead, mosquitto_session.url], "3.1.1")  # type: ignore[arg-type]
    async with (
        asyncio.timeout(20),
        make_publisher(settings, table, journal, connect_within=5) as publisher,
    ):
        assert publisher.current_url == mosquitto_session.url
        journal.append("table_status", {"state": "ready", "detail": ""})
        assert await publisher.flush(5)


async def test_without_a_broker_flush_times_out_and_stop_returns(journal, make_publisher):
    dead = f"mqtt://127.0.0.1:{free_port()}"
    settings = settings_for(dead, "5")
    async with asyncio.timeout(20), make_publisher(settings, "nobroker", journal) as publisher:
        journal.append("table_status", {"state": "waiting for broker", "detail": ""})
        assert not await publisher.wait_connected(0.3)
        assert not await publisher.flush(0.3)
    assert [e.seq for e in journal.undelivered()] == [1]


async def test_watch_prints_what_a_consumer_sees(mosquitto_session, journal, make_publisher):
    import argparse
    import io

    from controller.cli.watch import register
    from controller.watch import watch

    broker = mosquitto_session
    table = f"watch-{uuid.uuid4().hex[:6]}"
    out = io.StringIO()
    stop = asyncio.Event()
    settings = settings_for(broker.url, "5")
    async with (
        asyncio.timeout(20),
        make_publisher(settings, table, journal, connect_within=5) as publisher,
        asyncio.TaskGroup() as group,
    ):
        watch_task = group.create_task(
            watch([broker.url], table, protocol="3.1.1", out=out, stop=stop)
        )
        while "ONLINE" not in out.getvalue():
            await asyncio.sleep(0.02)
        journal.append(
            "round_opened",
            {
                "round_no": 1,
                "game": "g",
                "betting_seconds": 1,
                "betting_closes_at": "2026-01-01T00:00:01Z",
            },
            round_id="r-1",
        )
        card(journal, 1)
        card(journal, 2, face="hidden")
        journal.append(
            "round_result",
            {
                "round_no": 1,
                "game": "g",
                "winner": "A",
                "cards": {"A": ["C1", "C2"]},
                "hands": {"A": {"description": "two cards"}},
                "bets": {"player_a": {"outcome": "win", "payout": "1.95"}},
            },
            round_id="r-1",
        )
        assert await publisher.flush(5)
        while "player_a" not in out.getvalue():
            await asyncio.sleep(0.02)
        stop.set()
        await watch_task
    lines = out.getvalue().splitlines()
    text = "\n".join(lines)
    assert "S1 C1" in text
    assert "S2 [hidden]" in text
    assert "round 1 result: A wins; A [C1 C2] two cards" in text
    won = ["player_a", "win", "returns", "1.95", "per", "1", "staked"]
    assert any(line.split()[-7:] == won for line in lines)
    assert sum("S1 C1" in line for line in lines) == 1

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(
        ["watch", "--broker", broker.url, "--table-id", "t9", "--protocol", "3.1.1"]
    )
    assert (args.broker, args.table_id, args.protocol, args.prefix) == (
        [broker.url],
        "t9",
        "3.1.1",
        "tables",
    )


RESULT_BODY = {
    "game": "teen-patti-20-20",
    "round_no": 1,
    "cards": {"A": ["As", "Ks", "Qs"], "B": ["2c", "3d", "7h"]},
    "winner": "A",
    "hands": {"A": {"category": "straight-flush", "description": "Straight flush"}},
    "bets": {"A": {"outcome": "win", "payout": "1.95"}, "B": {"outcome": "lose", "payout": "0"}},
}


async def test_signed_results_verify_and_replay_resends_them(
    mosquitto_session, journal, make_publisher
):
    """Results carry a signature a consumer verifies with the public key; a changed one fails.
    A replay re-sends them with their original seq and ``replayed: true``, still signed."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from controller.signing import Signer, verify_envelope, why_invalid

    broker = mosquitto_session
    table = f"signed-{uuid.uuid4().hex[:6]}"
    signer = Signer(Ed25519PrivateKey.generate(), "tp-test-1")
    delivered: list[int] = []
    sub = Subscriber(broker.host, broker.port, table)
    async with (
        asyncio.timeout(30),
        sub.listening(),
        make_publisher(
            settings_for(broker.url, "5"),
            table,
            journal,
            version="t",
            signer=signer,
            on_delivered=lambda entry: delivered.append(entry.seq),
            connect_within=5,
        ) as publisher,
    ):
        journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
        journal.append("round_result", RESULT_BODY, round_id="r-1")
        journal.append("round_opened", {"round_no": 2, "game": "g"}, round_id="r-2")
        journal.append(
            "round_voided",
            {"reason": "stopped", "bets": {"A": {"outcome": "refund", "payout": "1"}}},
            round_id="r-2",
        )
        assert await publisher.flush(10)
        assert publisher.backlog() == 0
        await sub.wait_until(lambda: len(sub.on("results")) == 2)
        sent = await publisher.replay(1)
        assert sent == 2
        assert await publisher.replay(3, 4) == 1
        assert await publisher.replay(1, 1) == 0
        await sub.wait_until(lambda: len(sub.on("results")) == 5)

    assert delivered == [1, 2, 3, 4]
    public_key = signer.public_key
    results = sub.on("results")
    assert [(r["seq"], r["kind"], r.get("replayed")) for r in results] == [
        (2, "round_result", None),
        (4, "round_voided", None),
        (2, "round_result", True),
        (4, "round_voided", True),
        (4, "round_voided", True),
    ]
    for message in results:
        assert message["signature"]["key_id"] == "tp-test-1"
        assert verify_envelope(message, public_key), why_invalid(message, public_key)
    # The same signed envelope on events; other kinds are not signed.
    events = sub.on("events")
    assert verify_envelope(events[1], public_key)
    assert "signature" not in events[0]
    # A result changed on the way fails.
    forged = json.loads(json.dumps(results[0]))
    forged["data"]["bets"][1]["payout"] = "2"
    assert not verify_envelope(forged, public_key)
    assert "was changed" in why_invalid(forged, public_key)
    # The replayed copy is the original envelope plus replayed/delayed.
    original, replayed = results[0], results[2]
    strip = ("signature", "replayed", "delayed")
    assert {k: v for k, v in original.items() if k not in strip} == {
        k: v for k, v in replayed.items() if k not in strip
    }
    assert replayed["delayed"] is True


async def test_replay_needs_a_connection_and_a_sane_range(tmp_path):
    from controller.errors import PublishError

    journal = Journal.open(tmp_path / "j.sqlite")
    publisher = Publisher(
        settings_for("mqtt://127.0.0.1:1", "5"), "t", journal, game="g", version="t"
    )
    with pytest.raises(PublishError, match="not connected"):
        await publisher.replay(1)
    with pytest.raises(ValueError, match="bad replay range"):
        await publisher.replay(5, 2)
    journal.append("table_status", {"state": "x"})
    assert publisher.backlog() == 1
    journal.close()


# -- the pipelined outbox ------------------------------------------------------------------


def _delivered_in_file(path: Path) -> dict[int, object]:
    """``seq -> delivered_at`` as a second, independent connection reads the journal file."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return dict(db.execute("SELECT seq, delivered_at FROM entries ORDER BY seq").fetchall())


def _round_seq(message: dict[str, Any]) -> int:
    """The seq a round snapshot was published for (its envelope's and its data's)."""
    assert message["seq"] == message["data"]["last_seq"]
    return int(message["seq"])


async def _publishing(publisher: Publisher, journal: Journal) -> None:
    """Wait until ``publisher`` is connected and its outbox has delivered one entry."""
    assert await publisher.wait_connected(5)
    journal.append("table_status", {"state": "ready", "detail": "first"})
    assert await publisher.flush(5)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_burst_goes_out_in_order_once_with_one_snapshot_per_step(
    mosquitto_session, journal, make_publisher, protocol
):
    broker = mosquitto_session
    table = f"burst-{protocol.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    sub = Subscriber(broker.host, broker.port, table)
    settings = settings_for(broker.url, protocol)
    async with (
        asyncio.timeout(30),
        sub.listening(),
        make_publisher(settings, table, journal) as publisher,
    ):
        await _publishing(publisher, journal)  # seq 1, no round: no snapshot
        # 50 entries of one round in one go: no await between the appends.
        journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
        for n in range(1, 50):
            card(journal, n)
        assert journal.last_seq == 51
        assert await publisher.flush(10)
        await sub.wait_until(lambda: any(_round_seq(m) == 51 for m in sub.on("round")))
        await sub.wait_until(lambda: len(sub.on("events")) >= 51)

    assert [e["seq"] for e in sub.on("events")] == list(range(1, 52)), "in order, once each"
    round_messages = [(m, retained) for t, m, retained, _ in sub.received if t.endswith("/round")]
    assert not any(retained for _, retained in round_messages), "all received live"
    live_snapshots = [m for m, _ in round_messages]
    assert 1 <= len(live_snapshots) < 50, "the burst's snapshots are coalesced"
    assert _round_seq(live_snapshots[-1]) == 51
    seqs = [_round_seq(m) for m in live_snapshots]
    assert seqs == sorted(set(seqs)), "snapshots go out in seq order, none twice"
    assert journal.undelivered() == []
    journal.close()

    # A consumer arriving afterwards gets the snapshot of the last entry, whole.
    late = Subscriber(broker.host, broker.port, table)
    async with asyncio.timeout(10), late.listening():
        await late.wait_until(lambda: late.on("round"))
    (retained,) = late.on("round")
    assert _round_seq(retained) == 51
    assert [c["card"] for c in retained["data"]["cards"]] == [f"C{n}" for n in range(1, 50)]


async def test_an_entry_is_handed_to_the_client_inside_the_append(
    mosquitto_session, journal, make_publisher
):
    """While the outbox is caught up, the journal listener itself hands the entry over."""
    broker = mosquitto_session
    table = f"take-{uuid.uuid4().hex[:6]}"
    settings = settings_for(broker.url, "5")
    async with asyncio.timeout(20), make_publisher(settings, table, journal) as publisher:
        await _publishing(publisher, journal)
        for n in range(1, 4):
            before = publisher.published_messages
            journal.append("table_status", {"state": "ready", "detail": str(n)})
            # No await since the append: the message is already with the MQTT client.
            assert publisher.published_messages == before + 1
            assert await publisher.flush(5)
        assert journal.undelivered() == []
    # Not publishing any more: an append hands nothing over.
    before = publisher.published_messages
    journal.append("table_status", {"state": "ready", "detail": "after"})
    assert publisher.published_messages == before


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_entries_are_marked_delivered_and_the_marks_outlive_the_publisher(
    mosquitto_session, tmp_path, journal, make_publisher, protocol
):
    """Acknowledged entries are marked in the file by the time the publisher has stopped,
    without anyone reading the journal (reads write noted marks) or closing it."""
    broker = mosquitto_session
    path = tmp_path / "j.sqlite"
    table = f"marks-{uuid.uuid4().hex[:6]}"
    settings = settings_for(broker.url, protocol)
    async with (
        asyncio.timeout(30),
        make_publisher(settings, table, journal, connect_within=5) as publisher,
    ):
        journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
        for n in range(1, 12):
            card(journal, n)
            if n % 4 == 0:
                await asyncio.sleep(0)  # some live, some in a burst
        async with asyncio.timeout(10):
            while publisher.delivered_entries < 12:  # counted on PUBACK; reads no journal
                await asyncio.sleep(0.01)
    assert journal.unwritten_marks == 0
    in_file = _delivered_in_file(path)
    assert list(in_file) == list(range(1, 13))
    assert None not in in_file.values()
    journal.close()
    with Journal.open(path) as again:
        assert again.undelivered() == []


async def test_flush_leaves_nothing_undelivered(mosquitto_session, journal, make_publisher):
    broker = mosquitto_session
    table = f"flush-{uuid.uuid4().hex[:6]}"
    settings = settings_for(broker.url, "5")
    async with (
        asyncio.timeout(30),
        make_publisher(settings, table, journal, connect_within=5) as publisher,
    ):
        for n in range(1, 30):
            card(journal, n)
            if n % 7 == 0:
                await asyncio.sleep(0)
        assert await publisher.flush(10)
        assert journal.undelivered() == []
        assert publisher.backlog() == 0
        assert publisher.delivered_entries == 29
    assert journal.undelivered() == []


async def test_delivery_marks_reach_the_file_by_themselves(
    mosquitto_session, tmp_path, journal, make_publisher
):
    """Once the outbox is idle, the noted marks are written without any read or append."""
    broker = mosquitto_session
    path = tmp_path / "j.sqlite"
    table = f"quiet-{uuid.uuid4().hex[:6]}"
    settings = settings_for(broker.url, "5")
    async with asyncio.timeout(20), make_publisher(settings, table, journal) as publisher:
        await _publishing(publisher, journal)
        for n in range(1, 6):
            card(journal, n)
        assert await publisher.wait_idle(5)
        async with asyncio.timeout(5):
            while None in _delivered_in_file(path).values():
                await asyncio.sleep(0.02)
        assert journal.unwritten_marks == 0


async def test_wait_idle_without_a_broker_is_false_at_once(journal, make_publisher):
    dead = f"mqtt://127.0.0.1:{free_port()}"
    publisher = Publisher(settings_for(dead, "5"), "idle-none", journal, game="g", version="1")
    async with asyncio.timeout(2.5):  # half the timeout wait_idle is given
        assert await publisher.wait_idle(5) is False  # not even running
    async with (
        asyncio.timeout(20),
        make_publisher(settings_for(dead, "5"), "idle-none", journal) as publisher,
    ):
        journal.append("table_status", {"state": "waiting for broker", "detail": ""})
        assert not await publisher.wait_connected(0.3)
        async with asyncio.timeout(2.5):
            assert await publisher.wait_idle(5) is False


async def test_wait_idle_is_true_once_everything_is_acknowledged(
    mosquitto_session, journal, make_publisher
):
    broker = mosquitto_session
    table = f"idle-{uuid.uuid4().hex[:6]}"
    settings = settings_for(broker.url, "5")
    async with asyncio.timeout(20), make_publisher(settings, table, journal) as publisher:
        await _publishing(publisher, journal)
        journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
        for n in range(1, 5):
            card(journal, n)
        assert publisher.delivered_entries == 1, "no PUBACK can have come without an await"
        assert await publisher.wait_idle(5) is True
        # Idle means acknowledged: every entry is delivered by then.
        assert publisher.delivered_entries == 6
        assert journal.undelivered() == []
        assert await publisher.wait_idle(5) is True  # and stays so while nothing comes
    async with asyncio.timeout(2.5):
        assert await publisher.wait_idle(5) is False  # stopped: not connected


async def test_wait_idle_times_out_while_the_broker_does_not_answer(
    mosquitto, journal, make_publisher
):
    """A frozen broker (SIGSTOP) keeps a PUBACK pending: ``False`` once the timeout passed."""
    table = f"frozen-{uuid.uuid4().hex[:6]}"
    settings = settings_for(mosquitto.url, "5").model_copy(update={"publish_timeout": 5.0})
    async with asyncio.timeout(30), make_publisher(settings, table, journal) as publisher:
        await _publishing(publisher, journal)
        assert mosquitto.process is not None
        mosquitto.process.send_signal(signal.SIGSTOP)
        try:
            journal.append("table_status", {"state": "ready", "detail": "frozen"})
            loop = asyncio.get_running_loop()
            started = loop.time()
            assert await publisher.wait_idle(0.3) is False
            assert loop.time() - started >= 0.3, "it returned because the timeout passed"
            assert publisher.connected.is_set()
            assert [e.seq for e in journal.undelivered()] == [2]
        finally:
            mosquitto.process.send_signal(signal.SIGCONT)
        assert await publisher.wait_idle(4) is True
        assert journal.undelivered() == []


async def test_mqtt_311_pipelined_outbox_end_to_end(
    mosquitto_session, tmp_path, journal, make_publisher
):
    """MQTT 3.1.1: live entries and a burst arrive in order and are marked delivered."""
    broker = mosquitto_session
    table = f"v311-{uuid.uuid4().hex[:6]}"
    path = tmp_path / "j.sqlite"
    sub = Subscriber(broker.host, broker.port, table)
    settings = settings_for(broker.url, "3.1.1")
    async with (
        asyncio.timeout(30),
        sub.listening(),
        make_publisher(settings, table, journal) as publisher,
    ):
        await _publishing(publisher, journal)
        journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
        for n in range(1, 6):  # live, one at a time
            card(journal, n)
            assert await publisher.wait_idle(5)
        for n in range(6, 31):  # a burst
            card(journal, n)
        assert await publisher.flush(10)
        assert journal.undelivered() == []
        await sub.wait_until(lambda: len(sub.on("events")) >= 32)
        await sub.wait_until(lambda: any(_round_seq(m) == 32 for m in sub.on("round")))
    assert [e["seq"] for e in sub.on("events")] == list(range(1, 33))
    assert {qos for topic, _, _, qos in sub.received if topic.endswith("/events")} == {1}
    assert None not in _delivered_in_file(path).values()
