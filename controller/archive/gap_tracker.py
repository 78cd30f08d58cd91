"""Gaps in a table's ``seq`` for a single archive on SQLite: seen, asked for, filled, alerted.

Pure book-keeping (no I/O, the clock is passed in): :class:`GapTracker` learns each entry's
``seq`` as this process stores it and says which gaps are due for a replay request and which
for an alert. The consumer (:mod:`controller.archive.consumer`) does the I/O. It is the gap
path of the SQLite store (``make run``'s archive: one process, one table); PostgreSQL archives,
which may run as several instances that each see part of a table's ``seq``, keep their gaps in
the database instead (:class:`controller.archive.gaps.GapBook`; docs/archive.md, "Gaps").
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

MAX_LISTED = 10_000
"""The most missing ``seq`` values a gap lists (in its row and its alert)."""


@dataclass(slots=True)
class TrackedGap:
    """Missing ``seq`` values ``lo..hi`` of one table.

    Attributes:
        table: The table.
        lo: First missing ``seq``.
        hi: Last missing ``seq``.
        opened: When it was seen (the tracker's clock).
        got: The ``seq`` values in ``lo..hi`` that have arrived since.
        gap_id: Its row in the ``gaps`` table, once recorded.
        requested_at: When a replay was last asked for (``None``: never).
        alerted: It was alerted.
    """

    table: str
    lo: int
    hi: int
    opened: float
    got: set[int] = field(default_factory=set)
    gap_id: int | None = None
    requested_at: float | None = None
    alerted: bool = False

    @property
    def filled(self) -> bool:
        """Every missing ``seq`` arrived."""
        return len(self.got) == self.hi - self.lo + 1

    @property
    def missing_count(self) -> int:
        """How many ``seq`` values are still absent."""
        return self.hi - self.lo + 1 - len(self.got)

    def missing(self, limit: int = MAX_LISTED) -> list[int]:
        """The first ``limit`` ``seq`` values still absent, in order.

        Bounded: what is listed is stored with the gap and named in its alert; a gap is as
        wide as what its table could have sent (:class:`controller.inbound.SeqGuard`), which
        over a long outage is more than is worth listing.
        """
        return list(itertools.islice(
            (seq for seq in range(self.lo, self.hi + 1) if seq not in self.got), limit
        ))  # fmt: skip


class GapTracker:
    """Per table: the highest ``seq`` seen on ``events`` and the open gaps below it.

    Args:
        highest: Each table's highest archived ``seq`` (from the database at start).
    """

    def __init__(self, highest: dict[str, int] | None = None) -> None:
        self.highest: dict[str, int] = dict(highest or {})
        self.open: list[TrackedGap] = []

    def seen(self, table: str, seq: int, now: float, *, in_order_topic: bool) -> TrackedGap | None:
        """Learn that ``seq`` of ``table`` arrived; the new gap it reveals, if any.

        Args:
            table: The table.
            seq: The entry's ``seq``.
            now: The clock.
            in_order_topic: It came on ``events`` (gap-free): only there does a jump mean
                entries are missing (``results`` carries only some ``seq`` values).
        """
        for gap in self.open:
            if gap.table == table and gap.lo <= seq <= gap.hi:
                gap.got.add(seq)
        high = self.highest.get(table, 0)
        if seq <= high:
            return None
        if not in_order_topic:
            return None
        self.highest[table] = seq
        if seq == high + 1:
            return None
        gap = TrackedGap(table, high + 1, seq - 1, now)
        self.open.append(gap)
        return gap

    def filled(self) -> list[TrackedGap]:
        """Remove and return the gaps whose every ``seq`` arrived."""
        done = [gap for gap in self.open if gap.filled]
        self.open = [gap for gap in self.open if not gap.filled]
        return done

    def due_for_replay(
        self, now: float, grace: float, every: float = float("inf")
    ) -> list[TrackedGap]:
        """The open gaps due a replay request.

        Those older than ``grace`` with none asked yet, and those not alerted whose last
        request is ``every`` seconds old or more (asked again).
        """
        return [
            gap
            for gap in self.open
            if (gap.requested_at is None and now - gap.opened >= grace)
            or (
                gap.requested_at is not None and not gap.alerted and now - gap.requested_at >= every
            )
        ]

    def due_for_alert(self, now: float, timeout: float) -> list[TrackedGap]:
        """Open gaps older than ``timeout`` not alerted yet."""
        return [g for g in self.open if not g.alerted and now - g.opened >= timeout]
