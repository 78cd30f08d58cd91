"""The ``tablectl`` command line: the only layer that knows argparse.

One module per command group, each with ``register(subparsers)`` and the functions that run
its sub-commands. A command module parses options and calls library functions with plain
typed parameters; it imports the library (and its heavy dependencies) only when the command
runs, so ``tablectl --help`` stays fast. ``python -m controller.cli`` is ``tablectl``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Final

from controller import __version__
from controller.errors import TablectlError
from drivers.errors import DriverError

COMMAND_MODULES: Final = {
    "run": "run",
    "simulate-scanner": "simulate",
    "watch": "watch",
    "analyze": "analyze",
    "devices": "devices",
    "enrol": "enrol",
    "deck-check": "deck_check",
    "pit": "pit",
    "replay": "pit",
    "recall": "recall",
    "journal": "recall",
    "check-config": "check_config",
    "verify": "signing",
    "keygen": "signing",
    "schema": "schema",
    "archive": "archive",
    "studio": "studio",
}
"""Each sub-command and the module of ``controller.cli`` that registers it, in the order
``tablectl --help`` lists them (a test checks the modules register exactly these)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every sub-command registered, or only those of ``command``'s module.

    Args:
        command: The sub-command given on the command line. When it is a known one, only its
            module is imported and registered: ``tablectl run --config`` does not import the
            archive's, the studio's or the enrolment's commands (a restarted table's start,
            docs/performance.md). ``None`` or an unknown name: every module (help, errors).
    """
    parser = argparse.ArgumentParser(
        prog="tablectl",
        description="Controller for a live-dealer casino table: scanners in, rules, journal, "
        "MQTT out.",
    )
    parser.add_argument("--version", action="version", version=f"tablectl {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    known = COMMAND_MODULES.get(command) if command is not None else None
    modules = [known] if known is not None else list(dict.fromkeys(COMMAND_MODULES.values()))
    for name in modules:
        module = importlib.import_module(f"controller.cli.{name}")
        module.register(subparsers)
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
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(given[0] if given and not given[0].startswith("-") else None)
    args, unknown = parser.parse_known_args(given)
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
    except ImportError as exc:  # an extra not installed: say which, and how to install it
        from controller.extras import missing_extra

        missing = missing_extra(exc)
        if missing is None:
            raise
        print(f"tablectl {_command_name(args)}: {missing}", file=sys.stderr)
        return 2
    return code


def _command_name(args: argparse.Namespace) -> str:
    """The command as it was given: ``archive report``, not ``archive``, when it has one."""
    words = [args.command]
    for key in ("archive_command", "pit_command", "journal_command"):
        sub = getattr(args, key, None)
        if isinstance(sub, str):
            words.append(sub)
    return " ".join(words)
