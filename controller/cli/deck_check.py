"""``tablectl deck-check``: scan a whole deck and report what is wrong before it goes into play.

The library is :mod:`controller.deckcheck`; the device is any card source URL (a
``profile+serial://`` reader with ``--codes FILE``: the enrolled deck's code table). With a
table (``--table-id`` and ``--broker``, or ``--config``) the report is sent to it as
``cmd/pit/deck-check`` and journalled there (docs/drivers.md, "Deck check").

Exit status: 0 the deck may go into play, 1 it must not (missing, extra, duplicated or
unknown cards), 2 no check (no read, the device lost, the table did not record it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.deckcheck import DeckReport

DECKS = ("standard", "standard-joker", "mahjong-pai-gow-20")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``deck-check`` sub-command."""
    parser = subparsers.add_parser(
        "deck-check",
        help="scan a whole deck and report missing, extra, duplicated and unknown cards",
        description="Put every card of the deck on the reader once. The report names the "
        "cards missing, extra (not in this deck), duplicated and unknown (a tag the code "
        "table does not know). With a table (--table-id and --broker, or --config) the "
        "report is journalled there. Exit 0: the deck may go into play; 1: it must not; "
        "2: no check.",
    )
    parser.add_argument("--device", required=True, metavar="URL", help="the reader's URL")
    parser.add_argument(
        "--codes", metavar="FILE", help="the deck's code table (a profile reader's codes=)"
    )
    parser.add_argument("--deck", choices=DECKS, default="standard", help="what the deck holds")
    parser.add_argument(
        "--idle",
        type=float,
        default=5.0,
        metavar="S",
        help="the check ends S seconds after the last card read (default 5)",
    )
    parser.add_argument(
        "--first-read",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds to wait for the first card (default 120)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    table = parser.add_argument_group("journal the report at a table (cmd/pit/deck-check)")
    table.add_argument("--config", type=Path, metavar="FILE", help="the table's config (TOML)")
    table.add_argument("--broker", action="append", metavar="URL", help="broker URL")
    table.add_argument("--table-id", metavar="ID", help="the table")
    table.add_argument("--username", help="broker user name (e.g. pitboss)")
    table.add_argument("--password", help="broker password (or TABLECTL_PIT_PASSWORD)")
    table.add_argument("--operator", metavar="NAME", help="who checks the deck (journalled)")
    table.add_argument("--timeout", type=float, default=10.0, metavar="S", help="answer wait")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Scan, print the report, journal it at the table if one is named."""
    from controller.deckcheck import DeckCheckError
    from controller.errors import TablectlError
    from controller.logs import configure_logging
    from drivers.errors import DriverError

    configure_logging(level="WARNING")
    to_table = args.config is not None or args.table_id is not None or args.broker
    if to_table and not args.operator:
        print("tablectl deck-check: --operator NAME is needed to journal it", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(check_deck(args.device, args.codes, args.deck, args))
    except (DeckCheckError, DriverError) as exc:
        print(f"tablectl deck-check: {exc}", file=sys.stderr)
        return 2
    if args.json:
        import json

        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(report.lines()))
    if to_table:
        try:
            code = _journal(report, args)
        except TablectlError as exc:
            print(f"tablectl deck-check: not journalled: {exc}", file=sys.stderr)
            return 2
        if code != 0:
            return 2
    return 0 if report.ok else 1


async def check_deck(
    url: str, codes: str | None, deck: str, args: argparse.Namespace
) -> DeckReport:
    """Open the reader, scan the deck, close the reader."""
    from controller.deckcheck import deck_named, scan_deck, with_codes
    from drivers.source import DriverSettings, open_card_source

    source = open_card_source(with_codes(url, codes), DriverSettings(heartbeat_timeout=None))
    await source.open()
    try:
        return await scan_deck(
            source,
            deck_named(deck),
            idle_seconds=args.idle,
            first_read_seconds=args.first_read,
            say=lambda text: print(text, file=sys.stderr, flush=True),
        )
    finally:
        await source.close()


def _journal(report: DeckReport, args: argparse.Namespace) -> int:
    """Send the report to the table as ``cmd/pit/deck-check``; the answer's exit status."""
    from controller.deckcheck import public_url
    from controller.pitcli import EXIT_ACCEPTED, resolve_target, send_command

    target = resolve_target(
        config=args.config,
        brokers=args.broker,
        table_id=args.table_id,
        username=args.username,
        password=(
            args.password if args.password is not None else os.environ.get("TABLECTL_PIT_PASSWORD")
        ),
    )
    body = {"device": public_url(args.device), "operator": args.operator, **report.to_dict()}
    outcome = asyncio.run(send_command(target, "pit", "deck-check", body, timeout=args.timeout))
    print(outcome.text, file=sys.stdout if outcome.code == EXIT_ACCEPTED else sys.stderr)
    return outcome.code
