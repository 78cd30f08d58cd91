"""tablectl's asyncio MQTT client: paho-mqtt 2 driven through its public API only.

aiomqtt 2 wraps a paho-mqtt client it keeps private (``aiomqtt.Client._client``) and exposes
none of what the table, the studio, the pit and the archive need: PUBACK reason codes (a
refused publish must fail loudly), a publish handed to the socket without awaiting its
acknowledgement (the outbox pipelines), acknowledgements left to the caller (the archive's,
after its commit), a socket read that takes a backlog in bursts. Every one of those is in
paho's *public* API (``on_publish`` with its reason code, ``manual_ack_set``/``ack``, the
external-loop calls ``loop_read``/``loop_write``/``loop_misc``/``socket``/``want_write`` and
the ``on_socket_*`` callbacks), so :class:`Client` drives paho itself, on the running asyncio
loop, the way paho's documentation describes an external event loop:

* the socket is watched with ``add_reader``; a readable event calls ``loop_read()`` again
  while each call still hands something over (a message, an acknowledgement...), at most
  ``read_packets`` times, so a backlog is read in bursts (paho 2's ``loop_read`` reads one
  packet per call for a client that only receives) and other tasks run between two bursts
  (the socket stays readable: the loop calls again on its next pass);
* a packet paho queues is written at once, inside the call that queued it (``publish()``,
  ``ack()``, a PINGREQ), when that is made in the loop thread (``write_through``: the card's
  hot path; every :class:`~controller.mqtt.connection.Connector`'s client), otherwise when
  the socket is writable (``add_writer``, removed once paho's queue is empty): a received
  message's PUBACK, queued by paho inside ``loop_read``, goes out there and then, with no
  writable event and pass of the loop of its own (docs/performance.md, "The demo");
* ``loop_misc()`` every quarter of the keep-alive (at least every second), on the multiples of
  that period on the loop's clock, keeps the link alive (keep-alive, PINGREQ): one wake-up
  for every connection of the process (:func:`misc_delay`).

What the rest of the product sees is the small surface it used of aiomqtt
(``async with``, :meth:`Client.subscribe`, :meth:`Client.unsubscribe`, :meth:`Client.publish`,
:attr:`Client.messages`) plus :meth:`Client.hand_off` (the future of a PUBACK's reason code),
:meth:`Client.take_queued`, :meth:`Client.ack` and :attr:`Client.disconnect_reason`. Its errors
are :class:`MqttLinkError`, which is also an ``aiomqtt.MqttError``, so code written against
aiomqtt's errors catches them unchanged. A SUBACK, UNSUBACK or PUBACK that arrives after its
waiter was cancelled (a task stopped mid-subscribe at shutdown) is dropped quietly: aiomqtt
logs a ``KeyError`` traceback for it (issue 22).

The archive's drain adds what needs paho's internals, in :mod:`controller.mqtt.drain` only.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import aiomqtt
import paho.mqtt.client as paho_client
import structlog
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.errors import PublishError, TablectlError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "READ_PACKETS_MAX",
    "Client",
    "ConnectTimeout",
    "Message",
    "MqttLinkError",
    "Properties",
    "ReasonCode",
    "Will",
]

log = structlog.get_logger(__name__)

READ_PACKETS_MAX = 64
"""Default bound of a burst: ``loop_read`` calls in one readable event at most."""

MISC_SECONDS = 1.0
"""How often ``loop_misc`` runs at least (paho's keep-alive and PINGREQ; paho's own loop: 1 s).

