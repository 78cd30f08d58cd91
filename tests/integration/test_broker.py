"""Broker helpers: URL parsing, the CONNECT/CONNACK probe, the embedded amqtt broker."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid

import aiomqtt
import pytest

from controller.broker import (
    EmbeddedBroker,
    broker_answers,
    choose_broker,
    free_port,
    parse_broker_url,
)
from controller.errors import ConfigError
from controller.journal import Journal
from controller.mqtt.settings import MqttSettings
from controller.publisher import Publisher


def test_parse_broker_url():
    plain = parse_broker_url("mqtt://broker.example:1884")
    assert (plain.host, plain.port, plain.tls) == ("broker.example", 1884, False)
    assert parse_broker_url("mqtt://10.0.0.5").port == 1883
    secure = parse_broker_url("mqtts://broker.example")
    assert (secure.port, secure.tls) == (8883, True)
    for bad, why in [
        ("http://x:1883", "must start with mqtt"),
        ("mqtt://:1883", "no host"),
        ("mqtt://u:p@x:1883", "credentials"),
        ("mqtt://x:1883/path", "path"),
        ("mqtt://x:99999", "malformed"),
    ]:
        with pytest.raises(ConfigError, match=why) as info:
            parse_broker_url(bad)
        assert info.value.context["url"] == bad
    with pytest.raises(ConfigError, match="must start with mqtt"):
        MqttSettings(urls=["ws://x:80"])


async def test_broker_answers_true_for_mosquitto_in_both_protocols(mosquitto_session):
    broker = mosquitto_session
    assert await broker_answers(broker.host, broker.port, 3.0)
    assert await broker_answers(broker.host, broker.port, 3.0, protocol="5")


async def test_broker_answers_false_when_nothing_listens():
    assert not await broker_answers("127.0.0.1", free_port(), 1.0)


async def test_broker_answers_false_for_a_tcp_server_that_is_not_mqtt():
    """TCP accepts, but no CONNACK ever comes: not a broker."""
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await reader.read(1024)  # swallow the CONNECT, answer nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        assert not await broker_answers("127.0.0.1", port, 0.5)
        assert accepted, "the probe did reach the TCP server"
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_embedded_broker_carries_a_publish_end_to_end():
    async with EmbeddedBroker() as broker:
        assert broker.url == f"mqtt://127.0.0.1:{broker.port}"
        assert await broker_answers("127.0.0.1", broker.port, 3.0)
        async with aiomqtt.Client("127.0.0.1", broker.port, identifier="sub-e2e") as sub:
            await sub.subscribe("demo/#", qos=1)
            async with aiomqtt.Client("127.0.0.1", broker.port, identifier="pub-e2e") as pub:
                await pub.publish("demo/x", b'{"n":1}', qos=1)
            async with asyncio.timeout(5):
                message = await anext(aiter(sub.messages))
        assert (str(message.topic), message.payload) == ("demo/x", b'{"n":1}')
    # Stopped: the port no longer answers.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", broker.port), timeout=1).close()


async def test_publisher_over_the_embedded_broker_with_mqtt_311(tmp_path):
    table = f"emb-{uuid.uuid4().hex[:6]}"
    async with EmbeddedBroker() as broker:
        received: list[dict[str, object]] = []
        async with aiomqtt.Client("127.0.0.1", broker.port, identifier="sub-emb") as sub:
            await sub.subscribe(f"tables/{table}/events", qos=1)
            with Journal.open(tmp_path / "j.sqlite") as journal:
                settings = MqttSettings(urls=[broker.url], protocol="3.1.1", publish_timeout=2)
                publisher = Publisher(settings, table, journal, game="g", version="1")
                async with asyncio.timeout(20), asyncio.TaskGroup() as group:
                    run_task = group.create_task(publisher.run())
                    journal.append("table_status", {"state": "ready", "detail": "demo"})
                    journal.append("table_status", {"state": "busy", "detail": "demo"})
                    assert await publisher.flush(10)
                    async for message in sub.messages:
                        assert isinstance(message.payload, bytes)
                        received.append(json.loads(message.payload))
                        if len(received) == 2:
                            break
                    await publisher.stop()
                    await run_task
    assert [(r["seq"], r["kind"]) for r in received] == [(1, "table_status"), (2, "table_status")]


async def test_choose_broker():
    # Configured URLs are kept as they are, with the configured protocol.
    urls, embedded, protocol = await choose_broker(["mqtt://10.1.2.3:1883"], protocol="5")
    assert (urls, embedded, protocol) == (["mqtt://10.1.2.3:1883"], None, "5")
    with pytest.raises(ConfigError):
        await choose_broker(["ftp://x"])


async def test_choose_broker_prefers_a_local_broker(mosquitto_session):
    urls, embedded, protocol = await choose_broker([], local_url=mosquitto_session.url)
    assert (urls, embedded, protocol) == ([mosquitto_session.url], None, "5")


async def test_choose_broker_falls_back_to_an_embedded_311_broker():
    nobody = f"mqtt://127.0.0.1:{free_port()}"
    urls, embedded, protocol = await choose_broker([], local_url=nobody, probe_timeout=0.5)
    assert embedded is not None
    try:
        assert protocol == "3.1.1"
        assert urls == [embedded.url]
        assert embedded.running
        address = parse_broker_url(urls[0])
        assert await broker_answers(address.host, address.port, 3.0)
    finally:
        await embedded.stop()
    assert not embedded.running
