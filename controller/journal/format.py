"""The journal's on-disk format: the SQLite schema (migrations), stored times, the hash chain.

Nothing here may change for a released schema version: a new version appends a migration.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime

from controller.errors import JournalError

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
TIME_TEXT = re.compile(
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{6}Z\Z"
)
"""What :func:`format_time` writes (checked by :meth:`Journal.verify`)."""

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first entry of a journal."""


def entry_hash(
    prev_hash: str,
    *,
    seq: int,
    session: int,
    round_id: str | None,
    kind: str,
    happened_at: str,
    body: str,
) -> str:
    """The chained hash of one entry: ``sha256(prev_hash || canonical(entry))``, in hex.

    ``canonical`` is the compact JSON array ``[seq, session, round_id, kind, happened_at,
    body]`` (UTF-8), where ``happened_at`` and ``body`` are the exact texts stored in the file.
    ``delivered_at`` is not covered: it changes after the append.

    Args:
        prev_hash: The previous entry's hash (hex), :data:`GENESIS_HASH` for ``seq`` 1.
        seq: The entry's sequence number.
        session: The session that appended it.
        round_id: Its round, or ``None``.
        kind: Its kind.
        happened_at: The stored time text.
        body: The stored JSON text of the body.
    """
    canonical = json.dumps(
        [seq, session, round_id, kind, happened_at, body], separators=(",", ":"), ensure_ascii=False
    )
    digest = hashlib.sha256(bytes.fromhex(prev_hash))
    digest.update(canonical.encode("utf-8"))
    return digest.hexdigest()


def _chain_existing_entries(db: sqlite3.Connection) -> None:
    """Migration 2: compute the hash chain of the entries written before it existed."""
    prev = GENESIS_HASH
    after = 0
    while True:
        rows = db.execute(
            "SELECT seq, session, round_id, kind, happened_at, body FROM entries "
            "WHERE seq > ? ORDER BY seq LIMIT 5000",
            (after,),
        ).fetchall()
        if not rows:
            return
        updates = []
        for seq, session, round_id, kind, happened_at, body in rows:
            prev = entry_hash(
                prev,
                seq=seq,
                session=session,
                round_id=round_id,
                kind=kind,
                happened_at=happened_at,
                body=body,
            )
            updates.append((prev, seq))
            after = seq
        db.executemany("UPDATE entries SET hash = ? WHERE seq = ?", updates)


JOURNAL_ID_KEY = "journal_id"
"""The ``meta`` key of the journal's identity (:func:`new_journal_id`, made by migration 3)."""

JOURNAL_ID_TEXT = re.compile(r"[0-9a-f]{32}\Z")
"""What a journal id is: 32 lowercase hex digits (128 random bits)."""

SHORT_ID_LENGTH = 8
"""How many of a journal id's leading digits a round id carries (:func:`short_journal_id`)."""


def new_journal_id() -> str:
    """A fresh journal identity: 128 random bits in lowercase hex (32 characters)."""
    return secrets.token_hex(16)


def short_journal_id(journal_id: str) -> str:
    """The short form of a journal id that round ids carry: its first 8 hex digits."""
    return journal_id[:SHORT_ID_LENGTH]


def _identify_journal(db: sqlite3.Connection) -> None:
    """Migration 3: give the journal its identity (a new file and an old one alike)."""
    db.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
        (JOURNAL_ID_KEY, new_journal_id()),
    )


MigrationStep = str | Callable[[sqlite3.Connection], None]
"""One step of a migration: an SQL statement, or a function run inside its transaction."""

# Ordered migrations: migration i (0-based) takes the schema from user_version i to i + 1.
# Never edit a released migration; append a new one.
MIGRATIONS: tuple[tuple[MigrationStep, ...], ...] = (
    (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE entries (
            seq INTEGER PRIMARY KEY,
            session INTEGER NOT NULL,
            round_id TEXT,
            kind TEXT NOT NULL,
            happened_at TEXT NOT NULL,
            body TEXT NOT NULL,
            delivered_at TEXT
        )""",
        "CREATE INDEX entries_round ON entries (round_id, seq)",
        "CREATE INDEX entries_undelivered ON entries (seq) WHERE delivered_at IS NULL",
        "INSERT INTO meta (key, value) VALUES ('session', '0')",
    ),
    (
        # v2: the tamper-evident hash chain, and an index for "the last entry of a kind".
        "ALTER TABLE entries ADD COLUMN hash TEXT",
        "CREATE INDEX entries_kind ON entries (kind, seq)",
        _chain_existing_entries,
    ),
    (
        # v3: the journal's identity (issue 22): a random id made once, at creation or here.
        _identify_journal,
    ),
)
"""The schema, as an ordered list of migrations (each a list of steps)."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The ``PRAGMA user_version`` of a journal this code wrote."""

CHAIN_SCHEMA_VERSION = 2
"""The first schema with the hash chain (a file of schema 2 is verified like a newer one)."""


def format_time(moment: datetime) -> str:
    """A UTC ISO-8601 time with microseconds and ``Z`` (``2026-11-22T02:10:59.123456Z``).

    Raises:
        JournalError: The datetime is naive (no time zone).
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise JournalError(f"time {moment.isoformat()} has no time zone", moment=str(moment))
    # isoformat pads the year to four digits (strftime's %Y does not below 1000).
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_time(text: str) -> datetime:
    """Read a time written by :func:`format_time` (an aware UTC datetime)."""
    return datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC)