A client with a longer keep-alive runs it every quarter of its keep-alive instead
(:func:`misc_seconds`): a PINGREQ goes out at most a quarter late (the broker waits 1.5 times
the keep-alive), a missing PINGRESP is noticed at most a quarter late, and a process with many
idle connections (``make run``'s demo: the table's, the studio's, the pit's and the archive's)
is not woken once a second for each (docs/performance.md, "The demo")."""


def misc_seconds(keepalive: int) -> float:
    """How long ``loop_misc`` sleeps for a client with this keep-alive (seconds)."""
    return max(MISC_SECONDS, keepalive / 4)


MISC_MIN_SLEEP = 0.001
"""A misc tick that would come sooner than this (its own grid time, just passed) waits a
period more: no second ``loop_misc`` within a millisecond."""


def misc_delay(now: float, period: float) -> float:
    """How long to sleep from ``now`` (the event loop's clock) to the next misc tick.

    The ticks fall on the multiples of ``period`` on the loop's clock, not ``period`` after
    each client connected: every client of a process with the same keep-alive runs its
    ``loop_misc`` in the same pass of the loop, one wake-up for all of them instead of one
    each (``make run``'s demo holds five connections; docs/performance.md, "The demo"). A
    tick is never more than ``period`` + :data:`MISC_MIN_SLEEP` after the last one, so the
    keep-alive's margin (:data:`MISC_SECONDS`) holds.
    """
    delay = period - (now % period)
    return delay if delay >= MISC_MIN_SLEEP else delay + period


Protocol = Literal["5", "3.1.1"] | int
"""``"5"``/``5`` (MQTT 5) or ``"3.1.1"``/``4`` (``aiomqtt.ProtocolVersion`` values work too)."""


class MqttLinkError(TablectlError, aiomqtt.MqttCodeError):
    """The link to the broker failed, was refused, or an operation on it timed out.

    Also an ``aiomqtt.MqttCodeError`` (``rc`` is :attr:`reason_code`): code written against
    aiomqtt's errors catches this one unchanged.

    Attributes:
        reason_code: The MQTT reason code (CONNACK, DISCONNECT...) or paho error code behind
            it, when there is one (``0x87``: not authorised; ``0x8E``: session taken over).
    """

    def __init__(self, message: str, *, reason_code: int | None = None, **context: Any) -> None:
        if reason_code is not None:
            context["reason_code"] = reason_code
        super().__init__(message, **context)
        self.args = (message,)
        self.reason_code = reason_code
        self.rc = reason_code


class ConnectTimeout(MqttLinkError, TimeoutError):
    """No CONNACK within the connect timeout (also a ``TimeoutError``)."""


@dataclass(slots=True)
class Message:
    """A received PUBLISH.

    Attributes:
        topic: Its topic.
        payload: Its bytes.
        qos: 0, 1 or 2.
        retain: Whether the broker sent it as the topic's retained message.
        mid: Its packet id (for :meth:`Client.ack`).
        properties: Its MQTT 5 properties (``None`` on 3.1.1).
    """

    topic: str
    payload: bytes
    qos: int
    retain: bool
    mid: int
    properties: Properties | None


@dataclass(frozen=True, slots=True)
class Will:
    """The Last Will the broker publishes when the link is lost (not on a clean close)."""

    topic: str
    payload: bytes | str | None = None
    qos: int = 0
    retain: bool = False
    properties: Properties | None = None


def _version(protocol: Protocol) -> int:
    if protocol in ("5", 5):
        return int(paho_client.MQTTv5)
    if protocol in ("3.1.1", 4):
        return int(paho_client.MQTTv311)
    raise ValueError(f"MQTT protocol must be '5' or '3.1.1', got {protocol!r}")


def _code(reason: Any) -> int | None:
    value = getattr(reason, "value", reason)
    return value if isinstance(value, int) else None


class _Messages:
    """``async for message in client.messages``: the received messages, in order."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def __aiter__(self) -> _Messages:
        return self

    async def __anext__(self) -> Message:
        return await self._client.next_message()

    def __len__(self) -> int:
        return len(self._client.queued)


class Client:
    """One connection to a broker, as an async context manager (see the module notes).

    Args:
        hostname: The broker's host.
        port: Its port.
        identifier: The MQTT client id (paho makes one up if ``None``).
        username: Broker user name.
        password: Its password.
        logger: Standard logger paho logs to.
        protocol: ``"5"`` (default) or ``"3.1.1"``.
        clean_start: MQTT 5 clean start (``False``: resume the session).
        clean_session: MQTT 3.1.1 clean session; ``None``: paho's default (``True``).
        properties: MQTT 5 CONNECT properties (session expiry...).
        will: The Last Will.
        tls_context: TLS for the connection (``None``: plain TCP).
        keepalive: Keep-alive in seconds.
        timeout: Seconds :meth:`subscribe`, :meth:`unsubscribe`, :meth:`publish` and the
            clean close wait by default.
        connect_timeout: Seconds for the TCP connect and the CONNACK together.
        max_inflight_messages: paho's limit of QoS 1 publishes awaiting their PUBACK.
        socket_options: ``setsockopt`` arguments applied once connected (``TCP_NODELAY``).
        write_through: Write a queued packet inside the call that queued it, when made in the
            loop thread (otherwise on the next writable event).
        read_packets: ``loop_read`` calls per readable event at most (>= 1).
        manual_acks: Leave QoS 1/2 acknowledgements to :meth:`ack` (the archive's, after its
            commit); the broker sends again, to a persistent session, what was not.
        receive_maximum: MQTT 5: messages the broker sends before they are acknowledged.

    Attributes:
        queued: The messages received and not yet handed over, oldest first.
        disconnect_reason: The reason code of the last disconnection (``None`` while up or
            before a connection).
        pending_calls_threshold: Kept for aiomqtt's callers; not used.
        read_events: Readable events handled so far.
        largest_burst: The most ``loop_read`` calls that handed something over in one
            readable event (1 without bursts; at most ``read_packets``).
        timeout: As given.

    Raises:
        ValueError: ``read_packets`` below 1, or an unknown ``protocol``.
    """

    def __init__(
        self,
        hostname: str,
        port: int = 1883,
        *,
        identifier: str | None = None,
        username: str | None = None,
        password: str | None = None,
        logger: logging.Logger | None = None,
        protocol: Protocol = "5",
        clean_start: bool = True,
        clean_session: bool | None = None,
        properties: Properties | None = None,
        will: Will | None = None,
        tls_context: ssl.SSLContext | None = None,
        keepalive: int = 60,
        timeout: float = 10.0,
        connect_timeout: float = 10.0,
        max_inflight_messages: int | None = None,
        socket_options: Iterable[tuple[int, int, int]] = (),
        write_through: bool = False,
        read_packets: int = READ_PACKETS_MAX,
        manual_acks: bool = False,
        receive_maximum: int | None = None,
    ) -> None:
        if read_packets < 1:
            raise ValueError(f"read_packets must be >= 1, got {read_packets}")
        version = _version(protocol)
        self.hostname = hostname
        self.port = port
        self._identifier = identifier or ""
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.pending_calls_threshold = 10
        self.queued: collections.deque[Message] = collections.deque()
        self.disconnect_reason: ReasonCode | None = None
        self.read_events = 0
        self.largest_burst = 0
        self._keepalive = keepalive
        self._v5 = version == paho_client.MQTTv5
        self._clean_start = clean_start
        self._properties = properties
        self._socket_options = tuple(socket_options)
        self._write_through = write_through
        self._read_packets = read_packets
        self._watching_write = -1  # the descriptor watched for writability (-1: none)
        if receive_maximum is not None and self._v5:
            if self._properties is None:
                self._properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            self._properties.ReceiveMaximum = receive_maximum
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._events = 0
        self._up = False
        self._aborted = False
        self._torn = False
        self._lost: BaseException | None = None
        self._down: asyncio.Event | None = None
        self._connack: asyncio.Future[None] | None = None
        self._message_waiters: set[asyncio.Future[None]] = set()
        self._misc: asyncio.Task[None] | None = None
        self._fileno = -1
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.paho: paho_client.Client = self._make_paho(
            version=version,
            clean_session=clean_session,
            manual_acks=manual_acks,
            logger=logger,
            max_inflight_messages=max_inflight_messages,
            credentials=(username, password),
            tls_context=tls_context,
            will=will,
        )

    def _make_paho(
        self,
        *,
        version: int,
        clean_session: bool | None,
        manual_acks: bool,
        logger: logging.Logger | None,
        max_inflight_messages: int | None,
        credentials: tuple[str | None, str | None],
        tls_context: ssl.SSLContext | None,
        will: Will | None,
    ) -> paho_client.Client:
        """The paho client, its options set and every callback this class drives it with."""
        paho: Any = paho_client.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=self._identifier,
            protocol=MQTTProtocolVersion(version),
            clean_session=None if self._v5 else clean_session,
            reconnect_on_failure=False,
            manual_ack=manual_acks,
        )
        paho.connect_timeout = self.connect_timeout
        paho.enable_logger(logger if logger is not None else logging.getLogger("mqtt"))
        if max_inflight_messages is not None:
            paho.max_inflight_messages_set(max_inflight_messages)
        if credentials[0] is not None:
            paho.username_pw_set(*credentials)
        if tls_context is not None:
            paho.tls_set_context(tls_context)
        if will is not None:
            paho.will_set(will.topic, will.payload, will.qos, will.retain, will.properties)
        paho.on_connect = self._on_connect
        paho.on_disconnect = self._on_disconnect
        paho.on_message = self._on_message
        paho.on_publish = self._on_publish
        paho.on_subscribe = self._on_suback
        paho.on_unsubscribe = self._on_suback
        paho.on_socket_open = self._on_socket_open
        paho.on_socket_close = self._on_socket_close
        paho.on_socket_register_write = self._on_register_write
        paho.on_socket_unregister_write = self._on_unregister_write
        return paho  # type: ignore[no-any-return]

    # -- what callers use ----------------------------------------------------------------

    @property
    def identifier(self) -> str:
        """The client id this client connects with (``""``: the broker assigns one)."""
        return self._identifier

    @property
    def messages(self) -> _Messages:
        """The received messages, as an async iterator.

        It raises :class:`MqttLinkError` once the link is gone and nothing is left.
        """
        return _Messages(self)

    @property
    def connected(self) -> bool:
        """Whether the CONNACK came and the link has not gone since."""
        return self._up and self._lost is None and not self._torn and self.paho.is_connected()

    async def __aenter__(self) -> Client:
        """Connect: TCP (in an executor thread: paho's connect blocks) and CONNACK.

        Raises:
            MqttLinkError: The broker could not be reached, refused, or did not answer within
                ``connect_timeout`` seconds.
        """
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._down = asyncio.Event()
        self._connack = loop.create_future()
        self._lost = None
        self.disconnect_reason = None
        self._aborted = False
        self._torn = False
        connecting = loop.run_in_executor(None, self._connect_blocking)
        try:
            async with asyncio.timeout(self.connect_timeout):
                await asyncio.shield(connecting)
                sock = self.paho.socket()
                if isinstance(sock, socket.socket):
                    for option in self._socket_options:
                        sock.setsockopt(*option)
                await self._connack
        except BaseException as exc:
            self._abort(connecting)
            if isinstance(exc, TimeoutError):
                raise ConnectTimeout(
                    f"no CONNACK from {self.hostname}:{self.port} within "
                    f"{self.connect_timeout:g} s",
                    host=self.hostname,
                    port=self.port,
                ) from None
            if isinstance(exc, OSError | paho_client.WebsocketConnectionError):
                raise MqttLinkError(
                    f"cannot connect to {self.hostname}:{self.port}: {exc}",
                    host=self.hostname,
                    port=self.port,
                ) from exc
            raise
        self._up = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close: a DISCONNECT (waited for up to ``timeout`` seconds), then the socket."""
        try:
            if self.connected:
                rc = self.paho.disconnect()
                if rc == MQTTErrorCode.MQTT_ERR_SUCCESS and self._down is not None:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.timeout):
                            await self._down.wait()
        finally:
            self._teardown()

    def hand_off(
        self,
        topic: str,
        payload: str | bytes | bytearray | None,
        qos: int = 1,
        *,
        retain: bool = False,
        properties: Properties | None = None,
    ) -> asyncio.Future[ReasonCode] | None:
        """Give one publish to paho now; return the future of its PUBACK's reason code.

        Nothing is awaited, so a caller can pipeline publishes and check each PUBACK later.
        A 3.1.1 PUBACK resolves with a success code (3.1.1 has no reason codes). The future is
        never resolved if the link drops first: bound the wait.

        Raises:
            PublishError: ``qos`` is 2, or paho could not take the publish (not connected...).
        """
        if qos not in (0, 1):
            raise PublishError(
                "QoS 2 is not supported (paho drops the reason code of a QoS 2 PUBREC)",
                topic=topic,
                qos=qos,
            )
        info = self.paho.publish(topic, payload, qos, retain, properties)
        if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            raise PublishError(
                f"could not send the publish to {topic!r}: {paho_client.error_string(info.rc)}",
                topic=topic,
                rc=int(info.rc),
            )
        if qos == 0:
            return None
        future: asyncio.Future[ReasonCode] = asyncio.get_running_loop().create_future()
        # paho reads the socket in this loop only: the PUBACK cannot come before this line.
        self._pending[info.mid] = future
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
        """Publish and, for QoS 1, wait for the PUBACK; return its reason code.

        A refusal is returned, not raised (:func:`controller.mqtt.ack.publish_checked` raises).

        Raises:
            MqttLinkError: Not connected, the link failed, or no PUBACK within ``timeout``.
        """
        try:
            future = self.hand_off(topic, payload, qos, retain=retain, properties=properties)
        except PublishError as exc:
            raise MqttLinkError(str(exc), topic=topic) from exc
        if future is None:
            return None
        try:
            code: ReasonCode = await self._wait(future, timeout, f"PUBACK for {topic!r}")
            return code
        finally:
            self._forget(future)

    async def subscribe(
        self,
        topic: str | Sequence[tuple[str, int]],
        qos: int = 0,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (aiomqtt's signature)
    ) -> list[ReasonCode]:
        """Subscribe and wait for the SUBACK; return its reason codes (one per filter).

        Raises:
            MqttLinkError: Not connected, the link failed, or no SUBACK within ``timeout``.
        """
        what = topic if isinstance(topic, str) else list(topic)
        result, mid = self.paho.subscribe(what, qos)
        if result != MQTTErrorCode.MQTT_ERR_SUCCESS or mid is None:
            raise MqttLinkError(
                f"could not subscribe: {paho_client.error_string(result)}",
                topic=str(what),
                reason_code=int(result),
            )
        codes: list[ReasonCode] = await self._acknowledged(mid, timeout, "SUBACK")
        return codes

    async def unsubscribe(
        self,
        topic: str | list[str],
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (aiomqtt's signature)
    ) -> None:
        """Unsubscribe and wait for the UNSUBACK.

        Raises:
            MqttLinkError: Not connected, the link failed, or no UNSUBACK within ``timeout``.
        """
        result, mid = self.paho.unsubscribe(topic)
        if result != MQTTErrorCode.MQTT_ERR_SUCCESS or mid is None:
            raise MqttLinkError(
                f"could not unsubscribe: {paho_client.error_string(result)}",
                topic=str(topic),
                reason_code=int(result),
            )
        await self._acknowledged(mid, timeout, "UNSUBACK")

    async def next_message(self) -> Message:
        """The oldest message not handed over yet, waiting for one if none is queued.

        Raises:
            MqttLinkError: The link is gone and nothing is left.
        """
        while True:
            if self.queued:
                return self.queued.popleft()
            if self._lost is not None or self._down is None or self._down.is_set():
                raise MqttLinkError("disconnected during message iteration") from self._lost
            assert self._loop is not None
            waiter = self._loop.create_future()
            self._message_waiters.add(waiter)  # several readers may wait: each is woken
            try:
                await waiter
            finally:
                self._message_waiters.discard(waiter)

    def take_queued(self) -> list[Message]:
        """Every message received and not handed over yet, oldest first (none waited for)."""
        taken = list(self.queued)
        self.queued.clear()
        return taken

    def ack(self, mid: int, qos: int) -> None:
        """Acknowledge one received message on a ``manual_acks`` client (paho's ``ack``).

        On a link already gone this does nothing: the broker sends the message again.
        """
        if qos > 0 and self.connected:
            self.paho.ack(mid, qos)

    # -- waiting ---------------------------------------------------------------------------

    async def _acknowledged(self, mid: int, bound: float | None, what: str) -> Any:
        assert self._loop is not None
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[mid] = future
        try:
            return await self._wait(future, bound, what)
        finally:
            # Cancelled or timed out: an acknowledgement that comes later finds nothing to
            # resolve, and is dropped (aiomqtt logs a KeyError traceback for it).
            self._forget(future, mid)

    def _forget(self, future: asyncio.Future[Any], mid: int | None = None) -> None:
        if mid is None:
            mid = next((m for m, f in self._pending.items() if f is future), None)
        if mid is not None and self._pending.get(mid) is future:
            del self._pending[mid]

    async def _wait(self, future: asyncio.Future[Any], bound: float | None, what: str) -> Any:
        """``future``'s result, unless the link goes first or ``bound`` seconds pass."""
        down = self._down
        if down is None or down.is_set():
            raise MqttLinkError(f"not connected: no {what} can come") from self._lost
        bound = self.timeout if bound is None else bound
        gone = asyncio.ensure_future(down.wait())
        try:
            async with asyncio.timeout(bound):
                await asyncio.wait({future, gone}, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            raise MqttLinkError(f"no {what} within {bound:g} s", timeout=bound) from None
        finally:
            gone.cancel()
        if not future.done():
            raise MqttLinkError(f"the link was lost before the {what}") from self._lost
        return future.result()

    # -- paho's callbacks (the loop thread, but for the socket's opening) ------------------

    def _on_connect(
        self, client: Any, userdata: Any, flags: Any, reason: ReasonCode, properties: Any
    ) -> None:
        self._events += 1
        connack = self._connack
        if connack is None or connack.done():
            return
        if reason.is_failure:
            connack.set_exception(
                MqttLinkError(
                    f"the broker refused the connection: {reason.getName()} "
                    f"(reason code 0x{int(reason.value):02X})",
                    reason_code=int(reason.value),
                )
            )
        else:
            connack.set_result(None)

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: ReasonCode, properties: Any
    ) -> None:
        self._events += 1
        self.disconnect_reason = reason
        if reason.is_failure and self._lost is None:
            self._lost = MqttLinkError(
                f"disconnected: {reason.getName()} (reason code 0x{int(reason.value):02X})",
                reason_code=int(reason.value),
            )
        self._gone()

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        self._events += 1
        self.queued.append(
            Message(
                message.topic,
                message.payload,
                message.qos,
                bool(message.retain),
                message.mid,
                getattr(message, "properties", None),
            )
        )
        self._wake()

    def _wake(self) -> None:
        """Wake every reader waiting for a message (or for the link's end)."""
        for waiter in self._message_waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _on_publish(
        self, client: Any, userdata: Any, mid: int, reason: ReasonCode, properties: Any
    ) -> None:
        self._events += 1
        future = self._pending.pop(mid, None)
        if future is not None and not future.done():
            future.set_result(reason)

    def _on_suback(
        self, client: Any, userdata: Any, mid: int, reasons: list[ReasonCode], properties: Any
    ) -> None:
        self._events += 1
        future = self._pending.pop(mid, None)
        if future is None or future.done():
            # Its waiter was cancelled (or timed out): nobody is waiting any more.
            log.debug("acknowledgement no longer awaited", mid=mid)
            return
        future.set_result(reasons)

    def _on_socket_open(self, client: Any, userdata: Any, sock: Any) -> None:
        """Called in the executor thread that connects, before the CONNECT is sent."""
        if self._aborted:
            # Given up on: the CONNECT must not be sent, or a late connection would take our
            # client id's session from the next one. (paho logs this exception and re-raises.)
            sock.close()
            raise ConnectionAbortedError("connect given up on")
        loop = self._loop
        assert loop is not None
        loop.call_soon_threadsafe(self._watch, sock.fileno())

    def _watch(self, fileno: int) -> None:
        if self._aborted or self._lost is not None:
            return
        assert self._loop is not None
        self._fileno = fileno
        self._loop.add_reader(fileno, self._readable)
        self._misc = self._loop.create_task(self._misc_loop(), name="mqtt-misc")

    def _on_socket_close(self, client: Any, userdata: Any, sock: Any) -> None:
        self._in_loop(self._unwatch)

    def _unwatch(self) -> None:
        assert self._loop is not None
        if self._fileno >= 0:
            self._loop.remove_reader(self._fileno)
            self._loop.remove_writer(self._fileno)
            self._fileno = -1
        self._watching_write = -1
        if self._misc is not None and not self._misc.done():
            self._misc.cancel()

    def _on_register_write(self, client: Any, userdata: Any, sock: Any) -> None:
        if self._write_through and threading.get_ident() == self._loop_thread:
            try:
                self.paho.loop_write()
            except Exception as exc:  # the link is broken
                self._fail(exc)
                return
            if not self.paho.want_write():
                return
        fileno = sock.fileno()
        self._in_loop(lambda: self._writer(fileno))

    def _writer(self, fileno: int) -> None:
        assert self._loop is not None
        if fileno >= 0 and self._lost is None and self.paho.want_write():
            self._loop.add_writer(fileno, self._writable)
            self._watching_write = fileno

    def _on_unregister_write(self, client: Any, userdata: Any, sock: Any) -> None:
        fileno = sock.fileno()
        if fileno >= 0:
            self._in_loop(lambda: self._unwatch_write(fileno))

    def _unwatch_write(self, fileno: int) -> None:
        """Stop watching for writability, if it was watched.

        paho tells of every write that emptied its queue, most of them written through,
        with no writer to remove.
        """
        if self._watching_write == fileno and self._loop is not None:
            self._watching_write = -1
            self._loop.remove_writer(fileno)

    def _in_loop(self, call: Callable[[], object]) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            # The loop is gone: nothing is watched any more. (paho's ``__del__`` closes the
            # socket of a client collected after its loop closed, in whatever thread the
            # collector runs: raising there is an "exception ignored" for the process.)
            return
        if threading.get_ident() == self._loop_thread:
            call()
            return
        with contextlib.suppress(RuntimeError):  # closed between the check and the call
            loop.call_soon_threadsafe(call)

    # -- the socket's events -------------------------------------------------------------

    def _readable(self) -> None:
        paho = self.paho
        self.read_events += 1
        burst = 0
        try:
            for _ in range(self._read_packets):
                before = self._events
                rc = paho.loop_read()
                if rc != MQTTErrorCode.MQTT_ERR_SUCCESS or self._events == before:
                    break
                burst += 1
            self.largest_burst = max(self.largest_burst, burst)
            sock = paho.socket()
            pending = getattr(sock, "pending", None)
            if pending is not None and pending() > 0 and self._loop is not None:
                # Decrypted bytes held by TLS: no readable event would come for them.
                self._loop.call_soon(self._readable)
        except Exception as exc:  # a broken pipe, a reset: the link is gone
            self._fail(exc)

    def _writable(self) -> None:
        try:
            self.paho.loop_write()
        except Exception as exc:
            self._fail(exc)

    async def _misc_loop(self) -> None:
        loop = asyncio.get_running_loop()
        period = misc_seconds(self._keepalive)
        try:
            while self.paho.loop_misc() == MQTTErrorCode.MQTT_ERR_SUCCESS:  # noqa: ASYNC110 (paho's clock)
                await asyncio.sleep(misc_delay(loop.time(), period))
        except Exception as exc:  # pragma: no cover - paho reports through on_disconnect
            self._fail(exc)

    # -- the link's end --------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        if self._lost is None:
            self._lost = MqttLinkError(f"the link failed: {type(exc).__name__}: {exc}")
            self._lost.__cause__ = exc
        self._teardown()

    def _gone(self) -> None:
        """The link is down: wake whoever waits (a message, an acknowledgement)."""
        self._up = False
        if self._down is not None:
            self._down.set()
        self._wake()

    def _teardown(self) -> None:
        """The link is given up (failed, aborted, or closed): stop watching, close the socket.

        No DISCONNECT is sent here (a clean close is :meth:`__aexit__`'s): the broker then
        publishes the Last Will, as for any lost link.
        """
        if self._torn:
            return
        self._torn = True
        self._gone()
        self._in_loop(self._unwatch)
        sock = self.paho.socket()
        if sock is not None:
            with contextlib.suppress(Exception):
                sock.close()
        connack = self._connack
        if connack is not None and connack.done() and not connack.cancelled():
            connack.exception()  # retrieved: nobody waits for a refused CONNACK any more

    def _connect_blocking(self) -> None:
        """Connect with paho (it blocks: this runs in an executor thread)."""
        self.paho.connect(
            self.hostname,
            self.port,
            self._keepalive,
            clean_start=self._clean_start if self._v5 else paho_client.MQTT_CLEAN_START_FIRST_ONLY,
            properties=self._properties,
        )

    def _abort(self, connecting: asyncio.Future[None]) -> None:
        """Give up on a connect: one still in its thread must never send its CONNECT."""
        self._aborted = True

        def finished(done: asyncio.Future[None]) -> None:
            if not done.cancelled():
                done.exception()  # retrieved: an aborted connect's error is expected
            self._teardown()

        connecting.add_done_callback(finished)
