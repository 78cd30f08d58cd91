"""Reading a backlog in bursts per readable event (``Client(read_packets=...)``), real Mosquitto.

paho 2's ``loop_read`` reads one packet per call for a client that only receives; the client
(controller/mqtt/client.py) calls it again while each call hands something over, up to
``read_packets`` times per readable event. A backlog kept for a persistent session is drained
in bursts no larger than that bound, every message arriving once, in order, with its MQTT 5
properties (decoded on paho's shared property tables when the archive's drain installed them).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from controller.broker import parse_broker_url
from controller.mqtt.client import Client
from controller.mqtt.connection import Connector
from controller.mqtt.settings import MqttSettings

BACKLOG = 120
BOUND = 8
DRAIN_SECONDS = 5.0
"""The backlog is on the socket at once: reading it takes well under a second."""


def _persistent(url: str, name: str, **options: Any) -> Connector:
    """A connector of one persistent MQTT 5 session (a client id of its own) on ``url``."""
    return Connector(
        MqttSettings(urls=[url], protocol="5", connect_timeout=5.0),
        client_id=f"{name}-{uuid.uuid4().hex[:8]}",
        name="test",
        logger="tests.paho",
        persistent=True,
        **options,
    )


@pytest.mark.parametrize("shared_tables", [False, True], ids=["pahos-tables", "drain-tables"])
async def test_a_backlog_is_read_in_bounded_bursts_in_order_with_its_properties(
    mosquitto_session: Any, shared_tables: bool
) -> None:
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    if shared_tables:
        from controller.mqtt import drain

        drain.install()
    address = parse_broker_url(mosquitto_session.url)
    topic = f"tests/read-through/{uuid.uuid4().hex[:8]}"
    connector = _persistent(mosquitto_session.url, "read-through", read_packets=BOUND)
    async with asyncio.timeout(30):
        async with connector.connect(address) as client:
            await client.subscribe(topic, qos=1)
        # Away: the broker keeps the session's messages.
        async with Client(address.host, address.port, protocol="5") as publisher:
            for n in range(BACKLOG):
                properties: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
                properties.CorrelationData = f"c-{n}".encode()
                properties.UserProperty = [("n", str(n))]
                await publisher.publish(topic, f"m-{n}", qos=1, properties=properties)
        received: list[tuple[str, Any, Any]] = []
        async with connector.connect(address) as client, asyncio.timeout(DRAIN_SECONDS):
            async for message in client.messages:
                properties = message.properties
                assert properties is not None
                received.append(
                    (message.payload.decode(), properties.CorrelationData, properties.UserProperty)
                )
                if len(received) == BACKLOG:
                    break
            events, largest = client.read_events, client.largest_burst
    assert received == [(f"m-{n}", f"c-{n}".encode(), [("n", str(n))]) for n in range(BACKLOG)]
    # Bursts: a readable event read several waiting packets (paho alone reads one), never more
    # than the bound; so far fewer readable events than packets.
    assert largest == BOUND
    assert events < BACKLOG // 2, events


def test_read_packets_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="read_packets must be >= 1, got 0"):
        Client("127.0.0.1", 1, read_packets=0)


async def test_the_acknowledgements_of_a_burst_are_written_with_it(mosquitto_session: Any) -> None:
    """A received QoS 1 message's PUBACK is written before the message is handed over (inside
    the read that queued it: a connector's client writes through), not on a writable event of
    its own: no watch of the socket for writing, no pass of the loop (docs/performance.md,
    "The demo"). And the broker has it: a persistent session gets nothing again."""
    address = parse_broker_url(mosquitto_session.url)
    topic = f"tests/acks/{uuid.uuid4().hex[:8]}"
    connector = _persistent(mosquitto_session.url, "acks")
    pending_at_hand_over: list[bool] = []

    async def read(client: Client) -> None:
        async for message in client.messages:  # waiting when each message comes
            pending_at_hand_over.append(client.paho.want_write())
            assert message.payload == f"m-{len(pending_at_hand_over) - 1}".encode()
            if len(pending_at_hand_over) == 5:
                return

    async with asyncio.timeout(30):
        async with connector.connect(address) as client:
            await client.subscribe(topic, qos=1)
            reader = asyncio.create_task(read(client))
            async with Client(address.host, address.port, protocol="5") as publisher:
                for n in range(5):
                    await publisher.publish(topic, f"m-{n}", qos=1)
                    await asyncio.sleep(0.05)
            await reader
        async with connector.connect(address) as client:
            with pytest.raises(TimeoutError):  # nothing unacknowledged to send again
                async with asyncio.timeout(1.0):
                    await anext(client.messages)
    assert pending_at_hand_over == [False] * 5


async def test_an_acknowledgement_made_in_the_loop_is_written_inside_the_call(
    mosquitto_session: Any,
) -> None:
    """A connector's client writes through by default: the archive's ``ack()`` after its
    commit (``manual_acks``) is on the socket when the call returns, with no writable event
    and pass of the loop of its own (docs/performance.md, "Under 1.3x"). And the broker has
    it: a persistent session gets nothing again."""
    address = parse_broker_url(mosquitto_session.url)
    topic = f"tests/acks/{uuid.uuid4().hex[:8]}"
    connector = _persistent(mosquitto_session.url, "manual", manual_acks=True)
    pending_after_ack: list[bool] = []
    async with asyncio.timeout(30):
        async with connector.connect(address) as client:
            await client.subscribe(topic, qos=1)
            async with Client(address.host, address.port, protocol="5") as publisher:
                for n in range(3):
                    await publisher.publish(topic, f"m-{n}", qos=1)
                    message = await anext(client.messages)
                    assert message.payload == f"m-{n}".encode()
                    client.ack(message.mid, message.qos)
                    pending_after_ack.append(client.paho.want_write())
        async with connector.connect(address) as client:
            with pytest.raises(TimeoutError):  # nothing unacknowledged to send again
                async with asyncio.timeout(1.0):
                    await anext(client.messages)
    assert pending_after_ack == [False] * 3
