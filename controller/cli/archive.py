"""``tablectl archive run|migrate``: the studio archive (docs/archive.md).

``archive run --config archive.toml`` consumes every configured table's topics into
PostgreSQL until SIGINT/SIGTERM; ``archive migrate`` (``--config`` or ``--database URL``) only
brings the database schema up to date and prints the versions applied; ``archive report
--table T --from --to`` prints a table's rounds, voids, delayed results and per-bet outcome
counts over a period; ``archive verify --table T [--journal PATH]`` checks what the archive
holds of a table, and that the table's journal agrees with it; ``archive retain`` exports each
retention class's due months (entries and the side tables' rows) to CSV, verifies the files
and deletes what they hold (``--dry-run``: only shows it). The library is
:mod:`controller.archive`.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.archive.verify import ChainCheck


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl archive`` (``run``, ``migrate``, ``report``) to the CLI."""
    parser = subparsers.add_parser(
        "archive",
        help="the studio archive: every table's entries in PostgreSQL",
        description="The studio archive: consume the tables' events, results and statuses "
        "into PostgreSQL, exactly once, signatures verified, gaps replayed (docs/archive.md).",
    )
    actions = parser.add_subparsers(dest="archive_command", required=True, metavar="ACTION")
    run = actions.add_parser(
        "run",
        help="consume the tables' topics into PostgreSQL (until SIGINT/SIGTERM)",
        description="Migrate the database, subscribe to {prefix}/+/events, results and status, "
        "and store every message: entries once, statuses as history, the rest as rejected "
        "with the reason. Runs until SIGINT or SIGTERM.",
    )
    run.add_argument("--config", type=Path, required=True, metavar="FILE", help="archive.toml")
    run.set_defaults(func=run_command)
    migrate = actions.add_parser(
        "migrate",
        help="bring the archive database's schema up to date",
        description="Apply the archive's SQL migrations not applied yet (each in a "
        "transaction) and print their versions.",
    )
    source = migrate.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", type=Path, metavar="FILE", help="archive.toml")
    source.add_argument(
        "--database", metavar="URL", help="postgresql://USER@HOST:PORT/DB or sqlite:///PATH"
    )
    migrate.set_defaults(func=migrate_command)
    report = actions.add_parser(
        "report",
        help="a table's rounds, voids, delayed results and per-bet outcomes over a period",
        description="Count a table's rounds opened from --from (included) to --to (excluded): "
        "results, voids, unfinished rounds, delayed results, and per bet (from the results' "
        "settlement lines) how many won, lost, pushed or were refunded; list the voids and "
        "delayed results; and per game and bet, what the bet returned per 1 staked beside "
        "the par sheet's (tablectl analyze) and how often each outcome came beside its "
        "probability, with a goodness-of-fit test (docs/archive.md, 'Against the par "
        "sheet'). Times are ISO-8601 with a zone, or a date (midnight UTC).",
    )
    where = report.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", type=Path, metavar="FILE", help="archive.toml")
    where.add_argument(
        "--database", metavar="URL", help="postgresql://USER@HOST:PORT/DB or sqlite:///PATH"
    )
    report.add_argument("--table", required=True, help="the table id")
    report.add_argument(
        "--from",
        dest="start",
        default=None,
        metavar="TIME",
        help="from this time (included); default: today, 00:00 UTC",
    )
    report.add_argument(
        "--to",
        dest="end",
        default=None,
        metavar="TIME",
        help="to this time (excluded); default: the end of --from's day (UTC)",
    )
    report.add_argument(
        "--format",
        choices=["text", "csv", "json"],
        default="text",
        help="text (default), csv (the comparison with the par sheet: a row per bet and per "
        "outcome) or json (the counts and the comparison)",
    )
    report.set_defaults(func=report_command)
    verify = actions.add_parser(
        "verify",
        help="check what the archive holds of a table (and that its journal agrees)",
        description="Check a table's archive: every seq up to the highest archived once, "
        "every archived round folded, no gap open, no conflicting copy. With --journal, also "
        "verify the table's journal against the chain heads the archive holds (the "
        "results' chain_head): they agree when the journal's hash chain passes through "
        "each. Exit 0 when all is well, 1 otherwise.",
    )
    target = verify.add_mutually_exclusive_group(required=True)
    target.add_argument("--config", type=Path, metavar="FILE", help="archive.toml")
    target.add_argument(
        "--database", metavar="URL", help="postgresql://USER@HOST:PORT/DB or sqlite:///PATH"
    )
    verify.add_argument("--table", required=True, help="the table id")
    verify.add_argument("--journal", type=Path, metavar="PATH", help="the table's journal")
    verify.set_defaults(func=verify_command)
    retain = actions.add_parser(
        "retain",
        help="export each retention class's old months to CSV, verify, then delete them",
        description="For every table in a [retention.classes.*] class, the months of entries "
        "older than the class keeps are exported (one CSV file per table and month, a "
        "manifest.json and SHA256SUMS per month), each file read back and checked against "
        "the database (rows, content digest), and only then deleted (a month every table of "
        "which is due: its partition dropped whole). The side tables (rejected, table_status, "
        "closed gaps, alerts) go the same way, by their tables' classes; rows of no table or "
        "of unknown tables by [retention] unattributed_keep. Tables in no class are kept.",
    )
    retain.add_argument("--config", type=Path, required=True, metavar="FILE", help="archive.toml")
    retain.add_argument(
        "--dry-run",
        action="store_true",
        help="show what would be exported and deleted; change nothing",
    )
    retain.set_defaults(func=retain_command)


