"""The store contract, run against both archive stores: PostgreSQL and SQLite.

The same batches into ``open_store(url)`` for a ``postgresql://`` database of the tests'
own cluster and an ``sqlite:///`` file: the same outcomes (new, duplicate, conflict, as one by
one), the same rows, rounds folded from their entries in any order and across batches, a
round another writer added to refolded whole, and the consumer's handling of malformed input.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.archive.backend import open_store
from controller.archive.config import ArchiveSettings
from controller.archive.consumer import ArchiveConsumer
from controller.archive.errors import ArchiveError
from controller.archive.ingest import Entry, TableKeys, classify
from controller.archive.recall import recall_from_archive
from controller.archive.sqlite_store import is_sqlite_url, sqlite_path
from controller.signing import Signer

SIGNER = Signer(Ed25519PrivateKey.generate(), "k1")
KEYS = TableKeys({"t1": SIGNER.public_key, "t2": None})
AT = datetime(2026, 11, 25, 7, 0, tzinfo=UTC)


def envelope(
    seq: int, kind: str, data: dict[str, Any], round_id: str | None = "t1-000001", table="t1"
) -> dict[str, Any]:
    body = {
        "schema_version": "2",
        "table": table,
        "round": round_id,
        "seq": seq,
        "session": 1,
        "kind": kind,
        "at": (AT + timedelta(seconds=seq)).isoformat().replace("+00:00", "Z"),
        "delayed": False,
        "data": data,
    }
    if kind in {"round_result", "round_voided"} and table == "t1":
        body["chain_head"] = {"seq": seq, "hash": "0" * 64}
        body = SIGNER.sign(body)
    return body


def entry(env: dict[str, Any], topic: str | None = None) -> Entry:
    found = classify(topic or f"tables/{env['table']}/events", json.dumps(env).encode(), KEYS)
    assert isinstance(found, Entry), found
    return found


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    """A query's rows on either store (the queries below are both dialects)."""
    if is_sqlite_url(url):
        with sqlite3.connect(sqlite_path(url)) as conn:
            return list(conn.execute(query).fetchall())
    with psycopg.connect(url) as conn:
        return list(conn.execute(query.encode()).fetchall())


def one(url: str, query: str) -> Any:
    return rows(url, query)[0][0]


OPENED = envelope(1, "round_opened", {"round_no": 1, "game": "teen-patti-20-20"})
CLOSED = envelope(2, "betting_closed", {})
CARD = envelope(3, "card_dealt", {"slot": "A1", "hand": "A", "index": 0, "card": "As"})
BETS = [{"bet": "player_a", "outcome": "win", "payout": "1.98"}]
RESULT = envelope(
    4,
    "round_result",
    {"game": "teen-patti-20-20", "winner": "A", "cards": {}, "hands": {}, "bets": BETS},
)


async def test_a_batch_has_the_one_by_one_outcomes_on_both_stores(archive_url):
    other_closed = {**CLOSED, "at": "2026-11-25T07:00:09Z"}
    store = await open_store(archive_url)
    try:
        assert await store.store_entry(entry(OPENED)) == "new"
        outcomes = await store.store_entries(
            [
                entry(OPENED),  # archived before: duplicate
                entry(RESULT, "tables/t1/results"),
                entry(CLOSED),
                entry(RESULT),  # its second copy in the same batch: duplicate
                entry(other_closed),  # same key as CLOSED, other content: conflict
                entry(envelope(5, "table_status", {}, None)),
            ]
        )
        assert outcomes == ["duplicate", "new", "new", "duplicate", "conflict", "new"]
        assert await store.store_entries([]) == []
        assert await store.highest_seqs() == {"t1": 5}
    finally:
        await store.close()
    assert one(archive_url, "SELECT count(*) FROM events") == 4
    assert one(archive_url, "SELECT count(*) FROM entry_keys") == 4
    assert rows(archive_url, "SELECT category, seq FROM rejected") == [("conflict", 2)]
    assert one(archive_url, "SELECT topic FROM events WHERE seq = 4") == "tables/t1/results"
    assert rows(
        archive_url,
        "SELECT round_id, state, outcome, entries, result_seq, round_no FROM rounds",
    ) == [("t1-000001", "settled", "result", 3, 4, 1)]
    # The stored envelope is the message's own text.
    stored = one(archive_url, "SELECT envelope FROM events WHERE seq = 2")
    assert (json.loads(stored) if isinstance(stored, str) else stored) == CLOSED


