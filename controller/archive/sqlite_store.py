"""The archive on SQLite: the embedded default of ``make run`` (``sqlite:///var/archive.sqlite``).

:class:`SqliteArchiveStore` has the methods of :class:`controller.archive.store.ArchiveStore`
and keeps their rules (docs/archive.md, "SQLite"): idempotent on ``(table, session, seq)``
through ``entry_keys``, a batch in one transaction with the one-by-one outcomes, conflicts and
rejections kept with their reason, rounds folded by ``RoundFold`` (:mod:`controller.archive.batch`,
shared with PostgreSQL), statuses, gaps and alerts. The schema is
``controller/archive/migrations_sqlite/*.sql``, applied by the same versioned migrator rules.

The ``sqlite3`` module blocks, so every call runs on one thread of the store's own
(``archive-sqlite``): the event loop a table runs on beside it is never held by a write.
SQLite's ``busy_timeout`` bounds a wait for another writer. Errors come out as
:class:`controller.archive.errors.ArchiveRefused` (the database refused what it was given:
a message's fault) or :class:`controller.archive.errors.ArchiveDatabaseLost` (it cannot be
written any more).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from controller.archive.batch import (
    GAP_STAMP_COLUMNS,
    ChainWalks,
    Copy,
    GapStamp,
    Linked,
    RoundFolds,
    RoundKey,
    RoundRow,
    Stored,
    conflict,
    entry_of_copy,
    envelope_text,
    first_copies,
    forged,
    link_of,
    log_walks,
    outcomes,
    state_of,
)
from controller.archive.errors import ArchiveDatabaseLost, ArchiveError, ArchiveRefused
from controller.archive.ingest import Entry, Rejected, Status
from controller.archive.journals import NEW_JOURNAL, JournalRecord, place
from controller.archive.migrate import migrations

SCHEME = "sqlite://"
"""An SQLite archive's URL: ``sqlite:///relative/path`` or ``sqlite:////absolute/path``."""
BUSY_TIMEOUT_MS = 5000
"""How long a write waits for another connection's lock before it fails."""

_T = TypeVar("_T")


def is_sqlite_url(url: str) -> bool:
    """Whether ``url`` names an SQLite archive."""
    return url.startswith(SCHEME)


def sqlite_path(url: str) -> Path:
    """The file of an SQLite archive URL (``sqlite:///var/a.sqlite`` → ``var/a.sqlite``).

    Raises:
        ArchiveError: Not ``sqlite:///PATH``.
    """
    rest = url[len(SCHEME) :] if is_sqlite_url(url) else ""
    if not rest.startswith("/") or len(rest) < 2:
        raise ArchiveError(
            "an SQLite archive URL is sqlite:///relative/path or sqlite:////absolute/path",
            url=url,
        )
    return Path(rest[1:])


