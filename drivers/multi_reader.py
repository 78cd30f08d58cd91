"""Several position readers behind one card source: a table with a reader at each place.

A table may read its cards with several devices (RFID or barcode readers at the seats, on the
board, at the dealer), each bound to positions (slot names) in the table's config
(``[[devices]]``). :class:`MultiReaderSource` gives the orchestrator the one
:class:`~drivers.source.CardSource` it knows: each reader runs under its own supervisor
(:class:`~drivers.supervisor.SupervisedCardSource`, so each reconnects on its own), one pump
task per reader moves its reads onto one queue, and the commands go to the reader bound to
the slot they name.

A card must come from the reader bound to the slot the table waits for. A card read by
another reader is refused, never guessed: it comes out as ``Misread("position", "... read
from the wrong position ...")`` naming both readers; the orchestrator journals it and asks
for a rescan, which goes to the right reader. Device states name their reader
(``DeviceStatus.device``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from drivers.codec import LedColor
from drivers.errors import DriverError, TransportError
from drivers.source import (
    CardRead,
    CardRemoved,
    CardSource,
    DeviceStatus,
    DriverSettings,
    Misread,
    Read,
)
from drivers.supervisor import SupervisedCardSource

__all__ = ["MultiReaderError", "MultiReaderSource", "ReaderBinding"]


class MultiReaderError(TransportError):
    """A multi-reader table that cannot work (no readers, a slot claimed twice, no reader)."""


@dataclass(frozen=True, slots=True)
class ReaderBinding:
    """One reader of a multi-reader table.

    Attributes:
        name: The reader's name (``seat-A``, ``board``), in logs, errors and the journal.
        url: Its device URL (any driver: ``profile+serial://``, ``hidpos://``...).
        slots: The slot names it reads (a hand's name is expanded to its slots by the
            controller before it gets here).
        settings: Its driver settings.
    """

    name: str
    url: str
    slots: tuple[str, ...]
    settings: DriverSettings


class _Reader:
    """A reader at run time: its binding and its supervised source."""

    def __init__(self, binding: ReaderBinding, source: CardSource) -> None:
        self.binding = binding
        self.source = source

    @property
    def name(self) -> str:
        return self.binding.name

    def describe(self) -> str:
        return f"reader {self.name!r} ({', '.join(self.binding.slots)})"


Item = tuple[_Reader, Read] | DriverError


class MultiReaderSource:
    """Several readers, each bound to its slots, as one card source.

    Args:
        readers: The readers and their slots; a slot is bound to one reader.
        factory: Builds a reader's source from its binding (default: a
            :class:`~drivers.supervisor.SupervisedCardSource` of its URL and settings).
        usb_backend: The pyusb backend for USB readers (tests: the simulated one).

    Raises:
        MultiReaderError: No reader, two readers with one name, or a slot bound twice.

    Attributes:
        wrong_position: Cards refused because they came from another reader than the slot's.
    """

    def __init__(
        self,
        readers: Sequence[ReaderBinding],
        *,
        factory: Callable[[ReaderBinding], CardSource] | None = None,
        usb_backend: Any = None,
    ) -> None:
        if not readers:
            raise MultiReaderError("a multi-reader table needs at least one reader")
        self._by_slot: dict[str, _Reader] = {}
        self._readers: list[_Reader] = []
        names: set[str] = set()
        for binding in readers:
            if binding.name in names:
                raise MultiReaderError("two readers have one name", reader=binding.name)
            names.add(binding.name)
            source = (
                factory(binding)
                if factory is not None
                else SupervisedCardSource(binding.url, binding.settings, usb_backend=usb_backend)
            )
            reader = _Reader(binding, source)
            self._readers.append(reader)
            for slot in binding.slots:
                if slot in self._by_slot:
                    raise MultiReaderError(
                        "two readers claim one position",
                        slot=slot,
                        readers=f"{self._by_slot[slot].name}, {binding.name}",
                    )
                self._by_slot[slot] = reader
        self._url = "multi://" + ",".join(reader.name for reader in self._readers)
        self._queue: asyncio.Queue[Item] = asyncio.Queue()
        self._runner: asyncio.Task[None] | None = None
        self._expected: str | None = None
        self._last_reader: _Reader | None = None
        self._last_card: tuple[_Reader, str, str] | None = None
        self._log = structlog.get_logger(__name__).bind(url=self._url)
        self.wrong_position = 0

    # ------------------------------------------------------------------ properties

    @property
    def url(self) -> str:
        """``multi://`` and the readers' names."""
        return self._url

    @property
    def readers(self) -> Mapping[str, CardSource]:
        """Each reader's (supervised) source, by name."""
        return {reader.name: reader.source for reader in self._readers}

    @property
    def last_heartbeat_at(self) -> float | None:
        """The oldest of the readers' last heartbeats (``None`` while any is away)."""
        beats = [reader.source.last_heartbeat_at for reader in self._readers]
        if any(beat is None for beat in beats):
            return None
        return min(beat for beat in beats if beat is not None)

    def reader_of(self, slot: str) -> str | None:
        """The name of the reader bound to ``slot``, ``None`` if none is."""
        reader = self._by_slot.get(slot)
        return reader.name if reader is not None else None

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Open every reader (a table does not start without all of them).

        Raises:
            TransportError: A reader cannot be opened (the others are closed again).
            DeviceTimeout: A reader took longer than its ``open_timeout``.
        """
        if self._runner is not None:
            raise MultiReaderError("card source is already open", url=self._url)
        opened: list[_Reader] = []
        try:
            for reader in self._readers:
                await reader.source.open()
                opened.append(reader)
        except BaseException:
            for reader in opened:
                await reader.source.close()
            raise
        self._runner = asyncio.create_task(self._run(), name=f"card-source {self._url}")
        self._log.info("multi_reader_opened", readers=[r.name for r in self._readers])

    async def close(self) -> None:
        """Stop the pumps and close every reader. Never raises."""
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner
        for reader in self._readers:
            await reader.source.close()

    async def _run(self) -> None:
        """One named pump per reader, in one TaskGroup, until closed."""
        async with asyncio.TaskGroup() as group:
            for reader in self._readers:
                group.create_task(self._pump(reader), name=f"reader {reader.name}")

    async def _pump(self, reader: _Reader) -> None:
        """Move one reader's reads onto the queue (its supervisor reconnects it)."""
        while True:
            try:
                read = await reader.source.next_read()
            except DriverError as exc:  # closed under us: the source is being closed
                self._queue.put_nowait(exc)
                return
            self._queue.put_nowait((reader, read))

    # ------------------------------------------------------------------ reads

    async def next_read(self) -> Read:
        """The next read of any reader, checked against the slot the table waits for.

        Raises:
            TransportError: The source is not open (or a reader's source was closed).
        """
        while True:
            if self._runner is None and self._queue.empty():
                raise MultiReaderError("card source is not open", url=self._url)
            item = await self._queue.get()
            if isinstance(item, DriverError):
                raise item
            reader, read = item
            checked = self._checked(reader, read)
            if checked is not None:
                return checked

    def _checked(self, reader: _Reader, read: Read) -> Read | None:
        """A reader's read as the table sees it (``None``: not the table's concern)."""
        if isinstance(read, DeviceStatus):
            return DeviceStatus(
                read.state, f"{reader.describe()}: {read.detail}", read.at, reader.binding.url
            )
        expected = self._expected
        right = self._by_slot.get(expected) if expected is not None else None
        if isinstance(read, Misread):
            if read.cause == "away" and right is not None and right is not reader:
                # That reader lost nothing the table waits for (the slot is another's).
                self._log.info("reader back, not the slot's", reader=reader.name, slot=expected)
                return None
            return Misread(
                read.cause, f"{reader.describe()}: {read.detail}", read.device_seq, read.at
            )
        if isinstance(read, CardRemoved):
            # A card left a latched reader: the orchestrator knows which slot it was dealt to.
            return read
        self._last_reader = reader
        if expected is None:
            return CardRead(read.value, None, read.device_seq, read.at)
        if right is reader:
            self._last_card = (reader, read.value, expected)
            return CardRead(read.value, expected, read.device_seq, read.at)
        last = self._last_card
        if last is not None and last[:2] == (reader, read.value):
            # The card passed on last, read again by its reader after the next slot was cued:
            # the same physical card, at the slot it was read for. The orchestrator ignores it
            # as a bounce or refuses it for that position; a rescan here would cue a slot the
            # dealer has not dealt yet.
            return CardRead(read.value, last[2], read.device_seq, read.at)
        self.wrong_position += 1
        where = f"at {right.describe()}" if right is not None else "and no reader is bound to it"
        return Misread(
            "position",
            f"{read.value} read from the wrong position: {reader.describe()} read it, "
            f"but the table waits for {expected} {where}; scan it there",
            read.device_seq,
            read.at,
        )

    # ------------------------------------------------------------------ commands

    def _reader_for(self, slot: str) -> _Reader:
        reader = self._by_slot.get(slot)
        if reader is None:
            raise MultiReaderError("no reader is bound to this slot", url=self._url, slot=slot)
        return reader

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """Cue the slot at its reader.

        Raises:
            MultiReaderError: No reader is bound to the slot.
            DeviceAway: The slot's reader is away (sent again after it recovered).
        """
        self._expected = slot_name
        await self._reader_for(slot_name).source.expect(round_no, slot_index, slot_name)

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """Ask for the card again at the slot's reader.

        After a wrong position too: the cue goes where the card must be scanned (the wrong
        reader is not told to reject, which would tell the dealer to put the card aside).

        Raises:
            MultiReaderError: No reader is bound to the slot.
            DeviceAway: The slot's reader is away.
        """
        await self._reader_for(slot_name).source.request_rescan(slot_name, reason)

    async def reject(self, slot_name: str, reason: str) -> None:
        """Refuse the card at the reader that read it (the slot's, or the last one).

        Raises:
            DeviceAway: That reader is away.
        """
        reader = self._by_slot.get(slot_name) or self._last_reader
        if reader is not None:
            await reader.source.reject(slot_name, reason)

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """Set the LED of the reader of the slot the table waits for (if any).

        Raises:
            DeviceAway: That reader is away.
        """
        reader = self._by_slot.get(self._expected) if self._expected is not None else None
        if reader is not None:
            await reader.source.led(color, blink=blink, duration_ms=duration_ms)

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """Sound the beeper of the reader of the slot the table waits for (if any).

        Raises:
            DeviceAway: That reader is away.
        """
        reader = self._by_slot.get(self._expected) if self._expected is not None else None
        if reader is not None:
            await reader.source.beep(count, duration_ms)

    async def reset(self) -> None:
        """Reset every reader (one away is skipped and logged)."""
        for reader in self._readers:
            try:
                await reader.source.reset()
            except DriverError as exc:
                self._log.warning("reader not reset", reader=reader.name, error=str(exc))
