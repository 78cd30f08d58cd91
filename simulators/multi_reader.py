"""A table of position readers: several devices speaking one profile, each on its own pty.

One dealer (the line simulator's: one shoe, cues, rescans, rejects, misreads, the cable
pulled) deals the round; each card is put on the reader bound to the slot cued, and its
record (the profile's, byte for byte) comes out of that reader's pty. Each reader hears the
host's commands on its own pty (a cue shows its slot, a rescan blinks it, a reject shows red)
and they all go to the one dealer. Faults besides the line simulator's: a card put on the
wrong reader (``wrong_reader_at``, or the line faults' ``wrong_position_rate``), and the
cable pulled from the reader of the card being dealt (``unplug_every``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog

from drivers.codec import CardFrame, Frame
from drivers.profile import LoadedProfile
from simulators.errors import SimulatorConfigError, SimulatorError
from simulators.faults import Outgoing
from simulators.line_device import LineDeviceSimulator, LineFaults
from simulators.pty_port import PtyPort, open_pty, point_link
from simulators.wire import BYTE_TIME

__all__ = ["MultiReaderSimulator"]

_log = structlog.get_logger(__name__)


class MultiReaderSimulator(LineDeviceSimulator):
    """Several simulated readers of one profile, each bound to slots, and their dealer.

    Args:
        loaded: The readers' profile and the deck's code table.
        readers: Reader name → the slot names it reads (a slot is one reader's).
        wrong_reader_at: 0-based indices (in dealing order) of cards whose first scan is
            put on the wrong reader (the next one in order).
        **kwargs: As :class:`~simulators.line_device.LineDeviceSimulator`; the line faults'
            ``wrong_position_rate`` is the chance a card goes on the wrong reader.

    Attributes:
        placements: ``(card, reader)`` for every card record written, in order.
        reader_commands: Reader name → the host's command lines it heard.
    """

    def __init__(
        self,
        loaded: LoadedProfile,
        readers: Mapping[str, Sequence[str]],
        *,
        wrong_reader_at: frozenset[int] = frozenset(),
        **kwargs: Any,
    ) -> None:
        line_faults: LineFaults = kwargs.pop("line_faults", None) or LineFaults()
        self._wrong_rate = line_faults.wrong_position_rate
        super().__init__(
            loaded, line_faults=dataclasses.replace(line_faults, wrong_position_rate=0.0), **kwargs
        )
        if not readers:
            raise SimulatorConfigError("a multi-reader table needs readers")
        self.readers = {name: tuple(slots) for name, slots in readers.items()}
        self._reader_of: dict[str, str] = {}
        for name, slots in self.readers.items():
            for slot in slots:
                if slot in self._reader_of:
                    raise SimulatorConfigError("a slot is bound to two readers", slot=slot)
                self._reader_of[slot] = name
        self.wrong_reader_at = wrong_reader_at
        self.placements: list[tuple[str, str]] = []
        self.reader_commands: dict[str, list[str]] = {name: [] for name in self.readers}
        self._ports: dict[str, PtyPort | None] = {}
        self._links: dict[str, Path] = {}
        self._route = next(iter(self.readers))
        self._wrong_done: set[int] = set()
        self._wrong_rng = random.Random(f"{line_faults.seed}:reader")

    # ------------------------------------------------------------------ serving

    @contextlib.asynccontextmanager
    async def serve_ptys(self) -> AsyncIterator[dict[str, str]]:
        """Serve each reader on its own pty behind a symbolic link; yields name → link."""
        tmpdir = tempfile.mkdtemp(prefix="tablectl-readers-sim-")
        self._dealer.start()
        dealer = asyncio.create_task(self._dealer.run(), name="readers-sim-dealer")
        try:
            for name in self.readers:
                self._links[name] = Path(tmpdir) / name
                await self._plug(name)
            _log.info("readers_simulator_serving", readers=list(self.readers))
            yield {name: str(link) for name, link in self._links.items()}
        finally:
            tasks = [dealer, *self._tasks]
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for name, port in list(self._ports.items()):
                if port is not None:
                    await port.close()
                self._ports[name] = None
                with contextlib.suppress(OSError):
                    self._links[name].unlink()
            with contextlib.suppress(OSError):
                os.rmdir(tmpdir)
            failures = [
                r
                for r in results
                if isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError)
            ]
            if failures:
                raise SimulatorError("a readers simulator task failed", error=repr(failures[0]))

    async def _plug(self, name: str) -> None:
        async def session(reader: asyncio.StreamReader) -> None:
            await self._reader_session(name, reader)

        port = await open_pty(session)
        self._ports[name] = port
        point_link(self._links[name], port.path)

    async def _reader_session(self, name: str, reader: asyncio.StreamReader) -> None:
        buffer = b""
        terminator = self.profile.terminator_bytes
        while True:
            data = await reader.read(4096)
            if not data:
                return
            self.host_bytes += data
            buffer += data
            while terminator in buffer:
                line, buffer = buffer.split(terminator, 1)
                text = line.decode("ascii", "replace")
                self.reader_commands[name].append(text)
                self._on_command(text)

    # ------------------------------------------------------------------ records

    def reader_of(self, slot: str | None) -> str:
        """The reader bound to ``slot`` (the first reader for a slot of none)."""
        return self._reader_of.get(slot or "", next(iter(self.readers)))

    def _send(self, frame: Frame, out: Outgoing | None) -> None:
        if isinstance(frame, CardFrame):
            self._route = self._placed_on(frame)
            self.placements.append((frame.value, self._route))
        else:
            self._route = self.reader_of(self._cued_slot)
        super()._send(frame, out)

    def _placed_on(self, frame: CardFrame) -> str:
        """The reader the dealer puts the card on: its slot's, or by a fault another."""
        right = self.reader_of(frame.position)
        deal = len(self.drawn) - 1
        wrong = deal in self.wrong_reader_at and deal not in self._wrong_done
        if not wrong and self._wrong_rate:
            wrong = self._wrong_rng.random() < self._wrong_rate
        if not wrong or len(self.readers) < 2:
            return right
        self._wrong_done.add(deal)
        self.line_stats.wrong_positions += 1
        self.line_stats.faulty_records += 1
        names = list(self.readers)
        return names[(names.index(right) + 1) % len(names)]

    def _write(self, data: bytes) -> None:
        route = self._route
        delay = self._rng.uniform(0.0, self.faults.delay) if self.faults.delay else 0.0
        if not delay and not self.faults.byte_by_byte:
            self._put_to(route, data)
            return
        loop = asyncio.get_running_loop()
        due = max(loop.time() + delay, self._line_due)
        self._line_due = due + (len(data) * BYTE_TIME if self.faults.byte_by_byte else 0.0)
        self._spawn(self._write_to_later(route, data, due))

    async def _write_to_later(self, route: str, data: bytes, due: float) -> None:
        await asyncio.sleep(max(0.0, due - asyncio.get_running_loop().time()))
        if not self.faults.byte_by_byte:
            self._put_to(route, data)
            return
        for index in range(len(data)):
            self._put_to(route, data[index : index + 1])
            await asyncio.sleep(BYTE_TIME)

    def _put_to(self, route: str, data: bytes) -> None:
        port = self._ports.get(route)
        transport = port.write_transport if port is not None else None
        if transport is None or transport.is_closing():
            self.stats.dropped_bytes += len(data)
            return
        transport.write(data)

    def _pull_cable(self, seconds: float) -> None:
        """The cable of the reader of the card being dealt is out from now, for ``seconds``."""
        self.stats.unplugs += 1
        name = self.reader_of(self._cued_slot)
        port, self._ports[name] = self._ports.get(name), None
        self._spawn(self._unplug_reader(name, port, seconds))

    async def _unplug_reader(self, name: str, port: PtyPort | None, seconds: float) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._links[name].unlink()
        if port is not None:
            await port.close()
        await asyncio.sleep(seconds)
        await self._plug(name)
