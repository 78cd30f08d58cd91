"""A simulated Eccel Pepper C1 reader with its antennas, and a dealer putting tags on them.

:class:`PepperReaderSimulator` answers the binary protocol of ``drivers/pepper.py`` on a real
pty (the module's USB-CDC port) or a TCP port (its Ethernet/WiFi side), as the module does:
``SET_ACTIVE_ANTENNA`` (1-8), ``GET_TAG_COUNT`` and ``GET_UID`` of the active antenna,
``GET_VERSION``; anything else is answered with ERROR. A tag lying on an antenna is reported
at every poll (the repeats the latch absorbs), with its antenna number.

The dealer (``cards=`` a script, or the game's deck shuffled per round) puts the next card's
tag on the antenna bound to the cued slot when the host cues it through the reader's UART
passthrough (``cues=1`` in the URL: ``CUE <round> <index> <slot>``; a real studio wires a
dealer display there): a REJECT takes the card away; a RESCAN changes nothing for a card
lying on its antenna (it is read anyway) and replaces a tag of another deck with the card. At
a new round every tag is lifted first.

Faults (:class:`PepperFaults`): replies garbled (a byte flipped), replies dropped (the host's
poll times out once: no reply at all is a dead reader), a tag of another deck put down
first, two tags put down at once, and the cable pulled (the pty closed and replaced, the
TCP connection closed) for some seconds; :meth:`PepperReaderSimulator.unplug` does it on
demand.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from drivers.pepper import Command, PepperDecoder, PepperFrame, ack, error
from drivers.profile import CodeTable
from simulators.pty_port import PtyPort, open_pty, point_link

__all__ = ["UNKNOWN_UID", "PepperFaults", "PepperReaderSimulator", "PepperStats"]

UNKNOWN_UID = "04DEADBEEF0001"
"""A tag of another deck (in no code table we ship); the fault's n-th is this plus n."""

TAG_TYPE = 0x02
"""The tag type byte the simulator reports (an ISO 14443-A tag with a 7-byte UID)."""


@dataclass(frozen=True, slots=True)
class PepperFaults:
    """What goes wrong, drawn with ``random.Random(seed)``.

    Attributes:
        garble_rate: Share of replies with one byte flipped.
        drop_rate: Share of replies never sent (the host waits ``response_ms`` and the
            supervisor reconnects: use small rates).
        unknown_tag_rate: Share of cues answered first with a tag of another deck.
        two_tags_rate: Share of cues answered with the card and the next one at once.
        unplug_every: Pull the cable after every N cards dealt (0: never).
        unplug_seconds: How long it stays out.
        drop_at: Requests (1-based counts) whose reply is never sent.
        seed: The draw's seed.
    """

    garble_rate: float = 0.0
    drop_rate: float = 0.0
    unknown_tag_rate: float = 0.0
    two_tags_rate: float = 0.0
    unplug_every: int = 0
    unplug_seconds: float = 0.2
    drop_at: frozenset[int] = frozenset()
    seed: int = 0


@dataclass(slots=True)
class PepperStats:
    """The simulator's counters (tests compare what the host saw with these)."""

    requests: int = 0
    garbled: int = 0
    dropped: int = 0
    unknown_tags: int = 0
    two_tags: int = 0
    unplugs: int = 0
    cues: int = 0
    stalls: int = 0
    dealt: list[str] = field(default_factory=list)


