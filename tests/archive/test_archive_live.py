"""The archive against real parts: simulated tables on ptys, a real Mosquitto, real PostgreSQL.

Every entry of every table arrives in PostgreSQL exactly once and matches the table's journal
entry for entry; a duplicate is absorbed; a bad signature, a malformed message, an unknown
schema version and an unknown table are stored as rejected with their reasons; a gap is
replayed and, what a replay cannot bring back, alerted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiomqtt
import psycopg
import pytest

from controller.app import run_table
from controller.archive.config import ArchiveSettings
from controller.archive.consumer import ArchiveConsumer
from controller.archive.ingest import TableKeys
from controller.archive.store import ArchiveStore
from controller.journal import Journal
from controller.settings import load_settings
from controller.signing import generate_keypair
from simulators.table import Simulation, simulated_scanner

pytestmark = pytest.mark.hil

TABLES = ("arc-1", "arc-2", "arc-3")


def _settings(
    db: str, broker_url: str, keys: dict[str, Path | None], **gaps: Any
) -> ArchiveSettings:
    return ArchiveSettings.model_validate(
        {
            "database": {"url": db},
            "mqtt": {
                "urls": [broker_url],
                "client_id": "archive-test",
                "reconnect_min_seconds": 0.05,
                "reconnect_max_seconds": 0.3,
            },
            "gaps": {"grace_seconds": 0.3, "timeout_seconds": 30, **gaps},
            "tables": {t: {"public_key": k} for t, k in keys.items()},
        }
    )


@contextlib.asynccontextmanager
async def running_archive(settings: ArchiveSettings) -> AsyncIterator[ArchiveConsumer]:
    store = await ArchiveStore.open(settings.database.url)
    keys = TableKeys(settings.public_keys(), settings.mqtt.topic_prefix)
    consumer = ArchiveConsumer(settings, store, keys)
    task = asyncio.create_task(consumer.run(), name="archive")
    try:
        async with asyncio.timeout(10):
            await consumer.subscribed.wait()
        yield consumer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await store.close()


async def _watermarks_reach(url: str, last: dict[str, int]) -> None:
    """Wait (bounded) until the gap scans carry each table's watermark to its last seq.

    A scan moves it once the last entries are past their grace: an archive that stopped
    right after them leaves that to the next one.
    """
    marks: dict[str, int] = {}
    async with asyncio.timeout(10):
        while marks != last:
            await asyncio.sleep(0.05)
            marks = dict(await _rows(url, "SELECT table_id, scanned_to FROM gap_watermarks"))


async def run_tables(
    broker_url: str, tmp: Path, private: dict[str, Path], rounds: int, tables=TABLES, **extra: Any
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        tasks = []
        for n, table in enumerate(tables):
            url = await stack.enter_async_context(
                simulated_scanner("teen-patti-20-20", Simulation(seed=10 + n, deal_delay=0.0))
            )
            settings = load_settings(
                None,
                table_id=table,
                device={"url": url},
                mqtt={"urls": [broker_url]},
                journal={"path": tmp / f"{table}.sqlite"},
                rounds={"betting_seconds": 0.1, "pause_seconds": extra.get("pause", 0.1)},
                signing={"key_file": private[table], "key_id": f"{table}-key"},
            )
            tasks.append(asyncio.create_task(run_table(settings, rounds=rounds), name=table))
        async with asyncio.timeout(60):
            await asyncio.gather(*tasks)


def _keys(tmp: Path) -> tuple[dict[str, Path], dict[str, Path | None]]:
    private: dict[str, Path] = {}
    public: dict[str, Path | None] = {}
    for table in TABLES:
        private[table], public[table] = generate_keypair(tmp / "keys", f"{table}-key")
    return private, public


async def _rows(db: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(db) as conn:
        cursor = await conn.execute(query.encode(), params)
        return await cursor.fetchall()


async def _wait_rows(db: str, query: str, count: int, seconds: float = 15.0) -> None:
    async with asyncio.timeout(seconds):
        while (await _rows(db, query))[0][0] < count:
            await asyncio.sleep(0.05)


def _journal(path: Path) -> list[Any]:
    journal = Journal.open_readonly(path)
    try:
        return list(journal.entries())
    finally:
        journal.close()


async def _publish(broker: Any, topic: str, payload: bytes) -> None:
    async with aiomqtt.Client(broker.host, broker.port, identifier="archive-test-pub") as client:
        await client.publish(topic, payload, qos=1)


async def test_tables_arrive_exactly_once_matching_their_journals(mosquitto, archive_db, tmp_path):
    private, public = _keys(tmp_path)
    settings = _settings(archive_db, mosquitto.url, public)
    async with running_archive(settings) as consumer:
        await run_tables(mosquitto.url, tmp_path, private, rounds=3)
        journals = {t: _journal(tmp_path / f"{t}.sqlite") for t in TABLES}
        total = sum(len(entries) for entries in journals.values())
        await _wait_rows(archive_db, "SELECT count(*) FROM events", total)

        for table, entries in journals.items():
            rows = await _rows(
                archive_db,
                "SELECT seq, session, round_id, kind, at, envelope->'data', signed FROM events"
                " WHERE table_id = %s ORDER BY seq",
                table,
            )
            assert [(r[0], r[1], r[2], r[3], r[4]) for r in rows] == [
                (e.seq, e.session, e.round_id, e.kind, e.happened_at) for e in entries
            ]
            for row, entry in zip(rows, entries, strict=True):
                if entry.kind in {"round_result", "round_voided", "round_opened"}:
                    assert row[5] == entry.body, (table, entry.seq)
                assert row[6] == (entry.kind in {"round_result", "round_voided"})
            results = [e for e in entries if e.kind == "round_result"]
            rounds = await _rows(
                archive_db,
                "SELECT round_id, state, outcome, result_seq, bets FROM rounds"
                " WHERE table_id = %s AND outcome = 'result' ORDER BY result_seq",
                table,
            )
            assert [(r[0], r[2], r[3], r[4]) for r in rounds] == [
                (e.round_id, "result", e.seq, e.body["bets"]) for e in results
            ]
            assert len(rounds) == 3
            assert {r[1] for r in rounds} == {"settled"}
        # Every result came twice (events and results): the second copy was absorbed.
        assert consumer.counts["duplicate"] >= 9
        assert consumer.counts["new"] == total

        # A QoS 1 redelivery of a stored result: absorbed, nothing added.
        (envelope,) = (
            await _rows(
                archive_db,
                "SELECT envelope FROM events WHERE table_id = 'arc-1' AND kind = 'round_result'"
                " ORDER BY seq LIMIT 1",
            )
        )[0]
        before = consumer.counts["duplicate"]
        await _publish(mosquitto, "tables/arc-1/results", json.dumps(envelope).encode())
        async with asyncio.timeout(10):
            while consumer.counts["duplicate"] == before:
                await asyncio.sleep(0.02)
        assert (await _rows(archive_db, "SELECT count(*) FROM events"))[0][0] == total

        # A result whose content was changed after signing: rejected, never a round.
        forged = dict(envelope, seq=99_999, data={**envelope["data"], "winner": "forged"})
        await _publish(mosquitto, "tables/arc-1/results", json.dumps(forged).encode())
        # Garbage, a version we do not read, a table we do not know.
        await _publish(mosquitto, "tables/arc-2/events", b"{not json")
        await _publish(
            mosquitto,
            "tables/arc-2/events",
            json.dumps({**envelope, "schema_version": "4"}).encode(),
        )
        await _publish(mosquitto, "tables/stranger/events", json.dumps(envelope).encode())
        await _wait_rows(archive_db, "SELECT count(*) FROM rejected", 4)
        rejected = await _rows(
            archive_db, "SELECT category, table_id, reason FROM rejected ORDER BY id"
        )
        by_category = {row[0]: row for row in rejected}
        assert set(by_category) == {"signature", "not_json", "schema_version", "unknown_table"}
        assert "does not match" in by_category["signature"][2]
        assert by_category["signature"][1] == "arc-1"
        assert "not JSON" in by_category["not_json"][2]
        assert "'4'" in by_category["schema_version"][2]
        assert "stranger" in by_category["unknown_table"][2]
        assert (await _rows(archive_db, "SELECT count(*) FROM events"))[0][0] == total
        assert (
            await _rows(
                archive_db, "SELECT count(*) FROM rounds WHERE result->>'winner' = 'forged'"
            )
        )[0][0] == 0
        # Statuses are kept (births and clean stops), with the chain head.
        statuses = await _rows(archive_db, "SELECT DISTINCT table_id, state FROM table_status")
        assert {(t, "online") for t in TABLES} <= set(statuses)

    # A restart of the archive: nothing new, no false gap (the gap state is in the database).
    async with running_archive(settings) as again:
        await _watermarks_reach(archive_db, {t: journals[t][-1].seq for t in TABLES})
        assert again.counts["gap_opened"] == 0
        assert (await _rows(archive_db, "SELECT count(*) FROM gaps"))[0][0] == 0


async def test_a_gap_is_replayed_and_what_a_replay_cannot_bring_is_alerted(
    mosquitto, archive_db, tmp_path
):
    private, public = _keys(tmp_path)
    settings = _settings(
        archive_db,
        mosquitto.url,
        {"arc-1": public["arc-1"]},
        grace_seconds=0.2,
        timeout_seconds=2.0,
    )
    journal_path = tmp_path / "arc-1.sqlite"
    tables = asyncio.create_task(
        run_tables(mosquitto.url, tmp_path, private, rounds=4, tables=("arc-1",), pause=0.8)
    )
    try:
        # The archive comes up after the first round's result: seq 1.. went by unseen.
        async with asyncio.timeout(20):
            while not (
                journal_path.exists()
                and any(e.kind == "round_result" for e in _journal(journal_path))
            ):
                await asyncio.sleep(0.05)
        first_result = next(e for e in _journal(journal_path) if e.kind == "round_result")
        async with running_archive(settings) as consumer:
            await _wait_rows(archive_db, "SELECT count(*) FROM alerts", 1, seconds=15)
            await tables
            entries = _journal(journal_path)
            gap = await _rows(
                archive_db,
                "SELECT from_seq, to_seq, replay_requested_at IS NOT NULL, alerted_at IS NOT NULL,"
                " filled_at, missing FROM gaps",
            )
            assert len(gap) == 1
            lo, hi, requested, alerted, filled_at, missing = gap[0]
            assert lo == 1 and hi >= first_result.seq
            assert requested and alerted and filled_at is None
            # The replay brought the result back; the other entries of the gap are missing.
            replayed = await _rows(
                archive_db,
                "SELECT seq, replayed, signed FROM events WHERE table_id = 'arc-1'"
                " AND kind = 'round_result' AND seq <= %s",
                hi,
            )
            assert (first_result.seq, True, True) in replayed
            assert first_result.seq not in missing
            assert missing == [
                e.seq
                for e in entries
                if e.seq <= hi and e.kind not in {"round_result", "round_voided"}
            ]
            (detail,) = (await _rows(archive_db, "SELECT detail FROM alerts"))[0]
            assert f"seq 1..{hi} of table arc-1 not filled" in detail
            assert consumer.counts["gap_alert"] == 1
            # Everything after the gap arrived, once.
            await _wait_rows(
                archive_db,
                f"SELECT count(*) FROM events WHERE seq > {hi}",
                len([e for e in entries if e.seq > hi]),
            )
            rows = await _rows(
                archive_db,
                "SELECT seq FROM events WHERE table_id = 'arc-1' AND seq > %s ORDER BY seq",
                hi,
            )
            assert [r[0] for r in rows] == [e.seq for e in entries if e.seq > hi]
    finally:
        tables.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tables
