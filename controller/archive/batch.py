"""What every archive store does the same way around its database (pure, no I/O).

Both stores (:mod:`controller.archive.store`, PostgreSQL; :mod:`controller.archive.sqlite_store`,
SQLite) take a batch of entries and answer each one's outcome as if stored one by one
(:func:`first_copies`, :func:`outcomes`), and keep each round's fold to fold it on from its
new entries alone (:class:`RoundFolds`): the rules live here once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from controller.archive.ingest import Entry, Rejected
from controller.journal.fold import RoundFold

GapStamp = Literal["replay_requested", "filled", "alerted"]
"""What may be stamped on a gap (a store's ``mark_gap``)."""

GAP_STAMP_COLUMNS: dict[str, str] = {
    "replay_requested": "replay_requested_at",
    "filled": "filled_at",
    "alerted": "alerted_at",
}
"""The ``gaps`` column each stamp sets (the same in both stores' schemas)."""

Stored = Literal["new", "duplicate", "conflict"]
"""What became of an entry: archived now, a copy of an archived one, or a conflicting copy."""
Key = tuple[str, int, int]
"""An entry's idempotency key: ``(table, session, seq)``."""
RoundKey = tuple[str, str]
"""A round: ``(table, round_id)``."""
FOLDS_KEPT = 20_000
"""Rounds whose fold a store keeps, to fold a round on from its new entries alone."""


def key_of(entry: Entry) -> Key:
    """``entry``'s idempotency key."""
    return (entry.table, entry.session, entry.seq)


def first_copies(entries: Iterable[Entry]) -> dict[Key, Entry]:
    """Each key's first entry in ``entries``, in order."""
    first: dict[Key, Entry] = {}
    for entry in entries:
        first.setdefault((entry.table, entry.session, entry.seq), entry)
    return first


def outcomes(
    entries: Sequence[Entry], first: dict[Key, Entry], new: set[Key], stored: dict[Key, str]
) -> list[Stored]:
    """Each entry's outcome, in order, as if the batch had been stored one by one.

    Args:
        entries: The batch.
        first: :func:`first_copies` of it.
        new: The keys the batch archived now (their first copy is ``new``).
        stored: Each key's archived digest (a later copy with it is a ``duplicate``, with
            another a ``conflict``).
    """
    out: list[Stored] = []
    for entry in entries:
        key = (entry.table, entry.session, entry.seq)
        if key in new and first[key] is entry:
            out.append("new")
        elif stored.get(key) == entry.digest:
            out.append("duplicate")
        else:
            out.append("conflict")
    return out


def conflict(entry: Entry) -> Rejected:
    """The rejection of a copy of an archived key with other content."""
    return Rejected(
        entry.topic,
        entry.table,
        entry.seq,
        "conflict",
        f"seq {entry.seq} (session {entry.session}) is archived with other content",
        entry.raw or json.dumps(entry.envelope).encode(),
    )


def envelope_text(entry: Entry) -> str:
    """The envelope as stored: the payload's own text when it is UTF-8, else re-dumped."""
    return entry.raw.decode() if entry.raw else json.dumps(entry.envelope)


@dataclass(slots=True)
class Folded:
    """A round's entries folded so far, in ``seq`` order, and what its ``rounds`` row needs.

    Attributes:
        fold: The fold (``controller.journal.fold.RoundFold``).
        last_seq: The last entry's ``seq`` (0: none yet).
        count: How many entries.
        opened: When the round opened (its first ``round_opened``).
        final: ``(at, seq, delayed)`` of its first result or void.
    """

    fold: RoundFold
    last_seq: int = 0
    count: int = 0
    opened: datetime | None = None
    final: tuple[datetime, int, bool] | None = None

    def add(self, kind: str, data: Any, at: datetime, seq: int, delayed: bool) -> None:
        """Fold the next entry on (``seq`` above every one before)."""
        self.fold = self.fold.apply(kind, data)
        self.last_seq = seq
        self.count += 1
        if kind == "round_opened" and self.opened is None:
            self.opened = at
        if kind in {"round_result", "round_voided"} and self.final is None:
            self.final = (at, seq, delayed)

    def row(self, key: RoundKey) -> RoundRow:
        """Its ``rounds`` row."""
        fold, final = self.fold, self.final
        return RoundRow(
            table=key[0],
            round_id=key[1],
            round_no=fold.round_no,
            game=fold.game,
            state=fold.state,
            outcome=fold.outcome,
            opened_at=self.opened,
            finished_at=None if final is None else final[0],
            result_seq=None if final is None else final[1],
            delayed=False if final is None else final[2],
            result=None if fold.result is None else dict(fold.result),
            bets=fold.bets,
            entries=self.count,
        )


@dataclass(frozen=True, slots=True)
class RoundRow:
    """A ``rounds`` row, as both stores write it (``result`` and ``bets`` as JSON values)."""

    table: str
    round_id: str
    round_no: int | None
    game: str | None
    state: str
    outcome: str | None
    opened_at: datetime | None
    finished_at: datetime | None
    result_seq: int | None
    delayed: bool
    result: dict[str, Any] | None
    bets: Any
    entries: int


class RoundFolds:
    """The folds a store keeps, and which rounds of a batch must be read back and refolded.

    A round this store folded before, whose archived entries are exactly the ones it saw
    plus the batch's (same count, every new ``seq`` above its last), is folded on from its
    kept state with the new entries alone; any other (another instance wrote into it, an
    entry came out of ``seq`` order, a round not kept) is read back whole.
    """

    def __init__(self) -> None:
        self._folds: dict[RoundKey, Folded] = {}

    def clear(self) -> None:
        """Forget every fold (after a rolled-back transaction)."""
        self._folds.clear()

    @staticmethod
    def touched(fresh: Iterable[Entry]) -> dict[RoundKey, list[Entry]]:
        """The rounds of ``fresh`` (new entries), each with its new entries."""
        added: dict[RoundKey, list[Entry]] = {}
        for entry in fresh:
            if entry.round_id is not None:
                added.setdefault((entry.table, entry.round_id), []).append(entry)
        return added

    def fold_on(
        self, added: dict[RoundKey, list[Entry]], archived: dict[RoundKey, int]
    ) -> list[RoundKey]:
        """Fold each round on with its new entries where the kept fold allows it.

        Args:
            added: :meth:`touched`.
            archived: Each round's entry count in the database, the batch's included.

        Returns:
            The rounds to read back whole (:meth:`load` them).
        """
        reread: list[RoundKey] = []
        for key, entries in added.items():
            new = sorted(entries, key=lambda e: e.seq)
            kept = self._folds.pop(key, None) or Folded(RoundFold(round_id=key[1]))
            if kept.count + len(new) == archived.get(key) and new[0].seq > kept.last_seq:
                for entry in new:
                    kept.add(entry.kind, entry.data, entry.at, entry.seq, entry.delayed)
                self._keep(key, kept)
            else:
                reread.append(key)
        return reread

    def load(self, rows: Iterable[tuple[str, str, str, Any, datetime, int, bool]]) -> None:
        """Fold rounds whole from their archived entries.

        Args:
            rows: ``(table, round, kind, data, at, seq, delayed)`` in ``(table, round, seq)``
                order.
        """
        folds: dict[RoundKey, Folded] = {}
        for table, round_id, kind, data, at, seq, delayed in rows:
            key = (table, round_id)
            folded = folds.get(key)
            if folded is None:
                folded = folds[key] = Folded(RoundFold(round_id=round_id))
            folded.add(kind, data, at, seq, delayed)
        for key, folded in folds.items():
            self._keep(key, folded)

    def rows(self, keys: Iterable[RoundKey]) -> list[RoundRow]:
        """The ``rounds`` rows of ``keys`` (each folded by :meth:`fold_on` or :meth:`load`)."""
        return [self._folds[key].row(key) for key in keys]

    def _keep(self, key: RoundKey, folded: Folded) -> None:
        """Keep a round's fold (the oldest kept one dropped past :data:`FOLDS_KEPT`)."""
        self._folds[key] = folded
        if len(self._folds) > FOLDS_KEPT:
            del self._folds[next(iter(self._folds))]
