"""The ``tablectl`` command line.

Each sub-command is registered by the module that owns it (``register(subparsers)``) and
imports its heavy dependencies only when it runs, so ``tablectl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from controller import __version__
from controller.errors import TablectlError
from drivers.errors import DriverError


def _register_analyze(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from controller.analysis import ANALYZERS

    parser = subparsers.add_parser(
        "analyze",
        help="compute a game's par sheet (probabilities, payouts, return to player)",
        description="Compute a game's par sheet: for every bet type, every outcome with what "
        "it pays and its probability, and the bet's return to player.",
    )
    parser.add_argument("game", choices=sorted(ANALYZERS), help="game id")
    method = parser.add_mutually_exclusive_group()
    method.add_argument(
        "--exact",
        action="store_true",
        help="exact enumeration (default where the game supports it)",
    )
    method.add_argument(
        "--samples",
        type=int,
        metavar="N",
        help="Monte Carlo with N samples (prints the standard error)",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed for Monte Carlo (default 1)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=_analyze)


def _analyze(args: argparse.Namespace) -> int:
    from controller.analysis import Method, analyzer_for

    analyze = analyzer_for(args.game)
    method = Method.MONTE_CARLO if args.samples is not None else Method.EXACT
    samples = args.samples if args.samples is not None else 0
    if args.samples is not None and args.samples < 2:
        raise SystemExit("tablectl analyze: --samples needs at least 2")
    progress = not args.no_progress and sys.stderr.isatty()
    report = analyze(method=method, samples=samples, seed=args.seed, progress=progress)
    print(report.dumps() if args.json else report.to_text())
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="tablectl",
        description="Controller for a live-dealer casino table: scanners in, rules, journal, "
        "MQTT out.",
    )
    parser.add_argument("--version", action="version", version=f"tablectl {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from controller.app import register as register_run
    from controller.checkconfig import register as register_check_config
    from controller.pitcli import register as register_pit
    from controller.recall import register as register_recall
    from controller.schema import register as register_schema
    from controller.signing import register as register_signing
    from controller.watch import register as register_watch
    from drivers.discovery import register as register_devices
    from simulators.cli import register as register_simulators

    register_run(subparsers)
    register_simulators(subparsers)
    register_watch(subparsers)
    _register_analyze(subparsers)
    register_devices(subparsers)
    register_pit(subparsers)
    register_recall(subparsers)
    register_check_config(subparsers)
    register_signing(subparsers)
    register_schema(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tablectl`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except (TablectlError, DriverError) as exc:
        print(f"tablectl {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    raise SystemExit(main())
