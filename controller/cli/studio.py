"""``tablectl studio --config studio.toml``: the studio's web service (docs/studio.md).

The dealer screens and stream overlays of the studio's tables, fed by the tables' MQTT topics;
runs until SIGINT/SIGTERM. A broken ``studio.toml`` stops it at start with the file, the field
and the reason. The library is :mod:`controller.studio`.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl studio`` to the CLI."""
    parser = subparsers.add_parser(
        "studio",
        help="the studio's web service: dealer screens and stream overlays",
        description="Serve the dealer screen (/tables/ID/dealer) and the stream overlay "
        "(/tables/ID/overlay, ?mode=secure-delay) of the studio's tables, fed by their MQTT "
        "topics over one connection of the studio's own role. Runs until SIGINT or SIGTERM.",
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="studio.toml")
    parser.add_argument(
        "--hash-password",
        action="store_true",
        help="print an scrypt hash of a password for a [[pit.users]] entry, and exit",
    )
    parser.add_argument(
        "--stdin", action="store_true", help="with --hash-password: read it from standard input"
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    parser.add_argument("--log-format", default="auto", choices=["auto", "json", "console"])
    parser.set_defaults(func=studio_command)


def studio_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl studio``: 0 after SIGINT/SIGTERM."""
    if args.hash_password:
        return hash_password_command(read_stdin=args.stdin)
    if args.config is None:
        print("tablectl studio: --config FILE is needed (or --hash-password)", file=sys.stderr)
        return 2
    from controller.logs import configure_logging
    from controller.studio.config import load_studio_settings
    from controller.studio.server import StudioAddress, run_studio

    settings = load_studio_settings(args.config)
    configure_logging(level=args.log_level, fmt=args.log_format)
    if not settings.mqtt.urls:
        from controller.errors import ConfigError

        raise ConfigError(
            "studio config field 'mqtt.urls': at least one broker URL is needed",
            path=str(args.config),
            field="mqtt.urls",
        )

    def ready(address: StudioAddress) -> None:
        tables = settings.tables or ["ID"]
        pages = " ".join(page for table in tables for page in address.pages(table))
        print(f"studio: {pages}", flush=True)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await run_studio(settings, stop, on_ready=ready)
        print("studio stopped", file=sys.stderr)

    asyncio.run(main())
    return 0


def hash_password_command(*, read_stdin: bool) -> int:
    """``tablectl studio --hash-password``: an scrypt hash for the pit console's users.

    Returns:
        0 with the hash on standard output; 1 when the two entries differ or the password
        cannot be hashed (e.g. empty).
    """
    import getpass

    from controller.studio.pit.errors import PasswordHashError
    from controller.studio.pit.passwords import check_password_strength, hash_password

    if read_stdin:
        password = sys.stdin.read().rstrip("\r\n")
    else:
        try:
            if not sys.stdin.isatty():
                raise EOFError  # a pipe, /dev/null, a script: no one to ask
            password = getpass.getpass("password: ")
            again = getpass.getpass("again: ")
        except EOFError:
            print(
                "tablectl studio: no password to read: standard input is not a terminal; "
                "to hash one from a pipe or a script, use --hash-password --stdin "
                '(e.g. printf %s "$PASSWORD" | tablectl studio --hash-password --stdin)',
                file=sys.stderr,
            )
            return 1
        if again != password:
            print("tablectl studio: the two passwords differ", file=sys.stderr)
            return 1
    try:
        check_password_strength(password)
        print(hash_password(password))
    except PasswordHashError as exc:
        print(f"tablectl studio: {exc}", file=sys.stderr)
        return 1
    return 0