class PepperReaderSimulator:
    """A Pepper C1 with ``antennas`` antennas, on a pty or TCP, and its dealer.

    Args:
        table: The code table (card -> tag UID) of the deck on the table.
        cards: The cards dealt, in order (a script), or ``None`` with ``deck``.
        deck: The game's pieces (notation), shuffled per round when no script is given.
        seed: The shuffle's seed.
        slot_antennas: The antenna a cued slot's card goes on (``slot -> antenna``); a slot
            not in it goes on ``default_antenna``.
        default_antenna: Where cards go without a mapping.
        antennas: How many antennas the multiplexer has (1-8).
        deal_delay: Seconds between a cue and the tag put down.
        relift_seconds: How long the table stays clear between rounds (the cards of one round
            removed before the next are put down): longer than the host latch's removal time.
        faults: What goes wrong.
        one_at_a_time: The dealer takes its last card away before putting the next down
            (a reader used to enrol a deck or check one: one card on it at a time).
    """

    def __init__(
        self,
        table: CodeTable,
        *,
        cards: Sequence[str] | None = None,
        deck: Sequence[str] = (),
        seed: int = 0,
        slot_antennas: dict[str, int] | None = None,
        default_antenna: int = 1,
        antennas: int = 8,
        deal_delay: float = 0.0,
        relift_seconds: float = 0.5,
        faults: PepperFaults | None = None,
        one_at_a_time: bool = False,
    ) -> None:
        if not 1 <= antennas <= 8 or not 1 <= default_antenna <= antennas:
            raise ValueError(f"antennas 1-8 and the default among them: {antennas}")
        self.table = table
        self.fields: dict[int, list[str]] = {n: [] for n in range(1, antennas + 1)}
        self.active = 1
        self._inventory: list[str] = []
        self.stats = PepperStats()
        self.faults = faults or PepperFaults()
        self._rng = random.Random(self.faults.seed)
        self._script = list(cards) if cards is not None else None
        self._deck = list(deck)
        self._seed = seed
        self._slot_antennas = slot_antennas or {}
        self._default = default_antenna
        self._deal_delay = deal_delay
        self._relift = relift_seconds
        self._one_at_a_time = one_at_a_time
        self._round: int | None = None
        self._shoe: list[str] = []
        self._last: tuple[int, str] | None = None
        self._ahead = False
        self._cued: set[tuple[str, str]] = set()
        self._cues: asyncio.Queue[tuple[str, list[str]]] = asyncio.Queue()
        self._writers: list[Callable[[bytes], None]] = []
        self._unplugged = asyncio.Event()
        self._unplugged.set()  # "plugged" when set
        self._log = structlog.get_logger(__name__)
        self._pty: PtyPort | None = None
        self._link: Path | None = None
        self._server: asyncio.Server | None = None
        self._tcp: list[asyncio.StreamWriter] = []
        self._stall: tuple[float, int] | None = None

    # ------------------------------------------------------------------ the table

    def place(self, antenna: int, uid: str) -> None:
        """Put a tag on an antenna (it is reported from the next poll on)."""
        if uid not in self.fields[antenna]:
            self.fields[antenna].append(uid)

    def lift(self, antenna: int, uid: str) -> None:
        """Take a tag off an antenna."""
        with contextlib.suppress(ValueError):
            self.fields[antenna].remove(uid)

    def place_card(self, antenna: int, card: str) -> str:
        """Put a card's tag on an antenna; returns its UID.

        Raises:
            ValueError: The code table has no tag for the card.
        """
        codes = self.table.codes_of(card)
        if not codes:
            raise ValueError(f"no tag for {card!r} in the code table {self.table.name!r}")
        down = {uid for tags in self.fields.values() for uid in tags}
        # A set with two copies of a tile: the copy not on the table yet.
        uid = next((code for code in codes if code not in down), codes[0])
        self.place(antenna, uid)
        return uid

    def lift_card(self, card: str) -> None:
        """Take a card's tag(s) off every antenna."""
        for uid in self.table.codes_of(card):
            for antenna in self.fields:
                self.lift(antenna, uid)

    def clear(self) -> None:
        """Take every tag off."""
        for tags in self.fields.values():
            tags.clear()

    def stall_next_uid(self, seconds: float, index: int = 0) -> None:
        """Answer the next ``GET_UID`` of a tag at ``index`` or beyond ``seconds`` late.

        A reply late inside one poll, the tag count already taken (a slow module, or a host
        stalled between two of a poll's commands): the host's inventory then spans more than
        the latch's removal time. Counted in ``stats.stalls`` when it happens.
        """
        self._stall = (seconds, index)

    # ------------------------------------------------------------------ the protocol

    def reply(self, payload: bytes) -> bytes | None:
        """The reply frame to one request payload (``None``: no reply)."""
        self.stats.requests += 1
        command, params = payload[0], payload[1:]
        if command == Command.SET_ACTIVE_ANTENNA:
            if len(params) != 1 or params[0] not in self.fields:
                return error(command, 0x0001)
            self.active = params[0]
            return ack(command)
        if command == Command.GET_TAG_COUNT:
            # The count is an inventory of the field: GET_UID indexes that inventory, as a
            # tag put down or lifted meanwhile does not shift the others.
            self._inventory = list(self.fields[self.active])
            return ack(command, bytes([len(self._inventory)]))
        if command == Command.GET_UID:
            tags = self._inventory
            if len(params) != 1 or params[0] >= len(tags):
                return error(command, 0x0002)
            return ack(command, bytes([TAG_TYPE, 0x00]) + bytes.fromhex(tags[params[0]]))
        if command == Command.GET_VERSION:
            return ack(command, b"Pepper C1 sim 1.0")
        if command == Command.UART_PASSTHRU:
            words = params.decode("ascii", errors="replace").split()
            if words:
                self._cues.put_nowait((words[0], words[1:]))
            return ack(command)
        return error(command, 0x00FF)

    def _faulted(self, frame: bytes) -> bytes | None:
        faults = self.faults
        if self.stats.requests in faults.drop_at or (
            faults.drop_rate and self._rng.random() < faults.drop_rate
        ):
            self.stats.dropped += 1
            return None
        if faults.garble_rate and self._rng.random() < faults.garble_rate:
            self.stats.garbled += 1
            changed = bytearray(frame)
            changed[self._rng.randrange(5, len(changed))] ^= 1 << self._rng.randrange(8)
            return bytes(changed)
        return frame

    async def _session(self, reader: asyncio.StreamReader, write: Callable[[bytes], None]) -> None:
        decoder = PepperDecoder()
        while True:
            data = await reader.read(4096)
            if not data:
                return
            for item in decoder.feed(data):
                if not isinstance(item, PepperFrame) or not self._unplugged.is_set():
                    continue  # the reader ignores a bad request (the host times out)
                frame = self.reply(item.payload)
                out = self._faulted(frame) if frame is not None else None
                stall, payload = self._stall, item.payload
                if (
                    stall is not None
                    and len(payload) > 1
                    and payload[0] == Command.GET_UID
                    and payload[1] >= stall[1]
                ):
                    self._stall = None
                    self.stats.stalls += 1
                    await asyncio.sleep(stall[0])
                if out is not None:
                    write(out)

    # ------------------------------------------------------------------ transports

    @contextlib.asynccontextmanager
    async def serve_pty(self, link: Path | None = None) -> AsyncIterator[str]:
        """Serve on a pty behind a symbolic link; yields the link, which the host opens.

        ``link``: where to make it (else in a new temporary folder, removed at the end). It
        follows the pty across unplugs as udev's ``/dev/serial/by-id`` link does for a real
        module: an unplug removes it (the host's opens fail, ``ENOENT``) and the replug points
        it at the new pty. (Never the pty's own ``/dev/pts/N``: once that pty is closed, the
        number goes to the next pty anyone opens, and a host retrying it would open another
        program's terminal.)
        """
        folder: str | None = None
        if link is None:
            folder = tempfile.mkdtemp(prefix="tablectl-pepper-sim-")
            link = Path(folder) / "pepper"
        self._link = link
        await self._open_pty()
        dealer = asyncio.create_task(self._dealer(), name="pepper-sim-dealer")
        try:
            assert self._pty is not None
            yield str(link)
        finally:
            dealer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await dealer
            with contextlib.suppress(FileNotFoundError):
                link.unlink()  # first: nothing opens the pty's number once it is closed
            self._link = None
            if self._pty is not None:
                await self._pty.close()
                self._pty = None
            if folder is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(folder)

    async def _open_pty(self) -> None:
        holder: dict[str, PtyPort] = {}

        async def session(reader: asyncio.StreamReader) -> None:
            port = holder["port"]
            assert port.write_transport is not None
            await self._session(reader, port.write_transport.write)

        port = await open_pty(session)
        holder["port"] = port
        self._pty = port
        if self._link is not None:
            point_link(self._link, port.path)

    @contextlib.asynccontextmanager
    async def serve_tcp(
        self, host: str = "127.0.0.1", port: int = 0
    ) -> AsyncIterator[tuple[str, int]]:
        """Serve on TCP ``port`` (0: a free one); yields ``(host, port)``."""

        async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._tcp.append(writer)
            try:
                await self._session(reader, writer.write)
            except (ConnectionError, OSError):
                pass
            finally:
                with contextlib.suppress(ValueError):
                    self._tcp.remove(writer)
                writer.close()

        server = await asyncio.start_server(client, host, port)
        self._server = server
        dealer = asyncio.create_task(self._dealer(), name="pepper-sim-dealer")
        try:
            yield host, server.sockets[0].getsockname()[1]
        finally:
            dealer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await dealer
            server.close()
            for writer in list(self._tcp):
                writer.close()
            await server.wait_closed()

    async def unplug(self, seconds: float) -> None:
        """Pull the cable for ``seconds``; the tags stay where they are.

        The pty's link is removed and the pty closed (a new one comes back, the link pointed
        at it); TCP connections are closed (the host connects again).
        """
        self.stats.unplugs += 1
        self._unplugged.clear()
        if self._link is not None:  # first, as udev does: no open may find the closed pty
            with contextlib.suppress(FileNotFoundError):
                self._link.unlink()
        if self._pty is not None:
            old, self._pty = self._pty, None
            await old.close()
        for writer in list(self._tcp):
            writer.close()
        await asyncio.sleep(seconds)
        if self._server is None:  # a pty: a new one comes back (the link follows it)
            await self._open_pty()
        self._unplugged.set()

    # ------------------------------------------------------------------ the dealer

    def _next_card(self) -> str | None:
        if self._script is not None:
            return self._script.pop(0) if self._script else None
        if not self._shoe:
            return None
        return self._shoe.pop(0)

    def _new_round(self, round_no: int) -> None:
        self._round = round_no
        if self._script is None:
            shoe = list(self._deck)
            random.Random(f"{self._seed}:{round_no}").shuffle(shoe)
            self._shoe = shoe

    async def _dealer(self) -> None:
        while True:
            word, args = await self._cues.get()
            self.stats.cues += 1
            if word == "CUE" and len(args) == 3 and (args[0], args[1]) not in self._cued:
                self._cued.add((args[0], args[1]))  # a cue sent again (after a loss) is one
                await self._on_cue(int(args[0]) if args[0].isdigit() else 0, args[2])
            elif word in ("REJECT", "RESCAN") and self._last is not None:
                antenna, uid = self._last
                if uid.startswith(UNKNOWN_UID[:10]):  # another deck's tag aside, the card dealt
                    self.lift(antenna, uid)
                    self._last = None
                    await self._deal(antenna)
                elif word == "REJECT":  # the card put aside
                    self.lift(antenna, uid)
                # A rescan of a card lying on its antenna changes nothing: it is read anyway.

    async def _on_cue(self, round_no: int, slot: str) -> None:
        if round_no != self._round:
            if self._round is not None and any(self.fields.values()):
                self.clear()
                await asyncio.sleep(self._relift)  # the cards gone before the new ones
            self._new_round(round_no)
        if self._ahead:  # put down with the card before (two tags at once)
            self._ahead = False
            return
        await asyncio.sleep(self._deal_delay)
        antenna = self._slot_antennas.get(slot, self._default)
        faults = self.faults
        if faults.unknown_tag_rate and self._rng.random() < faults.unknown_tag_rate:
            self.stats.unknown_tags += 1
            uid = f"{int(UNKNOWN_UID, 16) + self.stats.unknown_tags - 1:014X}"
            self.place(antenna, uid)
            self._last = (antenna, uid)
            return  # the host refuses it (RESCAN / REJECT takes it away), then the card
        await self._deal(antenna)

    async def _deal(self, antenna: int) -> None:
        faults = self.faults
        if self._one_at_a_time and self._last is not None:
            self.lift(*self._last)
        card = self._next_card()
        if card is None:
            self._log.warning("the dealer has no card left", antenna=antenna)
            return
        uid = self.place_card(antenna, card)
        self._last = (antenna, uid)
        self.stats.dealt.append(card)
        if faults.two_tags_rate and self._rng.random() < faults.two_tags_rate:
            following = self._next_card()
            if following is not None:
                self.stats.two_tags += 1
                self._ahead = True
                self.place_card(antenna, following)
                self.stats.dealt.append(following)
        every = faults.unplug_every
        if every and len(self.stats.dealt) % every == 0:
            asyncio.get_running_loop().create_task(
                self.unplug(faults.unplug_seconds), name="pepper-sim-unplug"
            )
