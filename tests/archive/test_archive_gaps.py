"""Gap state in PostgreSQL, shared by archive instances: each step done once, whoever races.

Two :class:`GapBook` instances on two connections (two archive instances) work on one
database: a hole is a gap only once its grace is over, is recorded once, has its replay
claimed by one instance, is stamped filled once and alerted once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from controller.archive.gaps import GapBook
from controller.archive.migrate import migrate

pytestmark = pytest.mark.hil


@pytest.fixture
async def books(archive_db: str) -> AsyncIterator[tuple[GapBook, GapBook]]:
    first = await psycopg.AsyncConnection.connect(archive_db, autocommit=True)
    second = await psycopg.AsyncConnection.connect(archive_db, autocommit=True)
    await migrate(first)
    try:
        yield GapBook(first), GapBook(second)
    finally:
        await first.close()
        await second.close()


async def _keys(book: GapBook, table: str, seqs: list[int], age_seconds: float) -> None:
    """Archive ``seqs`` of ``table`` as received ``age_seconds`` ago."""
    await book.conn.execute(
        "INSERT INTO entry_keys (table_id, session, seq, at, digest, received_at)"
        " SELECT %s, 1, s, now(), 'd', now() - make_interval(secs => %s)"
        " FROM unnest(%s::bigint[]) AS s",
        (table, age_seconds, seqs),
    )


async def _rows(book: GapBook, query: str, *params: Any) -> list[tuple[Any, ...]]:
    cursor = await book.conn.execute(query.encode(), params)
    return await cursor.fetchall()


async def test_two_instances_record_claim_fill_and_alert_each_gap_once(books):
    one, two = books
    tables = ["t1", "t2"]
    # t1 holds 1-3, 5-6, 9 (received 10 s ago) and 12 (just now): holes 4, 7-8, 10-11.
    await _keys(one, "t1", [1, 2, 3, 5, 6, 9], 10.0)
    await _keys(one, "t1", [12], 0.0)
    # t2 starts at 3 (the archive never saw 1-2).
    await _keys(one, "t2", [3, 4], 10.0)

    found = await asyncio.gather(one.scan(tables, 1.0), two.scan(tables, 1.0))
    recorded = sorted((g.table, g.lo, g.hi) for gaps in found for g in gaps)
    assert recorded == [("t1", 4, 4), ("t1", 7, 8), ("t2", 1, 2)]
    # 10-11 is still in its grace: the watermark waits below it.
    marks = dict(await _rows(one, "SELECT table_id, scanned_to FROM gap_watermarks"))
    assert marks == {"t1": 9, "t2": 4}
    assert await one.scan(tables, 1.0) == [] and await two.scan(tables, 1.0) == []

    claims = await asyncio.gather(one.claim_replays(tables, 60.0), two.claim_replays(tables, 60.0))
    claimed = [(g.table, g.lo) for gaps in claims for g in gaps]
    assert sorted(claimed) == [("t1", 4), ("t1", 7), ("t2", 1)]  # each by one instance only
    assert await one.claim_replays(tables, 60.0) == []

    await _keys(one, "t1", [4], 0.0)
    fills = await asyncio.gather(one.fill(tables), two.fill(tables))
    assert [(g.table, g.lo, g.hi) for gaps in fills for g in gaps] == [("t1", 4, 4)]

    await _keys(one, "t1", [8], 0.0)  # half of 7-8 arrives
    alerts = await asyncio.gather(one.alert(tables, 0.0), two.alert(tables, 0.0))
    alerted = sorted((g.table, g.lo, g.missing) for gaps in alerts for g in gaps)
    assert alerted == [("t1", 7, (7,)), ("t2", 1, (1, 2))]
    assert await one.alert(tables, 0.0) == []
    rows = await _rows(one, "SELECT table_id, detail FROM alerts ORDER BY table_id")
    assert [r[0] for r in rows] == ["t1", "t2"]
    assert "seq 7..8 of table t1 not filled within 0.0 s: 1 missing (7)" in rows[0][1]
    missing = await _rows(one, "SELECT missing FROM gaps WHERE table_id = 't1' AND from_seq = 7")
    assert missing == [([7],)]

    # The young hole ripens; the partly filled gap is not recorded again.
    await one.conn.execute(
        "UPDATE entry_keys SET received_at = now() - interval '10 s' WHERE seq = 12"
    )
    assert [(g.lo, g.hi) for g in await two.scan(tables, 1.0)] == [(10, 11)]
    marks = dict(await _rows(one, "SELECT table_id, scanned_to FROM gap_watermarks"))
    assert marks["t1"] == 12

    # A late fill of an alerted gap is still stamped.
    await _keys(one, "t1", [7], 0.0)
    assert [(g.lo, g.hi) for g in await one.fill(tables, alerted_too=False)] == []
    assert [(g.lo, g.hi) for g in await one.fill(tables)] == [(7, 8)]
    open_gaps = await _rows(
        one, "SELECT table_id, from_seq FROM gaps WHERE filled_at IS NULL ORDER BY 1, 2"
    )
    assert open_gaps == [("t1", 10), ("t2", 1)]


async def test_a_table_being_scanned_by_one_instance_is_skipped_by_the_other(books):
    one, two = books
    await _keys(one, "t1", [1, 3], 10.0)
    await one.scan(["t1"], 1.0)  # the table's watermark row exists now
    await _keys(one, "t1", [5], 10.0)
    async with two.conn.transaction():
        await two.conn.execute("SELECT 1 FROM gap_watermarks WHERE table_id = 't1' FOR UPDATE")
        assert await one.scan(["t1"], 1.0) == []  # locked: skipped, not waited for
    assert [(g.lo, g.hi) for g in await one.scan(["t1"], 1.0)] == [(4, 4)]


async def _status(book: GapBook, table: str, head: int, age_seconds: float) -> None:
    """A status message of ``table`` stating journal head ``head``, received that long ago."""
    await book.conn.execute(
        "INSERT INTO table_status (table_id, state, session, chain_head_seq, chain_head_hash,"
        " envelope, received_at) VALUES (%s, 'offline', 1, %s, 'h', '{}',"
        " now() - make_interval(secs => %s))",
        (table, head, age_seconds),
    )


async def test_the_tail_a_status_states_is_a_gap_too(books):
    one, _ = books
    await _keys(one, "t1", [1, 2, 3], 10.0)
    await _status(one, "t1", 6, 0.0)  # the table stopped at seq 6 just now
    assert await one.scan(["t1"], 1.0) == []  # in its grace
    marks = dict(await _rows(one, "SELECT table_id, scanned_to FROM gap_watermarks"))
    assert marks == {"t1": 3}
    await one.conn.execute("UPDATE table_status SET received_at = now() - interval '10 s'")
    await _keys(one, "t1", [4], 0.0)  # a backlog still arriving: not yet
    assert await one.scan(["t1"], 1.0) == []
    await one.conn.execute("UPDATE entry_keys SET received_at = now() - interval '10 s'")
    assert [(g.lo, g.hi) for g in await one.scan(["t1"], 1.0)] == [(5, 6)]
    marks = dict(await _rows(one, "SELECT table_id, scanned_to FROM gap_watermarks"))
    assert marks == {"t1": 6}
    # An older, lower head says nothing new; entries after the head are scanned as usual.
    await _status(one, "t1", 2, 30.0)
    await _keys(one, "t1", [5, 6, 8], 10.0)
    assert [(g.lo, g.hi) for g in await one.scan(["t1"], 1.0)] == [(7, 7)]
    assert [(g.lo, g.hi) for g in await one.fill(["t1"])] == [(5, 6)]


async def test_a_replay_not_answered_is_asked_again_until_the_gap_is_filled_or_alerted(books):
    """A request that failed, or one claimed by an instance that died before sending it: the
    gap, still open, is claimed again once its last request is ``every`` seconds old, by one
    instance; a filled or an alerted gap is not asked again."""
    one, two = books
    tables = ["t1"]
    await _keys(one, "t1", [1, 4, 7, 10], 10.0)  # gaps 2-3, 5-6, 8-9
    assert len(await one.scan(tables, 1.0)) == 3
    first = await one.claim_replays(tables, 60.0)
    assert sorted(g.lo for g in first) == [2, 5, 8]
    assert await two.claim_replays(tables, 60.0) == []  # asked 0 s ago: not yet

    await one.conn.execute("UPDATE gaps SET replay_requested_at = now() - interval '61 s'")
    await _keys(one, "t1", [2, 3], 0.0)  # 2-3 is filled meanwhile
    assert [g.lo for g in await one.fill(tables)] == [2]
    await one.conn.execute("UPDATE gaps SET alerted_at = now() WHERE from_seq = 8")  # alerted
    again = await asyncio.gather(one.claim_replays(tables, 60.0), two.claim_replays(tables, 60.0))
    assert sorted(g.lo for gaps in again for g in gaps) == [5]  # once, by one instance
    assert await one.claim_replays(tables, 60.0) == []  # stamped anew: 60 s from now
    stamped = await _rows(
        one, "SELECT from_seq FROM gaps WHERE replay_requested_at > now() - interval '5 s'"
    )
    assert stamped == [(5,)]
