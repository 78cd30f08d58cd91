"""Retention of the side tables: ``rejected``, ``table_status``, ``gaps`` and ``alerts``.

What each side table is to retention (:data:`SIDE_TABLES`: the time its rows are due by, an
extra condition a row must meet to be due, the columns of its export), the SQL that counts,
locks, exports, reads and deletes one table id's due rows of one UTC month, the content digest
an export is verified with, and the steps of a run over them: the plan (:func:`plan_side`: a
row takes the class of its ``table_id``, rows with no table id and ``rejected`` rows of a table
in no class ``unattributed_keep``), the export (:func:`export_side`) and the delete
(:func:`delete_side`). The run is :class:`controller.archive.retention.RetentionRun` (one run,
one advisory lock): after ``events``, it exports each due (side table, table id, month) to
``export_dir/<side table>_YYYY_MM/<table>.csv``, verifies the file and deletes the rows in one
``REPEATABLE READ`` transaction, as it does a table's month of ``events`` (docs/archive.md,
"Retention"). This module does not import :mod:`~controller.archive.retention` (which calls
it); the pieces both use are in :mod:`~controller.archive.retention_plan` and
:mod:`~controller.archive.retention_files`. ``gap_watermarks``, ``entry_keys`` and
``archive_migrations`` are not side tables: retention never touches them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from controller.archive.config import RetentionSettings
from controller.archive.retention_files import (
    Export,
    Manifest,
    check_count,
    compare,
    copy_to_file,
    csv_rows,
    file_name,
    read_back,
)
from controller.archive.retention_plan import (
    Action,
    Item,
    Keep,
    Partition,
    TableClass,
    class_of,
    next_month,
)

NO_TABLE_FILE = "_no_table.csv"
"""The export file of a month's rows that have no table id."""
CONTENT_SHA256 = (
    "sha256 over each row's fields as a JSON array of strings (NULL as \"\") and '\\n', "
    "in file order"
)
"""How a side table's ``content_sha256`` is computed (written into its manifest)."""
NO_TABLE = "(no table)"
"""How a plan shows a side table's rows that have no table id."""
UNATTRIBUTED = "unattributed"
"""The class name of rows ``unattributed_keep`` covers."""


# -- the side tables and their SQL ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SideTable:
    """A table beside ``events`` whose rows retention exports and deletes by month.

    Attributes:
        name: The table.
        time_column: The time a row is due by (the whole UTC month of it must be past).
        columns: The exported columns, in file order (``id`` first: rows go in ``id`` order).
        closed: An SQL condition a row must also meet to be due (``gaps``: closed ones only).
        strays_unattributed: Rows of a table in no class follow ``unattributed_keep`` (ids
            anyone can send); otherwise they are kept for ever, like that table's events.
    """

    name: str
    time_column: str
    columns: tuple[str, ...]
    closed: str = "true"
    strays_unattributed: bool = False

    def counts(self) -> sql.Composed:
        """Per table id and month (UTC) before ``%s``: rows meeting ``closed``, rows not."""
        return sql.SQL(
            "SELECT table_id, date_trunc('month', {time}, 'UTC'),"
            " count(*) FILTER (WHERE {closed}), count(*) FILTER (WHERE NOT ({closed}))"
            " FROM {table} WHERE {time} < %s GROUP BY 1, 2 ORDER BY 2, 1 NULLS FIRST"
        ).format(
            time=sql.Identifier(self.time_column),
            closed=sql.SQL(self.closed),
            table=sql.Identifier(self.name),
        )

    def where(self, table_id: str | None) -> sql.Composed:
        """The due rows of one table id (``None``: no table id) in ``[%(start)s, %(end)s)``."""
        table = sql.SQL("table_id IS NULL" if table_id is None else "table_id = %(table)s")
        return sql.SQL(
            "{time} >= %(start)s AND {time} < %(end)s AND {table} AND ({closed})"
        ).format(time=sql.Identifier(self.time_column), table=table, closed=sql.SQL(self.closed))

    def lock(self, table_id: str | None) -> sql.Composed:
        """Lock the due rows (no update can change them before the delete) and count them."""
        return sql.SQL(
            "SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {where} FOR UPDATE) AS locked"
        ).format(table=sql.Identifier(self.name), where=self.where(table_id))

    def copy(self, table_id: str | None) -> sql.Composed:
        """The export: the due rows as CSV with a header line, in ``id`` order."""
        return sql.SQL(
            "COPY (SELECT {columns} FROM {table} WHERE {where} ORDER BY id)"
            " TO STDOUT (FORMAT csv, HEADER true)"
        ).format(
            columns=sql.SQL(", ").join(map(sql.Identifier, self.columns)),
            table=sql.Identifier(self.name),
            where=self.where(table_id),
        )

    def read(self, table_id: str | None) -> sql.Composed:
        """The verifying read: each column as text (what ``COPY`` writes), then id and time."""
        return sql.SQL(
            "SELECT {columns}, id AS row_id, {time} AS row_at FROM {table} WHERE {where}"
            " ORDER BY row_id"
        ).format(
            columns=sql.SQL(", ").join(
                sql.SQL("{}::text").format(sql.Identifier(column)) for column in self.columns
            ),
            time=sql.Identifier(self.time_column),
            table=sql.Identifier(self.name),
            where=self.where(table_id),
        )

    def delete(self, table_id: str | None) -> sql.Composed:
        """Delete the due rows (in the export's snapshot: exactly the exported ones)."""
        return sql.SQL("DELETE FROM {table} WHERE {where}").format(
            table=sql.Identifier(self.name), where=self.where(table_id)
        )


