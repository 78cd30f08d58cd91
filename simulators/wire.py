"""The simulated scanner's end of wire protocol v1: what a real device's firmware does.

:class:`DeviceWire` sends the device's frames stop-and-wait (one sequenced frame in flight,
sent again until the host ACKs it), sends heartbeats, writes the line (delayed or byte by
byte when the fault plan says so, in order), and reads the host's frames: ACKs release the
frame in flight, cues (EXPECT, RESCAN, REJECT) go to the dealer, RESET restarts the device.
The faults themselves are drawn by :class:`~simulators.faults.FaultInjector`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

import structlog

from drivers.codec import (
    AckFrame,
    BeepFrame,
    CardFrame,
    CorruptFrame,
    ExpectFrame,
    Frame,
    FrameDecoder,
    HeartbeatFrame,
    LedFrame,
    RejectFrame,
    RescanFrame,
    ResetFrame,
    StatusFrame,
)
from simulators.faults import FaultInjector, Outgoing, SimulatorStats

__all__ = ["BYTE_TIME", "MAX_BUFFERED", "SIM_VERSION", "DeviceWire", "Link"]

_log = structlog.get_logger(__name__)

MAX_BUFFERED = 64 * 1024
"""Bytes the simulator lets pile up towards a host that does not read; beyond, it drops."""

SIM_VERSION = "tablectl-scanner-sim 1"

BYTE_TIME = 10 / 115200
"""Seconds one byte takes on a 115,200-baud 8N1 line (start + 8 data + stop bits)."""


class Link(Protocol):
    """The device end of a transport (an asyncio write transport, or the USB IN endpoint)."""

    def write(self, data: bytes) -> None:
        """Write bytes towards the host."""

    def is_closing(self) -> bool:
        """Whether the host end is going away."""

    def get_write_buffer_size(self) -> int:
        """Bytes written but not yet taken by the host."""


Cue = ExpectFrame | RescanFrame | RejectFrame


class DeviceWire:
    """The device side of the link: sequencing, retransmission, heartbeats, host frames.

    Args:
        faults: Draws the line faults of every transmission.
        stats: The simulator's counters.
        heartbeat_interval: Seconds between heartbeats.
        ack_timeout: Seconds to wait for an ACK before sending a frame again.
        max_retransmits: Give a frame up after this many retransmissions; ``None``: never.
        on_cue: Gets every cue from the host (for the dealer).
        on_reset: Called when the host resets the device (the dealer forgets its card).
        dealt: Appended with the value of every CARD frame first sent.
        received: Appended with every good host frame.

    Attributes:
        link: Where the device writes (``None`` while no host is attached).
    """

    def __init__(
        self,
        *,
        faults: FaultInjector,
        stats: SimulatorStats,
        heartbeat_interval: float,
        ack_timeout: float,
        max_retransmits: int | None,
        on_cue: Callable[[Cue], None],
        on_reset: Callable[[], None],
        dealt: list[str],
        received: list[Frame],
    ) -> None:
        self.faults = faults
        self.stats = stats
        self.heartbeat_interval = heartbeat_interval
        self.ack_timeout = ack_timeout
        self.max_retransmits = max_retransmits
        self._on_cue = on_cue
        self._on_reset = on_reset
        self.dealt = dealt
        self.received = received
        self.link: Link | None = None
        self._line_queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        self._line_due = 0.0
        self._silent_until = 0.0
        self._outbox: asyncio.Queue[Outgoing] = asyncio.Queue()
        self._acked = asyncio.Event()
        self._outstanding: int | None = None
        self._completed: int | None = None
        self._tx_seq = 0
        self._last_host_seq: int | None = None
        self._started_at = time.monotonic()

    def start(self) -> None:
        """Power on: fresh queues, uptime from now."""
        self._started_at = time.monotonic()
        self._outbox = asyncio.Queue()
        self._acked = asyncio.Event()
        self._line_queue = asyncio.Queue()

    def new_host(self) -> None:
        """A host (re)attached: its sequence numbers start afresh."""
        self._last_host_seq = None

    def silence(self, seconds: float) -> None:
        """Stop the heartbeats for ``seconds``."""
        self.stats.heartbeat_stops += 1
        self._silent_until = time.monotonic() + seconds
        _log.info("simulator_heartbeat_stopped", seconds=seconds)

    # ------------------------------------------------------------------ line

    def _write(self, data: bytes, delay: float) -> None:
        if delay or self.faults.plan.byte_by_byte:
            due = max(time.monotonic() + delay, self._line_due)  # a stream keeps its order
            self._line_due = due
            self._line_queue.put_nowait((due, data))
            return
        self._put(data)

    def _put(self, data: bytes) -> None:
        link = self.link
        if link is None or link.is_closing() or link.get_write_buffer_size() > MAX_BUFFERED:
            self.stats.dropped_bytes += len(data)
            return
        link.write(data)

    async def line(self) -> None:
        """Writes delayed or byte-by-byte output, in order (a task)."""
        while True:
            due, data = await self._line_queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not self.faults.plan.byte_by_byte:
                self._put(data)
                continue
            for index in range(len(data)):
                self._put(data[index : index + 1])
                await asyncio.sleep(BYTE_TIME)

    def _transmit(self, frame: Frame, out: Outgoing | None = None) -> None:
        for data, delay in self.faults.transmission(frame, out):
            self._write(data, delay)

    # ------------------------------------------------------------------ sending

    def enqueue(self, frame: Frame, out: Outgoing | None = None) -> None:
        """Queue a sequenced frame (``out``: with its scripted line faults)."""
        self._outbox.put_nowait(out if out is not None else Outgoing(frame))

    async def sender(self) -> None:
        """Stop-and-wait: one sequenced frame in flight, retransmitted until ACKed (a task)."""
        while True:
            out = await self._outbox.get()
            frame = replace(out.frame, seq=self._tx_seq)
            self._tx_seq = (self._tx_seq + 1) % 256
            self._outstanding = frame.seq
            self._acked.clear()
            if isinstance(frame, CardFrame):
                self.dealt.append(frame.value)
            self.stats.frames_sent += 1
            await self._deliver(frame, out)
            if self._outstanding == frame.seq:  # not abandoned by a RESET meanwhile
                self._completed = frame.seq
            self._outstanding = None

    async def _deliver(self, frame: Frame, out: Outgoing) -> None:
        """Send until acknowledged, or given up after ``max_retransmits``."""
        attempts = 0
        while True:
            self._transmit(frame, out)
            try:
                async with asyncio.timeout(self.ack_timeout):
                    await self._acked.wait()
                return
            except TimeoutError:
                if self.max_retransmits is not None and attempts >= self.max_retransmits:
                    self.stats.gave_up.append(frame.seq)
                    _log.warning("simulator_gave_up", seq=frame.seq, frame=frame.TYPE.name)
                    return
                attempts += 1
                self.stats.retransmissions += 1

    async def heartbeats(self) -> None:
        """A heartbeat every ``heartbeat_interval``, unless silenced (a task)."""
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            if time.monotonic() < self._silent_until:
                continue
            uptime = int(time.monotonic() - self._started_at) % (1 << 32)
            self._transmit(HeartbeatFrame(uptime_s=uptime, completed=self._completed))
            self.stats.frames_sent += 1

    # ------------------------------------------------------------------ receiving

    async def session(self, reader: asyncio.StreamReader) -> None:
        """Read one host's frames until it goes away."""
        decoder = FrameDecoder()
        while True:
            data = await reader.read(4096)
            if not data:
                return
            for item in decoder.feed(data):
                if isinstance(item, CorruptFrame):
                    self.stats.host_corrupt += 1
                    _log.warning("simulator_corrupt_host_frame", detail=item.detail)
                    continue
                self._on_host_frame(item)

    def _on_host_frame(self, frame: Frame) -> None:
        if not frame.TYPE.from_host:
            self.stats.host_corrupt += 1
            return
        self.stats.host_frames += 1
        if self._last_host_seq is not None:
            step = (frame.seq - self._last_host_seq) % 256
            if step > 1:
                self.stats.host_gaps += step - 1
        self._last_host_seq = frame.seq
        self.received.append(frame)
        if isinstance(frame, AckFrame):
            if self._outstanding is not None and frame.acked == self._outstanding:
                self.stats.acks += 1
                self._acked.set()
        elif isinstance(frame, ExpectFrame | RescanFrame | RejectFrame):
            self._on_cue(frame)
        elif isinstance(frame, ResetFrame):
            self._reset()
        elif isinstance(frame, LedFrame | BeepFrame):
            pass  # recorded in ``received``; a real device lights up or beeps

    def _reset(self) -> None:
        while not self._outbox.empty():
            self._outbox.get_nowait()
        self._on_reset()
        self._tx_seq = 0
        self._outstanding = None
        self._completed = None
        self._acked.set()  # releases a frame in flight: a restarted device forgets it
        self._started_at = time.monotonic()
        self.enqueue(StatusFrame(state="boot", detail=f"{SIM_VERSION}, reset by host"))
