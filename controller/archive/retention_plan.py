"""Retention's periods, classes and plan: what is due, and how a run's outcome prints.

The lowest layer of ``tablectl archive retain`` (docs/archive.md, "Retention"), shared by
``events`` and the side tables: a retention period (:class:`Keep`), the class a table falls in
(:func:`class_of`), one table's rows of one month and what a run does with them
(:class:`Item`), a month's tables (:class:`Partition`), the plan of ``events``' partitions
(:func:`plan`; the side tables' is :func:`controller.archive.retention_side.plan_side`), the
lines a run prints (:func:`format_run`), and the error every step raises
(:class:`RetentionError`). :mod:`~controller.archive.retention` runs the plan.
"""

from __future__ import annotations

import calendar
import fnmatch
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg import sql

from controller.archive.config import KEEP_PATTERN, RetentionSettings
from controller.archive.errors import ArchiveError

_PARTITION = re.compile(r"^events_(\d{4})_(\d{2})$")

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

    @property
    def table_id(self) -> str | None:
        """The rows' ``table_id`` (as listed in a manifest)."""
        return self.table


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
    return start, next_month(start)


def next_month(start: datetime) -> datetime:
    """The first moment (UTC) of the month after the one ``start`` begins."""
    return datetime(start.year + start.month // 12, start.month % 12 + 1, 1, tzinfo=UTC)


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


# -- outcomes ---------------------------------------------------------------------------------


def would(part: Partition, item: Item) -> str:
    """What a dry run says retention would do with ``item``."""
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
