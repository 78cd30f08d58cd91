"""Receiving: hand a client's messages to a callback until a stop event is set.

Shared by the readers that follow topics until they are told to stop (``tablectl watch``, the
studio's feeds, the pit console, the command router), so that the one subtle part lives in one
place: the read still pending when the stop comes (or when the task is cancelled, Ctrl-C) must
be cancelled and awaited, or the disconnect fails it later and asyncio prints "Task exception
was never retrieved".

One task reads every message (not one per message): a message costs the reader's iteration
and the callback, no task or ``asyncio.wait`` of its own (docs/performance.md, "The demo").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any


async def take_until_stopped(client: Any, take: Callable[[Any], None], stop: asyncio.Event) -> None:
    """Hand every message of ``client`` to ``take`` until ``stop`` is set.

    Args:
        client: A connected client whose subscriptions are made (its ``messages`` iterator).
        take: Called with each message, in order (synchronously).
        stop: Returns once set.

    Raises:
        aiomqtt.MqttError: The link failed while reading (the caller reconnects).
    """
    if stop.is_set():
        return
    reader = asyncio.ensure_future(_take_all(client, take))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if reader in done:
            reader.result()  # the link's error, if it failed; else its iterator ended
    finally:
        for pending in (stopper, reader):
            if not pending.done():
                pending.cancel()
            with contextlib.suppress(BaseException):
                await pending


async def _take_all(client: Any, take: Callable[[Any], None]) -> None:
    async for message in client.messages:
        take(message)
