"""Retention: each table class's old months exported to CSV, verified, and only then deleted.

``tablectl archive retain`` (docs/archive.md, "Retention"). The ``events`` table is
partitioned by month (``events_YYYY_MM``, UTC); a table's entries of a month are due when the
whole month lies further back than its class's ``keep`` (``[retention.classes.*]``). A table in
no class is never deleted. For each due (table, month):

1. **Export**: the rows, ordered by ``seq``, with ``COPY ... TO STDOUT (FORMAT csv)`` into
   ``export_dir/events_YYYY_MM/<table>.csv`` (written as ``.partial``, fsynced, renamed).
2. **Verify**: the file is read back from disk and parsed; its row count and a content digest
   (sha256 over each row's session, seq and envelope) must equal a second, independent read of
   the database rows in the same snapshot. The file's sha256 goes into ``manifest.json`` and
   ``SHA256SUMS`` (``sha256sum -c SHA256SUMS`` checks the folder).
3. **Delete**: in the same ``REPEATABLE READ`` transaction as the export, so the ``DELETE``
   removes exactly the rows the snapshot exported (an entry that arrives meanwhile, a late
   replay of that month, is not in the snapshot and stays for the next run). When every table
   in a partition is due, the partition is **dropped whole** instead (``DETACH`` + ``DROP``,
   under a lock on ``events`` taken ``NOWAIT`` between the ingest's transactions, tried for
   ``lock_timeout_seconds``, after checking that it holds exactly the rows exported); if the
   lock is not had in time or rows arrived, the rows are deleted table by table as above.

``rounds`` rows are folds of ``events``: a round whose entries are all gone loses its row.
``entry_keys`` is kept (keys and digests only, no game content), so a late copy of a deleted
entry stays a duplicate and a restarted archive sees no false gap. Nothing is deleted that is
not in a verified file named by the manifest; a failure at any step rolls the month back.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import csv
import fnmatch
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import psycopg
import structlog
from psycopg import sql

from controller.archive.config import KEEP_PATTERN, RetentionSettings
from controller.archive.errors import ArchiveError

log = structlog.get_logger("archive.retention")

RETENTION_LOCK = 0x7AB1EC72
"""The session advisory lock one retention run holds (two runs never overlap)."""
_PARTITION = re.compile(r"^events_(\d{4})_(\d{2})$")
CSV_COLUMNS = (
    "table_id",
    "session",
    "seq",
    "at",
    "round_id",
    "kind",
    "topic",
    "delayed",
    "replayed",
    "signed",
    "envelope",
    "received_at",
)
"""The columns of an exported file, in order (a header line names them)."""

Action = Literal["keep", "delete", "drop"]


class RetentionError(ArchiveError):
    """An export that cannot be written or verified, a lock held, a plan that cannot run."""


# -- periods and classes ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Keep:
    """A retention period.

    Attributes:
        count: How many units.
        unit: ``d`` days, ``w`` weeks, ``m`` calendar months, ``y`` years.
    """

    count: int
    unit: str

    @classmethod
    def parse(cls, text: str) -> Keep:
        """``5y``, ``18m``, ``12w``, ``90d``.

        Raises:
            RetentionError: Not one of those forms.
        """
        match = KEEP_PATTERN.match(text)
        if match is None:
            raise RetentionError(f"{text!r} is not a retention period (e.g. 5y, 18m, 90d)")
        return cls(int(match.group(1)), match.group(2))

    def __str__(self) -> str:
        return f"{self.count}{self.unit}"

    def cutoff(self, now: datetime) -> datetime:
        """The oldest moment still kept at ``now`` (entries before it may go).

        Months and years are calendar ones: 3 months before 31 May is 28 (or 29) February.
        """
        if self.unit in {"d", "w"}:
            return now - timedelta(days=self.count * (7 if self.unit == "w" else 1))
        months = self.count * (12 if self.unit == "y" else 1)
        index = now.year * 12 + now.month - 1 - months
        year, month = divmod(index, 12)
        day = min(now.day, calendar.monthrange(year, month + 1)[1])
        return now.replace(year=year, month=month + 1, day=day)


@dataclass(frozen=True, slots=True)
class TableClass:
    """The retention class a table falls in.

    Attributes:
        name: The class's name in the config.
        keep: Its period.
    """

    name: str
    keep: Keep


def class_of(table: str, settings: RetentionSettings, now: datetime) -> TableClass | None:
    """The class of ``table``: of the classes whose patterns match it, the longest period.

    ``None``: no class matches (the table is kept for ever).
    """
    found: list[TableClass] = [
        TableClass(name, Keep.parse(entry.keep))
        for name, entry in sorted(settings.classes.items())
        if any(fnmatch.fnmatchcase(table, pattern) for pattern in entry.tables)
    ]
    if not found:
        return None
    return min(found, key=lambda c: c.keep.cutoff(now))


# -- the plan ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Item:
    """One table's rows in one monthly partition, and what retention does with them.

    Attributes:
        table: The table id.
        rows: Its rows in the partition (when planned).
        table_class: Its retention class, if any.
        due: The whole month is older than the class's period.
        outcome: What happened (filled by a run): ``exported``, ``deleted``, ``dropped``,
            ``kept``, ``failed: ...``.
        file: The exported file, once written.
        sha256: The file's sha256.
    """

    table: str
    rows: int
    table_class: TableClass | None
    due: bool
    outcome: str = ""
    file: Path | None = None
    sha256: str = ""


@dataclass(slots=True)
class Partition:
    """A monthly partition of ``events`` and its tables.

    Attributes:
        name: ``events_YYYY_MM``.
        start: The month's first moment (UTC).
        end: The next month's first moment.
        items: Its tables.
    """

    name: str
    start: datetime
    end: datetime
    items: list[Item] = field(default_factory=list)

    @property
    def action(self) -> Action:
        """``drop`` (every table due), ``delete`` (some) or ``keep`` (none)."""
        due = [item.due for item in self.items]
        if due and all(due):
            return "drop"
        return "delete" if any(due) else "keep"


def month_of(name: str) -> tuple[datetime, datetime] | None:
    """The month a partition's name covers, ``None`` for a name not ``events_YYYY_MM``."""
    match = _PARTITION.match(name)
    if match is None:
        return None
    year, month = int(match.group(1)), int(match.group(2))
    if not 1 <= month <= 12:
        return None
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


