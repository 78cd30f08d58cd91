"""The retained round snapshot the outbox publishes, folded lazily from the journal.

The live card's event needs no snapshot: its snapshot message is built after the event left,
once per burst (:mod:`controller.outbox.delivery`). Entries handed off meanwhile are queued
unfolded and folded when a snapshot is needed; each entry's snapshot is kept until it is
delivered, for a re-send after a reconnect.
"""

from __future__ import annotations

from collections import deque

from controller.journal import Journal, JournalEntry
from controller.messages import SNAPSHOT_VIEW_KINDS, RoundSnapshot


class SnapshotFolder:
    """Folds the current round's entries into :class:`~controller.messages.RoundSnapshot`.

    Args:
        journal: The table's journal.
    """

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self._snapshot = RoundSnapshot()
        self._snapshots: dict[int, RoundSnapshot] = {}
        self._unfolded: deque[JournalEntry] = deque()
        self._ready = False

    def prepare(self) -> None:
        """Fold the delivered part of the current round, so the retained snapshot is whole."""
        if self._ready:
            return
        pending = self.journal.undelivered(limit=1)
        first = pending[0].seq if pending else self.journal.last_seq + 1
        opened = self.journal.last_of_kind("round_opened", before_seq=first)
        snapshot = RoundSnapshot()
        if opened is not None:
            for entry in self.journal.entries(from_seq=opened.seq):
                if entry.seq >= first:
                    break
                snapshot = snapshot.apply(entry)
        self._snapshot = snapshot
        self._ready = True

    def for_message(self, entry: JournalEntry) -> RoundSnapshot | None:
        """The snapshot ``entry``'s own messages need now (``None``: it is folded later).

        An entry whose public view reads the snapshot, or one outside a round (nothing else
        would fold it), is folded at once; any other is queued, to be folded when a
        snapshot is needed.
        """
        if entry.kind in SNAPSHOT_VIEW_KINDS or entry.round_id is None:
            return self.after(entry)
        if entry.seq > self._snapshot.last_seq and (
            not self._unfolded or entry.seq > self._unfolded[-1].seq
        ):
            self._unfolded.append(entry)  # folded when its snapshot is needed
        return None

    def after(self, entry: JournalEntry) -> RoundSnapshot:
        """The round snapshot after ``entry``: entries handed off before it are folded first."""
        cached = self._snapshots.get(entry.seq)
        if cached is not None:
            return cached
        unfolded = self._unfolded
        while unfolded and unfolded[0].seq <= entry.seq:
            self._fold(unfolded.popleft())
        self._fold(entry)
        return self._snapshots.get(entry.seq, self._snapshot)

    def forget(self, seq: int) -> None:
        """``seq`` was delivered: its snapshot is not needed for a re-send any more."""
        self._snapshots.pop(seq, None)

    def _fold(self, entry: JournalEntry) -> None:
        if entry.seq > self._snapshot.last_seq:
            self._snapshot = self._snapshot.apply(entry)
            self._snapshots[entry.seq] = self._snapshot
