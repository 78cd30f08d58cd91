"""The journal: every state change of the table, appended and fsynced before it is published.

The journal is one SQLite file per table (``journal_mode=WAL``, ``synchronous=FULL``). Each
entry gets the table's sequence number ``seq`` (DESIGN.md §6): gap-free, never repeated, kept
across restarts. The outbox (:mod:`controller.publisher`) publishes entries in ``seq`` order and
marks each one delivered once the broker has acknowledged it.

Every :meth:`Journal.open` starts a new *session*: a counter kept in the ``meta`` table, carried
in every message so consumers can tell a controller restart from a network blip.

The API is synchronous and is called from the event loop thread: a commit costs about 0.2 ms
on the target hardware. A journal is used by one process at a time; a second
:meth:`Journal.open` of the same file is refused (an advisory ``flock`` on ``<path>.lock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import structlog

from controller.errors import JournalError

log = structlog.get_logger(__name__)

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"

# Ordered migrations: migration i (0-based) takes the schema from user_version i to i + 1.
# Never edit a released migration; append a new one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
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
)
"""The schema, as an ordered list of migrations (each a list of SQL statements)."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The ``PRAGMA user_version`` of a journal this code wrote."""


def format_time(moment: datetime) -> str:
    """A UTC ISO-8601 time with microseconds and ``Z`` (``2026-11-22T02:10:59.123456Z``).

    Raises:
        JournalError: The datetime is naive (no time zone).
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise JournalError(f"time {moment.isoformat()} has no time zone", moment=str(moment))
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


def parse_time(text: str) -> datetime:
    """Read a time written by :func:`format_time` (an aware UTC datetime)."""
    return datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journalled state change.

    Attributes:
        seq: The table's sequence number: gap-free, never repeated, survives restarts.
        session: The session counter of the controller run that appended it.
        round_id: The round it belongs to, or ``None`` (device and table status).
        kind: What happened (``"card_dealt"``, ``"round_result"``, ...).
        happened_at: When it happened (aware, UTC).
        body: The event's fields (JSON-able).
        delivered_at: When the broker acknowledged it, or ``None`` while undelivered.
    """

    seq: int
    session: int
    round_id: str | None
    kind: str
    happened_at: datetime
    body: dict[str, Any]
    delivered_at: datetime | None = None


_COLUMNS = "seq, session, round_id, kind, happened_at, body, delivered_at"


def _row_to_entry(row: tuple[Any, ...]) -> JournalEntry:
    seq, session, round_id, kind, happened_at, body, delivered_at = row
    return JournalEntry(
        seq=int(seq),
        session=int(session),
        round_id=round_id,
        kind=kind,
        happened_at=parse_time(happened_at),
        body=json.loads(body),
        delivered_at=parse_time(delivered_at) if delivered_at is not None else None,
    )


