"""A card scanner (shoe) simulator that speaks wire protocol v1 through the real codec.

It plays the device *and* the dealer: on EXPECT the dealer puts the next card on the scanner
(after ``deal_delay``), on RESCAN the same card is scanned again, on REJECT it is put aside.
Faults (misreads, line garbage, corrupted frames, repeated frames) come from seeded random
generators so a run can be reproduced.

Serve it on a pseudo-terminal (the driver opens ``serial:///dev/pts/N``) or on TCP (the
driver connects to ``socket://host:port``)::

    sim = ScannerSimulator(cards=["As", "Kd"], faults=FaultPlan(misreads_at={1: 2}))
    async with sim.serve_pty() as path:
        ...

or as a task: ``tg.create_task(sim.run_pty(on_ready=print))``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import tempfile
import time
import tty
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

import structlog

from controller.cards import Deck
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
    MisreadCause,
    MisreadFrame,
    RejectFrame,
    RescanFrame,
    ResetFrame,
    StatusFrame,
    encode_raw,
    wrap,
)
from drivers.errors import FrameError
from simulators.decks import GAME_DECKS, deck_for_game
from simulators.errors import SimulatorConfigError, SimulatorError

if TYPE_CHECKING:
    from simulators.usb import SimulatedUsbBackend

__all__ = [
    "GAME_DECKS",
    "CardFault",
    "FaultPlan",
    "ScannerSimulator",
    "SimulatorStats",
    "deck_for_game",
]

_log = structlog.get_logger(__name__)

MAX_BUFFERED = 64 * 1024
"""Bytes the simulator lets pile up towards a host that does not read; beyond, it drops."""

SIM_VERSION = "tablectl-scanner-sim 1"

BYTE_TIME = 10 / 115200
"""Seconds one byte takes on a 115,200-baud 8N1 line (start + 8 data + stop bits)."""


class _Link(Protocol):
    """The device end of a transport (an asyncio write transport, or the USB IN endpoint)."""

    def write(self, data: bytes) -> None: ...

    def is_closing(self) -> bool: ...

    def get_write_buffer_size(self) -> int: ...


class _UsbLink:
    """The simulated USB device's bulk IN endpoint as a :class:`_Link`."""

    def __init__(self, backend: SimulatedUsbBackend) -> None:
        self.backend = backend

    def write(self, data: bytes) -> None:
        self.backend.device_write(data)

    def is_closing(self) -> bool:
        return not self.backend.present

    def get_write_buffer_size(self) -> int:
        return self.backend.pending_in()


@dataclass(slots=True)
class _Outgoing:
    """A frame waiting to be sent, with the scripted line faults that apply to it."""

    frame: Frame
    corrupt: int = 0
    garbage: int = 0
    lose: int = 0
    delay: float = 0.0


FaultKind = Literal[
    "misread", "corrupt", "garbage", "loss", "double_read", "delay", "unplug", "heartbeat_stop"
]
"""What a scripted fault does to its card (see :class:`CardFault`)."""

FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)


