"""``tablectl check-config FILE [--offline]``: will this table start with this config?

The checks are :mod:`controller.checkconfig`.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from controller.checkconfig import DEFAULT_TIMEOUT
from controller.errors import ConfigError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl check-config``."""
    parser = subparsers.add_parser(
        "check-config",
        help="check a table config: fields, device, brokers, journal directory",
        description="Validate a table config and, unless --offline, check that the device "
        "opens, every broker accepts the configured credentials and the journal directory is "
        "writable. One line per check; exit status 1 if any check failed.",
    )
    parser.add_argument("config", type=Path, metavar="FILE", help="the table's TOML config")
    parser.add_argument(
        "--offline", action="store_true", help="only validate the file (no device, broker)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"per check (default {DEFAULT_TIMEOUT:g})",
    )
    parser.set_defaults(func=_check_config_command)


def _check_config_command(args: argparse.Namespace) -> int:
    from controller.checkconfig import run_checks

    if not args.timeout > 0:
        raise ConfigError("--timeout must be a positive number of seconds", field="--timeout")
    checks = asyncio.run(run_checks(args.config, offline=args.offline, timeout=args.timeout))
    for check in checks:
        print(check.line(), flush=True)
    failed = sum(check.failed for check in checks)
    if failed:
        print(f"{failed} check(s) failed", flush=True)
        return 1
    return 0
