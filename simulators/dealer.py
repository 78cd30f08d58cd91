"""The simulated dealer: takes cards from a shoe (or a script) and puts them on the scanner.

On EXPECT the dealer deals the next card (after ``deal_delay``), on RESCAN the same card is
scanned again, on REJECT it is put aside. Without cues (``interval``) a card is dealt every
``interval`` seconds. What a scan gives (a misread, a card read twice) and what happens as a
card is dealt (the cable pulled, heartbeats stopped) is drawn by
:class:`~simulators.faults.FaultInjector`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence

from controller.cards import Deck
from drivers.codec import (
    CardFrame,
    ExpectFrame,
    Frame,
    MisreadCause,
    MisreadFrame,
    RejectFrame,
    RescanFrame,
    StatusFrame,
)
from simulators.faults import FaultInjector, Outgoing, SimulatorStats

__all__ = ["SimulatedDealer"]

_Command = ExpectFrame | RescanFrame | RejectFrame | None
"""What the dealer acts on; ``None`` is a free-run tick."""


class SimulatedDealer:
    """The dealer at a simulated scanner.

    Args:
        deck: The pieces one round is dealt from.
        seed: Shuffle a fresh deck with ``random.Random(f"{seed}:{round_no}")`` at the start
            of every round; ``None`` with a script.
        script: Values dealt as written, in order, across rounds (or ``None``).
        deal_delay: Seconds between a cue and the scan.
        interval: When set, deal every ``interval`` seconds without waiting for cues.
        positions: Send the cued slot name as the CARD frame's position.
        faults: Draws the scan faults and what happens as a card is dealt.
        stats: The simulator's counters.
        send: Queues a frame for the wire (with its scripted line faults).
        unplug: Pulls the cable for some seconds.
        silence: Stops the heartbeats for some seconds.
        drawn: Appended with every card put on the scanner.
        rejected: Appended with every card put aside after a REJECT.
    """

    def __init__(
        self,
        *,
        deck: Deck,
        seed: int | None,
        script: Sequence[str] | None,
        deal_delay: float,
        interval: float | None,
        positions: bool,
        faults: FaultInjector,
        stats: SimulatorStats,
        send: Callable[[Frame, Outgoing | None], None],
        unplug: Callable[[float], None],
        silence: Callable[[float], None],
        drawn: list[str],
        rejected: list[str],
    ) -> None:
        self.deck = deck
        self.seed = seed
        self.script = list(script) if script is not None else None
        self.deal_delay = deal_delay
        self.interval = interval
        self.positions = positions
        self.faults = faults
        self.stats = stats
        self._send = send
        self._unplug = unplug
        self._silence = silence
        self.drawn = drawn
        self.rejected = rejected
        self.commands: asyncio.Queue[_Command] = asyncio.Queue()
        self.round_no: int | None = None
        self.shoe: list[str] = []
        self._shoe_pos = 0
        self._script_pos = 0
        self._card_index = 0
        self._current: tuple[int, str] | None = None
        self._current_slot: str | None = None
        self._served: tuple[int, int] | None = None
        self._empty_reported = False
        self._last_scan_misread = False

    def start(self) -> None:
        """A fresh command queue (the simulator starts serving)."""
        self.commands = asyncio.Queue()

    def cue(self, command: ExpectFrame | RescanFrame | RejectFrame) -> None:
        """A cue from the host."""
        self.commands.put_nowait(command)

    def forget(self) -> None:
        """The device was reset: pending cues and the card on the scanner are forgotten."""
        while not self.commands.empty():
            self.commands.get_nowait()
        self._current = None
        self._current_slot = None
        self._served = None

    async def run(self) -> None:
        """Act on cues (and free-run ticks) as they come (a task)."""
        while True:
            command = await self.commands.get()
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

    async def free_run(self) -> None:
        """A tick every ``interval`` seconds (a task, when free-running)."""
        assert self.interval is not None
        while True:
            await asyncio.sleep(self.interval)
            self.commands.put_nowait(None)

    async def _on_expect(self, expect: ExpectFrame) -> None:
        if self.interval is not None:
            return  # free-running: cues are ignored
        if expect.round_no != self.round_no:
            # A controller resuming a round after a restart cues a slot past the first:
            # the cards before it were dealt before the crash, the shoe continues there.
            self.start_round(expect.round_no, start=expect.slot_index)
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
        for kind, seconds in self.faults.as_dealt(self._current[0]):
            if kind == "unplug":
                self._unplug(seconds)
            else:
                self._silence(seconds)

    def start_round(self, round_no: int, start: int = 0) -> None:
        """A new round: with a seed, a freshly shuffled shoe dealt from ``start``."""
        self.round_no = round_no
        self._empty_reported = False
        if self.seed is not None:
            shoe = [str(piece) for piece in self.deck]
            random.Random(f"{self.seed}:{round_no}").shuffle(shoe)
            self.shoe = shoe
            self._shoe_pos = min(start, len(shoe))

    def _next_value(self) -> str | None:
        if self.script is not None:
            if self._script_pos < len(self.script):
                self._script_pos += 1
                return self.script[self._script_pos - 1]
            return None
        if self.round_no is None:
            self.start_round(0)
        if self._shoe_pos >= len(self.shoe) and self.interval is not None:
            self.start_round((self.round_no or 0) + 1)
        if self._shoe_pos < len(self.shoe):
            self._shoe_pos += 1
            return self.shoe[self._shoe_pos - 1]
        return None

    def _draw(self) -> bool:
        """Put the next card on the scanner; False (and a STATUS ``empty``) when none is left."""
        value = self._next_value()
        if value is None:
            self._current = None
            if not self._empty_reported:
                self._empty_reported = True
                detail = "script exhausted" if self.script is not None else "shoe empty"
                self._send(StatusFrame(state="empty", detail=detail), None)
            return False
        self._current = (self._card_index, value)
        self._card_index += 1
        self.drawn.append(value)
        return True

    def _scan(self) -> None:
        assert self._current is not None
        index, value = self._current
        misread = self.faults.misreads(index)
        self._last_scan_misread = misread
        if misread:
            self.stats.misreads_sent += 1
            self._send(MisreadFrame(cause=MisreadCause.UNREADABLE, text=f"card #{index}"), None)
            return
        position = self._current_slot if self.positions else None
        card = CardFrame(value=value, position=position)
        out, double = self.faults.card(card, index)
        self._send(card, out)
        if double:
            self.stats.double_reads += 1
            self._send(card, None)