def run_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl archive run``: 0 after SIGINT/SIGTERM.

    A database that cannot be reached or migrated at start ends it with an ``ArchiveError``
    (exit 2, the reason printed); one lost later is reconnected to (docs/archive.md,
    "Database outages").
    """
    from controller.archive.backend import open_store
    from controller.archive.collector import tune_for_ingest
    from controller.archive.config import load_archive_settings
    from controller.archive.consumer import ArchiveConsumer
    from controller.archive.ingest import TableKeys
    from controller.archive.metrics import ArchiveMetrics

    settings = load_archive_settings(args.config)
    keys = TableKeys(
        settings.public_keys(args.config.parent),
        settings.mqtt.topic_prefix,
        unsigned=settings.unsigned_tables(),
    )

    async def main() -> None:
        store = await open_store(settings.database.url)
        consumer = ArchiveConsumer(settings, store, keys)
        metrics = ArchiveMetrics()
        metrics.watch_consumer(consumer)
        server = metrics.serve(settings.metrics)  # [metrics] port: /metrics
        tune_for_ingest()  # this process is the archive's (controller/archive/collector.py)
        task = asyncio.create_task(consumer.run(), name="archive")
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass
        finally:
            if server is not None:
                server.shutdown()
            await store.close()
            await consumer.db.close()  # PostgreSQL: the connection made again after a loss
            counts = ", ".join(f"{key} {value}" for key, value in sorted(consumer.counts.items()))
            print(f"archive stopped: {counts or 'nothing received'}")

    asyncio.run(main())
    return 0


def migrate_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl archive migrate``."""
    from controller.archive.config import load_archive_settings
    from controller.archive.sqlite_store import connect, is_sqlite_url, migrate_sqlite, sqlite_path
    from controller.archive.store import ArchiveStore

    url = args.database or load_archive_settings(args.config).database.url

    async def main() -> list[int]:
        from controller.archive.migrate import migrate

        if is_sqlite_url(url):
            path = sqlite_path(url)
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(path)
            try:
                return migrate_sqlite(conn)
            finally:
                conn.close()
        store = await ArchiveStore.open(url, run_migrations=False)
        try:
            return await migrate(store.conn)
        finally:
            await store.close()

    applied = asyncio.run(main())
    print(
        "applied migrations " + ", ".join(f"{v:04d}" for v in applied)
        if applied
        else "the archive schema is up to date"
    )
    return 0


def parse_time(text: str, option: str) -> datetime:
    """``text`` as an aware time: ISO-8601 with a zone, or ``YYYY-MM-DD`` (midnight UTC).

    Raises:
        ArchiveError: Neither, naming ``option``.
    """
    from controller.archive.errors import ArchiveError

    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ArchiveError(
            f"{option} {text!r} is not a time (ISO-8601 with a zone, e.g. "
            "2026-11-25T21:14:00Z, or a date 2026-11-25)",
            option=option,
        ) from None
    if len(text) == 10 and moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    if moment.tzinfo is None:
        raise ArchiveError(f"{option} {text!r} has no time zone (add Z or +HH:MM)", option=option)
    return moment


def report_period(
    start: str | None, end: str | None, *, now: datetime
) -> tuple[datetime, datetime]:
    """``archive report``'s period: ``--from`` and ``--to``, or today (UTC) by default.

    Without ``--from``: today from 00:00 UTC. Without ``--to``: the end of ``--from``'s day
    (UTC), so ``--from 2026-11-25`` alone is that day and no option at all is today.

    Raises:
        ArchiveError: A time that cannot be read (naming its option).
    """
    since = parse_time(start, "--from") if start is not None else None
    if since is None:
        since = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if end is not None:
        return since, parse_time(end, "--to")
    day = since.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return since, day + timedelta(days=1)


