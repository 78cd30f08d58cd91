"""Small asyncio helpers shared by the long-lived parts of the controller."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def first_completed(*awaitables: Awaitable[Any]) -> tuple[asyncio.Future[Any], ...]:
    """Run ``awaitables`` until the first one finishes; cancel and await all the others.

    Returns:
        The futures that had finished when the first did (exceptions are left in them for
        the caller to inspect; none escapes from here).
    """
    futures = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        done, _ = await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            future.cancel()
        await asyncio.gather(*futures, return_exceptions=True)
    return tuple(future for future in futures if future in done)
