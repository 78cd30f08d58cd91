"""A line-oriented reader simulator that speaks a device profile byte for byte on a pty.

The dealer is the scanner simulator's (:class:`~simulators.dealer.SimulatedDealer`: script or
shoe, cues, misreads, double reads, the cable pulled); what it scans is written as the
profile's records (``[records]``, checksum computed, terminator appended) instead of frames.
The host's bytes are read as the profile's commands (cue, rescan, reject); a device without
commands hears its cues through :meth:`LineDeviceSimulator.screen` (the dealer reading the
table's event feed). Line faults: the plan's garbage, corrupt, delay and byte-by-byte, and
the profile's own (:class:`LineFaults`): a bad checksum, an unknown code, a read at the
wrong position. Lost lines, repeated frames and heartbeats belong to the framed protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import tempfile
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from controller.cards import Deck
from drivers.codec import CardFrame, ExpectFrame, Frame, MisreadFrame, RejectFrame, RescanFrame
from drivers.profile import LoadedProfile, render_record
from simulators.dealer import SimulatedDealer
from simulators.errors import SimulatorConfigError, SimulatorError
from simulators.faults import FaultInjector, FaultPlan, Outgoing, SimulatorStats
from simulators.pty_port import PtyPort, open_pty, point_link
from simulators.wire import BYTE_TIME

__all__ = ["LineDeviceSimulator", "LineFaults", "LineStats"]

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class LineFaults:
    """The profile-specific faults, drawn per card record (``random.Random(f"{seed}:profile")``).

    Attributes:
        bad_checksum_rate: Chance a card record carries a wrong checksum (profiles with one).
        unknown_code_rate: Chance a card record carries a code the code table does not know.
        wrong_position_rate: Chance a card is read at another position than the cued slot.
        seed: Seed of the draws.
    """

    bad_checksum_rate: float = 0.0
    unknown_code_rate: float = 0.0
    wrong_position_rate: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("bad_checksum_rate", "unknown_code_rate", "wrong_position_rate"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise SimulatorConfigError(f"{name} must be in [0, 1)", **{name: value})


@dataclass(slots=True)
class LineStats:
    """What the profile faults did (beside :class:`~simulators.faults.SimulatorStats`).

    ``faulty_records`` counts card records with at least one profile fault (each is one
    refusal: a record with two faults is refused once, under the first cause found).
    """

    records: int = 0
    faulty_records: int = 0
    bad_checksums: int = 0
    unknown_codes: int = 0
    wrong_positions: int = 0
    commands: int = 0


class LineDeviceSimulator:
    """A simulated line-oriented reader (and its dealer) for one profile.

    Args:
        loaded: The profile and its code table.
        cards: Values dealt as written, in order (else a shuffled ``deck`` with ``seed``).
        deck: The deck to deal when no script is given.
        seed: The shuffle seed.
        faults: The plan's faults (misreads need a profile with a misread status word).
        line_faults: The profile's faults.
        deal_delay: Seconds between a cue and the scan.
        interval: Deal a card every ``interval`` seconds without waiting for cues (a device
            that takes none, with no one reading the event feed: ``run --simulate``).

    Attributes:
        drawn: Every card put on the reader, once, in order.
        rejected: Cards put aside after a reject.
        host_bytes: Every byte the host wrote.
    """

    def __init__(
        self,
        loaded: LoadedProfile,
        *,
        cards: Sequence[str] | None = None,
        deck: Deck | None = None,
        seed: int = 0,
        faults: FaultPlan | None = None,
        line_faults: LineFaults | None = None,
        deal_delay: float = 0.05,
        interval: float | None = None,
    ) -> None:
        self.loaded = loaded
        self.profile = loaded.profile
        self.faults = faults if faults is not None else FaultPlan()
        self.line_faults = line_faults if line_faults is not None else LineFaults()
        self._check(cards, deck)
        self.stats = SimulatorStats()
        self.line_stats = LineStats()
        self.drawn: list[str] = []
        self.rejected: list[str] = []
        self.host_bytes = bytearray()
        self._rng = random.Random(f"{self.faults.seed}:line")
        self._profile_rng = random.Random(f"{self.line_faults.seed}:profile")
        self._dealer = SimulatedDealer(
            deck=deck if deck is not None else Deck.standard(),
            seed=None if cards is not None else seed,
            script=cards,
            deal_delay=deal_delay,
            interval=interval,
            positions=True,
            faults=FaultInjector(self.faults, self.stats),
            stats=self.stats,
            send=self._send,
            unplug=self._pull_cable,
            silence=lambda seconds: None,
            drawn=self.drawn,
            rejected=self.rejected,
        )
        self._port: PtyPort | None = None
        self._link: Path | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._line_due = 0.0
        self._commands = self._command_patterns()
        self._cue_index = -1
        self._scripted: set[str] = set()
        self._cued_slot: str | None = None

    def _check(self, cards: Sequence[str] | None, deck: Deck | None) -> None:
        pieces = [str(piece) for piece in deck] if deck is not None and cards is None else []
        for card in [*(cards or ()), *pieces]:
            if self.loaded.table.code_of(card) is None:
                raise SimulatorConfigError(
                    "a card to deal has no code in the profile's code table",
                    card=card,
                    table=self.loaded.table.name,
                )
        needs_status = self.faults.misread_rate or self.faults.misreads_at
        if needs_status and (
            self.profile.records.status is None or not self.profile.misread_status
        ):
            raise SimulatorConfigError(
                "misreads need a profile with a status record and a misread status word",
                profile=self.profile.name,
            )

    def _command_patterns(self) -> list[tuple[str, re.Pattern[str]]]:
        patterns = []
        for name in ("cue", "rescan", "reject"):
            template = getattr(self.profile.commands, name)
            if template is None:
                continue
            regex = re.escape(template)
            for field in ("round", "slot_index", "slot", "reason"):
                regex = regex.replace(re.escape(f"{{{field}}}"), f"(?P<{field}>.*?)")
            patterns.append((name, re.compile(regex)))
        return patterns

    # ------------------------------------------------------------------ serving

    @contextlib.asynccontextmanager
    async def serve_pty(self) -> AsyncIterator[str]:
        """Serve on a pty behind a symbolic link (an unplug replaces the pty); yields the link."""
        tmpdir = tempfile.mkdtemp(prefix="tablectl-line-sim-")
        self._link = Path(tmpdir) / "reader"
        self._dealer.start()
        dealer = asyncio.create_task(self._dealer.run(), name="line-sim-dealer")
        if self._dealer.interval is not None:
            self._spawn(self._dealer.free_run())
        try:
            self._port = await open_pty(self._session)
            point_link(self._link, self._port.path)
            _log.info("line_simulator_serving", device=self._port.path, profile=self.profile.name)
            yield str(self._link)
        finally:
            tasks = [dealer, *self._tasks]
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            if self._port is not None:
                await self._port.close()
                self._port = None
            with contextlib.suppress(OSError):
                self._link.unlink()
                os.rmdir(tmpdir)
            failures = [
                r
                for r in results
                if isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError)
            ]
            if failures:
                raise SimulatorError("a line simulator task failed", error=repr(failures[0]))

    def screen(self, cue: str, slot_name: str, *, round_no: int = 1, slot_index: int = 0) -> None:
        """The dealer reads a cue (``expect``, ``rescan``, ``reject``) from the event feed.

        For a device that takes no commands: the dealer screen's part.
        """
        self._dealer.cue(_cue_frame(cue, slot_name, round_no, slot_index))

    async def _session(self, reader: asyncio.StreamReader) -> None:
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
                self._on_command(line.decode("ascii", "replace"))

    def _on_command(self, text: str) -> None:
        for name, pattern in self._commands:
            match = pattern.fullmatch(text)
            if match is None:
                continue
            self.line_stats.commands += 1
            fields = match.groupdict()
            slot = fields.get("slot") or ""
            index = fields.get("slot_index")
            if name == "cue":
                if index is not None and index.isdigit():
                    self._cue_index = int(index)
                elif slot != self._cued_slot:  # a cue without an index: a new slot, a new index
                    self._cue_index += 1
                self._cued_slot = slot
            round_no = int(fields.get("round") or 1)
            kind = {"cue": "expect"}.get(name, name)
            self._dealer.cue(_cue_frame(kind, slot, round_no, self._cue_index))
            return
        self.stats.host_corrupt += 1

    # ------------------------------------------------------------------ the device's records

    def _send(self, frame: Frame, out: Outgoing | None) -> None:
        profile = self.profile
        if isinstance(frame, CardFrame):
            if out is not None and frame.value in self._scripted:
                out = None  # a card's scripted line faults hit its first scan only
            elif out is not None:
                self._scripted.add(frame.value)
            line = self._card_record(frame)
        elif isinstance(frame, MisreadFrame):
            assert profile.records.status is not None
            line = render_record(profile, profile.records.status, status=profile.misread_status[0])
        else:
            status = getattr(frame, "state", "").upper()
            if profile.records.status is None or not profile.regex.fullmatch(
                profile.records.status.replace("{status}", status).replace("{checksum}", "00")
            ):
                return  # the device has no way to say it
            line = render_record(profile, profile.records.status, status=status)
        self.line_stats.records += 1
        self._write(self._line_faults(line, out))

    def _card_record(self, frame: CardFrame) -> bytes:
        profile, faults, rng = self.profile, self.line_faults, self._profile_rng
        # A card the set holds twice (a Mahjong tile) has a tag a copy: the n-th one drawn
        # carries the n-th code (rescans of it, the same).
        code = self.loaded.table.code_of(frame.value, self.drawn.count(frame.value) - 1)
        assert code is not None
        position = frame.position or ""
        faulty = False
        if faults.unknown_code_rate and rng.random() < faults.unknown_code_rate:
            self.line_stats.unknown_codes += 1
            code = self._unknown_code(code)
            faulty = True
        if faults.wrong_position_rate and rng.random() < faults.wrong_position_rate:
            self.line_stats.wrong_positions += 1
            position = f"{position}X"
            faulty = True
        line = render_record(profile, profile.records.card, code=code, position=position)
        if (
            profile.checksum
            and faults.bad_checksum_rate
            and rng.random() < faults.bad_checksum_rate
        ):
            self.line_stats.bad_checksums += 1
            body = line[: -len(profile.terminator_bytes)]
            last = body[-1:]
            wrong = b"0" if last != b"0" else b"1"
            line = body[:-1] + wrong + profile.terminator_bytes
            faulty = True
        self.line_stats.faulty_records += faulty
        return line

    def _unknown_code(self, code: str) -> str:
        """A code of the same shape the table does not know (the last character changed)."""
        for digit in "0123456789":
            candidate = code[:-1] + digit
            if self.loaded.table.card_of(candidate) is None:
                return candidate
        raise SimulatorError("no unknown code of the same shape", code=code)

    def _line_faults(self, line: bytes, out: Outgoing | None) -> bytes:
        """The plan's line faults (garbage before the record, a flipped bit in it)."""
        rng, plan = self._rng, self.faults
        terminator = self.profile.terminator_bytes
        body = bytearray(line[: -len(terminator)])
        garbage = (out is not None and out.garbage > 0) or (
            plan.garbage_rate and rng.random() < plan.garbage_rate
        )
        if garbage:
            if out is not None and out.garbage > 0:
                out.garbage -= 1
            self.stats.garbage_bursts += 1
            noise = bytes(
                b
                for b in (rng.randrange(256) for _ in range(rng.randint(1, 24)))
                if b not in terminator
            )
            body[:0] = noise or b"?"
        corrupt = (out is not None and out.corrupt > 0) or (
            plan.corrupt_rate and rng.random() < plan.corrupt_rate
        )
        if corrupt:
            if out is not None and out.corrupt > 0:
                out.corrupt -= 1
            self.stats.corrupted += 1
            while True:
                index, bit = rng.randrange(len(body)), 1 << rng.randrange(8)
                if body[index] ^ bit not in terminator:
                    body[index] ^= bit
                    break
        return bytes(body) + terminator

    def _write(self, data: bytes) -> None:
        delay = self._rng.uniform(0.0, self.faults.delay) if self.faults.delay else 0.0
        if not delay and not self.faults.byte_by_byte:
            self._put(data)
            return
        loop = asyncio.get_running_loop()
        due = max(loop.time() + delay, self._line_due)
        self._line_due = due + (len(data) * BYTE_TIME if self.faults.byte_by_byte else 0.0)
        self._spawn(self._write_later(data, due))

    async def _write_later(self, data: bytes, due: float) -> None:
        await asyncio.sleep(max(0.0, due - asyncio.get_running_loop().time()))
        if not self.faults.byte_by_byte:
            self._put(data)
            return
        for index in range(len(data)):
            self._put(data[index : index + 1])
            await asyncio.sleep(BYTE_TIME)

    def _put(self, data: bytes) -> None:
        port = self._port
        transport = port.write_transport if port is not None else None
        if transport is None or transport.is_closing():
            self.stats.dropped_bytes += len(data)
            return
        transport.write(data)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _pull_cable(self, seconds: float) -> None:
        """The cable is out from now: the card about to be read is read into the void.

        A line device keeps nothing for the host: the record of the card being dealt is
        lost (``stats.dropped_bytes``), which the table must notice and ask for again.
        """
        self.stats.unplugs += 1
        port, self._port = self._port, None
        self._spawn(self._unplug(port, seconds))

    async def _unplug(self, port: PtyPort | None, seconds: float) -> None:
        assert self._link is not None
        with contextlib.suppress(FileNotFoundError):
            self._link.unlink()
        if port is not None:
            await port.close()
        await asyncio.sleep(seconds)
        self._port = await open_pty(self._session)
        point_link(self._link, self._port.path)


def _cue_frame(
    cue: str, slot_name: str, round_no: int, slot_index: int
) -> ExpectFrame | RescanFrame | RejectFrame:
    if cue == "expect":
        return ExpectFrame(round_no=round_no, slot_index=slot_index, slot_name=slot_name)
    if cue == "rescan":
        return RescanFrame(slot_name=slot_name, reason="")
    if cue == "reject":
        return RejectFrame(slot_name=slot_name, reason="")
    raise SimulatorConfigError("unknown cue", cue=cue)
