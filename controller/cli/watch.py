"""``tablectl watch``: a table's messages, as a consumer sees them, one readable line each.

The subscriber and the text are :mod:`controller.watch`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

QUIET_SECONDS = 5.0
"""After this long without a message of the table, ``watch`` says nothing has been heard."""

_STOP_GRACE_SECONDS = 0.5
"""After SIGINT/SIGTERM, how long ``watch`` may take to disconnect before it is cut short."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl watch`` to the CLI."""
    parser = subparsers.add_parser(
        "watch",
        help="show a table's messages as a consumer sees them",
        description="Subscribe to a table's public topics and print one readable line per "
        "message: status, betting, cards, rescans, refusals, results and settlements.",
    )
    parser.add_argument(
        "--broker", action="append", metavar="URL",
        help="broker URL, mqtt://HOST:PORT (repeat to fail over; default: the local broker "
        "mqtt://127.0.0.1:1883, as tablectl run --simulate uses)",
    )  # fmt: skip
    parser.add_argument(
        "--table-id", default="sim-1", help="the table to watch (default: sim-1, the simulated one)"
    )
    parser.add_argument(
        "--protocol", choices=("5", "3.1.1"), default="5", help="MQTT version (default 5)"
    )
    parser.add_argument("--prefix", default="tables", help="topic prefix (default tables)")
    parser.add_argument("--username", help="broker user name (e.g. viewer)")
    parser.add_argument(
        "--password", help="broker password (prefer TABLECTL_WATCH_PASSWORD in the environment)"
    )
    parser.add_argument("--ca-file", metavar="FILE", help="CA of mqtts:// brokers")
    parser.set_defaults(func=_run_watch)


def _run_watch(args: argparse.Namespace) -> int:
    """Watch until SIGINT (Ctrl-C) or SIGTERM; a stop by the user is a normal end: status 0."""
    password = args.password or os.environ.get("TABLECTL_WATCH_PASSWORD")
    asyncio.run(_watch_until_stopped(args, password))
    return 0


async def _watch_until_stopped(args: argparse.Namespace, password: str | None) -> None:
    from controller.watch import watch

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    from controller.broker import DEFAULT_LOCAL_URL

    task = asyncio.create_task(
        watch(
            args.broker or [DEFAULT_LOCAL_URL],
            args.table_id,
            protocol=args.protocol,
            prefix=args.prefix,
            username=args.username,
            password=password,
            ca_file=args.ca_file,
            stop=stop,
            quiet_seconds=QUIET_SECONDS,
        )
    )
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if not task.done():
        # Stopped: a connection attempt to a broker that does not answer is not waited for.
        await asyncio.wait({task}, timeout=_STOP_GRACE_SECONDS)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return
    task.result()  # an error (a URL that cannot be read) is the command's error