async def plan(
    conn: psycopg.AsyncConnection[Any], settings: RetentionSettings, now: datetime
) -> list[Partition]:
    """The partitions that hold due rows, oldest first, each with its tables and counts.

    Only partitions older than the shortest period are read (nothing younger can be due).
    """
    classes = [Keep.parse(entry.keep) for entry in settings.classes.values()]
    if not classes:
        return []
    horizon = max(keep.cutoff(now) for keep in classes)
    cursor = await conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = 'events'::regclass ORDER BY c.relname"
    )
    partitions: list[Partition] = []
    for (name,) in await cursor.fetchall():
        month = month_of(str(name))
        if month is None or month[1] > horizon:
            continue
        part = Partition(str(name), *month)
        rows = await conn.execute(
            sql.SQL("SELECT table_id, count(*) FROM {} GROUP BY table_id ORDER BY table_id").format(
                sql.Identifier(part.name)
            )
        )
        for table, count in await rows.fetchall():
            table_class = class_of(str(table), settings, now)
            due = table_class is not None and part.end <= table_class.keep.cutoff(now)
            part.items.append(Item(str(table), int(count), table_class, due))
        if any(item.due for item in part.items):
            partitions.append(part)
    return partitions


# -- export and verification ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Export:
    """A verified export of one table's rows of one month.

    Attributes:
        path: The file.
        rows: Its rows (the database's count in the export's snapshot).
        sha256: The file's sha256.
        content_sha256: sha256 over each row's ``session``, ``seq`` and envelope text.
        first: ``(seq, at)`` of the first row.
        last: ``(seq, at)`` of the last row.
        rounds: The round ids the rows belong to.
    """

    path: Path
    rows: int
    sha256: str
    content_sha256: str
    first: tuple[int, str]
    last: tuple[int, str]
    rounds: frozenset[str]


