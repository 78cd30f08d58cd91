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

:class:`Journal` is a façade: it owns the connection and the append API (``record``,
``append``) and hands each job to a module beside it: the insert, the hash chain's head and the
listeners (:mod:`~controller.journal.appending`, the card's hot path), opening, locking and
migrations (:mod:`~controller.journal.opening`), delivery marks
(:mod:`~controller.journal.marks`), queries and verification (:mod:`~controller.journal.reading`)
and the ``meta`` table (:mod:`~controller.journal.meta`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from controller.errors import JournalError
from controller.journal import opening
from controller.journal.anchors import Anchor
from controller.journal.appending import Appender
from controller.journal.entries import EntryBody, EntryKind, JournalEntry, stored_body
from controller.journal.format import SCHEMA_VERSION
from controller.journal.marks import DeliveryMarks
from controller.journal.meta import check_meta_keys, load_meta, store_metas
from controller.journal.reading import EntryReader
from controller.journal.verify import RoundCheck, VerifyReport


class Journal:
    """An open journal file. Create one with :meth:`open`.

    Attributes:
        path: The SQLite file.
        session: This run's session counter (1 for the first run of a new file); for a
            read-only journal, the session of the last run that opened it for writing.
        readonly: Opened with :meth:`open_readonly` (every write is refused).
        schema_version: The file's ``PRAGMA user_version`` (older than
            :data:`SCHEMA_VERSION` only for a read-only journal nobody has migrated yet).
        journal_id: The journal's identity, made once when the file was created (or migrated
            to schema 3): 32 hex digits, in every message the table publishes (docs/mqtt.md).
            ``None`` only for a read-only journal of schema 2 or older.
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
        self.session = 0
        self.journal_id: str | None = None
        self.readonly = readonly
        self.schema_version = SCHEMA_VERSION
        self._marks = DeliveryMarks(path)
        self._appender = Appender(path, self._marks)
        self._reader = EntryReader(path)

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path) -> Journal:
        """Open (creating and migrating if needed) a journal and start a new session.

        Raises:
            JournalError: The file cannot be opened, is locked by another process, is not a
                journal, or was written by a newer version of tablectl.
        """
        path = Path(path)
        lock_file = opening.lock(path)
        try:
            connection = opening.connect(path)
        except JournalError:
            lock_file.close()
            raise
        journal = cls(path, connection, lock_file)
        try:
            journal._opened(opening.prepare(connection, path))
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
        connection = opening.connect_readonly(path)
        journal = cls(path, connection, None, readonly=True)
        try:
            journal._opened(opening.prepare_readonly(connection, path))
        except BaseException:
            journal.close()
            raise
        return journal

    def _opened(self, opened: opening.Opened) -> None:
        self.session = self._appender.session = opened.session
        self.journal_id = opened.journal_id
        self.schema_version = opened.schema_version
        self._appender.last_seq = opened.last_seq
        self._appender.last_hash = opened.last_hash
        self._reader = EntryReader(self.path, opened.schema_version)

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise JournalError("journal is closed", path=str(self.path))
        return self._db

    def _reading(self) -> sqlite3.Connection:
        """The connection, for a read that shows delivery state: noted marks written first."""
        db = self._connection()
        if self._marks:
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
        return self._appender.last_seq

    @property
    def chain_head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the latest committed entry: the hash chain's head.

        ``(0, GENESIS_HASH)`` for an empty journal. Published in the retained online status
        (the birth) so the feed anchors the journal outside the file (docs/journal.md).
        """
        return self._appender.last_seq, self._appender.last_hash

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
        return self._appender.write(
            self._writable(), kind, text, value, body, round_id=round_id, happened_at=happened_at
        )

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
                seq=self._appender.last_seq + 1,
                kind=kind,
            ) from exc
        return self._appender.write(
            self._writable(),
            kind,
            text,
            json.loads(text),
            None,
            round_id=round_id,
            happened_at=happened_at,
        )

    def add_listener(self, callback: Callable[[JournalEntry], None]) -> None:
        """Call ``callback(entry)`` after each append is committed (in the appending thread).

        A listener must be quick and must not raise; an exception is logged and ignored.
        """
        self._appender.listeners.append(callback)

    def remove_listener(self, callback: Callable[[JournalEntry], None]) -> None:
        """Stop calling a listener added with :meth:`add_listener` (no error if absent)."""
        with contextlib.suppress(ValueError):
            self._appender.listeners.remove(callback)

    # -- delivery marks (controller.journal.marks) -----------------------------------------

    def mark_delivered(self, seq: int) -> None:
        """Record that the broker acknowledged entry ``seq``.

        Raises:
            JournalError: No such entry, or the write failed.
        """
        self.mark_delivered_many((seq,))

    def mark_delivered_many(self, seqs: Iterable[int], *, at: datetime | None = None) -> None:
        """Record that the broker acknowledged every entry of ``seqs``, in one transaction.

        Committed with ``synchronous=NORMAL`` (a mark lost in a power cut only causes a
        re-publish), together with the marks noted and not written yet.

        Raises:
            JournalError: An entry does not exist, the write failed, or the journal is read-only.
        """
        db = self._writable()
        self._marks.mark(db, seqs, at=at, last_seq=self._appender.last_seq)

    def note_delivered(self, seqs: Iterable[int], *, at: datetime | None = None) -> None:
        """Note that the broker acknowledged ``seqs``; written with the next write.

        The outbox's way to mark deliveries without a commit of their own: the marks ride
        along in the next :meth:`append`, or :meth:`flush_delivered` writes them; every read
        that shows delivery state and :meth:`close` write them first
        (:mod:`controller.journal.marks`).

        Raises:
            JournalError: An entry does not exist, or the journal is read-only.
        """
        self._writable()
        self._marks.note(seqs, at=at, last_seq=self._appender.last_seq)

    @property
    def unwritten_marks(self) -> int:
        """Delivery marks noted with :meth:`note_delivered` and not written yet."""
        return len(self._marks)

    def flush_delivered(self) -> None:
        """Write the delivery marks noted so far, in one ``synchronous=NORMAL`` transaction.

        Raises:
            JournalError: The write failed (the marks stay noted).
        """
        if self._db is not None and not self.readonly:
            self._marks.flush(self._db)

    # -- reading (controller.journal.reading) ----------------------------------------------

    def undelivered(self, *, limit: int = 500, from_seq: int = 1) -> list[JournalEntry]:
        """Up to ``limit`` entries with ``seq >= from_seq`` not yet acknowledged by the broker.

        In ``seq`` order.
        """
        return self._reader.undelivered(self._reading(), limit=limit, from_seq=from_seq)

    def undelivered_count(self) -> int:
        """How many entries the broker has not acknowledged yet."""
        return self._reader.undelivered_count(self._reading())

    def get(self, seq: int) -> JournalEntry | None:
        """The entry ``seq``, or ``None`` if there is none."""
        return self._reader.get(self._reading(), seq)

    def entries(
        self, *, from_seq: int = 0, round_id: str | None = None, page: int = 500
    ) -> Iterator[JournalEntry]:
        """Entries with ``seq >= from_seq`` (of one round if given), in ``seq`` order.

        Read in pages, so appending while iterating is safe (new entries are included).
        """
        yield from self._reader.entries(
            self._reading(), from_seq=from_seq, round_id=round_id, page=page
        )

    def entries_of_kinds(self, kinds: Sequence[str], *, page: int = 500) -> Iterator[JournalEntry]:
        """The entries of ``kinds``, in ``seq`` order, through the kind index (read in pages)."""
        yield from self._reader.entries_of_kinds(self._reading(), kinds, page=page)

    def last_of_kind(self, kind: str, *, before_seq: int | None = None) -> JournalEntry | None:
        """The most recent entry of ``kind`` (with ``seq < before_seq`` if given), or ``None``."""
        db = self._reading()
        limit = before_seq if before_seq is not None else self._appender.last_seq + 1
        return self._reader.last_of_kind(db, kind, before_seq=limit)

    def last_round_id(self) -> str | None:
        """The round id of the most recent ``round_opened`` entry, if any."""
        return self._reader.last_round_id(self._connection())

    def verify(
        self, anchors: Sequence[Anchor] = (), *, round_check: RoundCheck | None = None
    ) -> VerifyReport:
        """Check the whole file, in one read transaction, and say precisely what is wrong.

        The checks (the file's own, the hash chain, every round's order, and the feed's chain
        heads when given) are listed at :meth:`~controller.journal.reading.EntryReader.verify`
        and in docs/journal.md.

        Args:
            anchors: The feed's chain heads (none: the file's own checks only), from
                :func:`controller.journal.read_feed`.
            round_check: Handed each round's entries as it ends, for what the journal alone
                cannot judge (``controller.rules_check.RulesCheck``: the result re-evaluated
                from the cards with the game's rules); none: the file's own checks only.

        Returns:
            The report; ``report.ok`` when nothing was found (``report.truncated`` when the
            feed anchors entries beyond the file's last one).

        Raises:
            JournalError: The file cannot be read at all.
        """
        return self._reader.verify(
            self._reading(),
            schema_version=self.schema_version,
            anchors=anchors,
            round_check=round_check,
        )

    # -- meta (controller.journal.meta) ----------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """A value of the ``meta`` table, or ``None``."""
        return load_meta(self._connection(), key, path=self.path)

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
        check_meta_keys(values)
        store_metas(self._writable(), values, path=self.path)

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
            opening.unlock(self._lock_file)
            self._lock_file = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._db is None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def identity(self) -> str:
        """:attr:`journal_id` of a journal that has one (every journal opened for writing).

        Raises:
            JournalError: A read-only journal of schema 2 or older (no identity yet).
        """
        if self.journal_id is None:
            raise JournalError(
                "the journal has no identity yet (schema 2 or older: open it for writing once)",
                path=str(self.path),
            )
        return self.journal_id

    def __repr__(self) -> str:
        return f"Journal({os.fspath(self.path)!r}, session={self.session})"