class Journal:
    """An open journal file. Create one with :meth:`open`.

    Attributes:
        path: The SQLite file.
        session: This run's session counter (1 for the first run of a new file).
    """

    def __init__(self, path: Path, connection: sqlite3.Connection, lock_file: IO[bytes]) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = connection
        self._lock_file: IO[bytes] | None = lock_file
        self._listeners: list[Callable[[JournalEntry], None]] = []
        self.session = 0
        self._last_seq = 0

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path) -> Journal:
        """Open (creating and migrating if needed) a journal and start a new session.

        Raises:
            JournalError: The file cannot be opened, is locked by another process, is not a
                journal, or was written by a newer version of tablectl.
        """
        path = Path(path)
        lock_path = path.with_name(path.name + ".lock")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock_file = lock_path.open("ab")
        except OSError as exc:
            raise JournalError(f"cannot open journal: {exc}", path=str(path)) from exc
        try:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            lock_file.close()
            raise JournalError(
                "journal is in use by another process", path=str(path), lock=str(lock_path)
            ) from exc
        try:
            connection = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=5.0
            )
        except sqlite3.Error as exc:
            lock_file.close()
            raise JournalError(f"cannot open journal: {exc}", path=str(path)) from exc
        journal = cls(path, connection, lock_file)
        try:
            journal._prepare()
        except BaseException:
            journal.close()
            raise
        return journal

    def _prepare(self) -> None:
        db = self._connection()
        try:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise JournalError(
                    f"journal could not switch to WAL mode (got {mode!r})", path=str(self.path)
                )
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            self._migrate(db)
            db.execute("BEGIN IMMEDIATE")
            try:
                session = int(self._meta(db, "session") or "0") + 1
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('session', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(session),),
                )
                last = db.execute("SELECT MAX(seq) FROM entries").fetchone()[0]
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(f"cannot prepare journal: {exc}", path=str(self.path)) from exc
        self.session = session
        self._last_seq = int(last or 0)
        log.info("journal opened", path=str(self.path), session=session, last_seq=self._last_seq)

    def _migrate(self, db: sqlite3.Connection) -> None:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise JournalError(
                f"journal schema version {version} is newer than this tablectl knows "
                f"({SCHEMA_VERSION})",
                path=str(self.path),
                version=version,
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            db.execute("BEGIN IMMEDIATE")
            try:
                for statement in MIGRATIONS[target - 1]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {target}")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            log.info("journal migrated", path=str(self.path), version=target)

    @staticmethod
    def _meta(db: sqlite3.Connection, key: str) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise JournalError("journal is closed", path=str(self.path))
        return self._db

    # -- writing ---------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` appended so far (0 for an empty journal)."""
        return self._last_seq

    def append(
        self,
        kind: str,
        body: Mapping[str, Any],
        *,
        round_id: str | None = None,
        happened_at: datetime | None = None,
    ) -> JournalEntry:
        """Append an entry and return once it is durably committed; then tell the listeners.

        Args:
            kind: What happened (``"card_dealt"``).
            body: The event's fields; must be JSON-able (strings, numbers, lists, dicts).
            round_id: The round it belongs to, if any.
            happened_at: When it happened (aware); now if omitted.

        Raises:
            JournalError: The body is not JSON-able, the time is naive, or the write failed.
        """
        db = self._connection()
        seq = self._last_seq + 1
        when = happened_at if happened_at is not None else datetime.now(UTC)
        when_text = format_time(when)
        try:
            body_text = json.dumps(dict(body), separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise JournalError(
                f"entry body is not JSON-able: {exc}", path=str(self.path), seq=seq, kind=kind
            ) from exc
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    f"INSERT INTO entries ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, NULL)",
                    (seq, self.session, round_id, kind, when_text, body_text),
                )
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot append entry: {exc}", path=str(self.path), seq=seq, kind=kind
            ) from exc
        self._last_seq = seq
        entry = JournalEntry(
            seq=seq,
            session=self.session,
            round_id=round_id,
            kind=kind,
            happened_at=parse_time(when_text),
            body=json.loads(body_text),
        )
        for listener in tuple(self._listeners):
            try:
                listener(entry)
            except Exception:
                log.exception("journal listener failed", path=str(self.path), seq=seq)
        return entry

    def add_listener(self, callback: Callable[[JournalEntry], None]) -> None:
        """Call ``callback(entry)`` after each append is committed (in the appending thread).

        A listener must be quick and must not raise; an exception is logged and ignored.
        """
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[JournalEntry], None]) -> None:
        """Stop calling a listener added with :meth:`add_listener` (no error if absent)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(callback)

    def mark_delivered(self, seq: int) -> None:
        """Record that the broker acknowledged entry ``seq``.

        Raises:
            JournalError: No such entry, or the write failed.
        """
        self.mark_delivered_many((seq,))

    def mark_delivered_many(self, seqs: Iterable[int], *, at: datetime | None = None) -> None:
        """Record that the broker acknowledged every entry of ``seqs``, in one transaction.

        The commit uses ``synchronous=NORMAL``: losing a delivery mark in a power cut only
        means the entry is published again, which consumers de-duplicate on ``seq``.

        Raises:
            JournalError: An entry does not exist, or the write failed.
        """
        db = self._connection()
        wanted = sorted(set(seqs))
        if not wanted:
            return
        when = format_time(at if at is not None else datetime.now(UTC))
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    for seq in wanted:
                        cursor = db.execute(
                            "UPDATE entries SET delivered_at = COALESCE(delivered_at, ?) "
                            "WHERE seq = ?",
                            (when, seq),
                        )
                        if cursor.rowcount != 1:
                            raise JournalError(
                                f"no journal entry with seq {seq}", path=str(self.path), seq=seq
                            )
                    db.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                    raise
            finally:
                db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot mark delivered: {exc}", path=str(self.path), seq=wanted[0]
            ) from exc

    # -- reading ---------------------------------------------------------------------------

    def undelivered(self, *, limit: int = 500) -> list[JournalEntry]:
        """Up to ``limit`` entries not yet acknowledged by the broker, in ``seq`` order."""
        db = self._connection()
        try:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM entries WHERE delivered_at IS NULL ORDER BY seq LIMIT ?",
                (limit,),
            ).fetchall()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return [_row_to_entry(row) for row in rows]

    def undelivered_count(self) -> int:
        """How many entries the broker has not acknowledged yet."""
        db = self._connection()
        try:
            row = db.execute("SELECT COUNT(*) FROM entries WHERE delivered_at IS NULL").fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return int(row[0])

    def get(self, seq: int) -> JournalEntry | None:
        """The entry ``seq``, or ``None`` if there is none."""
        db = self._connection()
        try:
            row = db.execute(f"SELECT {_COLUMNS} FROM entries WHERE seq = ?", (seq,)).fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path), seq=seq) from exc
        return None if row is None else _row_to_entry(row)

    def entries(
        self, *, from_seq: int = 0, round_id: str | None = None, page: int = 500
    ) -> Iterator[JournalEntry]:
        """Entries with ``seq >= from_seq`` (of one round if given), in ``seq`` order.

        Read in pages, so appending while iterating is safe (new entries are included).
        """
        db = self._connection()
        after = from_seq - 1
        while True:
            try:
                if round_id is None:
                    rows = db.execute(
                        f"SELECT {_COLUMNS} FROM entries WHERE seq > ? ORDER BY seq LIMIT ?",
                        (after, page),
                    ).fetchall()
                else:
                    rows = db.execute(
                        f"SELECT {_COLUMNS} FROM entries WHERE round_id = ? AND seq > ? "
                        "ORDER BY seq LIMIT ?",
                        (round_id, after, page),
                    ).fetchall()
            except sqlite3.Error as exc:
                raise JournalError(
                    f"cannot read journal: {exc}", path=str(self.path), seq=after + 1
                ) from exc
            for row in rows:
                entry = _row_to_entry(row)
                after = entry.seq
                yield entry
            if len(rows) < page:
                return

    def last_of_kind(self, kind: str, *, before_seq: int | None = None) -> JournalEntry | None:
        """The most recent entry of ``kind`` (with ``seq < before_seq`` if given), or ``None``."""
        db = self._connection()
        limit = before_seq if before_seq is not None else self._last_seq + 1
        try:
            row = db.execute(
                f"SELECT {_COLUMNS} FROM entries WHERE kind = ? AND seq < ? "
                "ORDER BY seq DESC LIMIT 1",
                (kind, limit),
            ).fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return None if row is None else _row_to_entry(row)

    def last_round_id(self) -> str | None:
        """The round id of the most recent ``round_opened`` entry, if any."""
        db = self._connection()
        try:
            row = db.execute(
                "SELECT round_id FROM entries WHERE kind = 'round_opened' ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return None if row is None else row[0]

    # -- meta ------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """A value of the ``meta`` table, or ``None``."""
        db = self._connection()
        try:
            return self._meta(db, key)
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read meta: {exc}", path=str(self.path), key=key) from exc

    def set_meta(self, key: str, value: str) -> None:
        """Store a value in the ``meta`` table (durably).

        Raises:
            JournalError: The write failed, or ``key`` is one the journal manages itself.
        """
        if key == "session":
            raise JournalError("the session counter is managed by the journal", key=key)
        db = self._connection()
        try:
            db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, str(value)),
            )
        except sqlite3.Error as exc:
            raise JournalError(f"cannot write meta: {exc}", path=str(self.path), key=key) from exc

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file and release the lock (idempotent)."""
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._db is None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Journal({os.fspath(self.path)!r}, session={self.session})"
