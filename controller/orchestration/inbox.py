"""The orchestrator's inbox: the card source's reads and the wake-ups, through one queue.

One pump task moves the card source's reads into the queue as they arrive; a command or a
stop drops a wake-up (``None``) into the same queue. The orchestrator waits on the queue
alone: one wait, no helper task per call (the card's hot path, ``docs/architecture.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from drivers.source import CardSource, Read


@dataclass(frozen=True, slots=True)
class Failed:
    """The card source raised ``error`` (handed through the inbox)."""

    error: Exception


class Inbox:
    """The reads of a card source and the wake-ups of the orchestrator, in one queue.

    Args:
        source: The card source whose reads are pumped in.

    Attributes:
        woken: Set by :meth:`poke`; the waiting loop clears it when it starts a new wait, so
            a wake-up whose cause it has seen already is skipped.
    """

    def __init__(self, source: CardSource) -> None:
        self._source = source
        self._queue: asyncio.Queue[Read | Failed | None] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None
        self.woken = asyncio.Event()
        self._front: list[Read] = []

    def unread(self, read: Read) -> None:
        """Give ``read`` back: the next :meth:`next` returns it before anything queued."""
        self._front.append(read)

    def poke(self) -> None:
        """Wake the waiting loop up (a command or a stop changed what it waits for)."""
        self.woken.set()
        self._queue.put_nowait(None)

    async def close(self) -> None:
        """Stop the pump (at the end of :meth:`controller.orchestrator.Orchestrator.run`)."""
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(BaseException):
                await self._pump
            self._pump = None

    async def _pump_reads(self) -> None:
        """Move the card source's reads into the queue, in order, as they arrive.

        One ``next_read`` is always pending, so a read never waits for the orchestrator to
        ask and none is lost to a timeout. A failure is handed over and ends the pump; the
        next :meth:`next` starts a new one.
        """
        while True:
            try:
                read = await self._source.next_read()
            except Exception as exc:
                self._queue.put_nowait(Failed(exc))
                return
            self._queue.put_nowait(read)

    async def next(self, timeout: float) -> Read | None:  # noqa: ASYNC109
        """The next read; ``None`` when ``timeout`` passes or something woke us up.

        A wake-up whose cause the caller has already seen (``woken`` cleared since) is
        skipped.

        Raises:
            DriverError: The card source failed (an unsupervised source lost its device).
        """
        if self._front:
            return self._front.pop(0)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._pump_reads(), name="card-source-read")
        inbox = self._queue
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            if inbox.empty():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return None
                try:
                    async with asyncio.timeout(remaining):
                        item = await inbox.get()
                except TimeoutError:
                    return None
            else:
                item = inbox.get_nowait()
            if item is None:
                if self.woken.is_set():
                    return None
                continue
            if isinstance(item, Failed):
                raise item.error
            return item