class _Digest:
    """The content digest both sides compute: a row as session, tab, seq, tab, envelope, LF."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.rows = 0

    def add(self, session: object, seq: object, envelope: str) -> None:
        self.hash.update(f"{session}\t{seq}\t{envelope}\n".encode())
        self.rows += 1


def file_name(table: str) -> str:
    """A table's export file name (its id, percent-encoded where a file name could not hold it)."""
    return quote(table, safe="-_.~") + ".csv"


def _rows_query(partition: str) -> sql.Composed:
    return sql.SQL(
        "SELECT table_id, session, seq, at, round_id, kind, topic, delayed, replayed, signed,"
        " envelope, received_at FROM {} WHERE table_id = %s ORDER BY seq, session"
    ).format(sql.Identifier(partition))


async def export_rows(
    conn: psycopg.AsyncConnection[Any], partition: str, table: str, path: Path
) -> Export:
    """Write one table's rows of ``partition`` to ``path`` and verify the file.

    Call inside a ``REPEATABLE READ`` transaction: the ``COPY`` and the verifying read see the
    same snapshot.

    Raises:
        RetentionError: The file cannot be written, or it does not hold the rows.
    """
    partial = path.with_name(path.name + ".partial")
    query = sql.SQL("COPY ({}) TO STDOUT (FORMAT csv, HEADER true)").format(_rows_query(partition))
    digest = hashlib.sha256()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as out:
            async with conn.cursor() as cur, cur.copy(query, (table,)) as copy:
                async for chunk in copy:
                    data = bytes(chunk)
                    out.write(data)
                    digest.update(data)
            out.flush()
            os.fsync(out.fileno())
        partial.replace(path)
        _fsync_dir(path.parent)
    except OSError as exc:
        raise RetentionError(
            f"cannot write the export {path}: {exc.strerror or exc}", file=str(path), table=table
        ) from exc
    expected, rounds, first, last = await _database_digest(conn, partition, table)
    try:
        found = _file_digest(path)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RetentionError(
            f"cannot read the export {path} back: {exc}", file=str(path), table=table
        ) from exc
    if (found.rows, found.hash.hexdigest()) != (expected.rows, expected.hash.hexdigest()):
        raise RetentionError(
            f"export {path} does not hold the database's rows ({found.rows} rows in the file, "
            f"{expected.rows} in {partition}; content digests "
            f"{'equal' if found.hash.digest() == expected.hash.digest() else 'differ'})",
            file=str(path),
            table=table,
            partition=partition,
        )
    return Export(
        path,
        expected.rows,
        digest.hexdigest(),
        expected.hash.hexdigest(),
        first,
        last,
        frozenset(rounds),
    )


async def _database_digest(
    conn: psycopg.AsyncConnection[Any], partition: str, table: str
) -> tuple[_Digest, set[str], tuple[int, str], tuple[int, str]]:
    """The rows' digest read again from the database (a server-side cursor, streamed)."""
    digest = _Digest()
    rounds: set[str] = set()
    first = last = (0, "")
    query = sql.SQL(
        "SELECT session, seq, envelope::text, round_id, at FROM {} WHERE table_id = %s"
        " ORDER BY seq, session"
    ).format(sql.Identifier(partition))
    async with conn.cursor(name=f"retention_{partition}") as cur:
        await cur.execute(query, (table,))
        async for session, seq, envelope, round_id, at in cur:
            digest.add(session, seq, envelope)
            if round_id is not None:
                rounds.add(str(round_id))
            last = (int(seq), at.astimezone(UTC).isoformat())
            if digest.rows == 1:
                first = last
    return digest, rounds, first, last


