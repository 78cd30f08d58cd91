"""Retention's files: the exports, their checks and the month's manifest.

The file side of ``tablectl archive retain`` (docs/archive.md, "Retention"), the same for
``events``' partitions (:mod:`~controller.archive.retention`) and the side tables' months
(:mod:`~controller.archive.retention_side`): a ``COPY ... TO STDOUT`` written to an export
file (as ``.partial``, fsynced, renamed: :func:`copy_to_file`), the file read back and its
``(rows, content digest)`` compared with the database's (:func:`read_back`, :func:`compare`),
a locked or deleted count checked against the export (:func:`check_count`), and each month's
``manifest.json`` and ``SHA256SUMS`` (:class:`Manifest`). What a file holds and how its
content digest is computed are the callers'.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import psycopg
from psycopg import sql

from controller.archive.retention_plan import Item, Partition, RetentionError

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Export:
    """A verified export of one table's rows of one month.

    Attributes:
        path: The file.
        rows: Its rows (the database's count in the export's snapshot).
        sha256: The file's sha256.
        content_sha256: The rows' content digest (``events``: over each row's ``session``,
            ``seq`` and envelope text; a side table's: over every column).
        first: ``(seq, at)`` of the first row (a side table's: ``(id, time)``).
        last: ``(seq, at)`` of the last row (a side table's: ``(id, time)``).
        rounds: The round ids the rows belong to (none for a side table's).
    """

    path: Path
    rows: int
    sha256: str
    content_sha256: str
    first: tuple[int, str]
    last: tuple[int, str]
    rounds: frozenset[str]


def file_name(table: str) -> str:
    """A table's export file name (its id, percent-encoded where a file name could not hold it)."""
    return quote(table, safe="-_.~") + ".csv"


async def copy_to_file(
    conn: psycopg.AsyncConnection[Any], query: sql.Composed, params: Any, path: Path, table: str
) -> str:
    """Write a ``COPY ... TO STDOUT`` to ``path`` (as ``.partial``, fsynced, renamed); its sha256.

    Raises:
        RetentionError: The file cannot be written.
    """
    partial = path.with_name(path.name + ".partial")
    digest = hashlib.sha256()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as out:
            async with conn.cursor() as cur, cur.copy(query, params) as copy:
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
    return digest.hexdigest()


def csv_rows(path: Path, columns: Sequence[str]) -> Iterator[list[str]]:
    """The rows of an exported file, after its header, each checked to have ``columns``' width.

    Raises:
        csv.Error: A header other than ``columns``, or a line with another number of fields.
        OSError: The file cannot be read.
        UnicodeDecodeError: It is not UTF-8.
    """
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header != list(columns):
            raise csv.Error(f"the header is {header!r}, not {list(columns)!r}")
        for row in reader:
            if len(row) != len(columns):
                raise csv.Error(f"line {reader.line_num} has {len(row)} fields, not {len(columns)}")
            yield row


def read_back(path: Path, table: str, read: Callable[[], _T]) -> _T:
    """``read()`` the file just written.

    Raises:
        RetentionError: It cannot be read or parsed.
    """
    try:
        return read()
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RetentionError(
            f"cannot read the export {path} back: {exc}", file=str(path), table=table
        ) from exc


def compare(
    path: Path, table: str, where: str, *, found: tuple[int, str], expected: tuple[int, str]
) -> None:
    """Check a file's ``(rows, content digest)`` against the database's.

    Raises:
        RetentionError: They differ.
    """
    if found != expected:
        raise RetentionError(
            f"export {path} does not hold the database's rows ({found[0]} rows in the file, "
            f"{expected[0]} in {where}; content digests "
            f"{'equal' if found[1] == expected[1] else 'differ'})",
            file=str(path),
            table=table,
            partition=where,
        )


def check_count(what: str, count: int, export: Export, item: Item, part: Partition) -> None:
    """Check that ``count`` rows were locked or deleted: as many as were exported.

    Raises:
        RetentionError: Another count (the transaction is rolled back).
    """
    if count != export.rows:
        raise RetentionError(
            f"{what} {count} rows of {item.table} in {part.name}, "
            f"exported {export.rows}: rolled back",
            table=item.table,
            partition=part.name,
        )


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
        folder: ``export_dir/events_YYYY_MM`` (a side table's: ``export_dir/gaps_YYYY_MM``).
        heading: The manifest's first fields (``events``: ``partition``; a side table's:
            ``table``, ``month``).
        columns: The files' columns.
        content: How ``content_sha256`` is computed.
        order: What ``first_*`` and ``last_*`` name besides the time: ``seq`` or ``id``.
    """

    def __init__(
        self,
        folder: Path,
        heading: dict[str, str],
        *,
        columns: tuple[str, ...],
        content: str,
        order: str,
    ) -> None:
        self.folder = folder
        self.path = folder / "manifest.json"
        self.heading = heading
        self.columns = columns
        self.content = content
        self.order = order
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

    def next_path(self, table: str, base: str | None = None) -> Path:
        """Where ``table``'s next export goes.

        ``base`` (default: ``<table>.csv``), or ``<table>.N.csv`` when earlier runs' files of
        that table are listed (a file that is not listed is an unfinished run's: overwritten).
        """
        base = base or file_name(table)
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
                "table": item.table_id,
                "rows": export.rows,
                "sha256": export.sha256,
                "content_sha256": export.content_sha256,
                f"first_{self.order}": export.first[0],
                "first_at": export.first[1],
                f"last_{self.order}": export.last[0],
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
            **self.heading,
            "columns": list(self.columns),
            "content_sha256": self.content,
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
