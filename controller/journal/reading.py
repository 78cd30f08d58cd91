"""Reading a journal: entries by ``seq``, by round, by kind, from the outbox's cursor; verify.

:class:`EntryReader` holds the queries of :class:`controller.journal.Journal`'s readers; the
journal hands it the connection (after writing the noted delivery marks, for a read that shows
delivery state). Rows are read back as :class:`~controller.journal.JournalEntry`.
"""

from __future__ import annotations

import heapq
import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from controller.errors import JournalError
from controller.journal.anchors import Anchor
from controller.journal.entries import JournalEntry
from controller.journal.format import (
    CHAIN_SCHEMA_VERSION,
    GENESIS_HASH,
    SCHEMA_VERSION,
    parse_time,
)
from controller.journal.meta import read_meta
from controller.journal.verify import RoundCheck, Verifier, VerifyReport

_COLUMNS = (
    "seq, session, round_id, kind, happened_at, body, delivered_at, hash,"
    " (SELECT p.hash FROM entries AS p WHERE p.seq = entries.seq - 1)"
)
"""The entry's columns and the previous entry's hash (its ``link.prev``: a key look-up)."""
_COLUMNS_V1 = "seq, session, round_id, kind, happened_at, body, delivered_at, NULL, NULL"


def _seq(entry: JournalEntry) -> int:
    return entry.seq


def row_to_entry(row: tuple[Any, ...]) -> JournalEntry:
    """The entry of a row of :attr:`EntryReader.columns`."""
    seq, session, round_id, kind, happened_at, body, delivered_at, chain, prev = row
    if prev is None and chain is not None and int(seq) == 1:
        prev = GENESIS_HASH
    return JournalEntry(
        seq=int(seq),
        session=int(session),
        round_id=round_id,
        kind=kind,
        happened_at=parse_time(happened_at),
        body=json.loads(body),
        delivered_at=parse_time(delivered_at) if delivered_at is not None else None,
        hash=chain,
        prev_hash=prev,
    )


