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
import time
import tty
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

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

__all__ = ["GAME_DECKS", "FaultPlan", "ScannerSimulator", "SimulatorStats", "deck_for_game"]

_log = structlog.get_logger(__name__)

MAX_BUFFERED = 64 * 1024
"""Bytes the simulator lets pile up towards a host that does not read; beyond, it drops."""

SIM_VERSION = "tablectl-scanner-sim 1"


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
        seed: Seed of the fault generators.
    """

    misread_rate: float = 0.0
    misreads_at: dict[int, int] = field(default_factory=dict)
    garbage_rate: float = 0.0
    corrupt_rate: float = 0.0
    duplicate_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("misread_rate", "garbage_rate", "corrupt_rate", "duplicate_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise SimulatorConfigError(f"{name} must be between 0 and 1", **{name: value})
        if self.misread_rate >= 1.0:
            raise SimulatorConfigError(
                "misread_rate must be below 1 or no card is ever read",
                misread_rate=self.misread_rate,
            )
        for index, count in self.misreads_at.items():
            if index < 0 or count < 0:
                raise SimulatorConfigError(
                    "misreads_at maps card index >= 0 to a count >= 0", index=index, count=count
                )


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
        dealt: Every value sent in a CARD frame, in order (retransmissions not repeated).
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

        self.dealt: list[str] = []
        self.rejected: list[str] = []
        self.received: list[Frame] = []
        self.stats = SimulatorStats()

        self._line_rng = random.Random(f"{self.faults.seed}:line")
        self._scan_rng = random.Random(f"{self.faults.seed}:scan")
        self._misreads_left = dict(self.faults.misreads_at)
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

        self._link: asyncio.WriteTransport | None = None
        self._outbox: asyncio.Queue[Frame] = asyncio.Queue()
        self._commands: asyncio.Queue[_Command] = asyncio.Queue()
        self._acked = asyncio.Event()
        self._outstanding: int | None = None
        self._completed: int | None = None
        self._tx_seq = 0
        self._last_host_seq: int | None = None
        self._started_at = time.monotonic()
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ serving

    @contextlib.asynccontextmanager
    async def serve_pty(self) -> AsyncIterator[str]:
        """Serve on a new pseudo-terminal; yields the slave path for the driver.

        The simulator keeps its own slave descriptor open, so the driver can close and
        reopen the path freely.
        """
        master, slave = os.openpty()
        tty.setraw(slave)
        path = os.ttyname(slave)
        loop = asyncio.get_running_loop()
        read_transport: asyncio.ReadTransport | None = None
        write_transport: asyncio.WriteTransport | None = None
        try:
            reader = asyncio.StreamReader()
            read_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader),
                os.fdopen(os.dup(master), "rb", buffering=0),
            )
            write_transport, _ = await loop.connect_write_pipe(
                asyncio.Protocol, os.fdopen(os.dup(master), "wb", buffering=0)
            )
            async with self._running():
                self._link = write_transport
                session = asyncio.create_task(self._session(reader), name=f"sim-pty {path}")
                _log.info("simulator_serving", device=path)
                try:
                    yield path
                finally:
                    self._link = None
                    session.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await session
        finally:
            if read_transport is not None:
                read_transport.close()
            if write_transport is not None:
                write_transport.abort()
            os.close(master)
            os.close(slave)

    @contextlib.asynccontextmanager
    async def serve_tcp(
        self, host: str = "127.0.0.1", port: int = 0
    ) -> AsyncIterator[tuple[str, int]]:
        """Serve on TCP; yields the bound ``(host, port)`` (port 0 picks a free one).

        One host at a time: a new connection replaces the previous one.
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

        async with self._running():
            server = await asyncio.start_server(on_client, host, port)
            bound = server.sockets[0].getsockname()
            _log.info("simulator_serving", host=bound[0], port=bound[1])
            try:
                yield str(bound[0]), int(bound[1])
            finally:
                server.close()
                for writer in list(clients):
                    writer.close()
                self._link = None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(2.0):
                        await server.wait_closed()

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
        self._tasks = [
            asyncio.create_task(self._sender(), name="sim-sender"),
            asyncio.create_task(self._heartbeats(), name="sim-heartbeat"),
            asyncio.create_task(self._dealer(), name="sim-dealer"),
        ]
        if self.interval is not None:
            self._tasks.append(asyncio.create_task(self._free_run(), name="sim-free-run"))
        self._enqueue(StatusFrame(state="boot", detail=SIM_VERSION))
        try:
            yield
        finally:
            tasks, self._tasks = self._tasks, []
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

    def _write(self, data: bytes) -> None:
        link = self._link
        if link is None or link.is_closing() or link.get_write_buffer_size() > MAX_BUFFERED:
            self.stats.dropped_bytes += len(data)
            return
        link.write(data)

    def _transmit(self, frame: Frame) -> None:
        faults = self.faults
        rng = self._line_rng
        if faults.garbage_rate and rng.random() < faults.garbage_rate:
            size = rng.randint(1, 24)
            self._write(bytes(rng.randrange(256) for _ in range(size)))
            self.stats.garbage_bursts += 1
        raw = bytearray(encode_raw(frame))
        if faults.corrupt_rate and rng.random() < faults.corrupt_rate:
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
            self.stats.corrupted += 1
        self._write(wrap(bytes(raw)))
        sequenced = not isinstance(frame, HeartbeatFrame)
        if sequenced and faults.duplicate_rate and rng.random() < faults.duplicate_rate:
            self._write(wrap(encode_raw(frame)))
            self.stats.duplicates_sent += 1

    def _enqueue(self, frame: Frame) -> None:
        self._outbox.put_nowait(frame)

    async def _sender(self) -> None:
        """Stop-and-wait: one sequenced frame in flight, retransmitted until ACKed."""
        while True:
            frame = replace(await self._outbox.get(), seq=self._tx_seq)
            self._tx_seq = (self._tx_seq + 1) % 256
            self._outstanding = frame.seq
            self._acked.clear()
            if isinstance(frame, CardFrame):
                self.dealt.append(frame.value)
            self.stats.frames_sent += 1
            attempts = 0
            while True:
                self._transmit(frame)
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
            self._start_round(expect.round_no)
        key = (expect.round_no, expect.slot_index)
        if key == self._served:
            self.stats.ignored += 1  # a repeated cue for a slot already dealt
            return
        await asyncio.sleep(self.deal_delay)
        if not self._draw():
            return
        self._served = key
        self._current_slot = expect.slot_name
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
            self._scan()

    def _start_round(self, round_no: int) -> None:
        self._round = round_no
        self._empty_reported = False
        if self.seed is not None:
            shoe = [str(piece) for piece in self.deck]
            random.Random(f"{self.seed}:{round_no}").shuffle(shoe)
            self._shoe = shoe
            self._shoe_pos = 0

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
        self._enqueue(CardFrame(value=value, position=position))

    # ------------------------------------------------------------------ helpers for tests

    def host_commands(self) -> Iterator[Frame]:
        """The host frames received, without the ACKs."""
        return (frame for frame in self.received if not isinstance(frame, AckFrame))
