"""A taken command or status session raises a pit alert at once (real Mosquitto).

Another client connecting with the command router's client id (``tablectl-<table>-cmd``) or
the betting-status watcher's (``-status``) makes that connection stand down for
``mqtt.takeover_pause_seconds``: no command reaches the table meanwhile. Before, only a log
line said so; now a ``pit_alert`` is journalled at once, and the table's outbox (whose own
connection is untouched) publishes it on ``events`` (its public phrase; the reason itself on
``secure/events``), where the pit console lists it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from controller.aio import first_completed
from controller.broker import parse_broker_url
from controller.commands import Answer, Command, CommandRouter, StatusWatcher
from controller.journal import Journal
from controller.messages import Topics
from controller.mqtt.settings import MqttSettings
from tests.integration.conftest import running_publisher
from tests.support.mosquitto import MISSING, have_mosquitto

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason=MISSING)

TABLE = "tp-take"


def _settings(url: str) -> MqttSettings:
    return MqttSettings(
        urls=[url],
        reconnect_min_seconds=0.05,
        reconnect_max_seconds=0.3,
        publish_timeout=2.0,
        connect_timeout=3.0,
        takeover_pause_seconds=60.0,
    )


async def _rogue(url: str, client_id: str, stop: asyncio.Event) -> int:
    """Connect as ``client_id`` again and again (evicting its owner) until ``stop``."""
    address = parse_broker_url(url)
    connects = 0
    while not stop.is_set():
        try:
            async with aiomqtt.Client(
                address.host,
                address.port,
                identifier=client_id,
                protocol=aiomqtt.ProtocolVersion.V5,
                timeout=2.0,
            ) as client:
                connects += 1

                async def read(client: aiomqtt.Client = client) -> None:
                    async for _message in client.messages:
                        pass

                await first_completed(read(), stop.wait())
        except aiomqtt.MqttError:
            pass
        await asyncio.sleep(0.05)
    return connects


def _alerts(journal: Journal) -> list[str]:
    return [str(e.body["reason"]) for e in journal.entries() if e.kind == "pit_alert"]


async def _answer(command: Command) -> Answer:
    return Answer(True)


async def _published_alert(url: str, stop: asyncio.Event, seen: list[dict[str, Any]]) -> None:
    """Collect the table's pit alerts from its public ``events`` topic until ``stop``."""
    address = parse_broker_url(url)
    async with aiomqtt.Client(address.host, address.port, identifier="takeover-viewer") as client:
        topics = Topics(table=TABLE)
        await client.subscribe(topics.events, qos=1)
        await client.subscribe(topics.secure_events, qos=1)

        async def read() -> None:
            async for message in client.messages:
                body = json.loads(bytes(message.payload))
                if body.get("kind") == "pit_alert":
                    seen.append({"topic": str(message.topic), **body})

        await first_completed(read(), stop.wait())


async def test_a_taken_command_session_raises_a_pit_alert_at_once(
    mosquitto: Any, tmp_path: Path
) -> None:
    settings = _settings(mosquitto.url)
    with Journal.open(tmp_path / "j.sqlite") as journal:
        router = CommandRouter(settings, TABLE, journal, _answer, handler_timeout=2.0)
        stop = asyncio.Event()
        published: list[dict[str, Any]] = []
        async with (
            asyncio.timeout(30),
            running_publisher(settings, TABLE, journal, connect_within=10),
            asyncio.TaskGroup() as group,
        ):
            viewer = group.create_task(_published_alert(mosquitto.url, stop, published))
            task = group.create_task(router.run())
            async with asyncio.timeout(10):
                await router.subscribed.wait()
            started = asyncio.get_running_loop().time()
            rogue = group.create_task(_rogue(mosquitto.url, router.client_id, stop))
            while not _alerts(journal):
                await asyncio.sleep(0.02)
            detected = asyncio.get_running_loop().time() - started
            alert = _alerts(journal)[0]
            # Published (the public phrase on events, the reason on secure/events): the
            # publisher's connection is untouched.
            while len(published) < 2:
                await asyncio.sleep(0.02)
            stop.set()
            await router.stop()
            await task
            await viewer
            assert await rogue >= 1
    assert detected < 5.0, f"alert after {detected:.1f} s"
    assert "command client id" in alert
    assert "no command reaches the table" in alert
    assert "60 s" in alert
    by_topic = {m["topic"]: m["data"]["reason"] for m in published}
    assert set(by_topic) == {Topics(table=TABLE).events, Topics(table=TABLE).secure_events}
    assert alert in by_topic.values()
    assert len(_alerts_of(tmp_path)) == 1  # one alert, not one per eviction


def _alerts_of(tmp_path: Path) -> list[str]:
    with Journal.open(tmp_path / "j.sqlite") as journal:
        return _alerts(journal)


async def test_a_taken_status_session_raises_a_pit_alert(mosquitto: Any, tmp_path: Path) -> None:
    settings = _settings(mosquitto.url)
    with Journal.open(tmp_path / "j.sqlite") as journal:
        watcher = StatusWatcher(settings, TABLE, journal=journal)
        stop = asyncio.Event()
        async with asyncio.timeout(30), asyncio.TaskGroup() as group:
            task = group.create_task(watcher.run())
            await asyncio.sleep(0.5)  # connected and subscribed (a clean session each time)
            rogue = group.create_task(_rogue(mosquitto.url, watcher.client_id, stop))
            while not _alerts(journal):
                await asyncio.sleep(0.02)
            stop.set()
            await watcher.stop()
            await task
            await rogue
        alerts = _alerts(journal)
    assert len(alerts) == 1
    assert "status client id" in alerts[0]
    assert "betting system's presence" in alerts[0]
