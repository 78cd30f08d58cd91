"""The append: the next ``seq``, the hash chain's head, the insert and the listeners.

The card's hot path (docs/architecture.md, "Latency"): one ``BEGIN IMMEDIATE`` … ``COMMIT``
holding the noted delivery marks and the entry's row, its hash computed from the head kept in
memory (read at open), then the listeners (the outbox hands a card's event to the MQTT client
from one). :class:`controller.journal.Journal` prepares the stored body (``record``: the body
model's text; ``append``: a dict's) and calls :meth:`Appender.write`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from controller.errors import JournalError
from controller.journal.entries import EntryBody, EntryKind, JournalEntry
from controller.journal.format import GENESIS_HASH, entry_hash, format_time
from controller.journal.marks import DeliveryMarks
from controller.journal.transaction import immediate

log = structlog.get_logger(__name__)

_INSERT_COLUMNS = "seq, session, round_id, kind, happened_at, body, delivered_at, hash"


class Appender:
    """Appends entries to an open journal's file and tells the listeners.

    Attributes:
        path: The journal file (named in errors and logs).
        session: The session every entry records (set at open).
        last_seq: The highest ``seq`` committed (0 for an empty journal).
        last_hash: Its hash, the chain's head (:data:`~controller.journal.GENESIS_HASH` when
            empty).
        listeners: Called with each entry after its commit, in order.
    """

    def __init__(self, path: Path, marks: DeliveryMarks) -> None:
        self.path = path
        self.session = 0
        self.last_seq = 0
        self.last_hash = GENESIS_HASH
        self.listeners: list[Callable[[JournalEntry], None]] = []
        self._marks = marks

    def write(
        self,
        db: sqlite3.Connection,
        kind: EntryKind | str,
        body_text: str,
        body: dict[str, Any],
        typed: EntryBody | None,
        *,
        round_id: str | None,
        happened_at: datetime | None,
    ) -> JournalEntry:
        """Commit one entry (with the noted delivery marks), then tell the listeners.

        ``body_text`` is its stored JSON text, ``body`` the object that text reads back as,
        ``typed`` the body model it was written from (if any).

        Raises:
            JournalError: The time is naive, or the write failed (nothing was written).
        """
        seq = self.last_seq + 1
        prev = self.last_hash
        when = happened_at if happened_at is not None else datetime.now(UTC)
        when_text = format_time(when)
        kind_text = str(kind)
        chain = entry_hash(
            self.last_hash,
            seq=seq,
            session=self.session,
            round_id=round_id,
            kind=kind_text,
            happened_at=when_text,
            body=body_text,
        )
        try:
            with immediate(db):
                marks = self._marks.write(db)  # noted delivery marks ride along for free
                db.execute(
                    f"INSERT INTO entries ({_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
                    (seq, self.session, round_id, kind_text, when_text, body_text, chain),
                )
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot append entry: {exc}", path=str(self.path), seq=seq, kind=kind_text
            ) from exc
        self.last_seq = seq
        self.last_hash = chain
        self._marks.written(marks)
        entry = JournalEntry(
            seq=seq,
            session=self.session,
            round_id=round_id,
            kind=kind,
            happened_at=when.astimezone(UTC),  # == parse_time(when_text): format keeps the µs
            body=body,
            hash=chain,
            prev_hash=prev,
            _typed=typed,
        )
        for listener in tuple(self.listeners):
            try:
                listener(entry)
            except Exception:
                log.exception("journal listener failed", path=str(self.path), seq=seq)
        return entry