async def test_rounds_fold_in_any_order_and_across_batches_on_both_stores(archive_url):
    store = await open_store(archive_url)
    try:
        # The result first (it came on `results` before `events`), then the rest, one a batch.
        assert await store.store_entries([entry(RESULT, "tables/t1/results")]) == ["new"]
        assert await store.store_entries([entry(CARD), entry(OPENED)]) == ["new", "new"]
        assert await store.store_entries([entry(CLOSED)]) == ["new"]
        assert (await store.store_entries([entry(SIGNER.sign({**RESULT, "replayed": True}))])) == [
            "duplicate"
        ]
    finally:
        await store.close()
    assert rows(archive_url, "SELECT state, outcome, entries, round_no, game FROM rounds") == [
        ("settled", "result", 4, 1, "teen-patti-20-20")
    ]
    record = await recall_from_archive(archive_url, "t1-000001")
    assert [e.seq for e in record.entries] == [1, 2, 3, 4]
    assert record.status == "settled"


async def test_a_round_another_writer_added_to_is_refolded_whole(archive_url):
    first, second = await open_store(archive_url), await open_store(archive_url)
    try:
        assert await first.store_entries([entry(OPENED), entry(CLOSED)]) == ["new", "new"]
        # Another instance (shared subscription) stores the card: `first` has not seen it.
        assert await second.store_entries([entry(CARD)]) == ["new"]
        assert await first.store_entries([entry(RESULT)]) == ["new"]
    finally:
        await first.close()
        await second.close()
    assert rows(archive_url, "SELECT state, outcome, entries FROM rounds") == [
        ("settled", "result", 4)
    ]


async def test_the_consumer_keeps_what_it_rejects_on_both_stores(archive_url):
    store = await open_store(archive_url)
    settings = ArchiveSettings.model_validate({"database": {"url": archive_url}})
    consumer = ArchiveConsumer(settings, store, KEYS)
    forged = {**RESULT, "data": {**RESULT["data"], "winner": "B"}}
    status = {"schema_version": "2", "table": "t1", "state": "online", "session": 1}
    try:
        outcomes = await consumer.handle_batch(
            [
                ("tables/t1/events", json.dumps(OPENED).encode()),
                ("tables/t1/events", b"not json"),
                ("tables/t1/events", json.dumps({**CLOSED, "schema_version": "4"}).encode()),
                ("tables/t9/events", json.dumps({**CLOSED, "table": "t9"}).encode()),
                ("tables/t1/results", json.dumps(forged).encode()),
                ("tables/t1/status", json.dumps(status).encode()),
                (
                    "tables/t2/events",
                    json.dumps(envelope(1, "betting_closed", {}, None, "t2")).encode(),
                ),
            ]
        )
    finally:
        await store.close()
    assert outcomes == [
        "new",
        "rejected:not_json",
        "rejected:schema_version",
        "rejected:unknown_table",
        "rejected:signature",
        "status",
        "new",
    ]
    assert sorted(rows(archive_url, "SELECT category FROM rejected")) == [
        ("not_json",),
        ("schema_version",),
        ("signature",),
        ("unknown_table",),
    ]
    assert one(archive_url, "SELECT state FROM table_status") == "online"
    payload = one(archive_url, "SELECT payload FROM rejected WHERE category = 'not_json'")
    assert bytes(payload) == b"not json"


async def test_gaps_and_alerts_are_kept_on_both_stores(archive_url):
    store = await open_store(archive_url)
    try:
        gap = await store.open_gap("t1", 3, 5)
        await store.mark_gap(gap, "replay_requested", [3, 4, 5])
        await store.raise_alert("t1", "gap", "seq 3..5 not filled", gap_id=gap, missing=[3, 5])
    finally:
        await store.close()
    assert rows(archive_url, "SELECT table_id, from_seq, to_seq FROM gaps") == [("t1", 3, 5)]
    assert one(archive_url, "SELECT count(*) FROM gaps WHERE alerted_at IS NOT NULL") == 1
    assert one(archive_url, "SELECT detail FROM alerts") == "seq 3..5 not filled"


async def test_a_store_url_of_neither_kind_is_refused_naming_it():
    with pytest.raises(ArchiveError, match="postgresql://USER@HOST:PORT/DB or sqlite:///PATH"):
        await open_store("mysql://archive@db/archive")
    with pytest.raises(ArchiveError, match="sqlite:///relative/path"):
        await open_store("sqlite://archive.sqlite")
