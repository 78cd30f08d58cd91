"""The link layer of protocol v1, whatever carries the bytes (serial, pty, TCP, USB).

:class:`FramedCardSource` does everything ``docs/protocol.md`` asks of a host: one
background task reads the transport, decodes frames, acknowledges every sequenced device
frame, drops repeats, turns sequence gaps and corrupt frames into :class:`Misread` reads and
keeps heartbeats to itself; :meth:`FramedCardSource.next_read` hands out the rest in order.
A transport subclass supplies four coroutines: connect, receive a chunk, send bytes,
disconnect. Reconnection is not done here: :mod:`drivers.supervisor` closes and reopens.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import time
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Self

import structlog

from drivers.codec import (
    AckFrame,
    BeepFrame,
    CardFrame,
    CorruptFrame,
    CorruptReason,
    DecodedItem,
    ExpectFrame,
    Frame,
    FrameDecoder,
    HeartbeatFrame,
    LedColor,
    LedFrame,
    MisreadFrame,
    RejectFrame,
    RescanFrame,
    ResetFrame,
    StatusFrame,
    encode,
    misread_cause_name,
)
from drivers.errors import (
    ConnectionLost,
    DeviceTimeout,
    DriverError,
    HeartbeatLost,
    TransportError,
)
from drivers.source import (
    CardRead,
    DeviceStatus,
    DriverSettings,
    Misread,
    MisreadCauseName,
    Read,
)

BOOT_STATE = "boot"
"""A STATUS with this state starts a new device sequence (no gap is reported)."""


@dataclass(slots=True)
class LinkStats:
    """Counters of one source since it was built (they survive close/reopen).

    Attributes:
        frames: Good device frames received (including heartbeats and repeats).
        heartbeats: Heartbeats received.
        duplicates: Repeated frames dropped (retransmissions).
        gaps: Sequence gaps seen.
        lost_frames: Frames the gaps say were lost.
        corrupt: Corrupt frames (CRC, version, length, type, payload).
        acks_sent: ACK frames written.
        commands_sent: Other host frames written.
    """

    frames: int = 0
    heartbeats: int = 0
    duplicates: int = 0
    gaps: int = 0
    lost_frames: int = 0
    corrupt: int = 0
    acks_sent: int = 0
    commands_sent: int = 0


class FramedCardSource(abc.ABC):
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
        self._rx_seq: int | None = None
        self._commands_since_open = 0
        self._tx_seq = 0
        self._opened_at = 0.0
        self._last_heartbeat_at: float | None = None
        self._failed = False
        self.device_uptime_s: int | None = None
        self.stats = LinkStats()

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
        return self._last_heartbeat_at

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
            raise TransportError("card source is already open", url=self._url, device=self.device)
        try:
            async with asyncio.timeout(self._settings.open_timeout):
                await self._connect()
        except TimeoutError as exc:
            raise DeviceTimeout(
                "opening the card source timed out",
                url=self._url,
                device=self.device,
                detail=f"open_timeout={self._settings.open_timeout}s",
            ) from exc
        self._connected = True
        self._decoder.reset()
        self._rx_seq = None
        self._commands_since_open = 0
        self._opened_at = time.monotonic()
        self._last_heartbeat_at = None
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
                raise TransportError("card source is not open", url=self._url, device=self.device)
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
        since = self._last_heartbeat_at if self._last_heartbeat_at is not None else self._opened_at
        silent = time.monotonic() - since
        if silent > limit:
            self._log.error("heartbeat_lost", silent_s=round(silent, 3), limit_s=limit)
            raise HeartbeatLost(
                "no heartbeat from the device",
                url=self._url,
                device=self.device,
                detail=f"silent for {silent:.2f}s, heartbeat_timeout={limit}s",
            )

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._receive()
                if not data:
                    raise ConnectionLost(
                        "the device closed the connection (end of file)",
                        url=self._url,
                        device=self.device,
                    )
                at = time.monotonic()
                for item in self._decoder.feed(data):
                    await self._handle(item, at)
        except asyncio.CancelledError:
            raise
        except DriverError as exc:
            self._fail(exc)

    def _fail(self, exc: DriverError) -> None:
        self._failed = True
        self._log.error("card_source_failed", error=str(exc))
        self._queue.put_nowait(exc)

    async def _handle(self, item: DecodedItem, at: float) -> None:
        if isinstance(item, CorruptFrame):
            self.stats.corrupt += 1
            cause: MisreadCauseName = "crc" if item.reason is CorruptReason.CRC else "malformed"
            self._log.warning("corrupt_frame", reason=item.reason.value, detail=item.detail)
            self._queue.put_nowait(Misread(cause, f"{item.reason}: {item.detail}", None, at))
            return
        self.stats.frames += 1
        if isinstance(item, HeartbeatFrame):
            self.stats.heartbeats += 1
            self._last_heartbeat_at = at
            self.device_uptime_s = item.uptime_s
            if item.completed is not None:
                if self._rx_seq is None:
                    # Just opened. Before our first command, what the device finished is
                    # not ours; after it, a finished frame we never saw may be our card.
                    self._rx_seq = item.completed
                    if self._commands_since_open:
                        detail = (
                            f"the device is done with seq {item.completed} but no frame "
                            "reached us since the port was opened: maybe a card"
                        )
                        self.stats.gaps += 1
                        self._log.warning("sequence_gap", detail=detail)
                        self._queue.put_nowait(Misread("gap", detail, item.completed, at))
                    return
                step = (item.completed - self._rx_seq) % 256
                if 0 < step < 128:  # the device gave up on frames we never received
                    self._gap(step, item.completed, at, "the device gave up on")
                    self._rx_seq = item.completed
            return
        if not isinstance(item, CardFrame | MisreadFrame | StatusFrame):
            self.stats.corrupt += 1
            detail = f"host frame {item.TYPE.name} received from the device (echo?)"
            self._log.warning("unexpected_frame", detail=detail)
            self._queue.put_nowait(Misread("malformed", detail, None, at))
            return
        boot = isinstance(item, StatusFrame) and item.state == BOOT_STATE
        deliver = True
        if self._rx_seq is not None and not boot:
            step = (item.seq - self._rx_seq) % 256
            if step == 0:
                deliver = False
                self.stats.duplicates += 1
                self._log.info("duplicate_frame_dropped", seq=item.seq, type=item.TYPE.name)
            elif step > 1:
                self._gap(step - 1, (item.seq - 1) % 256, at, "lost")
        self._rx_seq = item.seq
        if deliver:
            self._queue.put_nowait(self._to_read(item, at))
        # Every sequenced frame is acknowledged, repeats too: the previous ACK may be lost.
        ack = AckFrame(seq=self._tx_seq, acked=item.seq)
        if self._writable() and self._transmit_now(encode(ack)):
            self._tx_seq = (self._tx_seq + 1) % 256
        else:
            await self._send(ack)
        self.stats.acks_sent += 1

    def _gap(self, lost: int, last_lost: int, at: float, how: str) -> None:
        assert self._rx_seq is not None
        first = (self._rx_seq + 1) % 256
        seqs = f"seq {first}" if lost == 1 else f"seq {first}-{last_lost}"
        detail = f"{how} {lost} device frame(s), {seqs}: maybe a card"
        self.stats.gaps += 1
        self.stats.lost_frames += lost
        self._log.warning("sequence_gap", detail=detail)
        self._queue.put_nowait(Misread("gap", detail, last_lost, at))

    @staticmethod
    def _to_read(item: CardFrame | MisreadFrame | StatusFrame, at: float) -> Read:
        if isinstance(item, CardFrame):
            return CardRead(item.value, item.position, item.seq, at)
        if isinstance(item, MisreadFrame):
            detail = misread_cause_name(item.cause)
            if item.text:
                detail = f"{detail}: {item.text}"
            return Misread("device", detail, item.seq, at)
        return DeviceStatus(item.state, item.detail, at)

    # ----------------------------------------------------------------- commands

    async def _send(self, frame: Frame) -> None:
        if not self._writable():
            raise TransportError(
                "card source is not open",
                url=self._url,
                device=self.device,
                frame_type=frame.TYPE.name,
            )
        numbered = replace(frame, seq=self._tx_seq)
        self._tx_seq = (self._tx_seq + 1) % 256
        try:
            async with asyncio.timeout(self._settings.write_timeout):
                await self._transmit(encode(numbered))
        except TimeoutError as exc:
            raise DeviceTimeout(
                "writing to the device timed out",
                url=self._url,
                device=self.device,
                detail=f"write_timeout={self._settings.write_timeout}s",
                frame_type=frame.TYPE.name,
            ) from exc
        except ConnectionLost as exc:
            exc.context.setdefault("frame_type", frame.TYPE.name)
            raise

    async def _command(self, frame: Frame) -> None:
        await self._send(frame)
        self.stats.commands_sent += 1
        self._commands_since_open += 1

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """Tell the device the table waits for a card for this slot (EXPECT).

        Raises:
            FrameError: A field is out of range.
            TransportError: Not open, or the write failed.
            DeviceTimeout: The write took longer than ``write_timeout``.
        """
        await self._command(
            ExpectFrame(round_no=round_no, slot_index=slot_index, slot_name=slot_name)
        )

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """Ask the dealer to read the same card again (RESCAN).

        Raises:
            FrameError: A field is out of range.
            TransportError: Not open, or the write failed.
            DeviceTimeout: The write took longer than ``write_timeout``.
        """
        await self._command(RescanFrame(slot_name=slot_name, reason=reason))

    async def reject(self, slot_name: str, reason: str) -> None:
        """Tell the dealer the card is refused and must be taken away (REJECT).

        Raises:
            FrameError: A field is out of range.
            TransportError: Not open, or the write failed.
            DeviceTimeout: The write took longer than ``write_timeout``.
        """
        await self._command(RejectFrame(slot_name=slot_name, reason=reason))

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """Set the device's LED (LED).

        Raises:
            FrameError: A field is out of range.
            TransportError: Not open, or the write failed.
            DeviceTimeout: The write took longer than ``write_timeout``.
        """
        await self._command(LedFrame(color=color, blink=blink, duration_ms=duration_ms))

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """Sound the device's beeper (BEEP).

        Raises:
            FrameError: A field is out of range.
            TransportError: Not open, or the write failed.
            DeviceTimeout: The write took longer than ``write_timeout``.
        """
        await self._command(BeepFrame(count=count, duration_ms=duration_ms))

    async def reset(self) -> None:
        """Ask the device to restart (RESET); it answers with STATUS ``boot``.

        Raises:
            TransportError: Not open, or the write failed.
            DeviceTimeout: The write took longer than ``write_timeout``.
        """
        await self._command(ResetFrame())
