"""The pit console on its own: uvicorn serving :func:`build_pit_app` (tests, a lone console).

:func:`serving` runs the server as a named task inside the caller's event loop and yields its
address once it accepts connections (``port=0``: a free port). :func:`main` is
``python -m controller.studio.pit.runner --config pit.toml [--host H --port P]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
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
        app, host=host, port=port, lifespan="on", log_level="warning", ws="websockets-sansio"
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


def main(argv: list[str] | None = None) -> int:
    """Run the pit console alone until interrupted."""
    import uvicorn

    from controller.errors import TablectlError
    from controller.studio.pit.app import build_pit_app
    from controller.studio.pit.settings import load_pit_settings

    parser = argparse.ArgumentParser(prog="python -m controller.studio.pit.runner")
    parser.add_argument("--config", required=True, help="pit settings (TOML)")
    parser.add_argument("--section", help="the TOML table holding them (e.g. pit)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8470)
    args = parser.parse_args(argv)
    try:
        settings = load_pit_settings(args.config, section=args.section)
    except TablectlError as exc:
        print(f"pit console: {exc}", file=sys.stderr)
        return 2
    print(f"pit console: http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(build_pit_app(settings), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
