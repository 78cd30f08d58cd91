"""What the JSON tag readers' drivers share: the reader core behind a transport, its timers.

A transport (an MQTT subscription, a serial port) hands each message to
:class:`~drivers.reader_json.ReaderCore`; between messages the core's presence latch has
deadlines (a tag stable long enough is placed, one silent long enough is removed): a timer
task beside the receiver hands those over as they fall due
(:meth:`TagReaderSource.run_timers`). Reads go on the queue of
:class:`~drivers.queued.QueuedReads`; the error that ended the transport too.

The time a link was down does not count as the tags' absence
(:meth:`~drivers.reader_json.ReaderCore.link_lost`, ``link_back``): silence while nothing
could be heard says nothing about a tag.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from drivers.codec import LedColor
from drivers.json_readers import JsonLinesSpec, MqttReaderSpec
from drivers.queued import QueuedReads
from drivers.reader_json import ReaderCore, load_reader_setup
from drivers.source import DriverSettings

__all__ = ["STALL", "TagReaderSource"]

STALL = 0.25
"""Seconds a latch deadline may be overdue before it counts as this process's stall (an
outage of the link, not the tags' absence): far above a loaded loop's lateness (a few ms)."""


class TagReaderSource(QueuedReads):
    """A JSON tag reader: the core, its deadlines and the commands it does not take.

    Args:
        url: The URL as configured.
        spec: What it resolved to.
        settings: Timeouts.
        raw_codes: Read the tags' UIDs as they are, without a code table (enrolment).

    Raises:
        ProfileError: The code table cannot be used (the file, the field, the reason).

    Attributes:
        core: The reader core (its ``stats`` count what it saw).
        commands_sent: Cues written to the reader.
        skipped_commands: Commands the reader does not take (not sent).
    """

    def __init__(
        self,
        url: str,
        spec: MqttReaderSpec | JsonLinesSpec,
        settings: DriverSettings,
        *,
        raw_codes: bool = False,
    ) -> None:
        super().__init__(url, spec.device)
        self._settings = settings
        table, times = load_reader_setup(
            spec.profile, spec.codes, spec.place_after_ms, spec.remove_after_ms
        )
        self.core = ReaderCore(
            None if raw_codes else table, times, device_id=spec.device_id, name=spec.device
        )
        self._opened_at: float | None = None
        self._wake = asyncio.Event()
        self.commands_sent = 0
        self.skipped_commands = 0

    @property
    def last_heartbeat_at(self) -> float | None:
        """When the link opened (a tag reader has no heartbeat); ``None`` while closed."""
        return self._opened_at

    def _opened(self) -> None:
        """The link is up: the time it was down does not count as the tags' absence."""
        now = time.monotonic()
        self._opened_at = now
        self.core.link_back(now)

    def _lost(self) -> None:
        """The link is down (failed or closed): the latch's time stops until it is back."""
        self.core.link_lost(time.monotonic())

    def _take(self, payload: bytes, *, retained: bool = False) -> None:
        for read in self.core.message(payload, time.monotonic(), retained=retained):
            self._queue.put_nowait(read)
        self._wake.set()

    def _status(self, payload: bytes) -> None:
        for read in self.core.reader_status(payload, time.monotonic()):
            self._queue.put_nowait(read)
        self._wake.set()

    def _tick(self) -> None:
        for read in self.core.due(time.monotonic()):
            self._queue.put_nowait(read)

    async def run_timers(self) -> None:
        """Hand the latch's decisions over as they fall due (a task beside the receiver).

        It sleeps until the core's next deadline, or until a message changes it (``_take``
        wakes it), and never touches the transport: a receive is never cancelled by a timer
        (aiomqtt's message iterator loses the message a cancelled wait had taken).

        A wake-up later than :data:`STALL` after its deadline means this process could not
        listen (its event loop was held up: a long collection, a swap, a starved CPU): the
        messages of that time may still wait unread in the socket. The time since this task
        last ran is counted as the link's outage (``link_lost``/``link_back``), not as the
        tags' absence (a removal then comes later, never wrongly); else a stall longer than
        the removal time would remove every card on the table.
        """
        listening = time.monotonic()
        held_up = False  # this wake-up's hold-up already counted
        while True:
            self._wake.clear()
            deadline = self.core.next_deadline()
            now = time.monotonic()
            delay = None if deadline is None else deadline - now
            if delay is not None and delay <= -STALL and not held_up:
                # Held up: from the last time this task ran, nothing could be heard.
                self.core.link_lost(listening)
                self.core.link_back(now)
                listening = now
                held_up = True
                continue
            if delay is not None and delay <= 0:
                # Due (a deadline still far past after the hold-up was counted was past
                # before this task last listened: a message timed earlier set it). Ticked,
                # and the loop let run: a deadline that would not move never holds it.
                self._tick()
                await asyncio.sleep(0)
                continue
            held_up = False
            listening = now
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """A tag reader has no LED command: nothing is sent."""
        self.skipped_commands += 1

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """A tag reader has no beep command: nothing is sent."""
        self.skipped_commands += 1

    async def reset(self) -> None:
        """A tag reader takes no reset: nothing is sent."""
        self.skipped_commands += 1
