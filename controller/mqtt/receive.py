"""Receiving: hand a client's messages to a callback until a stop event is set.

Shared by the readers that follow topics until they are told to stop (``tablectl watch``, the
studio's feeds), so that the one subtle part lives in one place: the read still pending when
the stop comes (or when the task is cancelled, Ctrl-C) must be cancelled and awaited, or the
disconnect fails it later and asyncio prints "Task exception was never retrieved".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any


async def take_until_stopped(client: Any, take: Callable[[Any], None], stop: asyncio.Event) -> None:
    """Hand every message of ``client`` (an ``aiomqtt.Client``) to ``take`` until ``stop``.

    Args:
        client: A connected client whose subscriptions are made.
        take: Called with each message, in order (synchronously).
        stop: Returns once set.

    Raises:
        aiomqtt.MqttError: The link failed while reading (the caller reconnects).
    """
    stopper = asyncio.ensure_future(stop.wait())
    getter: asyncio.Future[Any] | None = None
    try:
        iterator = client.messages.__aiter__()
        while True:
            getter = asyncio.ensure_future(iterator.__anext__())
            done, _ = await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                return
            try:
                message = getter.result()
            except StopAsyncIteration:  # the client's iterator ended (aiomqtt raises instead)
                return
            take(message)
    finally:
        for pending in (stopper, getter):
            if pending is not None and not pending.done():
                pending.cancel()
            if pending is not None:
                with contextlib.suppress(BaseException):
                    await pending
