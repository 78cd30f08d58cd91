"""The card-source driver of the Eccel Pepper C1 RFID reader (TCP or serial), latched.

URLs (``drivers/source.py``)::

    pepper://HOST:PORT?antennas=1:seat1,2:seat2,3:board,8:muck&codes=FILE
    pepper+serial:///dev/ttyUSB0?antennas=...&codes=FILE[&baud=115200][&profile=NAME]

One task (named ``card-source <url>``) polls the reader: for each antenna of ``antennas`` it
selects the antenna (``SET_ACTIVE_ANTENNA``, through the reader's multiplexer; without
``antennas`` there is one antenna and none is selected), asks how many tags are in the field
(``GET_TAG_COUNT``) and each tag's UID (``GET_UID``), every ``poll_ms`` of the profile
(``drivers/profiles/readers/pepper-c1.toml``). A tag lying on an antenna is so reported at
every poll; the presence latch (:class:`drivers.presence.PresenceLatch`, the profile's
``[presence]`` times) makes one placement of the repeats and a removal of their end. Each poll
is a whole inventory of its antenna, so a tag missing from one counts as absent from that poll
on: a host that polls late (a stall) removes nothing it did not see gone. The tags of a poll
count as seen when its tag count was taken (the UIDs index that inventory), so a reply late
inside a poll removes nothing either.

* a placement is a :class:`~drivers.source.CardRead` of the card the code table maps the UID
  to, at the antenna's position (a hand or slot name; ``muck`` for a muck antenna); a UID the
  table does not know is ``Misread("unknown_code")`` naming the tag and the antenna (a tag of
  another deck is never guessed);
* a removal is a :class:`~drivers.source.CardRemoved`;
* two tags placed on one antenna in one poll come after a ``DeviceStatus("two_tags")``
  naming the antenna (journalled; the cards follow in the reader's order);
* a garbled reply is ``Misread("crc")`` / ``Misread("malformed")`` (the poll is simply made
  again: nothing is lost, the latch bridges a missed poll);
* no reply within ``response_ms``, the port's end of file or an I/O error end the source with
  :class:`~drivers.errors.DeviceTimeout` / :class:`~drivers.errors.ConnectionLost`: the
  supervisor reconnects (``lost``, ``recovered``). The time away is no absence
  (:meth:`~drivers.presence.PresenceLatch.resumed`), and a card placed meanwhile is still on
  its antenna at the first poll after: nothing is lost with the reader.

The reader has no display or beeper commands tablectl uses: cues, rescans and rejections
reach the dealer through the table's event feed only (counted as ``skipped_commands``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, ClassVar

import serial
import serial_asyncio_fast
import structlog

from drivers.codec import LedColor
from drivers.errors import ConnectionLost, DeviceTimeout, DriverError, TransportError
from drivers.pepper import (
    Ack,
    Command,
    ErrorReply,
    PepperCorrupt,
    PepperDecoder,
    PepperFrame,
    parse_reply,
    parse_uid,
    request,
)
from drivers.pepper_url import PepperSpec
from drivers.presence import FieldEmpty, Placed, PresenceLatch, PresenceTimes, Removed, TagSeen
from drivers.profile import CodeTable, ProfileError
from drivers.queued import QueuedReads, close_stream
from drivers.reader_profile import load_reader_profile
from drivers.source import (
    CardRead,
    CardRemoved,
    DeviceStatus,
    DriverSettings,
    Misread,
    MisreadCauseName,
    Read,
)

__all__ = ["FAMILY", "PepperCardSource"]

FAMILY = "pepper-c1"
"""The reader profiles this driver takes (``family = "pepper-c1"``)."""

_READ_CHUNK = 4096
MAX_TAGS = 16
"""Tags asked for on one antenna in one poll (more is a reader fault, not a table)."""


class _CommandFailed(DriverError):
    """Internal: the reader answered a command with ERROR, or garbled its reply."""


class PepperCardSource(QueuedReads):
    """An Eccel Pepper C1 on TCP or a serial port, its antennas bound to positions.

    Args:
        url: The URL as configured (for logs and errors).
        spec: What the URL resolved to.
        settings: Timeouts and defaults (``open_timeout``, ``write_timeout``).
        raw_codes: Read the tags' UIDs as they are, without a code table (enrolment).

    Raises:
        ProfileError: The reader profile or the code table is not valid.

    Attributes:
        skipped_commands: Commands the reader has no counterpart for (not sent).
        polls: Complete poll cycles (all antennas) since the source was built.
    """

    loses_reads_while_away: ClassVar[bool] = False
    """A card placed while the reader was away is still on its antenna at the next poll."""

    def __init__(
        self, url: str, spec: PepperSpec, settings: DriverSettings, *, raw_codes: bool = False
    ) -> None:
        super().__init__(url, spec.device)
        self._spec = spec
        self._settings = settings
        loaded = load_reader_profile(spec.profile, spec.codes)
        if loaded.profile.family != FAMILY:
            raise ProfileError(
                f"a pepper URL needs a reader profile of the {FAMILY} family",
                file=str(loaded.path),
                field="family",
                detail=loaded.profile.family,
            )
        self.profile = loaded.profile
        self._table = None if raw_codes else loaded.table
        # Each poll is a whole inventory of its antenna: a tag missing from one is absent
        # from that poll on (FieldEmpty, then the tags present), so the latch runs without
        # repeats and the time between polls (a host stall) removes nothing.
        times = self.profile.presence.times()
        self._latch = PresenceLatch(PresenceTimes(times.place_after, times.remove_after, False))
        self._positions: dict[str | None, str | None] = (
            {str(number): position for number, position in spec.antennas}
            if spec.antennas
            else {None: None}
        )
        self._log = structlog.get_logger(__name__).bind(url=url, device=spec.device)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._decoder = PepperDecoder()
        self._wire = asyncio.Lock()  # one command and its reply at a time (polls, cues)
        self._last_reply: float | None = None
        self._answered: asyncio.Event | None = None
        self._seq = 0
        self._was_open = False
        self.skipped_commands = 0
        self.polls = 0

    @property
    def table(self) -> CodeTable | None:
        """The code table tags are mapped by (``None``: raw UIDs, for enrolment)."""
        return self._table

    async def answered(self) -> None:
        """Wait until the reader has answered since the source was opened.

        The caller bounds the wait (``tablectl check-config``).

        Raises:
            TransportError: The source is not open.
        """
        if self._answered is None:
            raise self._error(TransportError, "card source is not open")
        await self._answered.wait()

    @property
    def last_heartbeat_at(self) -> float | None:
        """When the reader last answered (its replies are its heartbeat); ``None`` before."""
        return self._last_reply

    async def open(self) -> None:
        """Open the port or connect, within ``open_timeout``, and start polling.

        Raises:
            TransportError: Already open, or it cannot be opened.
            DeviceTimeout: Opening took longer than ``open_timeout``.
        """
        if self._writer is not None:
            raise self._error(TransportError, "card source is already open")
        options: dict[str, Any] = {"baudrate": self._spec.baud or self.profile.baud}
        if self._spec.kind == "pepper+serial":
            options["exclusive"] = True
        try:
            async with asyncio.timeout(self._settings.open_timeout):
                reader, writer = await serial_asyncio_fast.open_serial_connection(
                    url=self._spec.port_url, **options
                )
        except TimeoutError as exc:
            raise self._error(
                DeviceTimeout, "opening the card source timed out",
                f"open_timeout={self._settings.open_timeout}s",
            ) from exc  # fmt: skip
        except (serial.SerialException, OSError, ValueError) as exc:
            raise self._error(TransportError, "cannot open the card source", str(exc)) from exc
        self._reader, self._writer = reader, writer
        self._decoder.reset()
        self._last_reply = None
        self._answered = asyncio.Event()
        if self._was_open:
            self._latch.resumed(time.monotonic())
        self._was_open = True
        self._task = asyncio.create_task(self._poll_loop(), name=f"card-source {self._url}")
        self._log.info("card_source_opened", kind=self._spec.kind, antennas=len(self._positions))

    async def close(self) -> None:
        """Stop polling and close; reads not taken yet stay queued. Never raises."""
        task, writer = self._task, self._writer
        self._task, self._reader, self._writer, self._last_reply = None, None, None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.keep_reads()
        if writer is None:
            return
        await close_stream(writer, self._settings.write_timeout, self._log)
        self._log.info("card_source_closed")

    async def next_read(self) -> Read:
        """The next card, removal, misread or status, in the order they were decided.

        Raises:
            ConnectionLost: The reader went away.
            DeviceTimeout: The reader stopped answering.
            TransportError: The source is not open.
        """
        return await self.take(is_open=self._writer is not None)

    # ------------------------------------------------------------------ polling

    async def _poll_loop(self) -> None:
        interval = self.profile.poll_ms / 1000
        try:
            while True:
                started = time.monotonic()
                for antenna in self._positions:
                    await self._poll(antenna)
                self.polls += 1
                # Decided as of the cycle's start: every antenna has been looked at since.
                self._emit(self._latch.due(started), None)
                await asyncio.sleep(max(0.0, started + interval - time.monotonic()))
        except DriverError as exc:
            self._log.error("card_source_failed", error=str(exc))
            self._queue.put_nowait(exc)

    async def _poll(self, antenna: str | None) -> None:
        """One antenna: select it, count its tags, read each UID, feed the latch."""
        try:
            if antenna is not None:
                await self._command(Command.SET_ACTIVE_ANTENNA, int(antenna))
            count_data = await self._command(Command.GET_TAG_COUNT)
            if not count_data:
                raise self._error(_CommandFailed, "GET_TAG_COUNT answered without a count")
            count = count_data[0]
            at = time.monotonic()
            if count > MAX_TAGS:
                raise self._error(_CommandFailed, f"the reader counts {count} tags on one antenna")
            seen: list[TagSeen] = []
            for index in range(count):
                data = await self._command(Command.GET_UID, index)
                uid = parse_uid(data)
                if uid is None:
                    raise self._error(
                        _CommandFailed, f"GET_UID answered no UID: {data.hex().upper()}"
                    )
                # Seen as of the count: the UIDs index the inventory the count took, so a
                # reply that comes late (a slow module, a stalled host) does not stretch the
                # poll past the removal time and remove the tags not read back yet.
                seen.append(TagSeen(uid.uid, antenna, at))
        except _CommandFailed as exc:
            self._put(
                Misread("malformed", self._where(antenna, str(exc.message)), None, time.monotonic())
            )
            return
        events = self._latch.feed(FieldEmpty(antenna, at))
        for observation in seen:
            events += self._latch.feed(observation)
        self._emit(events, antenna)

    async def _command(self, command: Command, *params: int) -> bytes:
        """Send a command and wait (``response_ms``) for its ACK; returns the ACK's data.

        Raises:
            _CommandFailed: The reader answered ERROR, or garbled the reply.
            DeviceTimeout: No reply in time.
            ConnectionLost: The port failed or closed.
        """
        writer, reader = self._writer, self._reader
        if writer is None or reader is None or writer.transport.is_closing():
            raise self._error(TransportError, "card source is not open")
        timeout = self.profile.response_ms / 1000
        try:
            async with self._wire, asyncio.timeout(timeout):
                writer.write(request(command, *params))
                await writer.drain()
                while True:
                    data = await reader.read(_READ_CHUNK)
                    if not data:
                        raise self._error(
                            ConnectionLost, "the reader closed the connection (end of file)"
                        )
                    answer = self._answer(command, self._decoder.feed(data))
                    if answer is not None:
                        return answer
        except TimeoutError as exc:
            raise self._error(
                DeviceTimeout,
                f"the reader did not answer {command.name} within {timeout:g} s",
                f"response_ms={self.profile.response_ms:g}",
            ) from exc
        except (OSError, serial.SerialException) as exc:
            raise self._error(
                ConnectionLost, "the connection to the reader failed", str(exc)
            ) from exc

    def _answer(self, command: Command, items: list[PepperFrame | PepperCorrupt]) -> bytes | None:
        answer: bytes | None = None
        for item in items:
            if isinstance(item, PepperCorrupt):
                cause: MisreadCauseName = "crc" if item.reason == "crc" else "malformed"
                self._put(
                    Misread(
                        cause,
                        f"garbled reply ({item.reason}): {item.detail}",
                        None,
                        time.monotonic(),
                    )
                )
                self._decoder.reset()
                raise self._error(_CommandFailed, f"the reply to {command.name} was garbled")
            reply = parse_reply(item.payload)
            self._last_reply = time.monotonic()
            if self._answered is not None:
                self._answered.set()
            if isinstance(reply, Ack) and reply.command == command:
                answer = reply.data
            elif isinstance(reply, ErrorReply) and reply.command == command:
                raise self._error(
                    _CommandFailed, f"the reader refused {command.name} (error {reply.code:#06x})"
                )
            elif reply is None:
                self._log.warning("unknown reply ignored", payload=item.payload.hex())
        return answer

    # ------------------------------------------------------------------ reads

    def _where(self, antenna: str | None, text: str) -> str:
        if antenna is None:
            return text
        position = self._positions.get(antenna)
        return f"antenna {antenna}" + (f" ({position})" if position else "") + f": {text}"

    def _put(self, read: Read) -> None:
        self._queue.put_nowait(read)

    def _emit(self, events: list[Placed | Removed], antenna: str | None) -> None:
        placed = [event for event in events if isinstance(event, Placed)]
        if len(placed) > 1:
            self._put(
                DeviceStatus(
                    "two_tags",
                    self._where(antenna, f"{len(placed)} tags placed at once; taken in the "
                    "reader's order (place one card at a time)"),
                    placed[0].at,
                )
            )  # fmt: skip
        for event in events:
            read = self._read_of(event)
            if read is not None:
                self._put(read)

    def _read_of(self, event: Placed | Removed) -> Read | None:
        position = self._positions.get(event.antenna)
        card = event.uid if self._table is None else self._table.card_of(event.uid)
        if isinstance(event, Removed):
            return None if card is None else CardRemoved(card, position, event.at)
        if card is None:
            table = self._table.name if self._table is not None else ""
            return Misread(
                "unknown_code",
                self._where(
                    event.antenna,
                    f"tag {event.uid!r} is not in the code table {table!r} (a tag of another "
                    "deck?): take it away",
                ),
                None,
                event.at,
            )
        self._seq += 1
        return CardRead(card, position, self._seq, event.at)

    # ------------------------------------------------------------------ commands

    async def _cue(self, text: str) -> None:
        """Write ``text`` through the UART passthrough (``cues=1``), else count it skipped.

        Raises:
            TransportError: The source is not open.
            DeviceTimeout: The reader did not acknowledge it in time.
        """
        if not self._spec.cues:
            self.skipped_commands += 1
            return
        data = text.encode("ascii", errors="replace")[:200]
        try:
            await self._command(Command.UART_PASSTHRU, *data)
        except _CommandFailed as exc:
            self._log.warning("cue not taken", text=text, error=str(exc))

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """Cue the slot (the dealer display on the passthrough; else the event feed only)."""
        await self._cue(f"CUE {round_no} {slot_index} {slot_name}")

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """Ask for the card again (as :meth:`expect`)."""
        await self._cue(f"RESCAN {slot_name}")

    async def reject(self, slot_name: str, reason: str) -> None:
        """Tell the dealer the card is refused (as :meth:`expect`)."""
        await self._cue(f"REJECT {slot_name}")

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """No LED command is used."""
        self.skipped_commands += 1

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """No beeper command is used."""
        self.skipped_commands += 1

    async def reset(self) -> None:
        """Forget a partial reply (the reader itself is not rebooted)."""
        self._decoder.reset()
