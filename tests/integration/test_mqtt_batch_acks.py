"""A batch's acknowledgements in one write, and the messages already queued taken at once.

``adapter.ack_all`` writes the PUBACKs of a committed batch together (paho alone sends each
packet with a ``send`` of its own), and ``adapter.queued_messages`` takes what aiomqtt has
queued already (its ``messages`` iterator hands over one message per task). Against a real
Mosquitto, on a persistent session with manual acknowledgements, as the archive uses them:
what was acknowledged is never sent again, what was not is sent again, in order, on the next
connection, in both MQTT versions.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from controller.broker import BrokerAddress, parse_broker_url
from controller.mqtt.adapter import ack_all, manual_acks, queued_messages
from controller.mqtt.connection import Connector
from controller.mqtt.settings import MqttSettings

if TYPE_CHECKING:
    import aiomqtt

BACKLOG = 60
ACKED = 45


class _ManualAcks(Connector):
    """The shared connector with acknowledgements left to the test (as the archive's)."""

    sends: list[int]

    def make_client(self, address: BrokerAddress) -> aiomqtt.Client:
        client = super().make_client(address)
        manual_acks(client)
        paho: Any = client._client
        send = paho._sock_send

        def counted_send(data: bytes) -> Any:
            self.sends.append(len(data))
            return send(data)

        paho._sock_send = counted_send
        return client


async def _backlog(address: BrokerAddress, topic: str, protocol: str) -> None:
    import aiomqtt

    version = aiomqtt.ProtocolVersion.V5 if protocol == "5" else aiomqtt.ProtocolVersion.V311
    async with aiomqtt.Client(address.host, address.port, protocol=version) as publisher:
        for n in range(BACKLOG):
            await publisher.publish(topic, f"m-{n}", qos=1)


async def _take(client: aiomqtt.Client, count: int) -> list[aiomqtt.Message]:
    """``count`` messages: one from ``client.messages``, then what is queued, until enough."""
    taken: list[aiomqtt.Message] = []
    async for first in client.messages:
        taken += [first, *queued_messages(client)]
        if len(taken) >= count:
            break
    return taken


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
async def test_a_batch_acknowledged_together_is_not_sent_again_and_the_rest_is(
    mosquitto_session: Any, protocol: str
) -> None:
    settings = MqttSettings(urls=[mosquitto_session.url], protocol=protocol, connect_timeout=5.0)
    address = parse_broker_url(mosquitto_session.url)
    topic = f"tests/batch-acks/{uuid.uuid4().hex[:8]}"
    connector = _ManualAcks(
        settings,
        client_id=f"batch-acks-{uuid.uuid4().hex[:8]}",
        name="test",
        logger="tests.paho",
        persistent=True,
    )
    connector.sends = []
    async with asyncio.timeout(30):
        async with connector.connect(address) as client:
            await client.subscribe(topic, qos=1)
        await _backlog(address, topic, protocol)  # kept for the session while it is away
        async with connector.connect(address) as client:
            first = await _take(client, BACKLOG)
            assert [bytes(m.payload).decode() for m in first] == [f"m-{n}" for n in range(BACKLOG)]
            assert len(client.messages) == 0  # everything queued was taken
            connector.sends.clear()
            ack_all(client, [(m.mid, m.qos) for m in first[:ACKED]])
            await asyncio.sleep(0.5)  # written by the loop; the broker takes them
            # One write for the batch: paho alone makes one `send` per PUBACK.
            assert connector.sends == [4 * ACKED]
        async with connector.connect(address) as client:
            again = await _take(client, BACKLOG - ACKED)
            ack_all(client, [(m.mid, m.qos) for m in again])
            await asyncio.sleep(0.5)
        async with connector.connect(address) as client:
            await asyncio.sleep(1.0)  # nothing more may come: all acknowledged
            assert len(client.messages) == 0
    # Exactly the unacknowledged ones came again, in order.
    assert [bytes(m.payload).decode() for m in again] == [f"m-{n}" for n in range(ACKED, BACKLOG)]


async def test_acknowledging_on_a_closed_connection_does_nothing() -> None:
    import aiomqtt

    client = aiomqtt.Client("127.0.0.1", 1)
    ack_all(client, [(1, 1), (2, 1)])  # not connected: the broker will send them again
    assert queued_messages(client) == []
