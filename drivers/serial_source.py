"""The card-source driver for serial ports, ptys and TCP (protocol v1 over a byte stream).

One background task reads the port, decodes frames, acknowledges every sequenced device
frame, drops repeats, turns sequence gaps and corrupt frames into :class:`Misread` reads and
keeps heartbeats to itself; :meth:`SerialCardSource.next_read` hands out the rest in order.
Reconnection is not done here: a supervisor closes and reopens the source.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

import serial
import serial_asyncio_fast
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
    PortSpec,
    Read,
)

BOOT_STATE = "boot"
"""A STATUS with this state starts a new device sequence (no gap is reported)."""

_READ_CHUNK = 4096


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


class SerialCardSource:
    """A scanner on a serial port, a pty or a TCP socket.

    Args:
        url: The URL as configured (for logs and errors).
        spec: What the URL resolved to.
        settings: Timeouts and defaults.
    """

    def __init__(self, url: str, spec: PortSpec, settings: DriverSettings) -> None:
        self._url = url
        self._spec = spec
        self._settings = settings
        self._log = structlog.get_logger(__name__).bind(url=url, device=spec.device)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
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

    # ----------------------------------------------------------------- properties

    @property
    def url(self) -> str:
        """The URL the source was built from."""
        return self._url

    @property
    def device(self) -> str:
        """The device path or ``host:port``."""
        return self._spec.device

    @property
    def is_open(self) -> bool:
        """Whether the port is open."""
        return self._writer is not None

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
        """Open the port or connect, within ``open_timeout``.

        Raises:
            TransportError: Already open, or the port cannot be opened.
            DeviceTimeout: Opening took longer than ``open_timeout``.
        """
        if self._writer is not None:
            raise TransportError("card source is already open", url=self._url, device=self.device)
        options: dict[str, Any] = {"baudrate": self._spec.baud}
        if self._spec.kind == "serial":
            options["exclusive"] = True
        try:
            async with asyncio.timeout(self._settings.open_timeout):
                reader, writer = await serial_asyncio_fast.open_serial_connection(
                    url=self._spec.port_url, **options
                )
        except TimeoutError as exc:
            raise DeviceTimeout(
                "opening the card source timed out",
                url=self._url,
                device=self.device,
                detail=f"open_timeout={self._settings.open_timeout}s",
            ) from exc
        except (serial.SerialException, OSError, ValueError) as exc:
            raise TransportError(
                "cannot open the card source", url=self._url, device=self.device, detail=str(exc)
            ) from exc
        self._reader, self._writer = reader, writer
        self._decoder.reset()
        self._rx_seq = None
        self._commands_since_open = 0
        self._opened_at = time.monotonic()
        self._last_heartbeat_at = None
        self._failed = False
        self._task = asyncio.create_task(self._read_loop(reader), name=f"card-source {self._url}")
        self._log.info("card_source_opened", kind=self._spec.kind, baud=self._spec.baud)

    async def close(self) -> None:
        """Stop reading and close the port. Safe to call twice; never raises.

        Reads that arrived but were not taken yet stay queued (they were acknowledged, the
        device will not send them again): ``next_read`` returns them, after a reopen too.
        A failure that was pending is forgotten.
        """
        task, writer = self._task, self._writer
        self._task, self._writer, self._reader = None, None, None
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
        if writer is None:
            return
        transport = writer.transport
        if not transport.is_closing():  # after a failure the transport closes itself
            if self._failed:
                transport.abort()
            else:
                writer.close()
        try:
            async with asyncio.timeout(self._settings.write_timeout):
                await writer.wait_closed()
        except TimeoutError:
            self._log.warning("card_source_close_timeout", timeout_s=self._settings.write_timeout)
        except Exception as exc:  # the error that closed it; already reported
            self._log.debug("card_source_close_error", error=str(exc))
        self._log.info("card_source_closed", stats=str(self.stats))

    async def __aenter__(self) -> SerialCardSource:
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
            if self._writer is None and self._queue.empty():
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
        if limit is None or self._writer is None:
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

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                data = await reader.read(_READ_CHUNK)
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
        except (OSError, serial.SerialException) as exc:
            self._fail(
                ConnectionLost(
                    "the connection to the device failed",
                    url=self._url,
                    device=self.device,
                    detail=str(exc),
                )
            )

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
        await self._send(AckFrame(acked=item.seq))
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
        writer = self._writer
        if writer is None or writer.transport.is_closing():
            raise TransportError(
                "card source is not open",
                url=self._url,
                device=self.device,
                frame_type=frame.TYPE.name,
            )
        numbered = replace(frame, seq=self._tx_seq)
        self._tx_seq = (self._tx_seq + 1) % 256
        writer.write(encode(numbered))
        try:
            async with asyncio.timeout(self._settings.write_timeout):
                await writer.drain()
        except TimeoutError as exc:
            raise DeviceTimeout(
                "writing to the device timed out",
                url=self._url,
                device=self.device,
                detail=f"write_timeout={self._settings.write_timeout}s",
                frame_type=frame.TYPE.name,
            ) from exc
        except (OSError, serial.SerialException) as exc:
            raise ConnectionLost(
                "writing to the device failed",
                url=self._url,
                device=self.device,
                detail=str(exc),
                frame_type=frame.TYPE.name,
            ) from exc

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