def time_text(moment: datetime) -> str:
    """A time as the SQLite archive keeps it: UTC, microseconds, so text order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_time_text(text: str | None) -> datetime | None:
    """A time kept by :func:`time_text` (``None`` stays ``None``)."""
    return None if text is None else datetime.fromisoformat(text)


_JOURNALS = (
    "SELECT table_id, journal, chain_id, first_seen, previous_chain, previous_last_seq"
    " FROM journals"
)


def _journal_record(row: Sequence[Any]) -> JournalRecord:
    return JournalRecord(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        datetime.fromisoformat(str(row[3])),
        None if row[4] is None else str(row[4]),
        None if row[5] is None else int(row[5]),
    )


def _now() -> str:
    return time_text(datetime.now(UTC))


def connect(path: Path) -> sqlite3.Connection:
    """An autocommit connection to the archive file (WAL; busy timeout).

    Raises:
        ArchiveError: The file cannot be opened.
    """
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as exc:
        raise ArchiveError(f"cannot open the SQLite archive: {exc}", path=str(path)) from exc
    return conn


def migrate_sqlite(conn: sqlite3.Connection) -> list[int]:
    """Apply every SQLite migration not applied yet; the versions applied.

    Each with its version row in one transaction (``BEGIN IMMEDIATE``: two processes do not
    race).

    Raises:
        ArchiveError: A migration failed (its version and SQLite's message named).
    """
    conn.execute(
        "CREATE TABLE IF NOT EXISTS archive_migrations (version INTEGER PRIMARY KEY,"
        " name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    applied: list[int] = []
    for migration in migrations("migrations_sqlite"):
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                done = conn.execute(
                    "SELECT 1 FROM archive_migrations WHERE version = ?", (migration.version,)
                ).fetchone()
                if done is None:
                    for statement in _statements(migration.sql):
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO archive_migrations VALUES (?, ?, ?)",
                        (migration.version, migration.name, _now()),
                    )
                    applied.append(migration.version)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise ArchiveError(
                f"migration {migration.version:04d}_{migration.name} failed: {exc}",
                version=migration.version,
            ) from exc
    return applied


def _statements(sql: str) -> list[str]:
    """A migration's statements.

    Not ``executescript``, which commits: each runs in the migration's transaction.
    """
    out: list[str] = []
    current = ""
    for line in sql.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            out.append(current)
            current = ""
    leftover = [line for line in current.splitlines() if line.strip()]
    if any(not line.strip().startswith("--") for line in leftover):
        out.append(current)  # an unterminated statement: SQLite says what is wrong
    return out


class SqliteArchiveStore:
    """The archive in one SQLite file (the methods of ``ArchiveStore``).

    Args:
        conn: A connection from :func:`connect` (schema migrated).
        path: Its file, for messages.

    Attributes:
        gaps_shared: ``False``: one archive beside one table keeps its gaps in memory
            (:class:`controller.archive.gap_tracker.GapTracker`).
    """

    gaps_shared: ClassVar[bool] = False

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self._folds = RoundFolds()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="archive-sqlite")
        self.resolved: list[Rejected] = []

    @classmethod
    async def open(cls, url: str, *, run_migrations: bool = True) -> SqliteArchiveStore:
        """Open (create) the archive file of ``url`` and bring its schema up to date.

        Raises:
            ArchiveError: A bad URL, a file that cannot be opened, a failed migration.
        """
        path = sqlite_path(url)
        if path.parent != Path():
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(path)
        store = cls(conn, path)
        if run_migrations:
            try:
                await store._run(migrate_sqlite, conn)
            except BaseException:
                await store.close()
                raise
        return store

    async def close(self) -> None:
        """Close the file and the store's thread."""
        await self._run(self.conn.close)
        self._thread.shutdown(wait=False)

    async def _run(self, call: Callable[..., _T], *args: Any) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, call, *args)

    async def _write(self, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)`` in one transaction on the store's thread, errors classified."""
        return await self._run(self._in_transaction, call, *args)

    def _in_transaction(self, call: Callable[..., _T], *args: Any) -> _T:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                result = call(*args)
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError) as exc:
            self._folds.clear()
            raise ArchiveRefused(f"SQLite refused it: {exc}", path=str(self.path)) from exc
        except sqlite3.Error as exc:
            self._folds.clear()
            raise ArchiveDatabaseLost(
                f"the SQLite archive cannot be written: {exc}", path=str(self.path)
            ) from exc
        return result

    # -- entries ---------------------------------------------------------------------------

    async def store_entry(self, entry: Entry) -> Stored:
        """Store ``entry`` once: ``new``, ``duplicate`` (absorbed) or ``conflict`` (rejected).

        Raises:
            ArchiveRefused: SQLite refused it (nothing of it was written).
            ArchiveDatabaseLost: The file cannot be written.
        """
        return (await self.store_entries([entry]))[0]

    async def store_entries(self, entries: Sequence[Entry]) -> list[Stored]:
        """Store a batch in one transaction; each entry's outcome, in order (as one by one).

        Raises:
            ArchiveRefused: SQLite refused the batch (nothing of it was written).
            ArchiveDatabaseLost: The file cannot be written.
        """
        if not entries:
            return []
        return await self._write(self._store_entries, entries)

    def _store_entries(self, entries: Sequence[Entry]) -> list[Stored]:
        first = first_copies(entries)
        new: set[tuple[str, int, int]] = set()
        stored: dict[tuple[str, int, int], str] = {}
        now = _now()
        self.resolved = []
        for key, entry in first.items():
            prev, chained = entry.link if entry.link is not None else (None, None)
            cursor = self.conn.execute(
                "INSERT INTO entry_keys (table_id, session, seq, at, digest, received_at, state,"
                " link_prev, link_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (*key, time_text(entry.at), entry.digest, now, state_of(entry), prev, chained),
            )
            if cursor.rowcount == 1:
                new.add(key)
                stored[key] = entry.digest
            else:
                row = self.conn.execute(
                    "SELECT digest FROM entry_keys WHERE table_id = ? AND session = ? AND seq = ?",
                    key,
                ).fetchone()
                stored[key] = str(row[0])
        fresh = [first[key] for key in first if key in new]
        self._insert_events(fresh, now)
        found = outcomes(entries, first, new, stored)
        for entry, outcome in zip(entries, found, strict=True):
            if outcome == "conflict":
                self._insert_rejected(conflict(entry))
        moved = self._walk(fresh, now)
        self._refold(fresh, moved)
        return found

    def _insert_events(self, fresh: Sequence[Entry], now: str) -> None:
        self.conn.executemany(
            "INSERT INTO events (table_id, session, seq, at, round_id, kind, topic, delayed,"
            " replayed, signed, envelope, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    e.table,
                    e.session,
                    e.seq,
                    time_text(e.at),
                    e.round_id,
                    e.kind,
                    e.topic,
                    e.delayed,
                    e.replayed,
                    e.signed,
                    envelope_text(e),
                    now,
                )
                for e in fresh
            ],
        )

    def _walk(self, fresh: Sequence[Entry], now: str) -> set[RoundKey]:
        """Walk the signed chain from the batch's new entries; the rounds it changed.

        :class:`ChainWalks` decides; here it is applied: keys verified, forged ones moved to
        ``rejected``, the chain's own copies archived in their place.
        """
        walks = ChainWalks(fresh)
        ranges = walks.windows()
        while ranges:
            for table, (lo, hi) in ranges.items():
                keys = self.conn.execute(
                    "SELECT seq, session, link_prev, link_hash, state FROM entry_keys"
                    " WHERE table_id = ? AND seq BETWEEN ? AND ?",
                    (table, lo, hi),
                ).fetchall()
                copies = self.conn.execute(
                    "SELECT id, seq, payload FROM rejected WHERE table_id = ?"
                    " AND category = 'conflict' AND seq BETWEEN ? AND ?",
                    (table, lo, hi),
                ).fetchall()
                walks.add(
                    table,
                    lo,
                    (Linked(int(q), int(s), p, h, str(st)) for q, s, p, h, st in keys),
                    (
                        Copy(int(i), int(q), *link)
                        for i, q, payload in copies
                        if (link := link_of(bytes(payload))) is not None
                    ),
                )
            ranges = walks.run()
        verified, forged_keys, promoted = walks.outcome()
        self.conn.executemany(
            "UPDATE entry_keys SET state = 'verified' WHERE table_id = ? AND session = ?"
            " AND seq = ?",
            verified,
        )
        moved: set[RoundKey] = set()
        for table, session, seq in forged_keys:
            row = self.conn.execute(
                "SELECT topic, round_id, envelope FROM events WHERE table_id = ? AND session = ?"
                " AND seq = ?",
                (table, session, seq),
            ).fetchone()
            if row is not None:
                rejected = forged(str(row[0]), table, seq, session, str(row[2]))
                self._insert_rejected(rejected)
                self.resolved.append(rejected)
                if row[1] is not None:
                    moved.add((table, str(row[1])))
            for sql in (
                "DELETE FROM events WHERE table_id = ? AND session = ? AND seq = ?",
                "DELETE FROM entry_keys WHERE table_id = ? AND session = ? AND seq = ?",
            ):
                self.conn.execute(sql, (table, session, seq))
        for table, copy in promoted:
            row = self.conn.execute(
                "SELECT topic, payload FROM rejected WHERE id = ?", (copy.id,)
            ).fetchone()
            entry = None if row is None else entry_of_copy(str(row[0]), bytes(row[1]), table)
            if entry is None:
                continue
            self.conn.execute(
                "INSERT INTO entry_keys (table_id, session, seq, at, digest, received_at, state,"
                " link_prev, link_hash) VALUES (?, ?, ?, ?, ?, ?, 'verified', ?, ?)",
                (
                    table,
                    entry.session,
                    entry.seq,
                    time_text(entry.at),
                    entry.digest,
                    now,
                    copy.prev,
                    copy.hash,
                ),
            )
            self._insert_events([entry], now)
            self.conn.execute("DELETE FROM rejected WHERE id = ?", (copy.id,))
            if entry.round_id is not None:
                moved.add((table, entry.round_id))
        log_walks(walks)
        return moved

    def _refold(self, fresh: Sequence[Entry], moved: AbstractSet[RoundKey] = frozenset()) -> None:
        """Refold the rounds of ``fresh`` and ``moved`` (read back whole)."""
        added = RoundFolds.touched(fresh)
        self._folds.forget(moved)
        archived: dict[RoundKey, int] = {}
        for key in added:
            row = self.conn.execute(
                "SELECT count(*) FROM events WHERE table_id = ? AND round_id = ?", key
            ).fetchone()
            archived[key] = int(row[0])
        reread = self._folds.fold_on(added, archived) + sorted(moved - set(added))
        for key in reread:
            rows = self.conn.execute(
                "SELECT kind, envelope, at, seq, delayed FROM events"
                " WHERE table_id = ? AND round_id = ? ORDER BY seq",
                key,
            ).fetchall()
            self._folds.load(
                (*key, kind, json.loads(text)["data"], datetime.fromisoformat(at), seq, bool(d))
                for kind, text, at, seq, d in rows
            )
        added.update({key: [] for key in moved})
        gone = [key for key in added if not self._folds.kept(key)]
        self.conn.executemany("DELETE FROM rounds WHERE table_id = ? AND round_id = ?", gone)
        added = {key: value for key, value in added.items() if key not in gone}
        self.conn.executemany(
            "INSERT INTO rounds (table_id, round_id, round_no, game, state, outcome, opened_at,"
            " finished_at, result_seq, delayed, result, bets, entries, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (table_id, round_id) DO UPDATE SET round_no = excluded.round_no,"
            " game = excluded.game, state = excluded.state, outcome = excluded.outcome,"
            " opened_at = excluded.opened_at, finished_at = excluded.finished_at,"
            " result_seq = excluded.result_seq, delayed = excluded.delayed,"
            " result = excluded.result, bets = excluded.bets, entries = excluded.entries,"
            " updated_at = excluded.updated_at",
            [_round_params(row) for row in self._folds.rows(sorted(added))],
        )

    # -- the rest --------------------------------------------------------------------------

    async def store_rejected(self, rejected: Rejected) -> None:
        """Keep a rejected message with its reason."""
        await self._write(self._insert_rejected, rejected)

    def _insert_rejected(self, rejected: Rejected) -> None:
        self.conn.execute(
            "INSERT INTO rejected (topic, table_id, seq, reason, category, payload, received_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                rejected.topic,
                rejected.table,
                rejected.seq,
                rejected.reason,
                rejected.category,
                rejected.payload,
                _now(),
            ),
        )

    async def store_status(self, status: Status) -> None:
        """Keep a status message (history: every birth, stop and Last Will)."""
        head_seq, head_hash = status.chain_head if status.chain_head else (None, None)
        await self._write(
            self.conn.execute,
            "INSERT INTO table_status (table_id, state, session, chain_head_seq,"
            " chain_head_hash, envelope, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                status.table,
                status.state,
                status.session,
                head_seq,
                head_hash,
                json.dumps(status.envelope),
                _now(),
            ),
        )

    async def journals(self) -> list[JournalRecord]:
        """Every journal of every table the archive knows (``journals``)."""
        rows = await self._run(lambda: self.conn.execute(_JOURNALS).fetchall())
        return [_journal_record(row) for row in rows]

    async def adopt_journal(
        self, table: str, journal: str, *, head_seq: int | None, at: datetime
    ) -> tuple[JournalRecord, bool]:
        """The chain of a journal of ``table`` met for the first time, recorded; whether new.

        A journal that replaced another raises the one alert (``new_journal``) in the same
        transaction (docs/archive.md, "Journals").
        """
        return await self._write(self._adopt, table, journal, head_seq, at)

    def _adopt(
        self, table: str, journal: str, head_seq: int | None, at: datetime
    ) -> tuple[JournalRecord, bool]:
        rows = self.conn.execute(_JOURNALS + " WHERE table_id = ?", (table,)).fetchall()
        known = [_journal_record(row) for row in rows]
        for record in known:
            if record.journal == journal:
                return record, False
        plain = self.conn.execute(
            "SELECT max(seq) FROM entry_keys WHERE table_id = ?", (table,)
        ).fetchone()[0]
        chain, previous = place(table, journal, known, plain_highest=plain, head_seq=head_seq)
        last = None
        if previous is not None:
            last = self.conn.execute(
                "SELECT max(seq) FROM entry_keys WHERE table_id = ?", (previous,)
            ).fetchone()[0]
        record = JournalRecord(table, journal, chain, at, previous, last)
        self.conn.execute(
            "INSERT INTO journals (table_id, journal, chain_id, first_seen, previous_chain,"
            " previous_last_seq) VALUES (?, ?, ?, ?, ?, ?)",
            (table, journal, chain, time_text(at), previous, last),
        )
        if record.alert is not None:
            self.conn.execute(
                "INSERT INTO alerts (table_id, kind, detail, raised_at) VALUES (?, ?, ?, ?)",
                (table, NEW_JOURNAL, record.alert, _now()),
            )
        return record, True

    async def highest_seqs(self, tables: Sequence[str] | None = None) -> dict[str, int]:
        """Each archived table's highest ``seq`` (of ``tables`` only, if given)."""
        rows = await self._run(
            lambda: self.conn.execute(
                "SELECT table_id, max(seq) FROM entry_keys GROUP BY table_id"
            ).fetchall()
        )
        found = {str(row[0]): int(row[1]) for row in rows}
        return found if tables is None else {t: s for t, s in found.items() if t in tables}

    async def open_gap(self, table: str, from_seq: int, to_seq: int) -> int:
        """Record a gap; its id."""
        cursor = await self._write(
            self.conn.execute,
            "INSERT INTO gaps (table_id, from_seq, to_seq, detected_at) VALUES (?, ?, ?, ?)",
            (table, from_seq, to_seq, _now()),
        )
        return int(cursor.lastrowid or 0)

    async def mark_gap(
        self,
        gap_id: int,
        what: GapStamp,
        missing: Sequence[int] = (),
    ) -> None:
        """Stamp a gap's replay request, fill or alert (``missing``: the seqs still absent)."""
        column = GAP_STAMP_COLUMNS[what]
        await self._write(
            self.conn.execute,
            f"UPDATE gaps SET {column} = ?, missing = ? WHERE id = ?",
            (_now(), json.dumps(list(missing)) if missing else None, gap_id),
        )

    async def raise_alert(
        self,
        table: str | None,
        kind: str,
        detail: str,
        *,
        gap_id: int | None = None,
        missing: Sequence[int] = (),
    ) -> None:
        """Keep an alert; with ``gap_id``, also stamp that gap alerted (one transaction)."""
        await self._write(self._alert, table, kind, detail, gap_id, list(missing))

    def _alert(
        self, table: str | None, kind: str, detail: str, gap_id: int | None, missing: list[int]
    ) -> None:
        now = _now()
        self.conn.execute(
            "INSERT INTO alerts (table_id, kind, detail, raised_at) VALUES (?, ?, ?, ?)",
            (table, kind, detail, now),
        )
        if gap_id is not None:
            self.conn.execute(
                "UPDATE gaps SET alerted_at = ?, missing = ? WHERE id = ?",
                (now, json.dumps(missing) if missing else None, gap_id),
            )