def _file_digest(path: Path) -> _Digest:
    """The digest of an exported file as read back from disk."""
    digest = _Digest()
    session_at = CSV_COLUMNS.index("session")
    seq_at = CSV_COLUMNS.index("seq")
    envelope_at = CSV_COLUMNS.index("envelope")
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header != list(CSV_COLUMNS):
            raise RetentionError(f"export {path} has the header {header!r}", file=str(path))
        for row in reader:
            if len(row) != len(CSV_COLUMNS):
                raise RetentionError(
                    f"export {path} line {reader.line_num} has {len(row)} fields, "
                    f"not {len(CSV_COLUMNS)}",
                    file=str(path),
                )
            digest.add(row[session_at], row[seq_at], row[envelope_at])
    return digest


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the manifest -----------------------------------------------------------------------------


class Manifest:
    """``manifest.json`` and ``SHA256SUMS`` of one month's export folder.

    Args:
        folder: ``export_dir/events_YYYY_MM``.
        partition: The partition's name.
    """

    def __init__(self, folder: Path, partition: str) -> None:
        self.folder = folder
        self.path = folder / "manifest.json"
        self.partition = partition
        self.files: list[dict[str, Any]] = []
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self.files = list(data["files"])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise RetentionError(
                    f"cannot read the manifest {self.path}: {exc}", file=str(self.path)
                ) from exc

    def listed(self) -> set[str]:
        """The file names the manifest lists."""
        return {str(entry["file"]) for entry in self.files}

    def next_path(self, table: str) -> Path:
        """Where ``table``'s next export goes.

        ``<table>.csv``, or ``<table>.N.csv`` when earlier runs' files of that table are
        listed (a file that is not listed is an unfinished run's: overwritten).
        """
        base = file_name(table)
        listed = self.listed()
        name, n = base, 1
        while name in listed:
            n += 1
            name = f"{base[: -len('.csv')]}.{n}.csv"
        return self.folder / name

    def add(self, item: Item, export: Export, how: str, now: datetime) -> None:
        """List an export (``how``: ``rows deleted`` or ``partition dropped``)."""
        assert item.table_class is not None  # only due items are exported
        self.files.append(
            {
                "file": export.path.name,
                "table": item.table,
                "rows": export.rows,
                "sha256": export.sha256,
                "content_sha256": export.content_sha256,
                "first_seq": export.first[0],
                "first_at": export.first[1],
                "last_seq": export.last[0],
                "last_at": export.last[1],
                "class": item.table_class.name,
                "keep": str(item.table_class.keep),
                "exported_at": now.isoformat(),
                "deleted": how,
            }
        )

    def write(self) -> None:
        """Write both files (each to a temporary name, fsynced, renamed)."""
        body = {
            "partition": self.partition,
            "columns": list(CSV_COLUMNS),
            "content_sha256": "sha256 over each row's 'session\\tseq\\tenvelope\\n', in file order",
            "files": self.files,
        }
        sums = "".join(f"{entry['sha256']}  {entry['file']}\n" for entry in self.files)
        for path, text in (
            (self.path, json.dumps(body, indent=2, ensure_ascii=False) + "\n"),
            (self.folder / "SHA256SUMS", sums),
        ):
            partial = path.with_name(path.name + ".partial")
            with partial.open("w", encoding="utf-8") as out:
                out.write(text)
                out.flush()
                os.fsync(out.fileno())
            partial.replace(path)
        _fsync_dir(self.folder)


# -- a run ------------------------------------------------------------------------------------


