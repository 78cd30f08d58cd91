"""The studio's web server wakes once a second only while a connection is open.

uvicorn refreshes its ``Date`` header on its tick; with no connection open there is no response
to date, so the studio's server then wakes every ``IDLE_TICK_SECONDS`` only (beside a table in
``make run`` its once-a-second tick was a share of the demo's CPU: docs/performance.md, "The
demo"). A stop still ends it at once, whatever the tick.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from controller.studio import server as studio_server
from tests.studio._harness import make_studio_settings

pytestmark = pytest.mark.fast


def _app() -> Starlette:
    async def hello(_request: object) -> PlainTextResponse:
        return PlainTextResponse("hello")

    return Starlette(routes=[Route("/", hello)])


async def test_the_server_ticks_each_second_only_with_a_connection_open(monkeypatch):
    monkeypatch.setattr(studio_server, "IDLE_TICK_SECONDS", 3.0)
    server = studio_server._Server(_app(), make_studio_settings("mqtt://127.0.0.1:1"))
    ticks: list[float] = []
    on_tick = server.server.on_tick

    async def counted(counter: int) -> bool:
        ticks.append(time.monotonic())
        return await on_tick(counter)

    server.server.on_tick = counted  # type: ignore[method-assign]
    sock = studio_server.bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    stop = asyncio.Event()
    serving = asyncio.create_task(server.serve(sock, stop), name="studio-http")
    try:
        await asyncio.sleep(2.5)
        assert len(ticks) == 1, ticks  # the first tick, then asleep (3 s here)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        assert b"200" in await reader.readline()
        opened = time.monotonic()
        await asyncio.sleep(5.5)  # the idle wait ends (by 3 s), then a tick each second
        during = [t for t in ticks if t > opened]
        assert 3 <= len(during) <= 7, during
        writer.close()
        await writer.wait_closed()
        started = time.monotonic()
        stop.set()
        await asyncio.wait_for(serving, 5)
        assert time.monotonic() - started < 2.5  # woken at once, not at the next tick
    finally:
        sock.close()
        if not serving.done():
            serving.cancel()