SIDE_TABLES = (
    SideTable(
        "rejected",
        "received_at",
        ("id", "topic", "table_id", "seq", "reason", "category", "payload", "received_at"),
        strays_unattributed=True,
    ),
    SideTable(
        "table_status",
        "received_at",
        (
            "id",
            "table_id",
            "state",
            "session",
            "chain_head_seq",
            "chain_head_hash",
            "envelope",
            "received_at",
        ),
    ),
    SideTable(
        "gaps",
        "detected_at",
        (
            "id",
            "table_id",
            "from_seq",
            "to_seq",
            "detected_at",
            "replay_requested_at",
            "filled_at",
            "alerted_at",
            "missing",
        ),
        closed="filled_at IS NOT NULL OR alerted_at IS NOT NULL",
    ),
    SideTable("alerts", "raised_at", ("id", "table_id", "kind", "detail", "raised_at")),
)
"""The side tables retention prunes, in the order a run takes them."""


# -- content digests --------------------------------------------------------------------------


class RowDigest:
    """The content digest both sides compute: each row's fields as a JSON array, then LF.

    A CSV file cannot tell NULL from an empty string, so both count as ``""``.
    """

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.rows = 0

    def add(self, fields: Sequence[str | None]) -> None:
        """Add one row."""
        line = json.dumps(["" if field is None else field for field in fields], ensure_ascii=False)
        self.hash.update(line.encode() + b"\n")
        self.rows += 1

    def key(self) -> tuple[int, str]:
        """Rows and digest, to compare."""
        return self.rows, self.hash.hexdigest()


def file_digest(path: Path, columns: Sequence[str]) -> RowDigest:
    """The digest of an exported file as read back from disk (:func:`csv_rows`' errors)."""
    digest = RowDigest()
    for row in csv_rows(path, columns):
        digest.add(row)
    return digest


async def database_digest(
    conn: psycopg.AsyncConnection[Any],
    side: SideTable,
    table_id: str | None,
    params: dict[str, Any],
) -> tuple[RowDigest, tuple[int, str], tuple[int, str]]:
    """The due rows' digest read again from the database, and the first and last ``(id, time)``.

    A server-side cursor, streamed; call it in the export's transaction (the same snapshot).
    """
    digest = RowDigest()
    first = last = (0, "")
    width = len(side.columns)
    async with conn.cursor(name=f"retention_{side.name}") as cur:
        await cur.execute(side.read(table_id), params)
        async for row in cur:
            digest.add(row[:width])
            last = (int(row[width]), row[width + 1].astimezone(UTC).isoformat())
            if digest.rows == 1:
                first = last
    return digest, first, last


# -- the plan ---------------------------------------------------------------------------------


def side_class(
    side: SideTable, table_id: str | None, settings: RetentionSettings, now: datetime
) -> TableClass | None:
    """The class a side table's row of ``table_id`` follows.

    Its table's class; for a row with no table id, and a ``rejected`` row of a table in no
    class, ``unattributed_keep``. ``None``: kept for ever.
    """
    found = None if table_id is None else class_of(table_id, settings, now)
    if found is None and (table_id is None or side.strays_unattributed):
        keep = settings.unattributed_keep
        return None if keep is None else TableClass(UNATTRIBUTED, Keep.parse(keep))
    return found


@dataclass(slots=True)
class SideItem(Item):
    """One table id's rows of one month in a side table.

    Attributes:
        no_table: The rows have no table id (``table`` is then :data:`NO_TABLE`).
    """

    no_table: bool = False

    @property
    def table_id(self) -> str | None:
        """The rows' ``table_id``: ``None`` for rows with no table id."""
        return None if self.no_table else self.table


@dataclass(slots=True)
class SidePartition(Partition):
    """A side table's rows of one month (``name``: ``rejected_YYYY_MM``, its export folder).

    Not a partition of the database: its rows are deleted table by table, never dropped.

    Attributes:
        side: The side table.
    """

    side: SideTable = field(kw_only=True)

    @property
    def action(self) -> Action:
        """``delete`` (some table id due) or ``keep`` (none)."""
        return "delete" if any(item.due for item in self.items) else "keep"


