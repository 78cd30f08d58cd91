"""The archive against hostile messages: a real Mosquitto, the consumer, PostgreSQL and SQLite.

The probe of issue 21 published, on a table's own topics, a 3,000-deep JSON value (the archive
retried it 986 times and stopped archiving every table), an event with ``seq`` >= 2^63 (it
raised OverflowError and reconnected, the message neither archived nor in ``rejected``) and a
``seq`` far ahead of the table. Here each of those and their kin goes through the broker to a
running consumer first, then the table's real entries: the real ones are archived, each hostile
one is in ``rejected`` once with its reason, and the consumer neither stopped nor reconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiomqtt
import psycopg

from controller.archive.backend import open_store
from controller.archive.config import ArchiveSettings
from controller.archive.consumer import ArchiveConsumer
from controller.archive.ingest import TableKeys
from controller.archive.sqlite_store import is_sqlite_url, sqlite_path

TABLE = "h-1"
DEEP = b"[" * 3000 + b"]" * 3000


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _envelope(seq: int, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schema_version": "2",
        "table": TABLE,
        "round": f"{TABLE}-000001",
        "seq": seq,
        "session": 1,
        "kind": "card_dealt",
        "at": _now(),
        "delayed": False,
        "data": {"slot": f"A{seq}", "card": "As", "face": "up"},
    }
    body.update(extra)
    return body


def _status(head: int) -> bytes:
    body = {
        "schema_version": "2",
        "state": "online",
        "table": TABLE,
        "session": 1,
        "game": "teen-patti-20-20",
        "version": "test",
        "at": _now(),
        "chain_head": {"seq": head, "hash": "0" * 64},
    }
    return json.dumps(body).encode()


def hostile() -> list[tuple[str, bytes, str]]:
    """``(topic suffix, payload, category)``: the probe's payloads and their kin."""
    return [
        ("events", DEEP, "too_deep"),
        ("results", DEEP, "too_deep"),
        ("status", DEEP, "too_deep"),
        ("events", b'{"schema_version":"2","data":' + DEEP + b"}", "too_deep"),
        ("events", json.dumps(_envelope(2**63)).encode(), "out_of_range"),
        ("events", json.dumps(_envelope(2**64 + 7)).encode(), "out_of_range"),
        ("events", json.dumps(_envelope(3, session=-(2**63) - 1)).encode(), "out_of_range"),
        ("events", json.dumps(_envelope(3, data={"x": float("nan")})).encode(), "out_of_range"),
        ("events", json.dumps(_envelope(10**9)).encode(), "seq_ahead"),
        ("results", json.dumps(_envelope(2**53 - 1)).encode(), "seq_ahead"),
        ("events", json.dumps(_envelope(3, data={"x": "y" * 20_000})).encode(), "too_large"),
        ("events", b"\xff\xfe\x00garbage", "not_utf8"),
        ("events", json.dumps(_envelope(3, data={"x": "\ud800"})).encode(), "not_utf8"),
        ("events", b"{" * 10, "not_json"),
        ("events", b"[1, 2]", "not_object"),
    ]


def _settings(url: str, broker: str) -> ArchiveSettings:
    return ArchiveSettings.model_validate(
        {
            "database": {"url": url},
            "mqtt": {
                "urls": [broker],
                "client_id": "archive-hostile",
                "reconnect_min_seconds": 0.05,
                "reconnect_max_seconds": 0.3,
            },
            "gaps": {"grace_seconds": 30, "timeout_seconds": 60},
            "tables": {TABLE: {"unsigned": True}},
        }
    )


@contextlib.asynccontextmanager
async def running(settings: ArchiveSettings) -> AsyncIterator[tuple[ArchiveConsumer, Any]]:
    store = await open_store(settings.database.url)
    consumer = ArchiveConsumer(settings, store, TableKeys(settings.public_keys()))
    task = asyncio.create_task(consumer.run(), name="archive")
    try:
        async with asyncio.timeout(10):
            await consumer.subscribed.wait()
        yield consumer, task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await store.close()


async def _rows(url: str, query: str) -> list[tuple[Any, ...]]:
    if is_sqlite_url(url):
        with contextlib.closing(sqlite3.connect(sqlite_path(url))) as conn:
            return conn.execute(query).fetchall()
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(query)
        return await cursor.fetchall()


async def test_hostile_messages_are_rejected_and_the_real_table_is_archived(mosquitto, archive_url):
    settings = _settings(archive_url, mosquitto.url)
    bad = hostile()
    async with running(settings) as (consumer, task):
        async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
            await client.publish(f"tables/{TABLE}/status", _status(0), qos=1, retain=True)
            for suffix, payload, _ in bad:
                await client.publish(f"tables/{TABLE}/{suffix}", payload, qos=1)
            for seq in range(1, 6):
                await client.publish(
                    f"tables/{TABLE}/events", json.dumps(_envelope(seq)).encode(), qos=1
                )
        async with asyncio.timeout(20):
            while consumer.counts["new"] < 5:
                assert not task.done(), "the consumer stopped"
                await asyncio.sleep(0.05)
            while sum(v for k, v in consumer.counts.items() if k.startswith("rejected:")) < len(
                bad
            ):
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # a redelivery (an unacknowledged batch) would show now
        assert not task.done() and consumer.subscribed.is_set()
        archived = await _rows(
            archive_url, f"SELECT seq FROM events WHERE table_id = '{TABLE}' ORDER BY seq"
        )
        assert archived == [(seq,) for seq in range(1, 6)]
        rejected = await _rows(
            archive_url, "SELECT category, seq, reason FROM rejected ORDER BY id"
        )
        # Each hostile message once (never retried), in order, with its reason.
        assert [row[0] for row in rejected] == [category for _, _, category in bad]
        assert all(row[2] for row in rejected)
        by_category = {row[0]: row for row in rejected}
        assert "levels; at most 24" in by_category["too_deep"][2]
        assert "could have sent" in by_category["seq_ahead"][2]
        assert by_category["out_of_range"][1] is None  # no seq beyond a database integer
        assert consumer.rejections.total == len(bad)
        assert consumer.rejections.counts["too_deep"] == 4
