"""The consumer on the SQLite store: gaps kept in memory, a locked file waited out.

PostgreSQL keeps gaps in the database (``GapBook``, ``test_archive_gaps.py``); an SQLite
archive is one process beside one table, so the consumer follows each table's ``seq`` as it
stores (``GapTracker``) and records each gap's life in the file's ``gaps`` and ``alerts``.
A write the file refuses for its own sake (locked by another writer) is held and tried again,
as a lost PostgreSQL connection is (``DbLink.retry``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiomqtt

from controller.archive.backend import open_store
from controller.archive.config import ArchiveSettings
from controller.archive.consumer import ArchiveConsumer
from controller.archive.ingest import TableKeys
from controller.archive.sqlite_store import SqliteArchiveStore

KEYS = TableKeys({"s1": None})
AT = datetime(2026, 11, 25, 7, 0, tzinfo=UTC)


def _message(seq: int, topic: str = "events") -> tuple[str, bytes]:
    body: dict[str, Any] = {
        "schema_version": "2",
        "table": "s1",
        "round": "s1-000001",
        "seq": seq,
        "session": 1,
        "kind": "card_dealt",
        "at": (AT + timedelta(seconds=seq)).isoformat(),
        "delayed": False,
        "data": {"slot": f"x{seq}", "card": None},
    }
    return (f"tables/s1/{topic}", json.dumps(body).encode())


def _settings(path: Path, gaps: dict[str, float] | None = None, **database: Any) -> ArchiveSettings:
    return ArchiveSettings.model_validate(
        {
            "database": {"url": f"sqlite:///{path}", **database},
            # No broker answers here: a replay request fails fast and is logged.
            "mqtt": {"urls": ["mqtt://127.0.0.1:1"]},
            "gaps": {
                "grace_seconds": 1.0,
                "timeout_seconds": 5.0,
                "replay_timeout_seconds": 0.5,
                **(gaps or {}),
            },
        }
    )


def _rows(path: Path, query: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(query).fetchall()


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_sqlite_gaps_are_tracked_replayed_alerted_and_filled(tmp_path):
    path = tmp_path / "archive.sqlite"
    store = await open_store(f"sqlite:///{path}")
    clock = _Clock()
    consumer = ArchiveConsumer(_settings(path), store, KEYS, clock=clock)
    assert not consumer.shared_gaps and consumer.gap_db is None
    try:
        await consumer.load_state()
        assert await consumer.store_batch([_message(1), _message(2)]) == ["new", "new"]
        # A jump on `results` is no gap (it carries some seqs only): a result's copy there
        # may come before its `events` copy.
        assert await consumer.store_batch([_message(6, "results")]) == ["new"]
        assert _rows(path, "SELECT count(*) FROM gaps") == [(0,)]
        # Its `events` copy (a duplicate) shows the jump.
        assert await consumer.store_batch([_message(6)]) == ["duplicate"]
        assert _rows(path, "SELECT from_seq, to_seq FROM gaps") == [(3, 5)]
        assert consumer.counts["gap_opened"] == 1
        await consumer.check_gaps()
        assert consumer.open_gaps == 1 and consumer.counts["replay_requested"] == 0
        clock.now += 1.5  # past the grace: the replay is asked (no table answers here)
        await consumer.check_gaps()
        assert consumer.counts["replay_requested"] == 1
        assert _rows(path, "SELECT replay_requested_at IS NOT NULL FROM gaps") == [(1,)]
        clock.now += 4.0  # past the timeout: alerted once, the missing seqs named
        await consumer.check_gaps()
        await consumer.check_gaps()
        assert consumer.counts["gap_alert"] == 1
        assert _rows(path, "SELECT detail FROM alerts") == [
            (
                "seq 3..5 of table s1 not filled within 5.0 s: 3 missing (3-5); "
                "a replay re-sends results only",
            )
        ]
        # Filled late, by any copy: stamped, no longer open.
        await consumer.store_batch([_message(3, "results"), _message(4), _message(5)])
        assert consumer.counts["gap_filled"] == 1
        assert _rows(path, "SELECT filled_at IS NOT NULL FROM gaps") == [(1,)]
        await consumer.check_gaps()
        assert consumer.open_gaps == 0
    finally:
        await asyncio.gather(*consumer._replays, return_exceptions=True)
        await store.close()
    # A restart reads the highest seq: no false gap.
    store = await open_store(f"sqlite:///{path}")
    again = ArchiveConsumer(_settings(path), store, KEYS, clock=clock)
    try:
        await again.load_state()
        assert await again.store_batch([_message(7)]) == ["new"]
        assert again.counts["gap_opened"] == 0
    finally:
        await store.close()


async def test_an_unanswered_replay_is_asked_again_until_the_gap_is_alerted(tmp_path):
    path = tmp_path / "archive.sqlite"
    store = await open_store(f"sqlite:///{path}")
    clock = _Clock()
    settings = _settings(path, {"replay_every_seconds": 2.0})
    consumer = ArchiveConsumer(settings, store, KEYS, clock=clock)
    try:
        await consumer.load_state()
        await consumer.store_batch([_message(1), _message(4)])  # gap 2-3
        stamps = []
        for step in (1.5, 1.0, 1.0, 1.0, 1.0, 1.0):  # at 101.5, 102.5 ... 106.5
            clock.now += step
            await consumer.check_gaps()
            stamps.append(consumer.counts["replay_requested"])
        # Asked at 101.5 (past the grace), again at 103.5 and 105.5 (every 2 s); alerted
        # at 105.5 (past the 5 s timeout, checked after the replays): not asked at 107.5.
        assert stamps == [1, 1, 2, 2, 3, 3] and consumer.counts["gap_alert"] == 1
        clock.now += 5.0
        await consumer.check_gaps()
        assert consumer.counts["replay_requested"] == 3
        assert _rows(path, "SELECT replay_requested_at IS NOT NULL FROM gaps") == [(1,)]
    finally:
        await asyncio.gather(*consumer._replays, return_exceptions=True)
        await store.close()


async def test_a_locked_sqlite_file_is_waited_out_and_nothing_is_lost(tmp_path):
    path = tmp_path / "archive.sqlite"
    store = await SqliteArchiveStore.open(f"sqlite:///{path}")
    settings = _settings(path, reconnect_min_seconds=0.05, reconnect_max_seconds=0.2)
    consumer = ArchiveConsumer(settings, store, KEYS)
    # The store waits 5 s for a busy file; here it gives up at once, so the loss shows.
    await store._run(store.conn.execute, "PRAGMA busy_timeout = 20")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another writer holds the file
    try:
        storing = asyncio.create_task(consumer.store_batch([_message(1), _message(2)]))
        async with asyncio.timeout(10):
            while consumer.db.losses == 0:
                await asyncio.sleep(0.01)
        assert not storing.done()  # held, not dropped
        other.execute("ROLLBACK")
        async with asyncio.timeout(10):
            assert await storing == ["new", "new"]
    finally:
        other.close()
        await store.close()
    assert consumer.db.losses == 1 and consumer.db.reconnects == 1
    assert _rows(path, "SELECT seq FROM events ORDER BY seq") == [(1,), (2,)]


async def test_only_its_own_tables_even_on_a_session_that_held_every_table(mosquitto, tmp_path):
    path = tmp_path / "archive.sqlite"
    settings = ArchiveSettings.model_validate(
        {
            "database": {"url": f"sqlite:///{path}"},
            "mqtt": {"urls": [mosquitto.url], "client_id": "archive-own", "protocol": "3.1.1"},
        }
    )
    # The persistent session as an earlier run left it: subscribed to every table.
    async with aiomqtt.Client(
        mosquitto.host,
        mosquitto.port,
        identifier="archive-own",
        protocol=aiomqtt.ProtocolVersion.V311,
        clean_session=False,
    ) as old:
        await old.subscribe("tables/+/status", qos=1)
    store = await open_store(settings.database.url)
    consumer = ArchiveConsumer(settings, store, KEYS, only_known_tables=True)
    task = asyncio.create_task(consumer.run(), name="archive")
    try:
        async with asyncio.timeout(10):
            await consumer.subscribed.wait()
        async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
            for table in ("other-9", "s1"):  # in this order: s1's arrives after other-9's would
                status = {"schema_version": "2", "table": table, "state": "online", "session": 1}
                await client.publish(f"tables/{table}/status", json.dumps(status), qos=1)
        async with asyncio.timeout(10):
            while consumer.counts["status"] == 0:
                await asyncio.sleep(0.02)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await store.close()
    assert dict(consumer.counts) == {"status": 1}
    assert _rows(path, "SELECT count(*) FROM rejected") == [(0,)]


async def test_with_no_gap_open_the_gap_loop_sleeps_until_one_opens(tmp_path):
    """SQLite's gaps are the consumer's own tracker's: none open, no check wakes it up.

    Beside a table (``make run``) a check every 2 s found nothing nearly always; the loop now
    checks once, then waits for a gap to open, and checks every ``check_seconds`` again while
    one is open (docs/performance.md, "The demo").
    """
    path = tmp_path / "archive.sqlite"
    store = await open_store(f"sqlite:///{path}")
    consumer = ArchiveConsumer(_settings(path, {"check_seconds": 0.05}), store, KEYS)
    checks: list[int] = []
    check = consumer.check_gaps

    async def counted() -> None:
        checks.append(len(consumer.gaps.open))
        await check()

    consumer.check_gaps = counted  # type: ignore[method-assign]
    try:
        await consumer.load_state()
        loop = asyncio.create_task(consumer._gap_loop())
        await asyncio.sleep(0.5)  # ten periods: one check, then asleep
        assert checks == [0]
        await consumer.store_batch([_message(1), _message(4)])  # gap 2-3 opens
        await asyncio.sleep(0.5)
        assert len(checks) >= 5 and all(checks[1:]), checks  # checked while it is open
        await consumer.store_batch([_message(2), _message(3)])  # filled
        await asyncio.sleep(0.2)
        settled = len(checks)
        await asyncio.sleep(0.5)
        assert len(checks) == settled and consumer.open_gaps == 0  # asleep again
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
    finally:
        await asyncio.gather(*consumer._replays, return_exceptions=True)
        await store.close()