async def plan_side(
    conn: psycopg.AsyncConnection[Any], settings: RetentionSettings, now: datetime
) -> list[SidePartition]:
    """The side tables' months that hold due rows, per side table oldest first.

    Only rows older than the shortest period's cutoff are read (nothing younger can be due).
    """
    periods = [entry.keep for entry in settings.classes.values()]
    if settings.unattributed_keep is not None:
        periods.append(settings.unattributed_keep)
    if not periods:
        return []
    horizon = max(Keep.parse(keep).cutoff(now) for keep in periods)
    found: list[SidePartition] = []
    for side in SIDE_TABLES:
        months: dict[datetime, SidePartition] = {}
        cursor = await conn.execute(side.counts(), (horizon,))
        for table_id, month, closed, still_open in await cursor.fetchall():
            start = month.astimezone(UTC)
            part = months.get(start)
            if part is None:
                name = f"{side.name}_{start:%Y_%m}"
                part = months[start] = SidePartition(name, start, next_month(start), side=side)
            table_class = side_class(side, table_id, settings, now)
            part.items += _side_items(
                part, table_id, table_class, now=now, closed=closed, still_open=still_open
            )
        found += [part for part in months.values() if part.action == "delete"]
    return found


def _side_items(
    part: SidePartition,
    table_id: str | None,
    table_class: TableClass | None,
    *,
    now: datetime,
    closed: int,
    still_open: int,
) -> list[Item]:
    """A table id's items in a side table's month: its closed rows, and its open ones (kept)."""
    due = table_class is not None and part.end <= table_class.keep.cutoff(now)
    label, no_table = (NO_TABLE, True) if table_id is None else (str(table_id), False)
    items: list[Item] = []
    if closed:
        items.append(SideItem(label, closed, table_class, due, no_table=no_table))
    if still_open:  # open gaps: never due
        items.append(
            SideItem(label, still_open, table_class, False, "kept (open)", no_table=no_table)
        )
    return items


# -- export and delete ------------------------------------------------------------------------


def side_file_name(table_id: str | None) -> str:
    """A side table's export file name: :func:`file_name`, or ``_no_table.csv``.

    ``_no_table.csv`` holds the rows with no table id; a table whose id is ``_no_table`` gets
    ``%5Fno_table.csv``.
    """
    if table_id is None:
        return NO_TABLE_FILE
    name = file_name(table_id)
    return "%5F" + name[1:] if name == NO_TABLE_FILE else name


def side_target(export_dir: Path, part: SidePartition, item: Item) -> tuple[Manifest, Path]:
    """The side table's month's manifest (``export_dir/<side table>_YYYY_MM``), the item's file."""
    manifest = Manifest(
        export_dir / part.name,
        {"table": part.side.name, "month": f"{part.start:%Y-%m}"},
        columns=part.side.columns,
        content=CONTENT_SHA256,
        order="id",
    )
    return manifest, manifest.next_path(item.table, side_file_name(item.table_id))


async def export_side(
    conn: psycopg.AsyncConnection[Any], part: SidePartition, item: Item, path: Path
) -> Export:
    """Write one table id's due rows of a side table's month to ``path`` and verify the file.

    As :func:`controller.archive.retention.export_rows` (inside a ``REPEATABLE READ``
    transaction); the content digest covers every column (:class:`RowDigest`), ``first`` and
    ``last`` are ``(id, time)``.

    Raises:
        RetentionError: The file cannot be written, or it does not hold the rows.
    """
    side, table_id = part.side, item.table_id
    params = _params(part, table_id)
    sha256 = await copy_to_file(conn, side.copy(table_id), params, path, item.table)
    expected, first, last = await database_digest(conn, side, table_id, params)
    found = read_back(path, item.table, lambda: file_digest(path, side.columns))
    compare(path, item.table, part.name, found=found.key(), expected=expected.key())
    return Export(path, expected.rows, sha256, expected.key()[1], first, last, frozenset())


async def delete_side(
    conn: psycopg.AsyncConnection[Any], part: SidePartition, item: Item, path: Path
) -> Export:
    """Lock the due rows, export them, delete them (the same predicate, one snapshot).

    Call inside the run's ``REPEATABLE READ`` transaction (the delete is the export's rows).

    Raises:
        RetentionError: The export fails, or another number of rows is locked or deleted.
    """
    await conn.execute("SET LOCAL bytea_output TO 'hex'")  # rejected.payload
    params = _params(part, item.table_id)
    cursor = await conn.execute(part.side.lock(item.table_id), params)
    locked = await cursor.fetchone()
    export = await export_side(conn, part, item, path)
    check_count("locked", locked[0] if locked else 0, export, item, part)
    cursor = await conn.execute(part.side.delete(item.table_id), params)
    check_count("deleted", cursor.rowcount, export, item, part)
    return export


def _params(part: SidePartition, table_id: str | None) -> dict[str, Any]:
    return {"start": part.start, "end": part.end, "table": table_id}
