"""The archive's metrics and bad input on the live path: a real Mosquitto, a real PostgreSQL.

Every kind of bad input (not JSON, not an object, a field of the wrong type, a table that is
not the topic's, an unknown table, a schema version it does not know, a bad signature, a
conflicting copy) is published through the broker: each is stored as rejected with its reason,
counted on ``/metrics`` (scraped over HTTP), and the consumer goes on storing what follows.
A gap is counted open, replayed, alerted and filled. ``tablectl archive run`` serves the
endpoint on its configured port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import aiomqtt
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from prometheus_client.parser import text_string_to_metric_families

from controller.archive.config import ArchiveSettings
from controller.archive.consumer import ArchiveConsumer
from controller.archive.ingest import TableKeys
from controller.archive.metrics import ArchiveMetrics
from controller.archive.store import ArchiveStore
from controller.metrics import MetricsServer
from controller.signing import Signer
from tests.support.mosquitto import free_port

pytestmark = pytest.mark.hil

SIGNER = Signer(Ed25519PrivateKey.generate(), "m-2-key")
FORGER = Signer(Ed25519PrivateKey.generate(), "m-2-key")


def _envelope(table: str, seq: int, kind: str = "betting_closed", **extra: Any) -> dict[str, Any]:
    at = datetime.now(UTC) - timedelta(milliseconds=5)
    body: dict[str, Any] = {
        "schema_version": "2",
        "table": table,
        "round": f"{table}-000001",
        "seq": seq,
        "session": 1,
        "kind": kind,
        "at": at.isoformat().replace("+00:00", "Z"),
        "delayed": False,
        "data": {"round_no": 1, "game": "g"} if kind == "round_opened" else {},
    }
    body.update(extra)
    return body


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


async def _metric(url: str, name: str, **labels: str) -> float:
    samples = await asyncio.to_thread(_scrape, url)
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def _until(url: str, name: str, value: float, seconds: float = 15, **labels: str) -> None:
    async with asyncio.timeout(seconds):
        while await _metric(url, name, **labels) != value:
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def _archive(settings: ArchiveSettings) -> AsyncIterator[tuple[ArchiveConsumer, str]]:
    store = await ArchiveStore.open(settings.database.url)
    consumer = ArchiveConsumer(settings, store, TableKeys({"m-1": None, "m-2": SIGNER.public_key}))
    metrics = ArchiveMetrics()
    metrics.watch_consumer(consumer)
    server = metrics.serve(settings.metrics)
    assert isinstance(server, MetricsServer)
    task = asyncio.create_task(consumer.run(), name="archive")
    try:
        async with asyncio.timeout(10):
            await consumer.subscribed.wait()
        yield consumer, server.url
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        server.shutdown()
        await store.close()


async def test_bad_input_is_rejected_counted_and_never_stops_the_consumer(mosquitto, archive_db):
    settings = ArchiveSettings.model_validate(
        {
            "database": {"url": archive_db},
            "mqtt": {"urls": [mosquitto.url], "client_id": "archive-metrics"},
            "gaps": {"grace_seconds": 0.2, "timeout_seconds": 1.5, "replay_timeout_seconds": 0.5},
            "metrics": {"port": free_port()},
            "tables": {"m-1": {}, "m-2": {}},
        }
    )
    async with (
        _archive(settings) as (consumer, url),
        aiomqtt.Client(mosquitto.host, mosquitto.port, identifier="metrics-pub") as client,
    ):

        async def send(topic: str, body: dict[str, Any] | bytes) -> None:
            payload = body if isinstance(body, bytes) else json.dumps(body).encode()
            await client.publish(topic, payload, qos=1)

        assert await _metric(url, "tablectl_archive_broker_connected") == 1
        await send("tables/m-1/events", _envelope("m-1", 1, "round_opened"))
        second = _envelope("m-1", 2)
        await send("tables/m-1/events", second)
        await send("tables/m-1/events", second)  # a redelivery
        await send("tables/m-1/status", {"schema_version": "2", "table": "m-1", "state": "online"})
        # The bad ones.
        bad: dict[str, list[tuple[str, dict[str, Any] | bytes]]] = {
            "not_json": [("tables/m-1/events", b"{not json")],
            "not_object": [("tables/m-1/events", b"[1, 2]")],
            "too_deep": [("tables/m-1/events", b"[" * 3000 + b"]" * 3000)],
            "out_of_range": [("tables/m-1/events", {**_envelope("m-1", 3), "seq": 2**63})],
            "malformed": [
                ("tables/m-1/events", {**_envelope("m-1", 3), "seq": "three"}),
                ("tables/m-1/events", _envelope("m-1", 3, at="yesterday")),
                ("tables/m-1/events", {**_envelope("m-1", 3), "table": "m-2"}),
            ],
            "unknown_table": [("tables/stranger/events", _envelope("stranger", 1))],
            "schema_version": [("tables/m-1/events", _envelope("m-1", 3, schema_version="4"))],
            "signature": [
                (
                    "tables/m-2/results",
                    FORGER.sign(_envelope("m-2", 1, "round_result", chain_head=None)),
                )
            ],
            "conflict": [("tables/m-1/events", _envelope("m-1", 2, kind="round_voided"))],
        }
        for items in bad.values():
            for topic, body in items:
                await send(topic, body)
        # What follows the bad input is stored: the consumer is alive.
        await send("tables/m-1/events", _envelope("m-1", 3))
        await _until(url, "tablectl_archive_entries_total", 3, table="m-1")
        for reason, items in bad.items():
            await _until(url, "tablectl_archive_rejected_total", len(items), reason=reason)
        assert await _metric(url, "tablectl_archive_duplicates_total", table="m-1") == 1
        assert await _metric(url, "tablectl_archive_statuses_total") == 1
        assert await _metric(url, "tablectl_archive_lag_seconds_count") == 3
        assert 0 < await _metric(url, "tablectl_archive_lag_seconds_sum") < 3 * 5.0
        # The database agrees with the metrics, reason by reason.
        async with await psycopg.AsyncConnection.connect(archive_db) as conn:
            cursor = await conn.execute(
                "SELECT category, count(*) FROM rejected GROUP BY category ORDER BY category"
            )
            stored: dict[str, int] = dict(await cursor.fetchall())
        assert stored == {reason: len(items) for reason, items in bad.items()}

        # A gap: seq 4 and 5 missing. Seen, replay asked (no table answers), alerted, filled.
        await send("tables/m-1/events", _envelope("m-1", 6))
        await _until(url, "tablectl_archive_gaps_open", 1)
        await _until(url, "tablectl_archive_gap_replays_total", 1)
        await _until(url, "tablectl_archive_gap_alerts_total", 1)
        assert await _metric(url, "tablectl_archive_gaps_filled_total") == 0
        await send("tables/m-1/events", _envelope("m-1", 4, replayed=True))
        await send("tables/m-1/events", _envelope("m-1", 5, delayed=True))
        await _until(url, "tablectl_archive_gaps_filled_total", 1)
        # The open count is the database's, read at the end of the check that stamped the fill.
        await _until(url, "tablectl_archive_gaps_open", 0)
        assert await _metric(url, "tablectl_archive_entries_total", table="m-1") == 6
        # The replayed and the delayed entry are not live: no lag observed for them.
        assert await _metric(url, "tablectl_archive_lag_seconds_count") == 4
        assert consumer.counts["new"] == 6


def test_archive_run_serves_metrics_on_its_port(mosquitto, archive_db, tmp_path):
    port = free_port()
    config = tmp_path / "archive.toml"
    config.write_text(
        f'[database]\nurl = "{archive_db}"\n\n'
        f'[mqtt]\nurls = ["{mosquitto.url}"]\nclient_id = "archive-metrics-cli"\n\n'
        f"[metrics]\nport = {port}\n\n[tables.c-1]\nunsigned = true\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "archive", "run", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/metrics"

    async def scenario() -> None:
        async with asyncio.timeout(30):
            while True:
                with contextlib.suppress(OSError):
                    if await _metric(url, "tablectl_archive_broker_connected") == 1:
                        break
                await asyncio.sleep(0.1)
        async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
            await client.publish("tables/c-1/events", b"\xff\xfe not json", qos=1)
            await client.publish("tables/c-1/events", json.dumps(_envelope("c-1", 1)), qos=1)
        await _until(url, "tablectl_archive_rejected_total", 1, reason="not_utf8")
        await _until(url, "tablectl_archive_entries_total", 1, table="c-1")

    try:
        asyncio.run(scenario())
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    assert process.returncode == 0, err.decode()
    assert "new 1" in out.decode() and "rejected:not_utf8 1" in out.decode()


def test_a_fault_in_the_metrics_hook_never_reaches_the_consumer():
    metrics = ArchiveMetrics()
    # Outcomes that do not match the messages (a bug elsewhere): logged, not raised.
    metrics.batch_stored([], ["new"])
    assert b"tablectl_archive_entries_total{" not in metrics.render()
