"""The journal's ``meta`` table: small named values kept durably beside the entries.

``session`` (incremented by every :meth:`controller.journal.Journal.open`) and ``journal_id``
(the journal's identity, made once: issue 22) are the journal's own;
the orchestrator keeps its counters there (``round.next_no``, ``round.current``...).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path

from controller.errors import JournalError
from controller.journal.transaction import immediate


def read_meta(db: sqlite3.Connection, key: str) -> str | None:
    """A value of the ``meta`` table, or ``None`` (SQLite errors are the caller's to wrap)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def load_meta(db: sqlite3.Connection, key: str, *, path: Path) -> str | None:
    """A value of the ``meta`` table, or ``None``.

    Raises:
        JournalError: The read failed.
    """
    try:
        return read_meta(db, key)
    except sqlite3.Error as exc:
        raise JournalError(f"cannot read meta: {exc}", path=str(path), key=key) from exc


def check_meta_keys(values: Mapping[str, str]) -> None:
    """Refuse a write of a key the journal manages itself.

    Raises:
        JournalError: ``values`` holds such a key.
    """
    if "session" in values:
        raise JournalError("the session counter is managed by the journal", key="session")
    if "journal_id" in values:
        raise JournalError("the journal's identity is made once, by the journal", key="journal_id")


def store_metas(db: sqlite3.Connection, values: Mapping[str, str], *, path: Path) -> None:
    """Store several ``meta`` values in one durable transaction (one commit, not one each).

    Raises:
        JournalError: The write failed (nothing is stored).
    """
    try:
        with immediate(db):
            db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [(key, str(value)) for key, value in values.items()],
            )
    except sqlite3.Error as exc:
        raise JournalError(
            f"cannot write meta: {exc}", path=str(path), keys=",".join(values)
        ) from exc