def _round_params(row: RoundRow) -> tuple[Any, ...]:
    return (
        row.table,
        row.round_id,
        row.round_no,
        row.game,
        row.state,
        row.outcome,
        None if row.opened_at is None else time_text(row.opened_at),
        None if row.finished_at is None else time_text(row.finished_at),
        row.result_seq,
        row.delayed,
        None if row.result is None else json.dumps(row.result),
        None if row.bets is None else json.dumps(row.bets),
        row.entries,
        _now(),
    )


@contextlib.contextmanager
def reading(url: str) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the SQLite archive of ``url`` (recall, report, verify).

    In autocommit mode: a caller that wants one snapshot across queries opens its read
    transaction (``BEGIN``). A query that fails is reported as the archive's error.

    Raises:
        ArchiveError: No such archive file, or a query failed.
    """
    path = sqlite_path(url)
    if not path.exists():
        raise ArchiveError("no SQLite archive at this path", path=str(path))
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            yield conn
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise ArchiveError(f"cannot read the SQLite archive: {exc}", path=str(path)) from exc


def read_rows(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of a query on the SQLite archive of ``url`` (read only; recall, report).

    Raises:
        ArchiveError: No such archive file, or the query failed.
    """
    with reading(url) as conn:
        return list(conn.execute(sql, tuple(params)).fetchall())


__all__ = [
    "SqliteArchiveStore",
    "connect",
    "from_time_text",
    "is_sqlite_url",
    "migrate_sqlite",
    "read_rows",
    "reading",
    "sqlite_path",
    "time_text",
]