@dataclass(slots=True)
class RetentionRun:
    """One run of retention over an archive database.

    Args:
        conn: An autocommit connection (each month is its own transaction).
        settings: The ``[retention]`` config.
        export_dir: Where the exports go (absolute, or relative to the working directory).
        now: The run's time (UTC).
    """

    conn: psycopg.AsyncConnection[Any]
    settings: RetentionSettings
    export_dir: Path
    now: datetime

    async def run(self, *, dry_run: bool = False) -> list[Partition]:
        """Export, verify and delete every due (table, month); the partitions with outcomes.

        Raises:
            RetentionError: Another retention run holds the lock.
        """
        cursor = await self.conn.execute("SELECT pg_try_advisory_lock(%s)", (RETENTION_LOCK,))
        row = await cursor.fetchone()
        if not row or not row[0]:
            raise RetentionError("another retention run is in progress (advisory lock held)")
        try:
            partitions = await plan(self.conn, self.settings, self.now)
            for part in partitions:
                if dry_run:
                    for item in part.items:
                        item.outcome = _would(part, item)
                    continue
                await self._partition(part)
            return partitions
        finally:
            # A connection that broke has released its session lock already.
            with contextlib.suppress(psycopg.Error):
                await self.conn.execute("SELECT pg_advisory_unlock(%s)", (RETENTION_LOCK,))

    async def _partition(self, part: Partition) -> None:
        for item in part.items:
            if not item.due:
                item.outcome = "kept"
        if part.action == "drop" and await self._drop(part):
            return
        for item in part.items:
            if item.due:
                await self._delete(part, item)

    async def _drop(self, part: Partition) -> bool:
        """Export every table, then drop the partition whole; False: fall back to deleting."""
        manifest = Manifest(self.export_dir / part.name, part.name)
        exports: list[tuple[Item, Export]] = []
        try:
            async with self.conn.transaction():
                await self.conn.execute(
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
                )
                await self.conn.execute("SET LOCAL TimeZone TO 'UTC'")
                for item in part.items:
                    path = manifest.next_path(item.table)
                    export = await export_rows(self.conn, part.name, item.table, path)
                    exports.append((item, export))
            dropped = await self._drop_exported(part, exports, manifest)
        except (RetentionError, psycopg.Error, OSError) as exc:
            log.error("dropping the partition failed", partition=part.name, error=str(exc))
            return False
        if not dropped:
            return False
        for item, export in exports:
            self._done(item, export, "exported, partition dropped")
        log.info("partition dropped", partition=part.name, tables=len(exports))
        return True

    async def _drop_exported(
        self, part: Partition, exports: list[tuple[Item, Export]], manifest: Manifest
    ) -> bool:
        """Drop the partition if it holds exactly the exported rows; False: it did not.

        ``LOCK ... NOWAIT``, tried again every 50 ms for ``lock_timeout_seconds``: the lock
        is taken only between the ingest's transactions, never queued behind one (a queued
        ``ACCESS EXCLUSIVE`` request would hold up every new ingest transaction, and could
        close a deadlock cycle with two archive instances writing the same keys).
        """
        deadline = time.monotonic() + self.settings.lock_timeout_seconds
        while True:
            try:
                async with self.conn.transaction():
                    await self.conn.execute("SET LOCAL lock_timeout = '1s'")
                    await self.conn.execute("LOCK TABLE events IN ACCESS EXCLUSIVE MODE NOWAIT")
                    if await self._counts(part.name) != {i.table: e.rows for i, e in exports}:
                        log.warning("rows arrived since the export", partition=part.name)
                        return False
                    name = sql.Identifier(part.name)
                    await self.conn.execute(
                        sql.SQL("ALTER TABLE events DETACH PARTITION {}").format(name)
                    )
                    await self.conn.execute(sql.SQL("DROP TABLE {}").format(name))
                    for item, export in exports:
                        await self._forget_rounds(item.table, export.rounds)
                        manifest.add(item, export, "partition dropped", self.now)
                    manifest.write()
                return True
            except psycopg.errors.LockNotAvailable:
                if time.monotonic() >= deadline:
                    log.warning("partition busy: deleting its rows instead", partition=part.name)
                    return False
                await asyncio.sleep(0.05)

    async def _delete(self, part: Partition, item: Item) -> None:
        """Export one table's rows of a month and delete exactly them, in one snapshot."""
        manifest = Manifest(self.export_dir / part.name, part.name)
        path = manifest.next_path(item.table)
        try:
            async with self.conn.transaction():
                await self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                await self.conn.execute("SET LOCAL TimeZone TO 'UTC'")
                export = await export_rows(self.conn, part.name, item.table, path)
                cursor = await self.conn.execute(
                    sql.SQL("DELETE FROM {} WHERE table_id = %s").format(sql.Identifier(part.name)),
                    (item.table,),
                )
                if cursor.rowcount != export.rows:
                    raise RetentionError(
                        f"deleted {cursor.rowcount} rows of {item.table} in {part.name}, "
                        f"exported {export.rows}: rolled back",
                        table=item.table,
                        partition=part.name,
                    )
                await self._forget_rounds(item.table, export.rounds)
                manifest.add(item, export, "rows deleted", self.now)
                manifest.write()
        except (RetentionError, psycopg.Error, OSError) as exc:
            item.outcome = f"failed, nothing deleted: {exc}"
            log.error("retention failed", partition=part.name, table=item.table, error=str(exc))
            return
        self._done(item, export, "exported, rows deleted")

    async def _counts(self, partition: str) -> dict[str, int]:
        cursor = await self.conn.execute(
            sql.SQL("SELECT table_id, count(*) FROM {} GROUP BY table_id").format(
                sql.Identifier(partition)
            )
        )
        return {str(t): int(n) for t, n in await cursor.fetchall()}

    async def _forget_rounds(self, table: str, rounds: frozenset[str]) -> None:
        """Delete the ``rounds`` rows of these rounds that have no entry left."""
        if rounds:
            await self.conn.execute(
                "DELETE FROM rounds r WHERE r.table_id = %s AND r.round_id = ANY(%s)"
                " AND NOT EXISTS (SELECT 1 FROM events e"
                " WHERE e.table_id = r.table_id AND e.round_id = r.round_id)",
                (table, sorted(rounds)),
            )

    @staticmethod
    def _done(item: Item, export: Export, outcome: str) -> None:
        item.outcome = outcome
        item.file = export.path
        item.sha256 = export.sha256
        log.info(
            "retention exported and deleted",
            table=item.table,
            file=str(export.path),
            rows=export.rows,
            sha256=export.sha256,
        )


