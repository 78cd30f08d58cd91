"""Reading every waiting packet per readable event (``adapter.read_through``), real Mosquitto.

paho 2's ``loop_read`` reads one packet per readable event for a client that only receives;
every :class:`~controller.mqtt.connection.Connector` client reads up to ``read_packets``.
A backlog kept for a persistent session is drained in bursts no larger than that bound, every
message arriving once, in order, with its MQTT 5 properties (decoded on paho's shared property
tables, ``adapter.share_property_tables``).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from controller.broker import BrokerAddress, parse_broker_url
from controller.mqtt.connection import Connector
from controller.mqtt.settings import MqttSettings

if TYPE_CHECKING:
    import aiomqtt

BACKLOG = 120
BOUND = 8
DRAIN_SECONDS = 5.0
"""The backlog is on the socket at once: reading it takes well under a second. Bytes left
stranded in the buffer would wait for the next packet the broker sends (a PINGRESP, after
the keepalive): longer than this."""


def counting(connector: Connector, reads: list[int]) -> None:
    """Record, for each readable event of ``connector``'s clients, the packets it read."""
    made = connector.make_client

    def make_client(address: BrokerAddress) -> aiomqtt.Client:
        client = made(address)
        paho: Any = client._client
        loop_read, packet_read = paho.loop_read, paho._packet_read

        def counted_loop_read(max_packets: int = 1) -> Any:
            reads.append(0)
            return loop_read(max_packets)

        def counted_packet_read() -> Any:
            rc = packet_read()
            if rc == 0 and reads:
                reads[-1] += 1
            return rc

        paho.loop_read = counted_loop_read
        paho._packet_read = counted_packet_read
        return client

    connector.make_client = make_client  # type: ignore[method-assign]


@pytest.mark.parametrize("buffered", [False, True], ids=["recv-per-read", "buffered"])
async def test_a_backlog_is_read_in_bounded_bursts_in_order_with_its_properties(
    mosquitto_session: Any, buffered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Buffered, the whole backlog comes in a few chunks: after each burst of ``BOUND``
    packets the rest waits in the buffer, not on the socket (no readable event would come
    for it), and is read on the loop's next pass."""
    import aiomqtt
    import paho.mqtt.client as paho_client
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    recvs: list[int] = []
    sock_recv = paho_client.Client._sock_recv

    def counted_recv(self: Any, size: int) -> bytes:
        data: bytes = sock_recv(self, size)
        recvs.append(len(data))
        return data

    monkeypatch.setattr(paho_client.Client, "_sock_recv", counted_recv)

    settings = MqttSettings(urls=[mosquitto_session.url], protocol="5", connect_timeout=5.0)
    address = parse_broker_url(mosquitto_session.url)
    topic = f"tests/read-through/{uuid.uuid4().hex[:8]}"
    connector = Connector(
        settings,
        client_id=f"read-through-{uuid.uuid4().hex[:8]}",
        name="test",
        logger="tests.paho",
        persistent=True,
        read_packets=BOUND,
        buffered_reads=buffered,
    )
    reads: list[int] = []
    counting(connector, reads)
    async with asyncio.timeout(30):
        async with connector.connect(address) as client:
            await client.subscribe(topic, qos=1)
        # Away: the broker keeps the session's messages.
        async with aiomqtt.Client(
            address.host, address.port, protocol=aiomqtt.ProtocolVersion.V5
        ) as publisher:
            for n in range(BACKLOG):
                properties: Any = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
                properties.CorrelationData = f"c-{n}".encode()
                properties.UserProperty = [("n", str(n))]
                await publisher.publish(topic, f"m-{n}", qos=1, properties=properties)
        reads.clear()
        recvs.clear()
        received: list[tuple[str, Any, Any]] = []
        async with connector.connect(address) as client, asyncio.timeout(DRAIN_SECONDS):
            async for message in client.messages:
                properties = message.properties
                payload: Any = message.payload
                assert properties is not None
                received.append(
                    (bytes(payload).decode(), properties.CorrelationData, properties.UserProperty)
                )
                if len(received) == BACKLOG:
                    break
    assert received == [(f"m-{n}", f"c-{n}".encode(), [("n", str(n))]) for n in range(BACKLOG)]
    # Bursts: a readable event read several waiting packets (paho alone reads one), never more
    # than the bound.
    assert max(reads) == BOUND
    assert sum(reads) >= BACKLOG  # the CONNACK and SUBACK too
    if buffered:  # a few chunks for the whole backlog (each recv asks for 64 KiB)
        assert len(recvs) < BACKLOG // 4, recvs
    else:  # paho alone: a recv per header byte, and one for the rest of each packet
        assert len(recvs) >= 3 * BACKLOG, len(recvs)


async def test_read_packets_below_one_is_refused() -> None:
    import aiomqtt

    from controller.mqtt.adapter import read_through

    with pytest.raises(ValueError, match="max_packets must be >= 1, got 0"):
        read_through(aiomqtt.Client("127.0.0.1", 1), 0)
