"""The ``tablectl`` command line: the only layer that knows argparse.

One module per command group, each with ``register(subparsers)`` and the functions that run
its sub-commands. A command module parses options and calls library functions with plain
typed parameters; it imports the library (and its heavy dependencies) only when the command
runs, so ``tablectl --help`` stays fast. ``python -m controller.cli`` is ``tablectl``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from controller import __version__
from controller.errors import TablectlError
from drivers.errors import DriverError


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="tablectl",
        description="Controller for a live-dealer casino table: scanners in, rules, journal, "
        "MQTT out.",
    )
    parser.add_argument("--version", action="version", version=f"tablectl {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from controller.cli import (
        analyze,
        archive,
        check_config,
        devices,
        enrol,
        pit,
        recall,
        run,
        schema,
        signing,
        simulate,
        studio,
        watch,
    )

    run.register(subparsers)
    simulate.register(subparsers)
    watch.register(subparsers)
    analyze.register(subparsers)
    devices.register(subparsers)
    enrol.register(subparsers)
    pit.register(subparsers)
    recall.register(subparsers)
    check_config.register(subparsers)
    signing.register(subparsers)
    schema.register(subparsers)
    archive.register(subparsers)
    studio.register(subparsers)
    _name_the_usage(parser)
    return parser


def _name_the_usage(parser: argparse.ArgumentParser) -> None:
    """Give every sub-command parser itself as ``_usage``, for errors after parsing.

    ``argparse`` reports arguments it does not know with the top-level usage; :func:`main`
    reports them with the usage of the sub-command that was given instead.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(_usage=sub)
                _name_the_usage(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tablectl`` console script."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        usage: argparse.ArgumentParser = getattr(args, "_usage", parser)
        usage.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        code: int = args.func(args)
    except (TablectlError, DriverError) as exc:
        print(f"tablectl {args.command}: {exc}", file=sys.stderr)
        # An error that is an expected way to end (a second stop signal: 128 + its number)
        # carries its own status; every other one is a usage or configuration error: 2.
        status = getattr(exc, "exit_status", 2)
        return status if isinstance(status, int) else 2
    except KeyboardInterrupt:
        return 130
    return code
