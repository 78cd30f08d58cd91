"""The pit console on its own: uvicorn serving :func:`build_pit_app` (tests, a lone console).

:func:`serving` runs the server as a named task inside the caller's event loop and yields its
address once it accepts connections (``port=0``: a free port). The console is served
for real by ``tablectl studio`` when ``studio.toml`` has a ``[pit]`` section.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette

STARTUP_SECONDS = 10.0
"""How long :func:`serving` waits for the server to accept connections."""


@contextlib.asynccontextmanager
async def serving(app: Starlette, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn (lifespan on) while the block runs; yields ``http://H:P``.

    Raises:
        TimeoutError: The server did not start within :data:`STARTUP_SECONDS`.
        RuntimeError: It stopped while starting (e.g. the port is taken).
    """
    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level="warning",
        ws="websockets-sansio",
        proxy_headers=False,  # the console reads forwarded headers from trusted proxies only
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(), name="pit-uvicorn")
    try:
        async with asyncio.timeout(STARTUP_SECONDS):
            while not server.started:
                if task.done():
                    raise RuntimeError(f"the pit console's server stopped while starting ({host})")
                await asyncio.sleep(0.02)
        sockets = [s for server_ in server.servers for s in server_.sockets]
        bound = sockets[0].getsockname()[1] if sockets else port
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            async with asyncio.timeout(STARTUP_SECONDS):
                await task