class EntryReader:
    """The journal's queries, for a file of one schema version.

    Attributes:
        path: The journal file (named in errors).
        columns: The selected columns (a v1 file has no ``hash``: read as ``NULL``).
    """

    def __init__(self, path: Path, schema_version: int = SCHEMA_VERSION) -> None:
        self.path = path
        self.columns = _COLUMNS if schema_version >= 2 else _COLUMNS_V1

    def _error(self, exc: sqlite3.Error, **context: object) -> JournalError:
        return JournalError(f"cannot read journal: {exc}", path=str(self.path), **context)

    def _rows(
        self, db: sqlite3.Connection, sql: str, params: tuple[Any, ...] = (), **context: object
    ) -> list[Any]:
        """All rows of a query (JournalError, with ``context``, if SQLite fails)."""
        try:
            return db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._error(exc, **context) from exc

    def _row(
        self, db: sqlite3.Connection, sql: str, params: tuple[Any, ...] = (), **context: object
    ) -> Any:
        """The first row of a query or ``None`` (JournalError, with ``context``, on failure)."""
        try:
            return db.execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            raise self._error(exc, **context) from exc

    def undelivered(
        self, db: sqlite3.Connection, *, limit: int, from_seq: int
    ) -> list[JournalEntry]:
        """Up to ``limit`` unacknowledged entries with ``seq >= from_seq``, in ``seq`` order."""
        rows = self._rows(
            db,
            f"SELECT {self.columns} FROM entries WHERE delivered_at IS NULL AND seq >= ? "
            "ORDER BY seq LIMIT ?",
            (from_seq, limit),
        )
        return [row_to_entry(row) for row in rows]

    def undelivered_count(self, db: sqlite3.Connection) -> int:
        """How many entries the broker has not acknowledged yet."""
        row = self._row(db, "SELECT COUNT(*) FROM entries WHERE delivered_at IS NULL")
        return int(row[0])

    def get(self, db: sqlite3.Connection, seq: int) -> JournalEntry | None:
        """The entry ``seq``, or ``None`` if there is none."""
        row = self._row(db, f"SELECT {self.columns} FROM entries WHERE seq = ?", (seq,), seq=seq)
        return None if row is None else row_to_entry(row)

    def entries(
        self, db: sqlite3.Connection, *, from_seq: int, round_id: str | None, page: int
    ) -> Iterator[JournalEntry]:
        """Entries with ``seq >= from_seq`` (of one round if given), read in pages of ``page``."""
        if round_id is None:
            return self._paged(db, "", (), from_seq - 1, page)
        return self._paged(db, "round_id = ? AND ", (round_id,), from_seq - 1, page)

    def _paged(
        self,
        db: sqlite3.Connection,
        where: str,
        params: tuple[object, ...],
        after: int,
        page: int,
    ) -> Iterator[JournalEntry]:
        """The entries past ``after`` that ``where`` (a condition and ``AND``) keeps, by page."""
        while True:
            rows = self._rows(
                db,
                f"SELECT {self.columns} FROM entries WHERE {where}seq > ? ORDER BY seq LIMIT ?",
                (*params, after, page),
                seq=after + 1,
            )
            for row in rows:
                entry = row_to_entry(row)
                after = entry.seq
                yield entry
            if len(rows) < page:
                return

    def entries_of_kinds(
        self, db: sqlite3.Connection, kinds: Sequence[str], *, page: int
    ) -> Iterator[JournalEntry]:
        """The entries of ``kinds``, in ``seq`` order, without reading the others.

        One paged read of the kind index per kind, merged by ``seq`` (a restart reads only
        the command entries of a 100,000-round journal, not every entry: issue 26).
        """
        return heapq.merge(*(self._of_kind(db, kind, page) for kind in kinds), key=_seq)

    def _of_kind(self, db: sqlite3.Connection, kind: str, page: int) -> Iterator[JournalEntry]:
        return self._paged(db, "kind = ? AND ", (kind,), 0, page)

    def last_of_kind(
        self, db: sqlite3.Connection, kind: str, *, before_seq: int
    ) -> JournalEntry | None:
        """The most recent entry of ``kind`` with ``seq < before_seq``, or ``None``."""
        row = self._row(
            db,
            f"SELECT {self.columns} FROM entries WHERE kind = ? AND seq < ? "
            "ORDER BY seq DESC LIMIT 1",
            (kind, before_seq),
        )
        return None if row is None else row_to_entry(row)

    def last_round_id(self, db: sqlite3.Connection) -> str | None:
        """The round id of the most recent ``round_opened`` entry, if any."""
        row = self._row(
            db, "SELECT round_id FROM entries WHERE kind = 'round_opened' ORDER BY seq DESC LIMIT 1"
        )
        return None if row is None else row[0]

    def verify(
        self,
        db: sqlite3.Connection,
        *,
        schema_version: int,
        anchors: Sequence[Anchor],
        round_check: RoundCheck | None = None,
    ) -> VerifyReport:
        """Run :meth:`controller.journal.Journal.verify`'s checks in one read transaction.

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
            db: The connection (noted delivery marks already written).
            schema_version: The version the journal was opened at (the report's until read).
            anchors: The feed's chain heads (none: the file's own checks only).
            round_check: Each round's entries go to it as the round ends (the game's rules).

        Raises:
            JournalError: The file cannot be read at all.
        """
        report = VerifyReport(path=str(self.path), schema_version=schema_version)
        try:
            db.execute("BEGIN")
            try:
                for (line,) in db.execute("PRAGMA integrity_check").fetchall():
                    if line != "ok":
                        report.add(f"SQLite integrity check: {line}")
                version = int(db.execute("PRAGMA user_version").fetchone()[0])
                report.schema_version = version
                if version < CHAIN_SCHEMA_VERSION:
                    report.add(
                        f"schema version {version} is older than {CHAIN_SCHEMA_VERSION}: no "
                        "hash chain to check (opening it for writing migrates it)"
                    )
                meta_session = int(read_meta(db, "session") or "0")
                report.undelivered = int(
                    db.execute(
                        "SELECT COUNT(*) FROM entries WHERE delivered_at IS NULL"
                    ).fetchone()[0]
                )
                Verifier(
                    report,
                    meta_session,
                    with_hash=version >= 2,
                    anchors=anchors,
                    round_check=round_check,
                ).run(db)
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise JournalError(f"cannot verify journal: {exc}", path=str(self.path)) from exc
        return report
