"""An in-process MQTT broker for the fast test tier: broker URLs ``memory://NAME``.

Every long-lived tablectl client connects through :class:`~controller.mqtt.connection.Connector`;
for a ``memory://NAME`` address it makes a :class:`MemoryClient` instead of a paho client, and
the table's publisher, command router and status watcher run unchanged on top of it: the
outbox, the envelopes, the acknowledgements and the retained birth are the real code. The
broker is the publish sink of ``make test-fast``: :attr:`MemoryBroker.published` keeps every
message accepted, in order, and subscribers get them as from Mosquitto.

What it does, of MQTT: topic filters with ``+`` and ``#`` (paho's ``topic_matches_sub``),
retained messages (an empty payload clears one), QoS 0 and 1 (a PUBACK at once, success),
the Last Will on a lost link (:meth:`MemoryBroker.drop`) and not on a clean close, one
session per client id (a second connection takes the first one's over: reason 0x8E, as
Mosquitto does). What it does not: authentication and ACLs, persistent sessions (a client
that is away misses what is published meanwhile), QoS 2, message expiry. Real brokers are
for the rest of the suite (``tests/support/mosquitto.py``); a table computer never uses this.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Sequence
from typing import Any

from paho.mqtt.client import topic_matches_sub
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.errors import PublishError
from controller.mqtt.client import Client, Message, MqttLinkError, Will

__all__ = ["MemoryBroker", "MemoryClient", "broker", "forget_brokers"]

SESSION_TAKEN_OVER = 0x8E
"""MQTT 5's DISCONNECT reason when another connection took the client id's session."""

_BROKERS: dict[str, MemoryBroker] = {}


def broker(name: str) -> MemoryBroker:
    """The broker called ``name`` in this process (made on first use)."""
    found = _BROKERS.get(name)
    if found is None:
        found = _BROKERS[name] = MemoryBroker(name)
    return found


def forget_brokers() -> None:
    """Drop every broker (between tests)."""
    _BROKERS.clear()


class MemoryBroker:
    """One named in-process broker.

    Attributes:
        name: Its name (``memory://NAME``).
        published: Every message accepted, in order (the publish sink).
        retained: The retained message of each topic.
        clients: The connected clients by client id.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.published: list[Message] = []
        self.retained: dict[str, Message] = {}
        self.clients: dict[str, MemoryClient] = {}
        self._ids = itertools.count(1)

    def topic(self, topic: str) -> list[bytes]:
        """The payloads published on ``topic`` so far, in order."""
        return [message.payload for message in self.published if message.topic == topic]

    def attach(self, client: MemoryClient) -> None:
        """Connect ``client``; one connected before with the same id is taken over."""
        key = client.identifier or f"auto-{next(self._ids)}"
        client.session_key = key
        previous = self.clients.get(key)
        if previous is not None and previous is not client:
            previous.lose(ReasonCode(PacketTypes.DISCONNECT, identifier=SESSION_TAKEN_OVER))
        self.clients[key] = client

    def detach(self, client: MemoryClient, *, clean: bool) -> None:
        """Disconnect ``client``; its Last Will is published unless it closed cleanly."""
        if self.clients.get(client.session_key) is client:
            del self.clients[client.session_key]
        will = client.will
        if not clean and will is not None:
            payload = will.payload.encode() if isinstance(will.payload, str) else will.payload
            self.publish(will.topic, payload or b"", will.qos, will.retain, will.properties)

    def drop(self, client_id: str) -> None:
        """The link of ``client_id`` fails (as a pulled cable): its Will is published."""
        client = self.clients.get(client_id)
        if client is not None:
            client.lose(None)

    def publish(
        self,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        properties: Properties | None,
    ) -> None:
        """Accept one message: keep it, retain it if asked, give it to every subscriber."""
        message = Message(topic, payload, qos, retain, 0, properties)
        self.published.append(message)
        if retain:
            if payload:
                self.retained[topic] = message
            else:
                self.retained.pop(topic, None)
        for client in list(self.clients.values()):
            client.offer(message, retained=False)


class MemoryClient(Client):
    """A :class:`~controller.mqtt.client.Client` whose link is a :class:`MemoryBroker`.

    The same public surface (``hand_off``, ``publish``, ``subscribe``, ``messages``, ``ack``,
    ``connected``, ``disconnect_reason``); no paho client, no socket, no thread.

    Args:
        name: The broker's name.
        identifier: The client id.
        will: The Last Will.
        timeout: Kept for the callers that read it.
    """

    def __init__(
        self,
        name: str,
        *,
        identifier: str | None = None,
        will: Will | None = None,
        timeout: float = 10.0,
    ) -> None:
        # Not Client.__init__: that builds a paho client, which this link does not use.
        self.hostname = f"memory:{name}"
        self.port = 0
        self._identifier = identifier or ""
        self.timeout = timeout
        self.connect_timeout = timeout
        self.pending_calls_threshold = 10
        self.queued: collections.deque[Message] = collections.deque()
        self.disconnect_reason: ReasonCode | None = None
        self.read_events = 0
        self.largest_burst = 0
        self.will = will
        self.session_key = ""
        self._broker = broker(name)
        self._filters: dict[str, int] = {}
        self._up = False
        self._waiters: set[asyncio.Future[None]] = set()
        self._mids = itertools.count(1)

    # -- the broker's side ---------------------------------------------------------------

    def offer(self, message: Message, *, retained: bool) -> None:
        """Queue ``message`` if a filter of this client matches its topic."""
        granted = [qos for pattern, qos in self._filters.items() if _matches(pattern, message)]
        if not granted:
            return
        qos = min(max(granted), message.qos)
        mid = next(self._mids) if qos else 0
        self.queued.append(
            Message(message.topic, message.payload, qos, retained, mid, message.properties)
        )
        self._wake()

    def lose(self, reason: ReasonCode | None) -> None:
        """The link is gone (taken over, or dropped): every waiter learns it at once."""
        if not self._up:
            return
        self._up = False
        self.disconnect_reason = reason
        self._broker.detach(self, clean=False)
        self._wake()

    def _wake(self) -> None:
        for waiter in list(self._waiters):
            if not waiter.done():
                waiter.set_result(None)

    # -- what callers use ----------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether the client is attached to its broker."""
        return self._up

    async def __aenter__(self) -> MemoryClient:
        """Attach to the broker (taking an older session of the same id over)."""
        self.disconnect_reason = None
        self._filters.clear()
        self.queued.clear()
        self._up = True
        self._broker.attach(self)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Detach cleanly (no Will)."""
        if self._up:
            self._up = False
            self._broker.detach(self, clean=True)
            self._wake()

    def hand_off(
        self,
        topic: str,
        payload: str | bytes | bytearray | None,
        qos: int = 1,
        *,
        retain: bool = False,
        properties: Properties | None = None,
    ) -> asyncio.Future[ReasonCode] | None:
        """Publish now; for QoS 1 the future of its PUBACK, resolved at once (success).

        Raises:
            PublishError: ``qos`` is 2, or the client is not connected.
        """
        if qos not in (0, 1):
            raise PublishError("QoS 2 is not supported", topic=topic, qos=qos)
        if not self._up:
            raise PublishError(f"could not send the publish to {topic!r}: not connected")
        self._broker.publish(topic, _bytes(payload), qos, retain, properties)
        if qos == 0:
            return None
        future: asyncio.Future[ReasonCode] = asyncio.get_running_loop().create_future()
        future.set_result(ReasonCode(PacketTypes.PUBACK, "Success"))
        return future

    async def publish(
        self,
        topic: str,
        payload: str | bytes | bytearray | None = None,
        qos: int = 0,
        retain: bool = False,
        properties: Properties | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (aiomqtt's signature)
    ) -> ReasonCode | None:
        """Publish; the PUBACK's reason code for QoS 1 (always success here).

        Raises:
            MqttLinkError: Not connected.
        """
        try:
            future = self.hand_off(topic, payload, qos, retain=retain, properties=properties)
        except PublishError as exc:
            raise MqttLinkError(str(exc), topic=topic) from exc
        return None if future is None else future.result()

    async def subscribe(
        self,
        topic: str | Sequence[tuple[str, int]],
        qos: int = 0,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (aiomqtt's signature)
    ) -> list[ReasonCode]:
        """Subscribe; the retained messages that match come at once, flagged retained.

        Raises:
            MqttLinkError: Not connected.
        """
        if not self._up:
            raise MqttLinkError("could not subscribe: not connected", topic=str(topic))
        wanted = [(topic, qos)] if isinstance(topic, str) else list(topic)
        for pattern, granted in wanted:
            self._filters[pattern] = granted
            for message in list(self._broker.retained.values()):
                if _matches(pattern, message):
                    self.offer(message, retained=True)
        return [ReasonCode(PacketTypes.SUBACK, identifier=granted) for _, granted in wanted]

    async def unsubscribe(
        self,
        topic: str | list[str],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (aiomqtt's signature)
    ) -> None:
        """Unsubscribe.

        Raises:
            MqttLinkError: Not connected.
        """
        if not self._up:
            raise MqttLinkError("could not unsubscribe: not connected", topic=str(topic))
        for pattern in [topic] if isinstance(topic, str) else topic:
            self._filters.pop(pattern, None)

    async def next_message(self) -> Message:
        """The oldest message not handed over yet, waiting for one if none is queued.

        Raises:
            MqttLinkError: The link is gone and nothing is left.
        """
        while True:
            if self.queued:
                return self.queued.popleft()
            if not self._up:
                raise MqttLinkError("disconnected during message iteration")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.add(waiter)
            try:
                await waiter
            finally:
                self._waiters.discard(waiter)

    def ack(self, mid: int, qos: int) -> None:
        """Nothing to do: the memory broker does not send again."""


def _matches(pattern: str, message: Message) -> bool:
    if pattern.startswith("$share/"):
        pattern = pattern.split("/", 2)[2] if pattern.count("/") >= 2 else pattern
    return bool(topic_matches_sub(pattern, message.topic))


def _bytes(payload: Any) -> bytes:
    if payload is None:
        return b""
    if isinstance(payload, str):
        return payload.encode()
    return bytes(payload)
