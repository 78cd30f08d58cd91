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
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from controller.cards import Deck
from drivers import memory
from drivers.codec import AckFrame, CardFrame, Frame, StatusFrame
from drivers.errors import FrameError
from simulators.dealer import SimulatedDealer
from simulators.decks import GAME_DECKS, deck_for_game
from simulators.errors import SimulatorConfigError, SimulatorError
from simulators.faults import (
    FAULT_KINDS,
    CardFault,
    FaultInjector,
    FaultKind,
    FaultPlan,
    Outgoing,
    SimulatorStats,
)
from simulators.pty_port import PtyPort, open_pty, point_link
from simulators.wire import SIM_VERSION, DeviceWire

if TYPE_CHECKING:
    from simulators.usb import SimulatedUsbBackend

__all__ = [
    "FAULT_KINDS",
    "GAME_DECKS",
    "CardFault",
    "FaultKind",
    "FaultPlan",
    "ScannerSimulator",
    "SimulatorStats",
    "deck_for_game",
]

_log = structlog.get_logger(__name__)


class _UsbLink:
    """The simulated USB device's bulk IN endpoint as a :class:`simulators.wire.Link`."""

    def __init__(self, backend: SimulatedUsbBackend) -> None:
        self.backend = backend

    def write(self, data: bytes) -> None:
        self.backend.device_write(data)

    def is_closing(self) -> bool:
        return not self.backend.present

    def get_write_buffer_size(self) -> int:
        return self.backend.pending_in()


