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

The side tables ``rejected``, ``table_status``, ``gaps`` and ``alerts`` follow in the same run
(:mod:`~controller.archive.retention_side` declares them and plans, exports and deletes
their months): a row takes the class of its
``table_id`` and is due by the month of its time column (``gaps``: once closed); rows with no
table id, and ``rejected`` rows of a table in no class, take ``unattributed_keep`` (unset: kept
for ever). Each due (side table, table id, month) goes to
``export_dir/<side table>_YYYY_MM/<table>.csv`` (``_no_table.csv``) and is deleted the way
step 3 deletes a table's month of ``events``; side tables are never dropped whole.

This module exports and deletes or drops ``events``' partitions (:func:`export_rows`) and runs
retention (:class:`RetentionRun`, :func:`retain`). Periods, classes, the plan and the lines a
run prints (:func:`format_run`) are in :mod:`~controller.archive.retention_plan`; the export
files' writing, checks and manifests in :mod:`~controller.archive.retention_files`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import structlog
from psycopg import sql

from controller.archive.config import RetentionSettings
from controller.archive.errors import ArchiveError
from controller.archive.retention_files import (
    Export,
    Manifest,
    check_count,
    compare,
    copy_to_file,
    csv_rows,
    read_back,
)
from controller.archive.retention_plan import (
    Item,
    Keep,
    Partition,
    RetentionError,
    TableClass,
    class_of,
    format_run,
    plan,
    would,
)
from controller.archive.retention_side import SidePartition, delete_side, plan_side, side_target

__all__ = [
    "CONTENT_SHA256",
    "CSV_COLUMNS",
    "RETENTION_LOCK",
    "Item",
    "Keep",
    "Partition",
    "RetentionError",
    "RetentionRun",
    "TableClass",
    "class_of",
    "export_rows",
    "format_run",
    "plan",
    "retain",
]

log = structlog.get_logger("archive.retention")

RETENTION_LOCK = 0x7AB1EC72
"""The session advisory lock one retention run holds (two runs never overlap)."""
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
CONTENT_SHA256 = "sha256 over each row's 'session\\tseq\\tenvelope\\n', in file order"
"""How an events file's ``content_sha256`` is computed (written into its manifest)."""


# -- export and verification ------------------------------------------------------------------


class _Digest:
    """The content digest both sides compute: a row as session, tab, seq, tab, envelope, LF."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.rows = 0

    def add(self, session: object, seq: object, envelope: str) -> None:
        self.hash.update(f"{session}\t{seq}\t{envelope}\n".encode())
        self.rows += 1


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
    query = sql.SQL("COPY ({}) TO STDOUT (FORMAT csv, HEADER true)").format(_rows_query(partition))
    sha256 = await copy_to_file(conn, query, (table,), path, table)
    expected, rounds, first, last = await _database_digest(conn, partition, table)
    found = read_back(path, table, lambda: _file_digest(path))
    compare(
        path,
        table,
        partition,
        found=(found.rows, found.hash.hexdigest()),
        expected=(expected.rows, expected.hash.hexdigest()),
    )
    return Export(
        path,
        expected.rows,
        sha256,
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
    """The digest of an exported file as read back from disk (:func:`csv_rows`' errors)."""
    digest = _Digest()
    session_at = CSV_COLUMNS.index("session")
    seq_at = CSV_COLUMNS.index("seq")
    envelope_at = CSV_COLUMNS.index("envelope")
    for row in csv_rows(path, CSV_COLUMNS):
        digest.add(row[session_at], row[seq_at], row[envelope_at])
    return digest


def _manifest(export_dir: Path, part: Partition) -> Manifest:
    """A partition's manifest (``export_dir/events_YYYY_MM``)."""
    return Manifest(
        export_dir / part.name,
        {"partition": part.name},
        columns=CSV_COLUMNS,
        content=CONTENT_SHA256,
        order="seq",
    )


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

        ``events``' partitions first, then the side tables' months (:class:`SidePartition`).

        Raises:
            RetentionError: Another retention run holds the lock.
        """
        cursor = await self.conn.execute("SELECT pg_try_advisory_lock(%s)", (RETENTION_LOCK,))
        row = await cursor.fetchone()
        if not row or not row[0]:
            raise RetentionError("another retention run is in progress (advisory lock held)")
        try:
            partitions: list[Partition] = [
                *await plan(self.conn, self.settings, self.now),
                *await plan_side(self.conn, self.settings, self.now),
            ]
            for part in partitions:
                if dry_run:
                    for item in part.items:
                        item.outcome = item.outcome or would(part, item)
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
                item.outcome = item.outcome or "kept"
        if part.action == "drop" and await self._drop(part):
            return
        for item in part.items:
            if item.due:
                await self._delete(part, item)

    async def _drop(self, part: Partition) -> bool:
        """Export every table, then drop the partition whole; False: fall back to deleting."""
        manifest = _manifest(self.export_dir, part)
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
        manifest, path = self._target(part, item)
        try:
            async with self.conn.transaction():
                await self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                await self.conn.execute("SET LOCAL TimeZone TO 'UTC'")
                if isinstance(part, SidePartition):
                    export = await delete_side(self.conn, part, item, path)
                else:
                    export = await self._delete_events(part, item, path)
                manifest.add(item, export, "rows deleted", self.now)
                manifest.write()
        except (RetentionError, psycopg.Error, OSError) as exc:
            item.outcome = f"failed, nothing deleted: {exc}"
            log.error("retention failed", partition=part.name, table=item.table, error=str(exc))
            return
        self._done(item, export, "exported, rows deleted")

    def _target(self, part: Partition, item: Item) -> tuple[Manifest, Path]:
        """The month's manifest and where the item's file goes."""
        if isinstance(part, SidePartition):
            return side_target(self.export_dir, part, item)
        manifest = _manifest(self.export_dir, part)
        return manifest, manifest.next_path(item.table)

    async def _delete_events(self, part: Partition, item: Item, path: Path) -> Export:
        export = await export_rows(self.conn, part.name, item.table, path)
        cursor = await self.conn.execute(
            sql.SQL("DELETE FROM {} WHERE table_id = %s").format(sql.Identifier(part.name)),
            (item.table,),
        )
        check_count("deleted", cursor.rowcount, export, item, part)
        await self._forget_rounds(item.table, export.rounds)
        return export

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
