"""Every use of paho-mqtt internals, behind one small adapter.

aiomqtt 2.x wraps a paho-mqtt 2.x client (``aiomqtt.Client._client``) and exposes no public
hook for what tablectl needs; this module is the only place in the product that reaches past
aiomqtt's public API. **A move to aiomqtt 3 (or away from paho) touches this file only**; the
rest of the product sees:

* :func:`hand_off`: give one publish to the client now, get the future of its PUBACK's
  reason code (aiomqtt ignores PUBACK reason codes; paho passes them to ``on_publish``,
  which :class:`_PubackTracker` hooks, keeping aiomqtt's own callback).
* :func:`failure`: the ``(code, name)`` of a failure reason code, ``None`` for a success.
* :func:`publish_properties` / :func:`connect_properties`: MQTT v5 properties (paho objects).
* :func:`bound_connect`: bound paho's blocking TCP connect, which runs in an executor thread.
* :func:`abort_connect`: stop a connect still running in that thread, so it cannot come
  alive later with our client id (it would kick our next connection off the broker).
* :func:`write_through`: write a queued packet to the socket at once, in the loop thread.
* :func:`read_through`: read every packet already waiting on the socket (up to a bound) per
  readable event, not one.
* :func:`share_property_tables`: MQTT 5 properties of received packets built without paho's
  per-object tables (process-wide, once).
* :func:`manual_acks`, :func:`ack_all`: acknowledgements left to the caller (the archive's,
  after its commit), a batch's PUBACKs written together.
* :func:`queued_messages`: the messages aiomqtt has queued already, taken without a task each.

If a future aiomqtt renames the paho client, :func:`hand_off` raises
:class:`~controller.errors.PublishError` saying so instead of silently not checking.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from controller.errors import PublishError

if TYPE_CHECKING:
    import aiomqtt

    # paho's types, re-exported for annotations elsewhere (so they name this module only).
    from paho.mqtt.properties import Properties as Properties  # noqa: PLC0414
    from paho.mqtt.reasoncodes import ReasonCode as ReasonCode  # noqa: PLC0414

__all__ = [
    "abort_connect",
    "ack_all",
    "bound_connect",
    "connect_properties",
    "failure",
    "hand_off",
    "manual_acks",
    "publish_properties",
    "queued_messages",
    "read_through",
    "session_taken_over",
    "share_property_tables",
    "write_through",
]

_TRACKER_ATTRIBUTE = "_tablectl_puback_tracker"


class _PubackTracker:
    """Sits in front of aiomqtt's ``on_publish``; resolves futures of awaited mids."""

    def __init__(self, paho_client: Any) -> None:
        self.pending: dict[int, asyncio.Future[ReasonCode]] = {}
        self.original: Callable[..., None] | None = paho_client.on_publish
        paho_client.on_publish = self.on_publish

    def on_publish(
        self,
        client: Any,
        userdata: Any,
        mid: int,
        reason_code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        future = self.pending.pop(mid, None)
        if future is not None and not future.done():
            future.set_result(reason_code)
        if self.original is not None:
            self.original(client, userdata, mid, reason_code, properties)


def _tracker(client: aiomqtt.Client) -> _PubackTracker:
    paho_client = getattr(client, "_client", None)
    if paho_client is None or not hasattr(paho_client, "on_publish"):
        raise PublishError(
            "cannot check PUBACK reason codes: this aiomqtt.Client has no paho client "
            "(aiomqtt changed its internals?)",
            client=type(client).__name__,
        )
    tracker = getattr(paho_client, _TRACKER_ATTRIBUTE, None)
    # aiomqtt may (re)install its callback, e.g. on a new connection: hook again then.
    if not isinstance(tracker, _PubackTracker) or paho_client.on_publish != tracker.on_publish:
        tracker = _PubackTracker(paho_client)
        setattr(paho_client, _TRACKER_ATTRIBUTE, tracker)
    return tracker


def hand_off(
    client: aiomqtt.Client,
    topic: str,
    payload: str | bytes | bytearray | None,
    qos: int = 1,
    *,
    retain: bool = False,
    properties: Properties | None = None,
) -> asyncio.Future[ReasonCode] | None:
    """Give one publish to paho now; return the future of its PUBACK's reason code.

    paho writes the packet at once (or queues it behind its in-flight limit); nothing is
    awaited, so a caller can pipeline many publishes and check each acknowledgement later.
    MQTT 3.1.1 acknowledgements resolve with a success code (3.1.1 has no reason codes).

    Args:
        client: A connected ``aiomqtt.Client``.
        topic: Topic to publish to.
        payload: The message body.
        qos: 1, or 0 (no acknowledgement: ``None`` is returned).
        retain: Retain flag.
        properties: MQTT v5 properties (:func:`publish_properties`).

    Returns:
        The PUBACK's reason code, when it comes (``None`` for QoS 0). The future is never
        resolved if the link drops first: bound the wait.

    Raises:
        PublishError: ``qos`` is 2, or the client could not take the publish (not connected...).
    """
    import paho.mqtt.client as mqtt

    if qos not in (0, 1):
        raise PublishError(
            "QoS 2 is not supported (paho drops the reason code of a QoS 2 PUBREC)",
            topic=topic,
            qos=qos,
        )
    tracker = _tracker(client)
    # paho's network I/O runs in this event loop (aiomqtt's socket callbacks), so the PUBACK
    # cannot be handled between publish() returning and the future being registered.
    info = client._client.publish(topic, payload, qos, retain, properties)
    if info.rc != mqtt.MQTT_ERR_SUCCESS:
        raise PublishError(
            f"could not send the publish to {topic!r}: {mqtt.error_string(info.rc)}",
            topic=topic,
            rc=int(info.rc),
        )
    if qos == 0:
        return None
    future: asyncio.Future[ReasonCode] = asyncio.get_running_loop().create_future()
    tracker.pending[info.mid] = future
    return future


def failure(reason_code: ReasonCode) -> tuple[int, str] | None:
    """The numeric value and name of a failure reason code (>= 0x80); ``None`` for a success."""
    if not reason_code.is_failure:
        return None
    return int(reason_code.value), reason_code.getName()


def publish_properties(correlation_data: bytes) -> Properties:
    """MQTT v5 PUBLISH properties carrying ``correlation_data``."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    properties.CorrelationData = correlation_data
    return properties


def connect_properties(session_expiry_seconds: int) -> Properties:
    """MQTT v5 CONNECT properties asking the broker to keep the session that long."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    properties.SessionExpiryInterval = session_expiry_seconds
    return properties


def manual_acks(client: aiomqtt.Client, receive_maximum: int | None = None) -> None:
    """Leave QoS 1 acknowledgements to the caller (:func:`ack_all`), before ``client`` connects.

    paho acknowledges a message as soon as it is handed over; a consumer that must not lose
    what it has received but not yet stored acknowledges after storing instead (the broker
    sends again what was not acknowledged, to a persistent session). ``receive_maximum``
    (MQTT 5) bounds the messages the broker sends before they are acknowledged.
    """
    client._client.manual_ack_set(True)
    properties = getattr(client, "_properties", None)
    if receive_maximum is not None and properties is not None:
        properties.ReceiveMaximum = receive_maximum


def ack_all(client: aiomqtt.Client, received: Iterable[tuple[int, int]]) -> None:
    """Acknowledge received messages ``(mid, qos)``, in order, on a :func:`manual_acks` client.

    What paho's ``ack`` does for each, with the QoS 1 acknowledgements (PUBACKs) written to
    the socket together: paho sends every queued packet with a ``send`` of its own, so a batch of
    2,000 acknowledgements cost 2,000 system calls. The PUBACKs are the bytes paho would
    write (``0x40``, length 2, the packet id: a success needs no reason code in MQTT 5 either),
    queued as one packet through paho's own queue, so they keep their place among paho's
    other packets. QoS 2 (never subscribed to here) is left to paho. On a connection that is
    already gone this does nothing: the broker sends the messages again on the next one.
    """
    from paho.mqtt.client import PUBACK

    paho: Any = client._client
    if not (paho.is_connected() and paho.socket() is not None):
        return
    pubacks = bytearray()
    for mid, qos in received:
        if qos == 1:
            pubacks += _PUBACK.pack(PUBACK, 2, mid)
        elif qos == 2:  # pragma: no cover - the archive subscribes with QoS 1
            if pubacks:
                paho._packet_queue(PUBACK, bytes(pubacks), 0, 1)
                pubacks.clear()
            paho.ack(mid, qos)
    if pubacks:
        paho._packet_queue(PUBACK, bytes(pubacks), 0, 1)


_PUBACK = struct.Struct("!BBH")
"""A PUBACK without reason code or properties: type, remaining length 2, packet id."""


def queued_messages(client: aiomqtt.Client) -> list[aiomqtt.Message]:
    """The messages ``client`` has received and queued already, taken from its queue.

    ``client.messages`` hands messages over one at a time, each through a task of its own
    and an ``asyncio.wait`` (aiomqtt 2.x): a reader that has just been given one takes what
    else is waiting here, in order, without a pass of the event loop each.
    """
    queue: asyncio.Queue[aiomqtt.Message] = client._queue
    taken: list[aiomqtt.Message] = []
    while not queue.empty():
        taken.append(queue.get_nowait())
    return taken


def bound_connect(client: aiomqtt.Client, seconds: float) -> None:
    """Bound paho's blocking TCP connect (it runs in an executor thread) to ``seconds``."""
    client._client.connect_timeout = seconds


def abort_connect(client: aiomqtt.Client) -> None:
    """Stop a connect that may still run in aiomqtt's executor thread (errors are ignored)."""
    with contextlib.suppress(Exception):
        client._client.disconnect()


def write_through(client: aiomqtt.Client, loop_thread: int) -> None:
    """Make paho write a queued packet to the socket at once, in the event loop thread.

    aiomqtt asks the loop to watch the socket for writability when paho queues a packet
    (``call_soon_threadsafe(add_writer)``): the bytes leave two loop iterations after
    ``publish()`` returned, after whatever else is ready (the orchestrator journalling the
    round's next entries, each with an fsync). paho without an external loop writes at once,
    in ``publish()``; this restores that for calls made in the loop thread (``loop_thread``,
    a :func:`threading.get_ident`). A partial write, or a write that fails, falls back to
    aiomqtt's callback (the writer watch finishes the write, or reports the broken link as
    aiomqtt always does). Calls from other threads (paho's connect runs in an executor) keep
    aiomqtt's callback.
    """
    paho = client._client
    deferred = paho.on_socket_register_write
    if deferred is None:  # pragma: no cover - aiomqtt always installs one
        return

    def register_write(paho_client: Any, userdata: Any, sock: Any) -> None:
        if threading.get_ident() == loop_thread:
            try:
                paho_client.loop_write()
            except Exception:  # aiomqtt's writer callback meets it again and reports it
                deferred(paho_client, userdata, sock)
                return
            if not paho_client.want_write():
                return
        deferred(paho_client, userdata, sock)

    paho.on_socket_register_write = register_write


READ_PACKETS_MAX = 64
"""Default bound of :func:`read_through`: packets read in one readable event at most."""


READ_CHUNK = 65_536
"""Bytes one ``recv`` asks for when :func:`read_through` buffers the socket."""


def read_through(
    client: aiomqtt.Client, max_packets: int = READ_PACKETS_MAX, *, buffered: bool = False
) -> None:
    """Make each readable event read every packet already waiting, up to ``max_packets``.

    aiomqtt watches the socket (``add_reader``) and calls paho's ``loop_read()`` once per
    readable event; paho 2's ``loop_read`` ignores its ``max_packets`` argument and reads
    ``len(_out_messages) + len(_in_messages)`` packets, at least 1: one for a client that
    only receives. A backlog then costs one event-loop pass per packet (a drain of 40,000
    packets took 181,000 passes), and a consumer's batches stay small. This replaces paho's
    ``loop_read`` on this client with one that reads packets until the socket has none left
    (paho's ``MQTT_ERR_AGAIN``) or ``max_packets`` were read, so other tasks still run between
    two bursts (the socket stays readable: the loop calls again on its next pass). Errors
    are paho's own (``_loop_rc_handle``), raised to aiomqtt's callback as before.

    ``buffered``: paho reads a packet with a ``recv`` per byte of its fixed header and one for
    the rest (four system calls for a small PUBLISH); buffered, one ``recv`` of
    :data:`READ_CHUNK` bytes serves many packets, through paho's own ``_sock_recv`` (its TLS
    and error handling unchanged). Bytes left in the buffer when ``max_packets`` were read
    are not on the socket any more, so no readable event would come for them: the next read
    is scheduled on the event loop instead (also for bytes a TLS socket holds decrypted). The
    buffer belongs to one socket (a new connection starts empty).

    Args:
        client: An ``aiomqtt.Client`` (connected or not).
        max_packets: Packets read per readable event at most (>= 1).
        buffered: Read the socket in chunks (for a client that receives a lot: the archive).

    Raises:
        ValueError: ``max_packets`` is below 1.
    """
    from paho.mqtt.enums import MQTTErrorCode

    if max_packets < 1:
        raise ValueError(f"read_through: max_packets must be >= 1, got {max_packets}")
    paho: Any = client._client
    chunks = _ChunkedReader(paho) if buffered else None

    def loop_read(max_packets_ignored: int = 1) -> MQTTErrorCode:
        for _ in range(max_packets):
            if paho._sock is None:
                return MQTTErrorCode.MQTT_ERR_NO_CONN
            rc = paho._packet_read()
            if rc > 0:
                return paho._loop_rc_handle(rc)  # type: ignore[no-any-return]
            if rc == MQTTErrorCode.MQTT_ERR_AGAIN:
                break
        else:
            if chunks is not None and chunks.holding():
                asyncio.get_running_loop().call_soon(paho.loop_read)
        return MQTTErrorCode.MQTT_ERR_SUCCESS

    paho.loop_read = loop_read


class _ChunkedReader:
    """paho's ``_sock_recv`` for one client, served from chunks of :data:`READ_CHUNK` bytes."""

    def __init__(self, paho: Any) -> None:
        self._paho = paho
        self._recv: Callable[[int], bytes] = paho._sock_recv
        self._socket: object = None
        self._chunk = b""
        self._at = 0
        paho._sock_recv = self.recv

    def holding(self) -> bool:
        """Whether bytes of the current socket wait in the buffer, or in its TLS layer.

        A TLS socket (and paho's websocket wrapper) may hold decrypted bytes that are not on
        the socket any more either: its ``pending()`` counts them.
        """
        sock = self._paho._sock
        if self._at < len(self._chunk) and self._socket is sock:
            return True
        pending = getattr(sock, "pending", None)
        return bool(pending is not None and pending())

    def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes: buffered ones first, else one ``recv`` of a chunk.

        Raises what paho's ``_sock_recv`` raises (``BlockingIOError``: nothing to read).
        """
        if self._socket is not self._paho._sock:  # a new connection: nothing of the old one
            self._socket = self._paho._sock
            self._chunk, self._at = b"", 0
        if self._at >= len(self._chunk):
            data = self._recv(READ_CHUNK)
            if len(data) <= size:
                return data  # b"": the peer closed the connection
            self._chunk, self._at = data, 0
        start, self._at = self._at, min(self._at + size, len(self._chunk))
        return self._chunk[start : self._at]


def share_property_tables() -> None:
    """Build received packets' MQTT 5 properties on shared, read-only lookup tables.

    paho decodes every received MQTT 5 packet (each PUBLISH, each PUBACK...) into a new
    ``Properties`` object whose ``__init__`` builds its own copy of three constant tables
    (a list of 7 type names, a dict of 27 property names, a dict of 27 tuples each holding a
    new list of packet types, after 27 ``list.index`` calls): about 60 objects per packet.
    On a drain of 20,000 messages that, with the garbage collections it brings on, cost
    more than the archive's classification and store together (py-spy). paho only reads
    these tables after ``__init__`` (``getIdentFromName``, ``__setattr__``'s checks,
    ``pack``/``unpack``), so one set, built once by paho itself, is shared by every object:
    this installs, process-wide and once, a ``Properties`` subclass for paho's packet
    decoder (``paho.mqtt._packet``) whose ``__init__`` only points at that set. Objects
    behave as before (same class hierarchy, same attributes and values); the properties a
    caller builds (:func:`publish_properties`...) are paho's own, unchanged.

    Raises:
        PublishError: paho's decoder no longer builds ``Properties`` where this expects it
            (paho changed its internals): nothing is installed.
    """
    from paho.mqtt import _packet as paho_packet
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    decoder: Any = paho_packet
    current: Any = getattr(decoder, "Properties", None)
    if getattr(current, "tablectl_shared_tables", False):
        return
    if current is not Properties:
        raise PublishError(
            "cannot share paho's property tables: paho.mqtt._packet.Properties is not "
            "paho.mqtt.properties.Properties (paho changed its internals?)",
            found=repr(current),
        )
    tables = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    attributes = frozenset(name.replace(" ", "") for name in tables.names)

    class SharedTables(Properties):
        """paho's ``Properties`` on the shared tables (no per-object copies)."""

        tablectl_shared_tables = True

        def __init__(self, packetType: int) -> None:
            state = self.__dict__  # paho's __setattr__ is for property names only
            state["packetType"] = packetType
            state["types"] = tables.types
            state["names"] = tables.names
            state["properties"] = tables.properties

        def clear(self) -> None:
            """Delete every property set, as paho's ``clear`` does, trying only the ones set.

            paho's ``unpack`` clears first: paho's own tries each of the 27 names
            (``hasattr``), a tenth of a received message's cost in the drain.
            """
            for name in [name for name in self.__dict__ if name in attributes]:
                delattr(self, name)

    decoder.Properties = SharedTables


SESSION_TAKEN_OVER = 0x8E
"""MQTT 5 DISCONNECT reason code: another client connected with this client id."""


def _reason_value(code: Any) -> int | None:
    value = getattr(code, "value", code)
    return value if isinstance(value, int) else None


def session_taken_over(client: aiomqtt.Client, error: BaseException | None = None) -> bool:
    """Whether the broker ended ``client``'s connection with 0x8E "Session taken over".

    Read from the DISCONNECT reason code aiomqtt keeps in its ``_disconnected`` future, or
    from an ``MqttCodeError`` in ``error``'s cause chain (MQTT 5 only: a 3.1.1 broker just
    closes the socket).
    """
    import aiomqtt

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if (
            isinstance(error, aiomqtt.MqttCodeError)
            and _reason_value(error.rc) == SESSION_TAKEN_OVER
        ):
            return True
        error = error.__cause__ or error.__context__
    disconnected = getattr(client, "_disconnected", None)
    if isinstance(disconnected, asyncio.Future) and disconnected.done():
        if disconnected.cancelled():
            return False
        failure = disconnected.exception()
        if isinstance(failure, aiomqtt.MqttCodeError):
            return _reason_value(failure.rc) == SESSION_TAKEN_OVER
    return False
