"""The archive's database side on a real PostgreSQL: migrations, partitions, idempotency."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.archive import migrate as migrate_module
from controller.archive.errors import ArchiveError
from controller.archive.ingest import Entry, TableKeys, classify
from controller.archive.migrate import Migration, migrate, migrations
from controller.archive.store import ArchiveStore
from controller.signing import Signer

SIGNER = Signer(Ed25519PrivateKey.generate(), "k1")
KEYS = TableKeys({"t1": SIGNER.public_key})


def envelope(
    seq: int, kind: str, at: str, data: dict[str, Any], round_id: str | None = "t1-000001"
) -> dict[str, Any]:
    body = {
        "schema_version": "2",
        "table": "t1",
        "round": round_id,
        "seq": seq,
        "session": 1,
        "kind": kind,
        "at": at,
        "delayed": False,
        "data": data,
    }
    if kind in {"round_result", "round_voided"}:
        body["chain_head"] = {"seq": seq, "hash": "0" * 64}
        body = SIGNER.sign(body)
    return body


def entry(env: dict[str, Any], topic: str = "tables/t1/events") -> Entry:
    found = classify(topic, json.dumps(env).encode(), KEYS)
    assert isinstance(found, Entry), found
    return found


async def _one(db: str, query: str, *params: object) -> object:
    async with await psycopg.AsyncConnection.connect(db) as conn:
        cursor = await conn.execute(query.encode(), params)
        row = await cursor.fetchone()
        return None if row is None else row[0]


async def test_migrations_apply_once_and_record_their_version(archive_db):
    versions = [m.version for m in migrations()]
    assert versions == list(range(1, len(versions) + 1))
    async with await psycopg.AsyncConnection.connect(archive_db, autocommit=True) as conn:
        assert await migrate(conn) == versions
        assert await migrate(conn) == []
    assert await _one(archive_db, "SELECT name FROM archive_migrations WHERE version = 1") == (
        "initial"
    )


async def test_instances_starting_together_migrate_once(archive_db):
    async def one() -> list[int]:
        async with await psycopg.AsyncConnection.connect(archive_db, autocommit=True) as conn:
            return await migrate(conn)

    results = await asyncio.gather(one(), one(), one())
    # Each migration applied by exactly one of them (the lock is taken per migration, so
    # one instance may apply the first and another the next).
    every = [m.version for m in migrations()]
    assert sorted(version for applied in results for version in applied) == every


async def test_a_failing_migration_leaves_nothing_behind(archive_db, monkeypatch):
    shipped = migrations()
    latest = shipped[-1].version
    broken = Migration(
        latest + 1, "broken", "CREATE TABLE half_done (x int); SELECT no_such_function();"
    )
    monkeypatch.setattr(migrate_module, "migrations", lambda: [*shipped, broken])
    async with await psycopg.AsyncConnection.connect(archive_db, autocommit=True) as conn:
        with pytest.raises(
            ArchiveError, match=f"migration {latest + 1:04d}_broken failed"
        ) as caught:
            await migrate(conn)
    assert caught.value.context["version"] == latest + 1
    assert await _one(archive_db, "SELECT to_regclass('half_done')") is None
    assert await _one(archive_db, "SELECT max(version) FROM archive_migrations") == latest


async def test_the_key_reordering_keeps_an_archive_s_keys_and_their_uniqueness(
    archive_db, monkeypatch
):
    """0003 on an archive written under 0001-0002: the keys stay, one index serves by seq."""
    shipped = migrations()
    monkeypatch.setattr(migrate_module, "migrations", lambda: [m for m in shipped if m.version < 3])
    store = await ArchiveStore.open(archive_db)
    at = "2026-11-25T21:14:00.000000Z"
    first = [entry(envelope(seq, "betting_closed", at, {})) for seq in (1, 2, 3)]
    try:
        # The keys as that schema's store wrote them (today's store writes later columns).
        for e in first:
            await store.conn.execute(
                "INSERT INTO entry_keys (table_id, session, seq, at, digest)"
                " VALUES (%s, %s, %s, %s, %s)",
                (e.table, e.session, e.seq, e.at, e.digest),
            )
    finally:
        await store.close()
    monkeypatch.setattr(migrate_module, "migrations", lambda: shipped)
    async with await psycopg.AsyncConnection.connect(archive_db, autocommit=True) as conn:
        assert await migrate(conn) == [m.version for m in shipped if m.version >= 3]
        cursor = await conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'entry_keys'"
        )
        indexes: dict[str, str] = dict(await cursor.fetchall())
    assert list(indexes) == ["entry_keys_pkey"]
    assert "(table_id, seq, session)" in indexes["entry_keys_pkey"]
    store = await ArchiveStore.open(archive_db)
    again = entry(envelope(2, "betting_closed", at, {}))
    other = entry(envelope(2, "betting_closed", at, {"late": True}))
    try:
        outcomes = await store.store_entries(
            [again, other, entry(envelope(4, "round_halted", at, {}))]
        )
    finally:
        await store.close()
    assert outcomes == ["duplicate", "conflict", "new"]
    rows = await _one(archive_db, "SELECT array_agg(seq ORDER BY seq) FROM entry_keys")
    assert rows == [1, 2, 3, 4]


async def test_events_go_to_monthly_partitions_made_on_demand(archive_db):
    store = await ArchiveStore.open(archive_db)
    try:
        times = [
            "2026-01-31T23:59:59.999999Z",
            "2026-02-01T00:00:00.000000Z",
            "2027-12-05T10:00:00Z",
        ]
        for seq, at in enumerate(times, start=1):
            assert (
                await store.store_entry(entry(envelope(seq, "table_status", at, {}, None))) == "new"
            )
    finally:
        await store.close()
    async with await psycopg.AsyncConnection.connect(archive_db) as conn:
        cursor = await conn.execute("SELECT seq, tableoid::regclass::text FROM events ORDER BY seq")
        assert await cursor.fetchall() == [
            (1, "events_2026_01"),
            (2, "events_2026_02"),
            (3, "events_2027_12"),
        ]


async def test_two_writers_making_one_month_s_partition_at_once_both_go_on(archive_db):
    """The second writer waits for the first one's partition, then uses it (no error).

    Two instances storing their first batch of a new month at the same moment: the one that
    makes the partition holds the name's lock until it commits; the other one, waiting on
    that lock, must then find the partition rather than make it again ("already exists"
    failed its whole batch, which then went one entry at a time).
    """
    await (await ArchiveStore.open(archive_db)).close()  # migrated
    moment = datetime(2027, 3, 9, 12, 0, tzinfo=UTC)
    async with (
        await psycopg.AsyncConnection.connect(archive_db) as first,
        await psycopg.AsyncConnection.connect(archive_db) as second,
        await psycopg.AsyncConnection.connect(archive_db, autocommit=True) as observer,
    ):
        await first.execute("SELECT archive_events_partition(%s)", (moment,))
        waiting = asyncio.create_task(
            second.execute("SELECT archive_events_partition(%s)", (moment,))
        )
        async with asyncio.timeout(10):
            while True:  # the second writer is waiting for the name's lock
                cursor = await observer.execute(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                )
                row = await cursor.fetchone()
                if row and row[0]:
                    break
                await asyncio.sleep(0.02)
        assert not waiting.done()
        await first.commit()
        cursor = await asyncio.wait_for(waiting, 10)
        assert await cursor.fetchone() == ("events_2027_03",)
        await second.commit()


async def test_duplicates_are_absorbed_and_conflicts_rejected_and_rounds_fold_in_any_order(
    archive_db,
):
    at = datetime(2026, 11, 25, 7, 0, tzinfo=UTC)

    def t(n: int) -> str:
        return at.replace(second=n).isoformat().replace("+00:00", "Z")

    opened = envelope(1, "round_opened", t(1), {"round_no": 1, "game": "teen-patti-20-20"})
    closed = envelope(2, "betting_closed", t(2), {})
    bets = [{"bet": "player_a", "outcome": "win", "payout": "1.98", "reason": "A"}]
    result = envelope(
        3,
        "round_result",
        t(3),
        {"game": "teen-patti-20-20", "winner": "A", "cards": {}, "hands": {}, "bets": bets},
    )
    store = await ArchiveStore.open(archive_db)
    try:
        # The result first (it came on `results` before `events`), then the rest.
        assert await store.store_entry(entry(result, "tables/t1/results")) == "new"
        assert await store.store_entry(entry(opened)) == "new"
        assert await store.store_entry(entry(closed)) == "new"
        # The same result again, flagged as a replay (other delivery flags, same content).
        replayed = SIGNER.sign({**result, "delayed": True, "replayed": True})
        assert await store.store_entry(entry(replayed)) == "duplicate"
        # Same key, other content: kept as rejected, the archived entry is untouched.
        other = envelope(2, "betting_closed", t(9), {})
        assert await store.store_entry(entry(other)) == "conflict"
    finally:
        await store.close()
    assert await _one(archive_db, "SELECT count(*) FROM events") == 3
    assert await _one(archive_db, "SELECT category FROM rejected") == "conflict"
    async with await psycopg.AsyncConnection.connect(archive_db) as conn:
        cursor = await conn.execute(
            "SELECT round_no, game, state, outcome, result_seq, bets, result->>'winner', entries"
            " FROM rounds WHERE table_id = 't1' AND round_id = 't1-000001'"
        )
        assert await cursor.fetchone() == (
            1,
            "teen-patti-20-20",
            "settled",
            "result",
            3,
            bets,
            "A",
            3,
        )


async def test_what_the_database_refuses_is_rejected_and_the_consumer_goes_on(archive_db):
    from controller.archive.config import ArchiveSettings
    from controller.archive.consumer import ArchiveConsumer

    store = await ArchiveStore.open(archive_db)
    settings = ArchiveSettings.model_validate({"database": {"url": archive_db}})
    consumer = ArchiveConsumer(settings, store, KEYS)
    try:
        # jsonb cannot hold "\u0000": the status and the round fold are refused by the server.
        status = {"schema_version": "2", "state": "online\u0000", "table": "t1"}
        assert await consumer.handle("tables/t1/status", json.dumps(status).encode()) == (
            "rejected:store_error"
        )
        bad = envelope(1, "round_opened", "2026-11-25T07:00:00Z", {"game": "x\u0000"})
        assert await consumer.handle("tables/t1/events", json.dumps(bad).encode()) == (
            "rejected:store_error"
        )
        good = envelope(2, "betting_closed", "2026-11-25T07:00:01Z", {})
        assert await consumer.handle("tables/t1/events", json.dumps(good).encode()) == "new"
    finally:
        await store.close()
    assert (
        await _one(archive_db, "SELECT count(*) FROM rejected WHERE category = 'store_error'") == 2
    )
    assert await _one(archive_db, "SELECT count(*) FROM events") == 1


async def test_a_batch_keeps_the_one_by_one_outcomes_and_folds_each_round_once(archive_db):
    at = "2026-11-25T07:00:0{}Z"
    opened = envelope(1, "round_opened", at.format(1), {"round_no": 1, "game": "teen-patti-20-20"})
    closed = envelope(2, "betting_closed", at.format(2), {})
    voided = envelope(3, "round_voided", at.format(3), {"reason": "dealer error", "refunds": []})
    other_closed = envelope(2, "betting_closed", at.format(9), {})
    table_entry = envelope(4, "table_status", at.format(4), {}, None)
    store = await ArchiveStore.open(archive_db)
    try:
        assert await store.store_entry(entry(opened)) == "new"
        outcomes = await store.store_entries(
            [
                entry(opened),  # archived before: duplicate
                entry(voided, "tables/t1/results"),
                entry(closed),
                entry(voided),  # its second copy in the same batch: duplicate
                entry(other_closed),  # same key as `closed`, in the same batch: conflict
                entry(table_entry),
            ]
        )
        assert outcomes == ["duplicate", "new", "new", "duplicate", "conflict", "new"]
        assert await store.store_entries([]) == []
    finally:
        await store.close()
    assert await _one(archive_db, "SELECT count(*) FROM events") == 4
    assert await _one(archive_db, "SELECT count(*) FROM entry_keys") == 4
    assert await _one(archive_db, "SELECT at FROM events WHERE seq = 2") == datetime(
        2026, 11, 25, 7, 0, 2, tzinfo=UTC
    )
    assert await _one(archive_db, "SELECT count(*) FROM rejected WHERE category = 'conflict'") == 1
    async with await psycopg.AsyncConnection.connect(archive_db) as conn:
        cursor = await conn.execute("SELECT round_id, outcome, entries, result_seq FROM rounds")
        assert await cursor.fetchall() == [("t1-000001", "void", 3, 3)]


async def test_a_refused_message_in_a_batch_is_rejected_alone(archive_db):
    from controller.archive.config import ArchiveSettings
    from controller.archive.consumer import ArchiveConsumer

    store = await ArchiveStore.open(archive_db)
    settings = ArchiveSettings.model_validate({"database": {"url": archive_db}})
    consumer = ArchiveConsumer(settings, store, KEYS)
    messages = [
        envelope(1, "round_opened", "2026-11-25T07:00:00Z", {"round_no": 1, "game": "g"}),
        envelope(2, "betting_closed", "2026-11-25T07:00:01Z", {"note": "x\u0000"}),
        envelope(3, "betting_closed", "2026-11-25T07:00:02Z", {}),
    ]
    try:
        outcomes = await consumer.handle_batch(
            [("tables/t1/events", json.dumps(m).encode()) for m in messages]
            + [("tables/t1/events", b"not json")]
        )
    finally:
        await store.close()
    assert outcomes == ["new", "rejected:store_error", "new", "rejected:not_json"]
    assert consumer.counts == {"new": 2, "rejected:store_error": 1, "rejected:not_json": 1}
    assert await _one(archive_db, "SELECT count(*) FROM events") == 2
