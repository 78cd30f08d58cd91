"""``tablectl recall ROUND_ID`` and ``tablectl journal verify``: read a journal back.

Both open the journal read-only (safe beside a running controller); the views are
:mod:`controller.recall` and :meth:`controller.journal.Journal.verify` (with each result
re-evaluated by :class:`controller.rules_check.RulesCheck`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.rules_check import RulesCheck


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``recall`` and ``journal`` (``journal verify``) sub-commands."""
    recall = subparsers.add_parser(
        "recall",
        help="print a round as the journal recorded it",
        description="Print one round as recorded: every entry with its seq and time, the cards "
        "by slot, misreads and rescans, refusals, decisions, the result and the settlement, "
        "and the timing. Reads the journal read-only (safe beside a running controller).",
    )
    recall.add_argument("round_id", metavar="ROUND_ID", help="round id, e.g. tp-01-000042")
    source = recall.add_mutually_exclusive_group(required=True)
    source.add_argument("--journal", type=Path, metavar="PATH", help="journal")
    source.add_argument(
        "--archive",
        metavar="URL",
        help="read the round from the studio archive (postgresql://...; docs/archive.md)",
    )
    recall.add_argument("--table", help="with --archive: the table, if round ids repeat")
    recall.add_argument("--json", action="store_true", help="print one JSON document")
    recall.set_defaults(func=recall_command)

    journal = subparsers.add_parser(
        "journal",
        help="journal tools (verify)",
        description="Journal tools. They open the journal read-only.",
    )
    actions = journal.add_subparsers(dest="journal_command", required=True, metavar="ACTION")
    verify = actions.add_parser(
        "verify",
        help="check the journal's integrity (exit 0 sound, 1 with the problems listed)",
        description="Check the journal: SQLite integrity, seq contiguous from 1, the hash "
        "chain, bodies, times, sessions, every round's entries in a legal order, and every "
        "result re-evaluated from its cards and decisions with the game's rules (winner, "
        "hands, every settlement line, what carries over to the next round). Exit 0 when "
        "sound, 1 with every problem listed (seq, round, what).",
    )
    verify.add_argument("--journal", type=Path, required=True, metavar="PATH", help="journal")
    rules = verify.add_mutually_exclusive_group()
    rules.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the table config (TOML) the journal was written under: its game_options and "
        "paytables are what the results are re-evaluated with (default: each game's default "
        "options and pay tables; the journal does not record them)",
    )
    rules.add_argument(
        "--no-rules",
        action="store_true",
        help="do not re-evaluate the results with the game's rules (the file's own checks only)",
    )
    verify.add_argument(
        "--against-feed",
        type=Path,
        metavar="FILE",
        help="also check the journal against the chain heads (chain_head) of messages "
        "recorded from the table's feed: JSON lines, one message a line, as "
        "`mosquitto_sub -t 'tables/T/results' -t 'tables/T/status'` (or -v) saves them; "
        "a head the journal lacks means its tail was cut (docs/journal.md, Anchors)",
    )
    verify.add_argument("--json", action="store_true", help="print one JSON document")
    verify.set_defaults(func=verify_command)


def recall_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl recall`` (errors propagate as ``TablectlError``: exit 2)."""
    from controller.journal import Journal
    from controller.recall import recall_round

    if args.archive is not None:
        import asyncio

        from controller.archive.recall import recall_from_archive

        record = asyncio.run(recall_from_archive(args.archive, args.round_id, args.table))
    else:
        with Journal.open_readonly(args.journal) as journal:
            record = recall_round(journal, args.round_id)
    if args.json:
        print(json.dumps(record.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(record.to_text())
    return 0


def _rules_check(config: Path | None) -> RulesCheck:
    """The re-evaluation of the results: with the table config's game, options, pay tables.

    Raises:
        ConfigError: The config cannot be read, or names a bad game, option or pay table.
    """
    from controller.rules_check import RulesCheck

    if config is None:
        return RulesCheck()
    from controller.settings import load_settings

    settings = load_settings(config)
    return RulesCheck.for_table(settings.game, settings.game_options, settings.paytables)


def verify_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl journal verify``: 0 sound, 1 problems found.

    Each result is re-evaluated with its game's rules (``RulesCheck``; ``--config`` gives the
    table's options and pay tables, ``--no-rules`` skips it). A feed that cannot be read
    (``--against-feed``) is an error (exit 2), as is a feed of more than one table, or a
    config that cannot be read.
    """
    from controller.journal import FeedError, Journal, read_feed
    from controller.recall import verify_text

    feed = read_feed(args.against_feed) if args.against_feed is not None else None
    if feed is not None and len(feed.tables) > 1:
        raise FeedError(
            f"the feed {feed.path} holds chain heads of {len(feed.tables)} tables "
            f"({', '.join(feed.tables)}): record one table's topics",
            path=feed.path,
        )
    round_check = None if args.no_rules else _rules_check(args.config)
    with Journal.open_readonly(args.journal) as journal:
        report = journal.verify(feed.anchors if feed is not None else (), round_check=round_check)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(verify_text(report), file=sys.stdout)
    return 0 if report.ok else 1
