"""Acknowledgements after the commit, and the messages already queued taken at once.

The archive's client leaves acknowledgements to it (``Connector(manual_acks=True)``: paho's
public ``manual_ack_set``), takes what is queued already with each message it is given
(``Client.take_queued``), and acknowledges a committed batch with ``drain.ack_all``: on the
pinned paho its PUBACKs are queued as one packet (one ``send``), otherwise through paho's
public ``ack`` one by one. Against a real Mosquitto, on a persistent session, both ways and in
both MQTT versions: what was acknowledged is never sent again, what was not is sent again, in
order, on the next connection.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from typing import Any, Literal

import paho.mqtt.client as paho_client
import pytest

from controller.broker import BrokerAddress, parse_broker_url
from controller.mqtt import drain
from controller.mqtt.client import Client, Message
from controller.mqtt.connection import Connector
from controller.mqtt.settings import MqttSettings

BACKLOG = 60
ACKED = 45


async def _backlog(address: BrokerAddress, topic: str, protocol: Literal["5", "3.1.1"]) -> None:
    async with Client(address.host, address.port, protocol=protocol) as publisher:
        for n in range(BACKLOG):
            await publisher.publish(topic, f"m-{n}", qos=1)


async def _take(client: Client, count: int) -> list[Message]:
    """``count`` messages: one from ``client.messages``, then what is queued, until enough."""
    taken: list[Message] = []
    async for first in client.messages:
        taken += [first, *client.take_queued()]
        if len(taken) >= count:
            break
    return taken


@pytest.mark.parametrize("path", ["batched", "public"])
@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_a_batch_acknowledged_after_the_commit_is_not_sent_again_and_the_rest_is(
    mosquitto_session: Any,
    protocol: Literal["5", "3.1.1"],
    path: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    queued: list[int] = []
    packet_queue = paho_client.Client.__dict__["_packet_queue"]

    @functools.wraps(packet_queue)
    def counted(self: Any, command: int, packet: bytes, *rest: Any, **named: Any) -> Any:
        if command & 0xF0 == paho_client.PUBACK:
            queued.append(len(packet))
        return packet_queue(self, command, packet, *rest, **named)

    # The drain's own test stands in here for what it relies on: packets queued to paho.
    monkeypatch.setattr(paho_client.Client, "_packet_queue", counted)
    if path == "public":
        monkeypatch.setattr(drain, "relied_on", lambda: "a paho the drain was not measured with")
    drain.forget()
    settings = MqttSettings(urls=[mosquitto_session.url], protocol=protocol, connect_timeout=5.0)
    address = parse_broker_url(mosquitto_session.url)
    topic = f"tests/batch-acks/{uuid.uuid4().hex[:8]}"
    connector = Connector(
        settings,
        client_id=f"batch-acks-{uuid.uuid4().hex[:8]}",
        name="test",
        logger="tests.paho",
        persistent=True,
        manual_acks=True,
    )
    try:
        async with asyncio.timeout(30):
            async with connector.connect(address) as client:
                await client.subscribe(topic, qos=1)
            await _backlog(address, topic, protocol)  # kept for the session while it is away
            async with connector.connect(address) as client:
                first = await _take(client, BACKLOG)
                assert [m.payload.decode() for m in first] == [f"m-{n}" for n in range(BACKLOG)]
                assert len(client.messages) == 0  # everything queued was taken
                queued.clear()
                drain.ack_all(client, [(m.mid, m.qos) for m in first[:ACKED]])
                # One packet for the batch on the pinned paho; paho's ack queues one each.
                assert queued == ([4 * ACKED] if path == "batched" else [4] * ACKED)
                await asyncio.sleep(0.5)  # written by the loop; the broker takes them
            async with connector.connect(address) as client:
                again = await _take(client, BACKLOG - ACKED)
                drain.ack_all(client, [(m.mid, m.qos) for m in again])
                await asyncio.sleep(0.5)
            async with connector.connect(address) as client:
                await asyncio.sleep(1.0)  # nothing more may come: all acknowledged
                assert len(client.messages) == 0
    finally:
        drain.forget()
    # Exactly the unacknowledged ones came again, in order.
    assert [m.payload.decode() for m in again] == [f"m-{n}" for n in range(ACKED, BACKLOG)]


async def test_acknowledging_on_a_closed_connection_does_nothing() -> None:
    client = Client("127.0.0.1", 1, manual_acks=True)
    drain.ack_all(client, [(1, 1), (2, 1)])  # not connected: the broker will send them again
    client.ack(3, 1)
    assert client.take_queued() == []
