"""The clients of one process run paho's ``loop_misc`` on one grid: one wake-up for all.

controller/mqtt/client.py (``misc_delay``): each client's keep-alive tick falls on the
multiples of its period on the event loop's clock, not a period after it connected, so the
five connections of ``make run``'s demo wake the process once per tick, not five times.
Real Mosquitto; the ticks are observed by wrapping each client's paho ``loop_misc``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from controller.broker import parse_broker_url
from controller.mqtt.client import Client, misc_seconds

KEEPALIVE = 2
"""Its misc period is one second (the shortest): three ticks in the test's few seconds."""

STAGGER = 0.3
"""The clients connect this far apart: on the old clock their ticks were this far apart."""


def _recorded(client: Client, loop: asyncio.AbstractEventLoop, times: list[float]) -> None:
    """Note the loop's time at each of ``client``'s ``loop_misc`` calls."""
    original: Callable[[], Any] = client.paho.loop_misc

    def loop_misc() -> Any:
        times.append(loop.time())
        return original()

    client.paho.loop_misc = loop_misc  # type: ignore[method-assign]


async def test_clients_connected_apart_tick_together_on_the_period_grid(mosquitto_session):
    address = parse_broker_url(mosquitto_session.url)
    loop = asyncio.get_running_loop()
    period = misc_seconds(KEEPALIVE)
    ticks: list[list[float]] = [[], [], []]
    async with contextlib.AsyncExitStack() as stack, asyncio.timeout(30):
        for times in ticks:
            client = Client(address.host, address.port, keepalive=KEEPALIVE)
            _recorded(client, loop, times)
            await stack.enter_async_context(client)
            await asyncio.sleep(STAGGER)
        await asyncio.sleep(3 * period + 0.2)
    # The first call is the connect's own; the ticks after it are the loop's.
    after = [times[1:] for times in ticks]
    assert all(len(times) >= 2 for times in after), after
    shared = set.intersection(*({round(t / period) for t in times} for times in after))
    assert len(shared) >= 2, f"the clients' ticks fall on different grid points: {after}"
    for point in shared:
        moments = [t for times in after for t in times if round(t / period) == point]
        spread = max(moments) - min(moments)
        assert spread < STAGGER / 3, f"tick {point}: the clients woke {spread:.3f} s apart"
