"""The link layer of protocol v1, whatever carries the bytes (serial, pty, TCP, USB).

:class:`FramedCardSource` does everything ``docs/protocol.md`` asks of a host: one
background task reads the transport, decodes frames, acknowledges every sequenced device
frame, drops repeats, turns sequence gaps and corrupt frames into :class:`Misread` reads and
keeps heartbeats to itself; :meth:`FramedCardSource.next_read` hands out the rest in order.
The receive side's bookkeeping (sequence numbers, repeats, gaps, heartbeats) is
:class:`drivers.receiver.LinkReceiver`; this class owns the transport, the ACKs, the commands
and the life-cycle. A transport subclass supplies four coroutines: connect, receive a chunk,
send bytes, disconnect. Reconnection is not done here: :mod:`drivers.supervisor` closes and reopens.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import time
from dataclasses import replace
from types import TracebackType
from typing import Any, Self, TypeVar

import structlog

from drivers.codec import (
    AckFrame,
    Frame,
    FrameDecoder,
    encode,
)
from drivers.errors import (
    ConnectionLost,
    DeviceTimeout,
    DriverError,
    HeartbeatLost,
    TransportError,
)
from drivers.host_commands import HostCommands
from drivers.receiver import LinkReceiver, LinkStats
from drivers.source import (
    DriverSettings,
    Read,
)

_E = TypeVar("_E", bound=DriverError)


class FramedCardSource(HostCommands):
    """A scanner speaking protocol v1 over some byte transport (the subclass).

    Args:
        url: The URL as configured (for logs and errors).
        device: The device path, ``host:port`` or ``VID:PID`` (for logs and errors).
        settings: Timeouts and defaults.
        kind: Transport name for the log (``"serial"``, ``"socket"``, ``"usb"``).
    """

    def __init__(self, url: str, device: str, settings: DriverSettings, kind: str) -> None:
        self._url = url
        self._device = device
        self._kind = kind
        self._settings = settings
        self._log = structlog.get_logger(__name__).bind(url=url, device=device)
        self._connected = False
        self._task: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[Read | DriverError] = asyncio.Queue()
        self._decoder = FrameDecoder()
        self._tx_seq = 0
        self._opened_at = 0.0
        self._failed = False
        self.stats = LinkStats()
        self._receiver = LinkReceiver(self._queue, self.stats, self._log)

    # ----------------------------------------------------------------- transport

    @abc.abstractmethod
    async def _connect(self) -> None:
        """Open the transport (the caller bounds it by ``open_timeout``).

        Raises:
            TransportError: It cannot be opened.
        """

    @abc.abstractmethod
    async def _receive(self) -> bytes:
        """The next bytes from the device; ``b""`` at end of file.

        Raises:
            ConnectionLost: The transport failed.
        """

    @abc.abstractmethod
    async def _transmit(self, data: bytes) -> None:
        """Send bytes to the device (the caller bounds it by ``write_timeout``).

        Raises:
            ConnectionLost: The transport failed.
        """

    @abc.abstractmethod
    async def _disconnect(self, *, failed: bool) -> None:
        """Close the transport (``failed``: after an error, abort rather than flush).

        Never raises; bounded by ``write_timeout``.
        """

    def _writable(self) -> bool:
        """Whether bytes can be sent now (the transport is open and not closing)."""
        return self._connected

    def _transmit_now(self, data: bytes) -> bool:
        """Send ``data`` at once, without waiting, if the transport can; else ``False``.

        For the ACK on every frame's path: a transport whose write never blocks while its
        buffer is empty (a serial port, a pty, TCP) says so here and spares the ACK the
        coroutine, the timeout and the drain of :meth:`_transmit`. The default cannot.
        """
        return False

    def _error(self, kind: type[_E], message: str, detail: str | None = None, **context: Any) -> _E:
        """An exception of ``kind`` about this source (its URL and device filled in)."""
        return kind(message, url=self._url, device=self.device, detail=detail, **context)

    # ----------------------------------------------------------------- properties

    @property
    def url(self) -> str:
        """The URL the source was built from."""
        return self._url

    @property
    def device(self) -> str:
        """The device path, ``host:port`` or ``VID:PID``."""
        return self._device

    @property
    def is_open(self) -> bool:
        """Whether the transport is open."""
        return self._connected

    @property
    def last_heartbeat_at(self) -> float | None:
        """``time.monotonic()`` of the last heartbeat since open, ``None`` before the first."""
        return self._receiver.last_heartbeat_at

    @property
    def device_uptime_s(self) -> int | None:
        """The device's uptime as its last heartbeat gave it."""
        return self._receiver.device_uptime_s

    @property
    def garbage_bytes(self) -> int:
        """Bytes skipped as garbage between frames since the source was built."""
        return self._decoder.garbage_bytes

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> None:
        """Open the transport within ``open_timeout``.

        Raises:
            TransportError: Already open, or the transport cannot be opened.
            DeviceTimeout: Opening took longer than ``open_timeout``.
        """
        if self._connected:
            raise self._error(TransportError, "card source is already open")
        try:
            async with asyncio.timeout(self._settings.open_timeout):
                await self._connect()
        except TimeoutError as exc:
            raise self._error(
                DeviceTimeout,
                "opening the card source timed out",
                f"open_timeout={self._settings.open_timeout}s",
            ) from exc
        self._connected = True
        self._decoder.reset()
        self._receiver.reset()
        self._opened_at = time.monotonic()
        self._failed = False
        self._task = asyncio.create_task(self._read_loop(), name=f"card-source {self._url}")
        self._log.info("card_source_opened", kind=self._kind)

    async def close(self) -> None:
        """Stop reading and close the transport. Safe to call twice; never raises.

        Reads that arrived but were not taken yet stay queued (they were acknowledged, the
        device will not send them again): ``next_read`` returns them, after a reopen too.
        A failure that was pending is forgotten.
        """
        task, connected = self._task, self._connected
        self._task, self._connected = None, False
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        pending: list[Read | DriverError] = []
        while not self._queue.empty():
            pending.append(self._queue.get_nowait())
        for item in pending:
            if not isinstance(item, DriverError):
                self._queue.put_nowait(item)
        if not connected:
            return
        try:
            await self._disconnect(failed=self._failed)
        except Exception as exc:  # never raises: log what the transport said
            self._log.warning("card_source_close_error", error=str(exc))
        self._log.info("card_source_closed", stats=str(self.stats))

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # ----------------------------------------------------------------- reads

    async def next_read(self) -> Read:
        """Wait for the next card, misread or status, in arrival order.

        Reads that arrived before a failure are returned before the failure is raised.

        Raises:
            ConnectionLost: The device went away.
            HeartbeatLost: No heartbeat within ``heartbeat_timeout``.
            DeviceTimeout: An ACK could not be written in time.
            TransportError: The source is not open.
        """
        while True:
            if not self._connected and self._queue.empty():
                raise self._error(TransportError, "card source is not open")
            try:
                async with asyncio.timeout(self._settings.read_timeout):
                    item = await self._queue.get()
            except TimeoutError:
                self._check_heartbeat()
                continue
            if isinstance(item, DriverError):
                self._queue.put_nowait(item)  # every later call raises it too
                raise item
            return item

    def _check_heartbeat(self) -> None:
        limit = self._settings.heartbeat_timeout
        if limit is None or not self._connected:
            return
        last = self._receiver.last_heartbeat_at
        since = last if last is not None else self._opened_at
        silent = time.monotonic() - since
        if silent > limit:
            self._log.error("heartbeat_lost", silent_s=round(silent, 3), limit_s=limit)
            raise self._error(
                HeartbeatLost,
                "no heartbeat from the device",
                f"silent for {silent:.2f}s, heartbeat_timeout={limit}s",
            )

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._receive()
                if not data:
                    raise self._error(
                        ConnectionLost, "the device closed the connection (end of file)"
                    )
                at = time.monotonic()
                receive = self._receiver.receive
                for item in self._decoder.feed(data):
                    acked = receive(item, at)
                    if acked is not None and not self._acknowledge_now(acked):
                        await self._acknowledge(acked)
        except asyncio.CancelledError:
            raise
        except DriverError as exc:
            self._fail(exc)

    def _fail(self, exc: DriverError) -> None:
        self._failed = True
        self._log.error("card_source_failed", error=str(exc))
        self._queue.put_nowait(exc)

    def _acknowledge_now(self, seq: int) -> bool:
        """ACK a sequenced device frame at once if the transport can (the card's path)."""
        if self._writable() and self._transmit_now(encode(AckFrame(seq=self._tx_seq, acked=seq))):
            self._tx_seq = (self._tx_seq + 1) % 256
            self.stats.acks_sent += 1
            return True
        return False

    async def _acknowledge(self, seq: int) -> None:
        """ACK a sequenced device frame, bounded by ``write_timeout``."""
        await self._send(AckFrame(acked=seq))
        self.stats.acks_sent += 1

    # ----------------------------------------------------------------- commands

    async def _send(self, frame: Frame) -> None:
        if not self._writable():
            raise self._error(TransportError, "card source is not open", frame_type=frame.TYPE.name)
        numbered = replace(frame, seq=self._tx_seq)
        self._tx_seq = (self._tx_seq + 1) % 256
        try:
            async with asyncio.timeout(self._settings.write_timeout):
                await self._transmit(encode(numbered))
        except TimeoutError as exc:
            raise self._error(
                DeviceTimeout,
                "writing to the device timed out",
                f"write_timeout={self._settings.write_timeout}s",
                frame_type=frame.TYPE.name,
            ) from exc
        except ConnectionLost as exc:
            exc.context.setdefault("frame_type", frame.TYPE.name)
            raise

    async def _command(self, frame: Frame) -> None:
        """Send a command frame (the vocabulary is :class:`drivers.host_commands.HostCommands`)."""
        await self._send(frame)
        self.stats.commands_sent += 1
        self._receiver.commands_since_open += 1
