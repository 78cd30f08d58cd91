"""``controller.mqtt.client.Client`` (paho-mqtt through its public API) against a real Mosquitto.

* A SUBACK that arrives after its ``subscribe`` was cancelled (a task stopped mid-subscribe,
  as at a second SIGINT) is dropped quietly: aiomqtt logged a ``KeyError`` traceback for it
  (``self._pending_subscribes.pop(mid)`` in ``_on_subscribe``; issue 22).
* A publish is written inside ``hand_off`` when asked (``write_through``), and its PUBACK's
  reason code resolves the future it returned.
* A broker that ends the link shows in ``messages`` and in every wait, at once.
* The public surface only: no line of the product outside ``controller/mqtt/drain.py`` reaches
  into a library's private attributes (the shared/hooks check's pattern).
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from controller.broker import parse_broker_url
from controller.mqtt.client import Client
from controller.mqtt.connection import Connector
from controller.mqtt.settings import MqttSettings

ROOT = Path(__file__).resolve().parents[2]
PRIVATE = re.compile(r"(client|paho|aiomqtt|_client|mqtt)[A-Za-z_]*\._[a-z]")
"""The shared/hooks check: a library's private attribute reached through a client."""


def _connector(url: str, **extra: Any) -> Connector:
    settings = MqttSettings(urls=[url], protocol="5", connect_timeout=5.0, publish_timeout=5.0)
    return Connector(
        settings, client_id=f"client-{uuid.uuid4().hex[:8]}", name="test", logger="tests.paho",
        **extra,
    )  # fmt: skip


async def test_a_suback_after_its_waiter_was_cancelled_is_dropped_quietly(
    mosquitto_session: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The SUBSCRIBE is on the wire when its task is cancelled; its SUBACK comes later."""
    caplog.set_level(logging.DEBUG)
    connector = _connector(mosquitto_session.url)
    address = parse_broker_url(mosquitto_session.url)
    topic = f"tests/client/{uuid.uuid4().hex[:8]}"
    async with asyncio.timeout(20), connector.connect(address) as client:
        pending = asyncio.create_task(client.subscribe(f"{topic}/cancelled", qos=1))
        await asyncio.sleep(0)  # sent: now waiting for its SUBACK
        assert not pending.done()
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        # The broker answers in order: once this SUBACK is in, the cancelled one was read.
        await client.subscribe(f"{topic}/after", qos=1)
        await client.publish(f"{topic}/after", b"still works", qos=1)
        message = await client.messages.__anext__()
        assert (str(message.topic), bytes(message.payload)) == (f"{topic}/after", b"still works")
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert errors == [], [r.getMessage() for r in errors]
    assert "KeyError" not in caplog.text


async def test_a_publish_is_written_inside_hand_off_and_its_puback_resolves_it(
    mosquitto_session: Any,
) -> None:
    address = parse_broker_url(mosquitto_session.url)
    topic = f"tests/client/{uuid.uuid4().hex[:8]}"
    for write_through in (True, False):
        connector = _connector(mosquitto_session.url, write_through=write_through)
        async with asyncio.timeout(20), connector.connect(address) as client:
            future = client.hand_off(topic, b"x", 1)
            assert future is not None
            # Written at once (write-through), or left for the next writable event.
            assert client.paho.want_write() is (not write_through)
            reason = await future
            assert not reason.is_failure
            assert client.hand_off(topic, b"x", 0) is None  # QoS 0: nothing to wait for


async def test_two_readers_waiting_at_once_each_get_a_message(mosquitto_session: Any) -> None:
    connector = _connector(mosquitto_session.url)
    address = parse_broker_url(mosquitto_session.url)
    topic = f"tests/client/{uuid.uuid4().hex[:8]}"
    async with asyncio.timeout(20), connector.connect(address) as client:
        await client.subscribe(topic, qos=1)
        readers = [asyncio.create_task(client.messages.__anext__()) for _ in range(2)]
        await asyncio.sleep(0.05)  # both wait
        for n in range(2):
            await client.publish(topic, f"m-{n}", qos=1)
        got = sorted(message.payload for message in await asyncio.gather(*readers))
    assert got == [b"m-0", b"m-1"]


async def test_a_lost_link_ends_the_messages_and_every_wait_at_once(
    mosquitto: Any,
) -> None:
    from controller.mqtt.client import MqttLinkError

    connector = _connector(mosquitto.url)
    address = parse_broker_url(mosquitto.url)
    async with asyncio.timeout(20):
        async with connector.connect(address) as client:
            await client.subscribe("tests/client/#", qos=1)
            reader = asyncio.create_task(client.messages.__anext__())
            await asyncio.sleep(0.1)
            mosquitto.stop()
            with pytest.raises(MqttLinkError, match="disconnected during message iteration"):
                await reader
            assert not client.connected
            with pytest.raises(MqttLinkError, match=r"not (currently )?connected"):
                await client.subscribe("tests/client/again", qos=1)


def test_a_client_whose_loop_has_closed_closes_its_socket_quietly(mosquitto_session: Any) -> None:
    """paho's ``__del__`` closes the socket of a client collected after its loop closed.

    It calls ``on_socket_close`` in whatever thread the collector runs: before, the client
    handed the unwatching to the closed loop (``call_soon_threadsafe``), which raised "Event
    loop is closed" inside ``__del__``: an "exception ignored" for the process, and a failed
    test in the suite (pytest turns it into an error; issue 26). The loop being gone, there is
    nothing to unwatch: it returns quietly, in the loop's thread or any other.
    """
    address = parse_broker_url(mosquitto_session.url)
    held: list[Any] = []

    async def connect_and_leave() -> None:
        client = Client(address.host, address.port, identifier=f"left-{uuid.uuid4().hex[:8]}")
        await client.__aenter__()  # never left: the loop closes under it, as in a test
        held.append(client)

    asyncio.run(connect_and_leave())
    client = held.pop()
    sock = client.paho.socket()
    assert sock is not None
    failures: list[BaseException] = []

    def close() -> None:
        try:
            client.paho.on_socket_close(client.paho, None, sock)
        except BaseException as exc:
            failures.append(exc)

    other = threading.Thread(target=close)  # as the collector's thread would
    other.start()
    other.join(10)
    close()  # and as the loop's thread
    sock.close()
    assert failures == [], failures


def test_no_product_line_reaches_into_a_library_s_private_attributes() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for package in ("controller", "drivers", "simulators")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "controller" / "mqtt" / "drain.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert found == []