def report_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl archive report``."""
    from controller.archive import drift
    from controller.archive.config import load_archive_settings
    from controller.archive.report import format_report, table_report

    start, end = report_period(args.start, args.end, now=datetime.now(UTC))
    url = args.database or load_archive_settings(args.config).database.url
    found = asyncio.run(table_report(url, args.table, start, end))
    fits, notes = drift.compare(found)
    if args.format == "json":
        print(drift.report_json(found, fits, notes))
    elif args.format == "csv":
        print(drift.to_csv(found, fits, notes), end="")
    else:
        print(format_report(found) + drift.format_text(fits, notes))
    return 0


def verify_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl archive verify``: 0 when all is well, 1 otherwise.

    Each of the table's journals (its chains: docs/archive.md, "Journals") is checked on its
    own; ``--journal`` is checked against the chain of its own journal id.
    """
    from controller.archive.config import load_archive_settings
    from controller.archive.verify import chain_of_journal, verify_archive
    from controller.journal import Journal

    url = args.database or load_archive_settings(args.config).database.url
    table: str = args.table
    records, chains = asyncio.run(verify_archive(url, table))
    several = len(chains) > 1
    if several:
        print(f"archive, table {table}: {len(chains)} journals, each its own seq (chains)")
    for chain in chains:
        _print_check(chain, several=several)
    ok = all(chain.check.ok for chain in chains)
    if args.journal is not None:
        with Journal.open_readonly(args.journal) as journal:
            name = chain_of_journal(table, records, journal.journal_id)
            found = next((c for c in chains if c.check.table == name), chains[0])
            report = journal.verify(found.anchors)
        check = found.check
        agree = report.ok and report.anchors_checked == check.anchors
        print(
            f"journal {report.path}: {report.entries} entries (seq 1..{report.last_seq}); "
            f"{report.anchors_checked} of the archive's {check.anchors} chain heads checked"
            + (f" (chain {check.table})" if several else "")
            + ": "
            + ("the journal and the archive agree" if agree else "they DO NOT agree")
        )
        for problem in report.problems:
            where = f" (seq {problem.seq})" if problem.seq is not None else ""
            print(f"  problem: {problem.what}{where}")
        if report.last_seq != check.last_seq:
            print(f"  the archive holds up to seq {check.last_seq}, the journal {report.last_seq}")
        ok = ok and agree and report.last_seq == check.last_seq
    return 0 if ok else 1


def _print_check(chain: ChainCheck, *, several: bool) -> None:
    """One journal's (chain's) check, as ``archive verify`` prints it."""
    check, record = chain.check, chain.record
    name = f"table {check.table}"
    if several:
        journal = "no journal id (published before schema version 3)"
        if record is not None:
            journal = f"journal {record.journal}"
            if record.alert is not None:
                journal += f": {record.alert}"
        name = f"table {check.table.partition('/')[0]}, chain {check.table} ({journal})"
    print(
        f"archive, {name}: {check.entries} entries (seq 1..{check.last_seq}), "
        f"{check.rounds} rounds ({check.settled} settled, {check.voided} voided), "
        f"{check.anchors} chain heads, {check.open_gaps} open gaps"
    )
    print(
        f"  chain: {check.verified} verified, {check.provisional} provisional, "
        f"{check.unsigned} unsigned, {check.forged} forged copies rejected"
    )
    for problem in check.problems:
        print(f"  problem: {problem}")
    for note in check.notes:
        print(f"  note: {note}")


def retain_command(args: argparse.Namespace) -> int:
    """Entry point of ``tablectl archive retain``: 0, or 1 when a month could not be pruned."""
    from controller.archive.config import load_archive_settings
    from controller.archive.retention import format_run, retain
    from controller.logs import configure_logging

    configure_logging()  # log lines to standard error; the plan or outcome to standard output
    settings = load_archive_settings(args.config)
    export_dir = settings.retention.export_dir
    if not export_dir.is_absolute():
        export_dir = args.config.parent / export_dir
    now = datetime.now(UTC)
    partitions = asyncio.run(
        retain(settings.database.url, settings.retention, export_dir, now=now, dry_run=args.dry_run)
    )
    for line in format_run(partitions, now, export_dir):
        print(line)
    failed = any(item.outcome.startswith("failed") for part in partitions for item in part.items)
    return 1 if failed else 0