@dataclass(frozen=True, slots=True)
class CardFault:
    """One scripted fault at a given card (scenarios, ``simulators/scenarios/*.toml``).

    Attributes:
        at: Card index, 0-based, in the order cards are taken from the shoe or script.
        kind: ``misread`` (the scan gives ``times`` MISREADs first), ``corrupt`` (the
            card's first ``times`` transmissions have a flipped bit), ``garbage`` (a burst of
            garbage before each of its first ``times`` transmissions), ``loss`` (its first
            ``times`` transmissions never arrive), ``double_read`` (the card is read twice),
            ``delay`` (its frame leaves ``seconds`` late), ``unplug`` (the link goes away for
            ``seconds`` as the card is dealt), ``heartbeat_stop`` (heartbeats stop for
            ``seconds`` once the card is dealt).
        times: How many times, for the counted kinds.
        seconds: How long, for ``delay``, ``unplug`` and ``heartbeat_stop``.
    """

    at: int
    kind: FaultKind
    times: int = 1
    seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise SimulatorConfigError(
                "unknown fault kind", kind=self.kind, known=", ".join(FAULT_KINDS)
            )
        if self.at < 0 or self.times < 1 or not 0 <= self.seconds <= 3600:
            raise SimulatorConfigError(
                "a fault needs at >= 0, times >= 1 and 0 <= seconds <= 3600",
                at=self.at,
                times=self.times,
                seconds=self.seconds,
            )


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """What goes wrong, and how often. All draws come from ``random.Random`` seeded by ``seed``.

    Attributes:
        misread_rate: Chance that a scan gives a MISREAD instead of the CARD.
        misreads_at: Card index (0-based, in the order cards are taken from the shoe) → how
            many misreads that card gives before its good read. Applied before
            ``misread_rate``.
        garbage_rate: Chance that random garbage bytes go on the line before a frame.
        corrupt_rate: Chance that a transmitted frame has one bit flipped (its CRC fails).
        duplicate_rate: Chance that a sequenced frame is sent twice in a row (a repeat the
            host must drop).
        loss_rate: Chance that a transmission never arrives (the device retransmits
            sequenced frames; a lost heartbeat is just missing).
        double_read_rate: Chance that a card is read twice: a second CARD frame, new seq,
            same value, right after the first (a bounce, for the orchestrator to ignore).
        delay: Maximum extra latency in seconds, drawn per transmission (order is kept:
            a byte stream does not reorder).
        byte_by_byte: Write every byte on its own, one byte-time (115,200 baud) apart.
        unplug_every: Pull the cable as every N-th card is dealt (``None``: never).
        unplug_seconds: How long the cable stays out.
        heartbeat_stop_after: Heartbeats stop once this many cards were dealt (once).
        heartbeat_stop_seconds: How long they stay stopped.
        script: Faults at given cards (scenarios).
        seed: Seed of the fault generators.
    """

    misread_rate: float = 0.0
    misreads_at: dict[int, int] = field(default_factory=dict)
    garbage_rate: float = 0.0
    corrupt_rate: float = 0.0
    duplicate_rate: float = 0.0
    loss_rate: float = 0.0
    double_read_rate: float = 0.0
    delay: float = 0.0
    byte_by_byte: bool = False
    unplug_every: int | None = None
    unplug_seconds: float = 1.0
    heartbeat_stop_after: int | None = None
    heartbeat_stop_seconds: float = 10.0
    script: tuple[CardFault, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        for name in (
            "misread_rate",
            "garbage_rate",
            "corrupt_rate",
            "duplicate_rate",
            "loss_rate",
            "double_read_rate",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise SimulatorConfigError(f"{name} must be between 0 and 1", **{name: value})
        for name in ("misread_rate", "loss_rate"):
            if getattr(self, name) >= 1.0:
                raise SimulatorConfigError(
                    f"{name} must be below 1 or no card ever arrives", **{name: getattr(self, name)}
                )
        for index, count in self.misreads_at.items():
            if index < 0 or count < 0:
                raise SimulatorConfigError(
                    "misreads_at maps card index >= 0 to a count >= 0", index=index, count=count
                )
        for name in ("delay", "unplug_seconds", "heartbeat_stop_seconds"):
            value = getattr(self, name)
            if not 0.0 <= value <= 3600:
                raise SimulatorConfigError(f"{name} must be 0-3600 seconds", **{name: value})
        for name in ("unplug_every", "heartbeat_stop_after"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SimulatorConfigError(
                    f"{name} must be a number of cards >= 1", **{name: value}
                )

    @property
    def unplugs(self) -> bool:
        """Whether the plan ever pulls the cable (the pty is then served behind a link)."""
        return self.unplug_every is not None or any(f.kind == "unplug" for f in self.script)

    def at_card(self, index: int) -> list[CardFault]:
        """The scripted faults of one card."""
        return [fault for fault in self.script if fault.at == index]


@dataclass(slots=True)
class SimulatorStats:
    """What the simulator did (for tests and the CLI's summary).

    Attributes:
        frames_sent: Frames first transmitted (heartbeats included).
        retransmissions: Sequenced frames sent again for want of an ACK.
        gave_up: Sequence numbers abandoned after ``max_retransmits``.
        misreads_sent: MISREAD frames produced by scans.
        corrupted: Transmissions sent with a flipped bit.
        garbage_bursts: Garbage bursts put on the line.
        duplicates_sent: Frames deliberately sent twice.
        dropped_bytes: Bytes not written because the host was absent or not reading.
        acks: ACKs that released an outstanding frame.
        host_frames: Good host frames received.
        host_corrupt: Corrupt frames received from the host.
        host_gaps: Host frames the host sequence numbers say were lost.
        ignored: Commands that made no sense in the dealer's state (RESCAN with no card).
        lost: Transmissions deliberately not sent (``loss_rate``, scripted ``loss``).
        double_reads: Cards read twice on purpose.
        unplugs: Times the cable was pulled.
        heartbeat_stops: Times the heartbeat stopped.
    """

    frames_sent: int = 0
    retransmissions: int = 0
    gave_up: list[int] = field(default_factory=list)
    misreads_sent: int = 0
    corrupted: int = 0
    garbage_bursts: int = 0
    duplicates_sent: int = 0
    dropped_bytes: int = 0
    acks: int = 0
    host_frames: int = 0
    host_corrupt: int = 0
    host_gaps: int = 0
    ignored: int = 0
    lost: int = 0
    double_reads: int = 0
    unplugs: int = 0
    heartbeat_stops: int = 0


_Command = ExpectFrame | RescanFrame | RejectFrame | None
"""What the dealer acts on; ``None`` is a free-run tick."""


class ScannerSimulator:
    """A simulated scanner with a simulated dealer.

    Args:
        deck: The pieces one round is dealt from (default: a standard 52-card deck).
        seed: Shuffle a fresh deck with ``random.Random(f"{seed}:{round_no}")`` at the start
            of every round (a round starts when an EXPECT brings a new round number).
        cards: Values sent as written, in order, across rounds; when given, ``seed`` is
            ignored.
        faults: What goes wrong (default: nothing).
        deal_delay: Seconds between a cue (EXPECT, RESCAN) and the scan.
        interval: When set, deal a card every ``interval`` seconds without waiting for
            EXPECT (for hosts that send no cues).
        heartbeat_interval: Seconds between heartbeats.
        ack_timeout: Seconds to wait for an ACK before sending a frame again.
        max_retransmits: Give a frame up after this many retransmissions (the host then sees
            a sequence gap); ``None`` retransmits until acknowledged.
        positions: Send the EXPECTed slot name as the CARD frame's position field.

    Attributes:
        drawn: Every card put on the scanner, in order, once (what a host must end up with).
        dealt: Every value sent in a CARD frame, in order (retransmissions not repeated;
            a double read appears twice).
        rejected: Values put aside after a REJECT.
        received: Every good host frame, in order of arrival.
        stats: Counters.
    """

    def __init__(
        self,
        *,
        deck: Deck | None = None,
        seed: int | None = None,
        cards: Sequence[str] | None = None,
        faults: FaultPlan | None = None,
        deal_delay: float = 0.05,
        interval: float | None = None,
        heartbeat_interval: float = 1.0,
        ack_timeout: float = 0.5,
        max_retransmits: int | None = None,
        positions: bool = False,
    ) -> None:
        if cards is not None and not cards:
            raise SimulatorConfigError("the scripted card list is empty")
        for text in cards or ():
            try:
                CardFrame(value=text)
            except FrameError as exc:
                raise SimulatorConfigError(
                    "a scripted card cannot go in a CARD frame", value=text, reason=exc.message
                ) from exc
        for name, value in (
            ("deal_delay", deal_delay),
            ("heartbeat_interval", heartbeat_interval),
            ("ack_timeout", ack_timeout),
        ):
            if value < 0 or (name != "deal_delay" and value == 0):
                raise SimulatorConfigError(f"{name} must be positive", **{name: value})
        if interval is not None and interval <= 0:
            raise SimulatorConfigError("interval must be positive", interval=interval)
        self.deck = deck if deck is not None else Deck.standard()
        self.seed: int | None = None if cards is not None else (seed if seed is not None else 0)
        self.script = list(cards) if cards is not None else None
        self.faults = faults if faults is not None else FaultPlan()
        self.deal_delay = deal_delay
        self.interval = interval
        self.heartbeat_interval = heartbeat_interval
        self.ack_timeout = ack_timeout
        self.max_retransmits = max_retransmits
        self.positions = positions

        self.drawn: list[str] = []
        self.dealt: list[str] = []
        self.rejected: list[str] = []
        self.received: list[Frame] = []
        self.stats = SimulatorStats()

        self._line_rng = random.Random(f"{self.faults.seed}:line")
        self._scan_rng = random.Random(f"{self.faults.seed}:scan")
        self._misreads_left = dict(self.faults.misreads_at)
        for fault in self.faults.script:
            if fault.kind == "misread":
                self._misreads_left[fault.at] = self._misreads_left.get(fault.at, 0) + fault.times
        self._link_rng = random.Random(f"{self.faults.seed}:link")
        self._unplug: Callable[[float], Coroutine[Any, Any, None]] | None = None
        self._line_queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        self._line_due = 0.0
        self._silent_until = 0.0
        self._heartbeat_stopped = False
        self._round: int | None = None
        self._shoe: list[str] = []
        self._shoe_pos = 0
        self._script_pos = 0
        self._card_index = 0
        self._current: tuple[int, str] | None = None
        self._current_slot: str | None = None
        self._served: tuple[int, int] | None = None
        self._empty_reported = False
        self._last_scan_misread = False

        self._link: _Link | None = None
        self._outbox: asyncio.Queue[_Outgoing] = asyncio.Queue()
        self._commands: asyncio.Queue[_Command] = asyncio.Queue()
        self._acked = asyncio.Event()
        self._outstanding: int | None = None
        self._completed: int | None = None
        self._tx_seq = 0
        self._last_host_seq: int | None = None
        self._started_at = time.monotonic()
        self._tasks: list[asyncio.Task[None]] = []
        self._side_tasks: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------------ serving

    @contextlib.asynccontextmanager
    async def serve_pty(self, link: str | os.PathLike[str] | None = None) -> AsyncIterator[str]:
        """Serve on a new pseudo-terminal; yields the path for the driver.

        The simulator keeps its own slave descriptor open, so the driver can close and
        reopen the path freely. When the fault plan pulls the cable (or ``link`` is given)
        the path yielded is a symbolic link to the current pty, as udev makes for a real
        scanner: an unplug closes the pty (the host's reads fail) and removes the link; the
        replug opens a new pty and points the link at it.
        """
        tmpdir: str | None = None
        if link is None and self.faults.unplugs:
            tmpdir = tempfile.mkdtemp(prefix="tablectl-sim-")
            link = Path(tmpdir) / "scanner"
        port: _PtyPort | None = None
        try:
            async with self._running():
                port = await self._open_pty()
                if link is not None:
                    _point_link(Path(link), port.path)

                async def unplug(seconds: float) -> None:
                    nonlocal port
                    assert link is not None
                    self._link = None
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(link)
                    if port is not None:
                        await port.close()
                        port = None
                    await asyncio.sleep(seconds)
                    port = await self._open_pty()
                    _point_link(Path(link), port.path)

                self._unplug = unplug if link is not None else None
                _log.info("simulator_serving", device=port.path, link=str(link))
                yield str(link) if link is not None else port.path
        finally:
            self._unplug = None
            self._link = None
            if port is not None:
                await port.close()
            if link is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(link)
            if tmpdir is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(tmpdir)

    async def _open_pty(self) -> _PtyPort:
        master, slave = os.openpty()
        tty.setraw(slave)
        port = _PtyPort(master, slave, os.ttyname(slave))
        loop = asyncio.get_running_loop()
        try:
            reader = asyncio.StreamReader()
            port.read_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader),
                os.fdopen(os.dup(master), "rb", buffering=0),
            )
            port.write_transport, _ = await loop.connect_write_pipe(
                asyncio.Protocol, os.fdopen(os.dup(master), "wb", buffering=0)
            )
        except BaseException:
            await port.close()
            raise
        self._link = port.write_transport
        self._last_host_seq = None
        port.session = asyncio.create_task(self._session(reader), name=f"sim-pty {port.path}")
        return port

    @contextlib.asynccontextmanager
    async def serve_tcp(
        self, host: str = "127.0.0.1", port: int = 0
    ) -> AsyncIterator[tuple[str, int]]:
        """Serve on TCP; yields the bound ``(host, port)`` (port 0 picks a free one).

        One host at a time: a new connection replaces the previous one. An unplug closes
        the connection and the listening socket; the replug listens again on the same port.
        """
        clients: set[asyncio.StreamWriter] = set()

        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for other in clients:
                other.close()
            clients.add(writer)
            self._link = writer.transport
            self._last_host_seq = None
            try:
                await self._session(reader)
            finally:
                clients.discard(writer)
                if self._link is writer.transport:
                    self._link = None
                writer.close()

        async def stop(server: asyncio.Server) -> None:
            server.close()
            for writer in list(clients):
                writer.transport.abort()
            self._link = None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2.0):
                    await server.wait_closed()

        async with self._running():
            server = await asyncio.start_server(on_client, host, port, reuse_address=True)
            bound = server.sockets[0].getsockname()
            bound_host, bound_port = str(bound[0]), int(bound[1])

            async def unplug(seconds: float) -> None:
                nonlocal server
                await stop(server)
                await asyncio.sleep(seconds)
                server = await asyncio.start_server(
                    on_client, bound_host, bound_port, reuse_address=True
                )

            self._unplug = unplug
            _log.info("simulator_serving", host=bound_host, port=bound_port)
            try:
                yield bound_host, bound_port
            finally:
                self._unplug = None
                await stop(server)

    @contextlib.asynccontextmanager
    async def serve_usb(
        self, backend: SimulatedUsbBackend | None = None
    ) -> AsyncIterator[SimulatedUsbBackend]:
        """Serve as a USB device; yields the pyusb backend to hand to the driver.

        ``open_card_source(f"usb://{vid:04x}:{pid:04x}", settings, usb_backend=backend)``
        then finds it. An unplug makes it vanish from enumeration for a while.
        """
        from simulators.usb import SimulatedUsbBackend

        device = backend if backend is not None else SimulatedUsbBackend()
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()

        def from_host(data: bytes) -> None:  # called in the driver's worker thread
            loop.call_soon_threadsafe(reader.feed_data, data)

        async def unplug(seconds: float) -> None:
            device.unplug()
            await asyncio.sleep(seconds)
            self._last_host_seq = None
            device.replug()

        async with self._running():
            device.on_host_bytes = from_host
            self._link = _UsbLink(device)
            self._unplug = unplug
            session = asyncio.create_task(self._session(reader), name="sim-usb")
            _log.info("simulator_serving", usb=f"{device.vendor_id:04x}:{device.product_id:04x}")
            try:
                yield device
            finally:
                self._unplug = None
                self._link = None
                device.on_host_bytes = None
                session.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await session

    async def run_pty(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve on a pty until cancelled (for a TaskGroup); ``on_ready`` gets the path."""
        async with self.serve_pty() as path:
            if on_ready is not None:
                on_ready(path)
            await asyncio.Event().wait()

    async def run_tcp(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        on_ready: Callable[[str, int], None] | None = None,
    ) -> None:
        """Serve on TCP until cancelled (for a TaskGroup); ``on_ready`` gets host and port."""
        async with self.serve_tcp(host, port) as (bound_host, bound_port):
            if on_ready is not None:
                on_ready(bound_host, bound_port)
            await asyncio.Event().wait()

    @contextlib.asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        if self._tasks:
            raise SimulatorError("the simulator is already serving")
        self._started_at = time.monotonic()
        self._outbox = asyncio.Queue()
        self._commands = asyncio.Queue()
        self._acked = asyncio.Event()
        self._line_queue = asyncio.Queue()
        self._tasks = [
            asyncio.create_task(self._sender(), name="sim-sender"),
            asyncio.create_task(self._heartbeats(), name="sim-heartbeat"),
            asyncio.create_task(self._dealer(), name="sim-dealer"),
            asyncio.create_task(self._line(), name="sim-line"),
        ]
        if self.interval is not None:
            self._tasks.append(asyncio.create_task(self._free_run(), name="sim-free-run"))
        self._enqueue(StatusFrame(state="boot", detail=SIM_VERSION))
        try:
            yield
        finally:
            tasks, self._tasks = self._tasks, []
            tasks += self._side_tasks
            self._side_tasks = set()
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            failures = [
                result
                for result in results
                if isinstance(result, BaseException)
                and not isinstance(result, asyncio.CancelledError)
            ]
            if failures:
                raise SimulatorError("a simulator task failed", error=repr(failures[0]))

    # ------------------------------------------------------------------ line

    def _write(self, data: bytes, delay: float = 0.0) -> None:
        faults = self.faults
        if faults.delay:
            delay += self._line_rng.uniform(0.0, faults.delay)
        if delay or faults.byte_by_byte:
            due = max(time.monotonic() + delay, self._line_due)  # a stream keeps its order
            self._line_due = due
            self._line_queue.put_nowait((due, data))
            return
        self._put(data)

    def _put(self, data: bytes) -> None:
        link = self._link
        if link is None or link.is_closing() or link.get_write_buffer_size() > MAX_BUFFERED:
            self.stats.dropped_bytes += len(data)
            return
        link.write(data)

    async def _line(self) -> None:
        """Writes delayed or byte-by-byte output, in order."""
        while True:
            due, data = await self._line_queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not self.faults.byte_by_byte:
                self._put(data)
                continue
            for index in range(len(data)):
                self._put(data[index : index + 1])
                await asyncio.sleep(BYTE_TIME)

    def _transmit(self, frame: Frame, out: _Outgoing | None = None) -> None:
        faults = self.faults
        rng = self._line_rng
        if (out is not None and out.lose > 0) or (
            faults.loss_rate and self._link_rng.random() < faults.loss_rate
        ):
            if out is not None and out.lose > 0:
                out.lose -= 1
            self.stats.lost += 1
            return
        garbage = out is not None and out.garbage > 0
        if garbage or (faults.garbage_rate and rng.random() < faults.garbage_rate):
            if out is not None and garbage:
                out.garbage -= 1
            size = rng.randint(1, 24)
            self._write(bytes(rng.randrange(256) for _ in range(size)))
            self.stats.garbage_bursts += 1
        raw = bytearray(encode_raw(frame))
        corrupt = out is not None and out.corrupt > 0
        if corrupt or (faults.corrupt_rate and rng.random() < faults.corrupt_rate):
            if out is not None and corrupt:
                out.corrupt -= 1
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
            self.stats.corrupted += 1
        delay = out.delay if out is not None else 0.0
        if out is not None:
            out.delay = 0.0  # a scripted delay applies to the first transmission only
        self._write(wrap(bytes(raw)), delay)
        sequenced = not isinstance(frame, HeartbeatFrame)
        if sequenced and faults.duplicate_rate and rng.random() < faults.duplicate_rate:
            self._write(wrap(encode_raw(frame)))
            self.stats.duplicates_sent += 1

    def _enqueue(self, frame: Frame, out: _Outgoing | None = None) -> None:
        self._outbox.put_nowait(out if out is not None else _Outgoing(frame))

    async def _sender(self) -> None:
        """Stop-and-wait: one sequenced frame in flight, retransmitted until ACKed."""
        while True:
            out = await self._outbox.get()
            frame = replace(out.frame, seq=self._tx_seq)
            self._tx_seq = (self._tx_seq + 1) % 256
            self._outstanding = frame.seq
            self._acked.clear()
            if isinstance(frame, CardFrame):
                self.dealt.append(frame.value)
            self.stats.frames_sent += 1
            attempts = 0
            while True:
                self._transmit(frame, out)
                try:
                    async with asyncio.timeout(self.ack_timeout):
                        await self._acked.wait()
                    break
                except TimeoutError:
                    if self.max_retransmits is not None and attempts >= self.max_retransmits:
                        self.stats.gave_up.append(frame.seq)
                        _log.warning("simulator_gave_up", seq=frame.seq, frame=frame.TYPE.name)
                        break
                    attempts += 1
                    self.stats.retransmissions += 1
            if self._outstanding == frame.seq:  # not abandoned by a RESET meanwhile
                self._completed = frame.seq
            self._outstanding = None

    async def _heartbeats(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            if time.monotonic() < self._silent_until:
                continue
            uptime = int(time.monotonic() - self._started_at) % (1 << 32)
            self._transmit(HeartbeatFrame(uptime_s=uptime, completed=self._completed))
            self.stats.frames_sent += 1

    async def _session(self, reader: asyncio.StreamReader) -> None:
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
            self._commands.put_nowait(frame)
        elif isinstance(frame, ResetFrame):
            self._reset()
        elif isinstance(frame, LedFrame | BeepFrame):
            pass  # recorded in ``received``; a real device lights up or beeps

    def _reset(self) -> None:
        while not self._outbox.empty():
            self._outbox.get_nowait()
        while not self._commands.empty():
            self._commands.get_nowait()
        self._tx_seq = 0
        self._outstanding = None
        self._completed = None
        self._acked.set()  # releases a frame in flight: a restarted device forgets it
        self._current = None
        self._current_slot = None
        self._served = None
        self._started_at = time.monotonic()
        self._enqueue(StatusFrame(state="boot", detail=f"{SIM_VERSION}, reset by host"))

    # ------------------------------------------------------------------ dealer

    async def _dealer(self) -> None:
        while True:
            command = await self._commands.get()
            if command is None:
                await self._tick()
            elif isinstance(command, ExpectFrame):
                await self._on_expect(command)
            elif isinstance(command, RescanFrame):
                if self._current is None:
                    self.stats.ignored += 1
                    continue
                await asyncio.sleep(self.deal_delay)
                self._scan()
            else:
                if self._current is not None:
                    self.rejected.append(self._current[1])
                self._current = None
                self._served = None

    async def _on_expect(self, expect: ExpectFrame) -> None:
        if self.interval is not None:
            return  # free-running: cues are ignored
        if expect.round_no != self._round:
            # A controller resuming a round after a restart cues a slot past the first:
            # the cards before it were dealt before the crash, the shoe continues there.
            self._start_round(expect.round_no, start=expect.slot_index)
        key = (expect.round_no, expect.slot_index)
        if key == self._served:
            self.stats.ignored += 1  # a repeated cue for a slot already dealt
            return
        await asyncio.sleep(self.deal_delay)
        if not self._draw():
            return
        self._served = key
        self._current_slot = expect.slot_name
        self._card_events()
        self._scan()

    async def _free_run(self) -> None:
        assert self.interval is not None
        while True:
            await asyncio.sleep(self.interval)
            self._commands.put_nowait(None)

    async def _tick(self) -> None:
        if self._current is not None and self._last_scan_misread:
            self._scan()  # no host to ask for a rescan: the dealer tries again
            return
        if self._draw():
            self._card_events()
            self._scan()

    def _card_events(self) -> None:
        """Faults that happen as a card is dealt: the cable is pulled, heartbeats stop."""
        assert self._current is not None
        index = self._current[0]
        faults = self.faults
        for fault in faults.at_card(index):
            if fault.kind == "unplug":
                self._pull_cable(fault.seconds)
            elif fault.kind == "heartbeat_stop":
                self._stop_heartbeat(fault.seconds)
        if faults.unplug_every is not None and (index + 1) % faults.unplug_every == 0:
            self._pull_cable(faults.unplug_seconds)
        if (
            faults.heartbeat_stop_after is not None
            and index + 1 == faults.heartbeat_stop_after
            and not self._heartbeat_stopped
        ):
            self._heartbeat_stopped = True
            self._stop_heartbeat(faults.heartbeat_stop_seconds)

    def _stop_heartbeat(self, seconds: float) -> None:
        self.stats.heartbeat_stops += 1
        self._silent_until = time.monotonic() + seconds
        _log.info("simulator_heartbeat_stopped", seconds=seconds)

    def _pull_cable(self, seconds: float) -> None:
        unplug = self._unplug
        if unplug is None:
            _log.warning("simulator_cannot_unplug", reason="this transport has no unplug")
            return
        self.stats.unplugs += 1
        _log.info("simulator_unplugged", seconds=seconds)
        task = asyncio.create_task(unplug(seconds), name="sim-unplug")
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    def _start_round(self, round_no: int, start: int = 0) -> None:
        self._round = round_no
        self._empty_reported = False
        if self.seed is not None:
            shoe = [str(piece) for piece in self.deck]
            random.Random(f"{self.seed}:{round_no}").shuffle(shoe)
            self._shoe = shoe
            self._shoe_pos = min(start, len(shoe))

    def _draw(self) -> bool:
        """Put the next card on the scanner; False (and a STATUS ``empty``) when none is left."""
        value: str | None = None
        if self.script is not None:
            if self._script_pos < len(self.script):
                value = self.script[self._script_pos]
                self._script_pos += 1
        else:
            if self._round is None:
                self._start_round(0)
            if self._shoe_pos >= len(self._shoe) and self.interval is not None:
                self._start_round((self._round or 0) + 1)
            if self._shoe_pos < len(self._shoe):
                value = self._shoe[self._shoe_pos]
                self._shoe_pos += 1
        if value is None:
            self._current = None
            if not self._empty_reported:
                self._empty_reported = True
                detail = "script exhausted" if self.script is not None else "shoe empty"
                self._enqueue(StatusFrame(state="empty", detail=detail))
            return False
        self._current = (self._card_index, value)
        self._card_index += 1
        self.drawn.append(value)
        return True

    def _scan(self) -> None:
        assert self._current is not None
        index, value = self._current
        left = self._misreads_left.get(index, 0)
        misread = False
        if left > 0:
            self._misreads_left[index] = left - 1
            misread = True
        elif self.faults.misread_rate and self._scan_rng.random() < self.faults.misread_rate:
            misread = True
        self._last_scan_misread = misread
        if misread:
            self.stats.misreads_sent += 1
            self._enqueue(MisreadFrame(cause=MisreadCause.UNREADABLE, text=f"card #{index}"))
            return
        position = self._current_slot if self.positions else None
        card = CardFrame(value=value, position=position)
        out = _Outgoing(card)
        double = False
        for fault in self.faults.at_card(index):
            if fault.kind == "corrupt":
                out.corrupt += fault.times
            elif fault.kind == "garbage":
                out.garbage += fault.times
            elif fault.kind == "loss":
                out.lose += fault.times
            elif fault.kind == "delay":
                out.delay += fault.seconds
            elif fault.kind == "double_read":
                double = True
        rate = self.faults.double_read_rate
        if rate and self._scan_rng.random() < rate:
            double = True
        self._enqueue(card, out)
        if double:
            self.stats.double_reads += 1
            self._enqueue(card)

    # ------------------------------------------------------------------ helpers for tests

    def host_commands(self) -> Iterator[Frame]:
        """The host frames received, without the ACKs."""
        return (frame for frame in self.received if not isinstance(frame, AckFrame))


@dataclass(slots=True)
class _PtyPort:
    """One pseudo-terminal the simulator serves on (replaced at every replug)."""

    master: int
    slave: int
    path: str
    read_transport: asyncio.ReadTransport | None = None
    write_transport: asyncio.WriteTransport | None = None
    session: asyncio.Task[None] | None = None

    async def close(self) -> None:
        if self.session is not None:
            self.session.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.session
        if self.read_transport is not None:
            self.read_transport.close()
        if self.write_transport is not None:
            self.write_transport.abort()
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)


def _point_link(link: Path, target: str) -> None:
    """Point the symbolic link ``link`` at ``target`` atomically."""
    temporary = link.with_name(f".{link.name}.new")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    temporary.symlink_to(target)
    temporary.replace(link)
