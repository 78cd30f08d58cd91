"""The journal store: the :class:`Journal`, one SQLite file per table.

The journal is one SQLite file per table (``journal_mode=WAL``, ``synchronous=FULL``). Each
entry gets the table's sequence number ``seq`` (DESIGN.md §6): gap-free, never repeated, kept
across restarts. The outbox (:mod:`controller.publisher`) publishes entries in ``seq`` order and
marks each one delivered once the broker has acknowledged it.

Every :meth:`Journal.open` starts a new *session*: a counter kept in the ``meta`` table, carried
in every message so consumers can tell a controller restart from a network blip.

Every entry also stores ``hash = sha256(previous hash || canonical(entry))`` (schema v2), a
chain that :meth:`Journal.verify` recomputes: an entry altered or removed after the fact breaks
it. Tools that run beside a live controller (``tablectl recall``, ``tablectl journal verify``)
use :meth:`Journal.open_readonly`: no lock, no new session, nothing written.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import structlog

from controller.errors import JournalError
from controller.journal.anchors import Anchor
from controller.journal.entries import EntryBody, EntryKind, JournalEntry, stored_body
from controller.journal.format import (
    GENESIS_HASH,
    MIGRATIONS,
    SCHEMA_VERSION,
    entry_hash,
    format_time,
    parse_time,
)
from controller.journal.verify import Verifier, VerifyReport

log = structlog.get_logger(__name__)


_COLUMNS = "seq, session, round_id, kind, happened_at, body, delivered_at, hash"
_COLUMNS_V1 = "seq, session, round_id, kind, happened_at, body, delivered_at, NULL"
_INSERT_COLUMNS = "seq, session, round_id, kind, happened_at, body, delivered_at, hash"
_MARK_DELIVERED = "UPDATE entries SET delivered_at = COALESCE(delivered_at, ?) WHERE seq = ?"


def _row_to_entry(row: tuple[Any, ...]) -> JournalEntry:
    seq, session, round_id, kind, happened_at, body, delivered_at, chain = row
    return JournalEntry(
        seq=int(seq),
        session=int(session),
        round_id=round_id,
        kind=kind,
        happened_at=parse_time(happened_at),
        body=json.loads(body),
        delivered_at=parse_time(delivered_at) if delivered_at is not None else None,
        hash=chain,
    )


class Journal:
    """An open journal file. Create one with :meth:`open`.

    Attributes:
        path: The SQLite file.
        session: This run's session counter (1 for the first run of a new file); for a
            read-only journal, the session of the last run that opened it for writing.
        readonly: Opened with :meth:`open_readonly` (every write is refused).
        schema_version: The file's ``PRAGMA user_version`` (older than
            :data:`SCHEMA_VERSION` only for a read-only journal nobody has migrated yet).
    """

    def __init__(
        self,
        path: Path,
        connection: sqlite3.Connection,
        lock_file: IO[bytes] | None,
        *,
        readonly: bool = False,
    ) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = connection
        self._lock_file: IO[bytes] | None = lock_file
        self._listeners: list[Callable[[JournalEntry], None]] = []
        self.session = 0
        self.readonly = readonly
        self.schema_version = SCHEMA_VERSION
        self._columns = _COLUMNS
        self._last_seq = 0
        self._last_hash = GENESIS_HASH
        self._pending_marks: list[tuple[str, int]] = []

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

    @classmethod
    def open_readonly(cls, path: str | Path) -> Journal:
        """Open a journal to read it beside a live controller: no lock, no session, no writes.

        The file is opened with SQLite's ``mode=ro``; nothing is created or migrated. A file
        of an older schema is read as it is (its entries have no ``hash``).

        Raises:
            JournalError: The file does not exist, is not a journal, or was written by a newer
                version of tablectl.
        """
        path = Path(path)
        if not path.is_file():
            raise JournalError("no journal file at this path", path=str(path))
        uri = f"file:{quote(str(path.resolve()))}?mode=ro"
        try:
            connection = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=5.0
            )
        except sqlite3.Error as exc:
            raise JournalError(f"cannot open journal: {exc}", path=str(path)) from exc
        journal = cls(path, connection, None, readonly=True)
        try:
            journal._prepare_readonly()
        except BaseException:
            journal.close()
            raise
        return journal

    def _prepare_readonly(self) -> None:
        db = self._connection()
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise JournalError(
                    f"journal schema version {version} is newer than this tablectl knows "
                    f"({SCHEMA_VERSION})",
                    path=str(self.path),
                    version=version,
                )
            if version < 1:
                raise JournalError("not a tablectl journal (schema version 0)", path=str(self.path))
            self.schema_version = version
            chain_column = "hash"
            if version < 2:
                self._columns = _COLUMNS_V1
                chain_column = "NULL"
            db.execute("BEGIN")
            try:
                session = int(self._meta(db, "session") or "0")
                row = db.execute(
                    f"SELECT seq, {chain_column} FROM entries ORDER BY seq DESC LIMIT 1"
                ).fetchone()
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        self.session = session
        if row is not None:
            self._last_seq = int(row[0])
            self._last_hash = row[1] or GENESIS_HASH

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
                last = db.execute(
                    "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(f"cannot prepare journal: {exc}", path=str(self.path)) from exc
        self.session = session
        if last is not None:
            self._last_seq = int(last[0])
            self._last_hash = str(last[1]) if last[1] is not None else GENESIS_HASH
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
                for step in MIGRATIONS[target - 1]:
                    if isinstance(step, str):
                        db.execute(step)
                    else:
                        step(db)
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

    def _reading(self) -> sqlite3.Connection:
        """The connection, for a read that shows delivery state: noted marks written first."""
        db = self._connection()
        if self._pending_marks:
            self.flush_delivered()
        return db

    def _writable(self) -> sqlite3.Connection:
        if self.readonly:
            raise JournalError("journal is open read-only", path=str(self.path))
        return self._connection()

    # -- writing ---------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` appended so far (0 for an empty journal)."""
        return self._last_seq

    @property
    def chain_head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the latest committed entry: the hash chain's head.

        ``(0, GENESIS_HASH)`` for an empty journal. Published in the retained online status
        (the birth) so the feed anchors the journal outside the file (docs/journal.md).
        """
        return self._last_seq, self._last_hash

    def record(
        self,
        body: EntryBody,
        *,
        round_id: str | None = None,
        happened_at: datetime | None = None,
    ) -> JournalEntry:
        """Append a typed entry: its kind is its body model's (``CardDealtData`` ...).

        The body is stored as :func:`~controller.journal.entries.body_text` writes it, and the
        returned entry (and the one the listeners get) carries it as its
        :attr:`~controller.journal.JournalEntry.typed_body`, not parsed again.

        Args:
            body: The body model of an entry kind (built by the caller, not validated again).
            round_id: The round it belongs to, if any.
            happened_at: When it happened (aware); now if omitted.

        Raises:
            JournalError: The model is no entry kind's, the body is not JSON-able, the time
                is naive, the write failed, or the journal is read-only.
        """
        kind = body.KIND
        if kind is None:
            raise JournalError(
                f"{type(body).__name__} is not the body of an entry kind", path=str(self.path)
            )
        try:
            text, value = stored_body(body)
        except JournalError as exc:
            raise JournalError(exc.message, path=str(self.path), kind=kind) from exc
        return self._write(kind, text, value, body, round_id=round_id, happened_at=happened_at)

    def append(
        self,
        kind: EntryKind | str,
        body: Mapping[str, Any],
        *,
        round_id: str | None = None,
        happened_at: datetime | None = None,
    ) -> JournalEntry:
        """Append an entry given as a kind and a JSON object (tools, tests, old journals' kinds).

        The product journals typed bodies with :meth:`record`; both store the same text for
        the same body.

        Args:
            kind: What happened (``EntryKind.CARD_DEALT``; any text is stored as it is).
            body: The event's fields; must be JSON-able (strings, numbers, lists, dicts).
            round_id: The round it belongs to, if any.
            happened_at: When it happened (aware); now if omitted.

        Raises:
            JournalError: The body is not JSON-able, the time is naive, the write failed, or
                the journal is read-only.
        """
        try:
            text = json.dumps(dict(body), separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise JournalError(
                f"entry body is not JSON-able: {exc}",
                path=str(self.path),
                seq=self._last_seq + 1,
                kind=kind,
            ) from exc
        return self._write(
            kind, text, json.loads(text), None, round_id=round_id, happened_at=happened_at
        )

    def _write(
        self,
        kind: EntryKind | str,
        body_text: str,
        body: dict[str, Any],
        typed: EntryBody | None,
        *,
        round_id: str | None,
        happened_at: datetime | None,
    ) -> JournalEntry:
        """Commit one entry, then tell the listeners.

        ``body_text`` is its stored JSON text, ``body`` the object that text reads back as.
        """
        db = self._writable()
        seq = self._last_seq + 1
        when = happened_at if happened_at is not None else datetime.now(UTC)
        when_text = format_time(when)
        kind_text = str(kind)
        chain = entry_hash(
            self._last_hash,
            seq=seq,
            session=self.session,
            round_id=round_id,
            kind=kind_text,
            happened_at=when_text,
            body=body_text,
        )
        marks = len(self._pending_marks)
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                if marks:  # delivery marks noted since the last write ride along for free
                    db.executemany(_MARK_DELIVERED, self._pending_marks[:marks])
                db.execute(
                    f"INSERT INTO entries ({_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
                    (seq, self.session, round_id, kind_text, when_text, body_text, chain),
                )
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot append entry: {exc}", path=str(self.path), seq=seq, kind=kind_text
            ) from exc
        self._last_seq = seq
        self._last_hash = chain
        del self._pending_marks[:marks]
        entry = JournalEntry(
            seq=seq,
            session=self.session,
            round_id=round_id,
            kind=kind,
            happened_at=when.astimezone(UTC),  # == parse_time(when_text): format keeps the µs
            body=body,
            hash=chain,
            _typed=typed,
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
        means the entry is published again, which consumers de-duplicate on ``seq``. Marks
        noted with :meth:`note_delivered` and not written yet are written in the same
        transaction.

        Raises:
            JournalError: An entry does not exist, the write failed, or the journal is read-only.
        """
        self._writable()
        wanted = sorted(set(seqs))
        when = format_time(at if at is not None else datetime.now(UTC))
        for seq in wanted:
            if not 1 <= seq <= self._last_seq:
                raise JournalError(f"no journal entry with seq {seq}", path=str(self.path), seq=seq)
        self._pending_marks.extend((when, seq) for seq in wanted)
        self.flush_delivered()

    def note_delivered(self, seqs: Iterable[int], *, at: datetime | None = None) -> None:
        """Note that the broker acknowledged ``seqs``; written with the next write.

        The outbox's way to mark deliveries without a commit of their own on the event loop:
        the marks ride along in the next :meth:`append` transaction, or are written by
        :meth:`flush_delivered` (the publisher calls it when nothing is in flight). Every
        read that shows delivery state (:meth:`undelivered`, :meth:`entries`, ...) and
        :meth:`close` write them first, so callers never see a noted mark missing. A crash
        loses at most the unwritten marks: those entries are published again, and consumers
        de-duplicate on ``seq``.

        Raises:
            JournalError: An entry does not exist, or the journal is read-only.
        """
        self._writable()
        when = format_time(at if at is not None else datetime.now(UTC))
        wanted = list(seqs)
        for seq in wanted:  # all or nothing
            if not 1 <= seq <= self._last_seq:
                raise JournalError(f"no journal entry with seq {seq}", path=str(self.path), seq=seq)
        self._pending_marks.extend((when, seq) for seq in wanted)

    @property
    def unwritten_marks(self) -> int:
        """Delivery marks noted with :meth:`note_delivered` and not written yet."""
        return len(self._pending_marks)

    def flush_delivered(self) -> None:
        """Write the delivery marks noted so far, in one ``synchronous=NORMAL`` transaction.

        Raises:
            JournalError: The write failed (the marks stay noted).
        """
        if not self._pending_marks or self._db is None or self.readonly:
            return
        db = self._db
        marks = len(self._pending_marks)
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.executemany(_MARK_DELIVERED, self._pending_marks[:marks])
                    db.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                    raise
            finally:
                db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot mark delivered: {exc}", path=str(self.path), seq=self._pending_marks[0][1]
            ) from exc
        del self._pending_marks[:marks]

    # -- reading ---------------------------------------------------------------------------

    def undelivered(self, *, limit: int = 500, from_seq: int = 1) -> list[JournalEntry]:
        """Up to ``limit`` entries with ``seq >= from_seq`` not yet acknowledged by the broker.

        In ``seq`` order.
        """
        db = self._reading()
        try:
            rows = db.execute(
                f"SELECT {self._columns} FROM entries WHERE delivered_at IS NULL AND seq >= ? "
                "ORDER BY seq LIMIT ?",
                (from_seq, limit),
            ).fetchall()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return [_row_to_entry(row) for row in rows]

    def undelivered_count(self) -> int:
        """How many entries the broker has not acknowledged yet."""
        db = self._reading()
        try:
            row = db.execute("SELECT COUNT(*) FROM entries WHERE delivered_at IS NULL").fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return int(row[0])

    def get(self, seq: int) -> JournalEntry | None:
        """The entry ``seq``, or ``None`` if there is none."""
        db = self._reading()
        try:
            row = db.execute(
                f"SELECT {self._columns} FROM entries WHERE seq = ?", (seq,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path), seq=seq) from exc
        return None if row is None else _row_to_entry(row)

    def entries(
        self, *, from_seq: int = 0, round_id: str | None = None, page: int = 500
    ) -> Iterator[JournalEntry]:
        """Entries with ``seq >= from_seq`` (of one round if given), in ``seq`` order.

        Read in pages, so appending while iterating is safe (new entries are included).
        """
        db = self._reading()
        after = from_seq - 1
        while True:
            try:
                if round_id is None:
                    rows = db.execute(
                        f"SELECT {self._columns} FROM entries WHERE seq > ? ORDER BY seq LIMIT ?",
                        (after, page),
                    ).fetchall()
                else:
                    rows = db.execute(
                        f"SELECT {self._columns} FROM entries WHERE round_id = ? AND seq > ? "
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
        db = self._reading()
        limit = before_seq if before_seq is not None else self._last_seq + 1
        try:
            row = db.execute(
                f"SELECT {self._columns} FROM entries WHERE kind = ? AND seq < ? "
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

    # -- verification ----------------------------------------------------------------------

    def verify(self, anchors: Sequence[Anchor] = ()) -> VerifyReport:
        """Check the whole file, in one read transaction, and say precisely what is wrong.

        Checks: SQLite's ``integrity_check``; the schema version; ``seq`` contiguous from 1;
        the hash chain (an entry altered, inserted or removed breaks it); every body is a JSON
        object and every time readable; sessions never go backwards and none is beyond the
        ``meta`` counter; ``delivered_at`` never before ``happened_at``; and every round's
        entries in a legal order: ``round_opened`` → (``betting_closed`` → ``card_dealt`` in
        slot order → ``round_result`` with exactly the dealt cards) or ``round_voided`` (with
        a refund of every bet), one result or void per round, nothing after it, no round
        opened while another is unfinished. Only the last round may be unfinished.

        With ``anchors`` (chain heads from a recorded feed, :func:`controller.journal.read_feed`)
        it also checks the file against them: an anchored ``seq`` beyond the journal's last
        entry is a truncated journal (``report.truncated``); an anchored entry whose stored
        hash differs, or that is missing, is a rewritten one.

        Args:
            anchors: The feed's chain heads (none: the file's own checks only).

        Returns:
            The report; ``report.ok`` when nothing was found.

        Raises:
            JournalError: The file cannot be read at all.
        """
        db = self._reading()
        report = VerifyReport(path=str(self.path), schema_version=self.schema_version)
        try:
            db.execute("BEGIN")
            try:
                for (line,) in db.execute("PRAGMA integrity_check").fetchall():
                    if line != "ok":
                        report.add(f"SQLite integrity check: {line}")
                version = int(db.execute("PRAGMA user_version").fetchone()[0])
                report.schema_version = version
                if version < SCHEMA_VERSION:
                    report.add(
                        f"schema version {version} is older than {SCHEMA_VERSION}: no hash "
                        "chain to check (opening it for writing migrates it)"
                    )
                meta_session = int(self._meta(db, "session") or "0")
                report.undelivered = int(
                    db.execute(
                        "SELECT COUNT(*) FROM entries WHERE delivered_at IS NULL"
                    ).fetchone()[0]
                )
                Verifier(report, meta_session, with_hash=version >= 2, anchors=anchors).run(db)
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise JournalError(f"cannot verify journal: {exc}", path=str(self.path)) from exc
        return report

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
        self.set_metas({key: value})

    def set_metas(self, values: Mapping[str, str]) -> None:
        """Store several ``meta`` values in one transaction (one durable commit, not one each).

        Raises:
            JournalError: The write failed (nothing is stored), or a key is one the journal
                manages itself.
        """
        if "session" in values:
            raise JournalError("the session counter is managed by the journal", key="session")
        db = self._writable()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [(key, str(value)) for key, value in values.items()],
                )
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot write meta: {exc}", path=str(self.path), keys=",".join(values)
            ) from exc

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file and release the lock (idempotent); noted marks are written first."""
        if self._db is not None:
            with contextlib.suppress(JournalError):
                self.flush_delivered()
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
