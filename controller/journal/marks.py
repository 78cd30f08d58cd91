"""Delivery marks: which entries the broker has acknowledged (``entries.delivered_at``).

The outbox notes a mark when a PUBACK arrives (:meth:`DeliveryMarks.note`); the mark is kept
in memory and written with the next write transaction: inside the next append (no extra
commit: :meth:`DeliveryMarks.write` in the append's transaction), or by
:meth:`DeliveryMarks.flush`, which the outbox calls as soon as nothing is in flight. Every read
that shows delivery state writes them first (:meth:`controller.journal.Journal.flush_delivered`),
so no caller ever sees a noted mark missing. A crash loses at most the unwritten marks: those
entries are published again, and consumers de-duplicate on ``seq``.

Marks are committed with ``synchronous=NORMAL`` (switched back to ``FULL`` right after): a
mark lost in a power cut only causes a re-publish. A repeated mark keeps the first
acknowledgement time. Marking an unknown ``seq`` is an error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from controller.errors import JournalError
from controller.journal.format import format_time
from controller.journal.transaction import immediate

MARK_DELIVERED = "UPDATE entries SET delivered_at = COALESCE(delivered_at, ?) WHERE seq = ?"
"""One delivery mark: ``(delivered_at, seq)``; the first acknowledgement time is kept."""


class DeliveryMarks:
    """The delivery marks noted and not written yet, and how they are written.

    Attributes:
        path: The journal file (named in errors).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: list[tuple[str, int]] = []

    def __len__(self) -> int:
        return len(self._pending)

    def note(self, seqs: Iterable[int], *, at: datetime | None, last_seq: int) -> None:
        """Note that the broker acknowledged ``seqs`` (all or nothing), at ``at`` or now.

        Raises:
            JournalError: An entry does not exist (``seq`` outside ``1..last_seq``).
        """
        when = format_time(at if at is not None else datetime.now(UTC))
        wanted = list(seqs)
        self._check(wanted, last_seq)
        self._pending.extend((when, seq) for seq in wanted)

    def mark(
        self, db: sqlite3.Connection, seqs: Iterable[int], *, at: datetime | None, last_seq: int
    ) -> None:
        """Write the marks of ``seqs`` now, with those noted before, in one transaction.

        Raises:
            JournalError: An entry does not exist, or the write failed.
        """
        wanted = sorted(set(seqs))
        when = format_time(at if at is not None else datetime.now(UTC))
        self._check(wanted, last_seq)
        self._pending.extend((when, seq) for seq in wanted)
        self.flush(db)

    def _check(self, seqs: list[int], last_seq: int) -> None:
        for seq in seqs:
            if not 1 <= seq <= last_seq:
                raise JournalError(f"no journal entry with seq {seq}", path=str(self.path), seq=seq)

    def write(self, db: sqlite3.Connection) -> int:
        """Write the noted marks inside the caller's open transaction.

        Returns:
            How many were written: pass it to :meth:`written` once the transaction commits.
        """
        count = len(self._pending)
        if count:
            db.executemany(MARK_DELIVERED, self._pending[:count])
        return count

    def written(self, count: int) -> None:
        """Forget the first ``count`` noted marks: :meth:`write` wrote them and it committed."""
        del self._pending[:count]

    def flush(self, db: sqlite3.Connection) -> None:
        """Write the noted marks in a transaction of their own, ``synchronous=NORMAL``.

        Raises:
            JournalError: The write failed (the marks stay noted).
        """
        if not self._pending:
            return
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            try:
                with immediate(db):
                    count = self.write(db)
            finally:
                db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot mark delivered: {exc}", path=str(self.path), seq=self._pending[0][1]
            ) from exc
        self.written(count)