def _check_arguments(
    cards: Sequence[str] | None, timings: dict[str, float], interval: float | None
) -> None:
    """Refuse a scripted card that cannot go in a CARD frame, or a timing that cannot be."""
    if cards is not None and not cards:
        raise SimulatorConfigError("the scripted card list is empty")
    for text in cards or ():
        try:
            CardFrame(value=text)
        except FrameError as exc:
            raise SimulatorConfigError(
                "a scripted card cannot go in a CARD frame", value=text, reason=exc.message
            ) from exc
    for name, value in timings.items():
        if value < 0 or (name != "deal_delay" and value == 0):
            raise SimulatorConfigError(f"{name} must be positive", **{name: value})
    if interval is not None and interval <= 0:
        raise SimulatorConfigError("interval must be positive", interval=interval)


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
        timings = {
            "deal_delay": deal_delay,
            "heartbeat_interval": heartbeat_interval,
            "ack_timeout": ack_timeout,
        }
        _check_arguments(cards, timings, interval)
        self.faults = faults if faults is not None else FaultPlan()
        self.interval = interval
        self.drawn: list[str] = []
        self.dealt: list[str] = []
        self.rejected: list[str] = []
        self.received: list[Frame] = []
        self.stats = SimulatorStats()
        injector = FaultInjector(self.faults, self.stats)
        self._dealer = SimulatedDealer(
            deck=deck if deck is not None else Deck.standard(),
            seed=None if cards is not None else (seed if seed is not None else 0),
            script=cards,
            deal_delay=deal_delay,
            interval=interval,
            positions=positions,
            faults=injector,
            stats=self.stats,
            send=self._enqueue,
            unplug=self._pull_cable,
            silence=self._silence,
            drawn=self.drawn,
            rejected=self.rejected,
        )
        self._wire = DeviceWire(
            faults=injector,
            stats=self.stats,
            heartbeat_interval=heartbeat_interval,
            ack_timeout=ack_timeout,
            max_retransmits=max_retransmits,
            on_cue=self._dealer.cue,
            on_reset=self._dealer.forget,
            dealt=self.dealt,
            received=self.received,
        )
        self._unplug: Callable[[float], Coroutine[Any, Any, None]] | None = None
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
        port: PtyPort | None = None
        try:
            async with self._running():
                port = await self._open_pty()
                if link is not None:
                    point_link(Path(link), port.path)

                async def unplug(seconds: float) -> None:
                    nonlocal port
                    assert link is not None
                    self._wire.link = None
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(link)
                    if port is not None:
                        await port.close()
                        port = None
                    await asyncio.sleep(seconds)
                    port = await self._open_pty()
                    point_link(Path(link), port.path)

                self._unplug = unplug if link is not None else None
                _log.info("simulator_serving", device=port.path, link=str(link))
                yield str(link) if link is not None else port.path
        finally:
            self._unplug = None
            self._wire.link = None
            if port is not None:
                await port.close()
            if link is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(link)
            if tmpdir is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(tmpdir)

    async def _open_pty(self) -> PtyPort:
        port = await open_pty(self._wire.session)
        self._wire.link = port.write_transport
        self._wire.new_host()
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
            self._wire.link = writer.transport
            self._wire.new_host()
            try:
                await self._wire.session(reader)
            finally:
                clients.discard(writer)
                if self._wire.link is writer.transport:
                    self._wire.link = None
                writer.close()

        async def stop(server: asyncio.Server) -> None:
            server.close()
            for writer in list(clients):
                writer.transport.abort()
            self._wire.link = None
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
    async def serve_memory(self, name: str) -> AsyncIterator[str]:
        """Serve on the in-memory null modem (``drivers/memory.py``); yields ``memory://NAME``.

        The same device as on a pty or TCP, with no file descriptor: for the fast test tier.
        An unplug closes the connection and stops serving the name (a reopen is refused, as
        for a pulled cable) until the replug serves it again.
        """

        async def on_connect(end: memory.MemoryEnd) -> None:
            self._wire.link = end
            self._wire.new_host()
            try:
                await self._wire.session(end.reader)
            finally:
                if self._wire.link is end:
                    self._wire.link = None

        serving = contextlib.ExitStack()
        async with self._running():
            try:
                serving.enter_context(memory.serve(name, on_connect))

                async def unplug(seconds: float) -> None:
                    nonlocal serving
                    serving.close()
                    self._wire.link = None
                    await asyncio.sleep(seconds)
                    serving = contextlib.ExitStack()
                    serving.enter_context(memory.serve(name, on_connect))

                self._unplug = unplug
                _log.info("simulator_serving", device=f"memory:{name}")
                yield f"memory://{name}"
            finally:
                self._unplug = None
                self._wire.link = None
                serving.close()

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
            self._wire.new_host()
            device.replug()

        async with self._running():
            device.on_host_bytes = from_host
            self._wire.link = _UsbLink(device)
            self._unplug = unplug
            session = asyncio.create_task(self._wire.session(reader), name="sim-usb")
            _log.info("simulator_serving", usb=f"{device.vendor_id:04x}:{device.product_id:04x}")
            try:
                yield device
            finally:
                self._unplug = None
                self._wire.link = None
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
        self._wire.start()
        self._dealer.start()
        self._tasks = [
            asyncio.create_task(self._wire.sender(), name="sim-sender"),
            asyncio.create_task(self._wire.heartbeats(), name="sim-heartbeat"),
            asyncio.create_task(self._dealer.run(), name="sim-dealer"),
            asyncio.create_task(self._wire.line(), name="sim-line"),
        ]
        if self.interval is not None:
            self._tasks.append(asyncio.create_task(self._dealer.free_run(), name="sim-free-run"))
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

    # ------------------------------------------------------------------ the two sides

    def _enqueue(self, frame: Frame, out: Outgoing | None = None) -> None:
        """Queue a frame for the wire (every frame the device sends goes through here)."""
        self._wire.enqueue(frame, out)

    def _silence(self, seconds: float) -> None:
        self._wire.silence(seconds)

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

    @property
    def _round(self) -> int | None:
        """The round the dealer deals (for a recording subclass, ``tests/chaos``)."""
        return self._dealer.round_no

    def _start_round(self, round_no: int, start: int = 0) -> None:
        self._dealer.start_round(round_no, start)

    @property
    def _shoe(self) -> list[str]:
        return self._dealer.shoe

    # ------------------------------------------------------------------ helpers for tests

    def host_commands(self) -> Iterator[Frame]:
        """The host frames received, without the ACKs."""
        return (frame for frame in self.received if not isinstance(frame, AckFrame))
