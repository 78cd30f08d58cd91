"""The archive under the shipped broker security: config/mosquitto/mosquitto.conf and acl.

A Mosquitto runs the committed ``mosquitto.conf`` (only its paths and ports replaced) with the
committed ACL file unchanged; the table ``tp-01`` and the archive connect over TLS on the
controllers' listener with their own credentials: the table's three (``table-tp-01``,
``-cmd``, ``-status``), the archive instance's two (``archive-1`` for its consumer,
``archive-1-replay`` for its replay requests; the broker uses each user name as the client id).
The archive starts after the table's first round: it sees the gap, asks for a replay on
``cmd/replay`` (the only command its replay credential may send), and the table's replayed,
signed result arrives. Everything after the gap arrives too. The consumer's credential
publishes nothing; neither can publish an entry or a pit command, and neither ever receives a
``secure/`` message.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import uuid
from pathlib import Path
from typing import Any

import aiomqtt
import psycopg
import pytest
from pydantic import SecretStr

from controller.app import run_table
from controller.archive.config import ArchiveSettings
from controller.archive.consumer import ArchiveConsumer
from controller.archive.ingest import TableKeys
from controller.archive.store import ArchiveStore
from controller.journal import Journal
from controller.mqtt.ack import PublishRefused, publish_checked
from controller.mqtt.client import Client
from controller.mqtt.settings import MqttSettings
from controller.pitcli import EXIT_REFUSED, Target, send_command
from controller.settings import load_settings
from controller.signing import generate_keypair
from simulators.table import Simulation, simulated_scanner
from tests.integration._secure_broker import (
    SHIPPED_PASSWORDS,
    SecureBroker,
    TlsFiles,
    shipped_broker,
)
from tests.support.mosquitto import MISSING, have_mosquitto

pytestmark = [pytest.mark.hil, pytest.mark.skipif(not have_mosquitto(), reason=MISSING)]

PASSWORDS = SHIPPED_PASSWORDS


@pytest.fixture
def secure_broker(tmp_path: Path) -> Any:
    broker, tls = shipped_broker(tmp_path / "broker")
    with broker:
        yield broker, tls


def _mqtt(broker: SecureBroker, tls: TlsFiles, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "urls": [f"mqtts://127.0.0.1:{broker.port}"],
        "username": user,
        "password": PASSWORDS[user],
        "ca_file": str(tls.ca_cert),
        **extra,
    }


def _client(broker: SecureBroker, tls: TlsFiles, user: str) -> Client:
    return Client(
        "127.0.0.1",
        broker.port,
        username=user,
        password=PASSWORDS[user],
        identifier=f"{user}-probe-{uuid.uuid4().hex[:8]}",
        protocol=aiomqtt.ProtocolVersion.V5,
        tls_context=ssl.create_default_context(cafile=str(tls.ca_cert)),
        timeout=10,
    )


async def _count(db: str, query: str) -> int:
    async with await psycopg.AsyncConnection.connect(db) as conn:
        row = await (await conn.execute(query.encode())).fetchone()
        return int(row[0]) if row else 0


def _entries(path: Path) -> list[Any]:
    journal = Journal.open_readonly(path)
    try:
        return list(journal.entries())
    finally:
        journal.close()


async def _table(broker: SecureBroker, tls: TlsFiles, tmp_path: Path, key: Path) -> None:
    async with simulated_scanner("teen-patti-20-20", Simulation(seed=5, deal_delay=0.0)) as device:
        settings = load_settings(
            None,
            table_id="tp-01",
            device={"url": device},
            mqtt=_mqtt(
                broker,
                tls,
                "table-tp-01",
                command_username="table-tp-01-cmd",
                command_password=PASSWORDS["table-tp-01-cmd"],
                status_username="table-tp-01-status",
                status_password=PASSWORDS["table-tp-01-status"],
            ),
            journal={"path": tmp_path / "tp-01.sqlite"},
            rounds={"betting_seconds": 0.1, "pause_seconds": 0.8},
            signing={"key_file": key, "key_id": "tp-01-key"},
        )
        async with asyncio.timeout(60):
            await run_table(settings, rounds=3)


@pytest.mark.parametrize(
    "consumer",
    [{}, {"share_group": "archive"}, {"partition": "0/1"}],
    ids=["plain", "shared", "partitioned"],
)
async def test_the_archive_works_under_the_shipped_acl(
    secure_broker, archive_db, tmp_path, consumer
):
    # Each way of subscribing (docs/archive.md, "Several instances") is allowed by the ACL.
    broker, tls = secure_broker
    private, public = generate_keypair(tmp_path / "keys", "tp-01-key")
    journal = tmp_path / "tp-01.sqlite"
    settings = ArchiveSettings.model_validate(
        {
            "database": {"url": archive_db},
            "mqtt": _mqtt(
                broker,
                tls,
                "archive-1",
                client_id="tablectl-archive-1",
                command_username="archive-1-replay",
                command_password=PASSWORDS["archive-1-replay"],
            ),
            "gaps": {"grace_seconds": 0.2, "timeout_seconds": 3.0, "replay_role": "betting"},
            "consumer": consumer,
            "tables": {"tp-01": {"public_key": str(public)}},
        }
    )
    table = asyncio.create_task(_table(broker, tls, tmp_path, private), name="tp-01")
    store = await ArchiveStore.open(archive_db)
    consumer = ArchiveConsumer(settings, store, TableKeys(settings.public_keys()))
    archive: asyncio.Task[None] | None = None
    try:
        # The archive comes up after the first result: seq 1.. went by unseen.
        async with asyncio.timeout(30):
            while not (
                journal.exists() and any(e.kind == "round_result" for e in _entries(journal))
            ):
                await asyncio.sleep(0.05)
        first = next(e for e in _entries(journal) if e.kind == "round_result")
        archive = asyncio.create_task(consumer.run(), name="archive")
        async with asyncio.timeout(30):
            await consumer.subscribed.wait()
            # The replay asked on cmd/replay brings the first result back, signed.
            while not await _count(
                archive_db,
                f"SELECT count(*) FROM events WHERE seq = {first.seq} AND replayed AND signed",
            ):
                await asyncio.sleep(0.05)
        await table
        entries = _entries(journal)
        hi = await _count(archive_db, "SELECT max(to_seq) FROM gaps")
        assert hi >= first.seq
        after = [e for e in entries if e.seq > hi]
        async with asyncio.timeout(15):
            while await _count(archive_db, f"SELECT count(*) FROM events WHERE seq > {hi}") < len(
                after
            ):
                await asyncio.sleep(0.05)
        assert consumer.counts["replay_requested"] == 1
        assert await _count(archive_db, "SELECT count(*) FROM rejected") == 0
    finally:
        table.cancel()
        if archive is not None:
            archive.cancel()
        for task in (table, archive):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await store.close()


@pytest.mark.parametrize("user", ["archive-1", "archive-1-replay"])
async def test_the_archive_credentials_may_do_nothing_else(secure_broker, user):
    broker, tls = secure_broker
    async with _client(broker, tls, user) as spy, _client(broker, tls, "table-tp-01") as tp:
        forbidden = ["tables/tp-01/events", "tables/tp-01/cmd/pit/replay", "betting/status"]
        if user == "archive-1":  # the consumer asks for nothing: its replay user does
            forbidden.append("tables/tp-01/cmd/replay")
        else:
            await publish_checked(spy, "tables/tp-01/cmd/replay", b"{}", timeout=10)
        for topic in forbidden:
            with pytest.raises(PublishRefused):
                await publish_checked(spy, topic, b"{}", timeout=10)
        await spy.subscribe("tables/#", qos=1)
        await tp.publish("tables/tp-01/secure/events", b"hidden", qos=1)
        await tp.publish("tables/tp-01/round", b"snapshot", qos=1)
        await tp.publish("tables/tp-01/reply/pit", b"for the pit", qos=1)
        control_topic = (
            "tables/tp-01/events" if user == "archive-1" else "tables/tp-01/reply/betting"
        )
        await tp.publish(control_topic, b"control", qos=1)
        got: list[tuple[str, bytes]] = []
        async with asyncio.timeout(10):
            async for message in spy.messages:
                assert isinstance(message.payload, bytes)
                got.append((str(message.topic), message.payload))
                if message.payload == b"control":
                    break
    # The consumer: the retained status comes too; neither secure/ nor round (not granted)
    # ever does. The replay user: only the betting role's replies.
    assert got[-1] == (control_topic, b"control")
    allowed = (
        {"tables/tp-01/status", "tables/tp-01/events"}
        if user == "archive-1"
        else {"tables/tp-01/reply/betting"}
    )
    assert {topic for topic, _ in got} <= allowed
    if user == "archive-1":
        return
    # A replay on the pit boss's topic is refused by the broker (replay_role must be betting).
    pit = MqttSettings.model_validate(
        {**_mqtt(broker, tls, user), "password": SecretStr(PASSWORDS[user])}
    )
    outcome = await send_command(
        Target(pit, "tp-01"), "pit", "replay", {"round": None, "from_seq": 1}, timeout=10
    )
    assert outcome.code == EXIT_REFUSED, outcome.text