def _would(part: Partition, item: Item) -> str:
    if not item.due:
        return "kept"
    return (
        "would export, then drop the partition"
        if part.action == "drop"
        else ("would export, then delete the rows")
    )


def format_run(partitions: list[Partition], now: datetime, export_dir: Path) -> Iterator[str]:
    """The lines ``tablectl archive retain`` prints."""
    yield f"retention at {now.isoformat()}, exports in {export_dir}"
    if not partitions:
        yield "nothing is due"
        return
    for part in partitions:
        for item in part.items:
            klass = (
                f"{item.table_class.name} (keep {item.table_class.keep})"
                if item.table_class
                else "no class (kept for ever)"
            )
            line = f"{part.name}  {item.table:<12} {item.rows:>9} rows  {klass:<28} {item.outcome}"
            if item.file is not None:
                line += f"  {item.file.name} sha256 {item.sha256}"
            yield line


async def retain(
    url: str,
    settings: RetentionSettings,
    export_dir: Path,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
) -> list[Partition]:
    """Connect to the archive at ``url`` and run retention once (see the module's text).

    Raises:
        ArchiveError: The database cannot be reached, or failed outside a month's work
            (which is reported in the month's outcome instead).
        RetentionError: Another run holds the lock.
    """
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    except psycopg.Error as exc:
        raise ArchiveError(f"cannot connect to the archive database: {exc}") from exc
    async with conn:
        try:
            return await RetentionRun(conn, settings, export_dir, moment).run(dry_run=dry_run)
        except psycopg.Error as exc:  # e.g. a database the archive never migrated
            raise ArchiveError(f"retention stopped: {exc}") from exc
