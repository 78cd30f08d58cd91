"""What a card source that queues its reads shares (the line-profile and USB HID drivers).

A reader task puts reads, and the error that ended it, on one queue; :meth:`QueuedReads.
take` hands them over in arrival order, and an error stays queued so every later call sees
it until the source is reopened. Closing keeps the reads not yet taken and drops the error.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from drivers.errors import DriverError, TransportError
from drivers.source import Read

__all__ = ["QueuedReads"]


class QueuedReads:
    """The queue of reads, its hand-over and the source's errors.

    Args:
        url: The URL as configured (for logs and errors).
        device: The device named in errors.

    Attributes:
        loses_reads_while_away: A read the device made while it was away is lost with it (no
            link retransmits it): the supervisor says so after ``recovered``
            (``Misread("away")``), and the table asks for the card again.
    """

    loses_reads_while_away: ClassVar[bool] = True

    def __init__(self, url: str, device: str) -> None:
        self._url = url
        self._device = device
        self._queue: asyncio.Queue[Read | DriverError] = asyncio.Queue()

    @property
    def url(self) -> str:
        """The URL the source was built from."""
        return self._url

    @property
    def device(self) -> str:
        """The device, as errors name it."""
        return self._device

    def _error(self, kind: type[DriverError], message: str, detail: str | None = None) -> Any:
        return kind(message, url=self._url, device=self._device, detail=detail)

    async def take(self, *, is_open: bool) -> Read:
        """The next queued read; the queued error (raised, and kept for the next call).

        Raises:
            DriverError: The error that ended the reader (``ConnectionLost`` and the like).
            TransportError: The source is not open and nothing is queued.
        """
        if not is_open and self._queue.empty():
            raise self._error(TransportError, "card source is not open")
        item = await self._queue.get()
        if isinstance(item, DriverError):
            self._queue.put_nowait(item)
            raise item
        return item

    def keep_reads(self) -> None:
        """On close: keep the reads not yet taken, drop the error that ended the reader."""
        items: list[Read | DriverError] = []
        while not self._queue.empty():
            items.append(self._queue.get_nowait())
        for item in items:
            if not isinstance(item, DriverError):
                self._queue.put_nowait(item)


async def close_stream(writer: asyncio.StreamWriter, bound: float, log: Any) -> None:
    """Abort a source's serial stream and wait, at most ``bound`` seconds, until it is closed.

    The one closing of the stream-based sources (``profile+serial://``, ``jsonl+serial://``,
    ``pepper://``). Never raises: the error that closed the stream was reported already.
    """
    if not writer.transport.is_closing():
        writer.transport.abort()
    try:
        async with asyncio.timeout(bound):
            await writer.wait_closed()
    except Exception as exc:
        log.debug("card_source_close_error", error=str(exc))
