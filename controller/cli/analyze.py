"""``tablectl analyze GAME``: a game's par sheet (probabilities, payouts, return to player).

The analysers are :mod:`controller.analysis`.
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl analyze``."""
    from controller.games.registry import ANALYZERS

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
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a game option the par sheet reads, as in the table's game_options (repeatable; "
        "e.g. break-poker: dealer_qualifier=needs_king, the published table's reading)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=_analyze)


def _analyze(args: argparse.Namespace) -> int:
    from controller.analysis import Method
    from controller.errors import ConfigError
    from controller.games.registry import analyzer_for

    options: dict[str, str] = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"tablectl analyze: --option wants KEY=VALUE, got {item!r}")
        options[key.strip()] = value.strip()
    try:
        analyze = analyzer_for(args.game, options)
    except ConfigError as exc:
        raise SystemExit(f"tablectl analyze: --option: {exc.message}") from exc
    method = Method.MONTE_CARLO if args.samples is not None else Method.EXACT
    samples = args.samples if args.samples is not None else 0
    if args.samples is not None and args.samples < 2:
        raise SystemExit("tablectl analyze: --samples needs at least 2")
    progress = not args.no_progress and sys.stderr.isatty()
    report = analyze(method=method, samples=samples, seed=args.seed, progress=progress)
    print(report.dumps() if args.json else report.to_text())
    return 0
