"""Gaps in a table's ``seq``, kept in PostgreSQL so that several archive instances share them.

With MQTT 5 shared subscriptions each instance sees only part of a table's entries (one may
hold seq 10 and 12 while the other stores 11), so no instance can tell a gap from what it
received. A gap is what **the database** lacks: :class:`GapBook` finds the holes in a table's
archived ``seq`` values (``entry_keys``) and walks each through its life, every step a
statement that one instance wins (docs/archive.md, "Gaps"):

1. :meth:`GapBook.scan`: under the table's ``gap_watermarks`` row lock (``FOR UPDATE SKIP
   LOCKED``: an instance skips a table another one is scanning), the holes above the
   watermark whose next archived ``seq`` arrived at least ``grace`` seconds ago are recorded
   in ``gaps``, and so is the tail between the highest archived ``seq`` and the journal head
   a status message of the table stated (``chain_head``) once that status and the table's
   last archived entry are as old; the watermark moves up to the first hole still in its
   grace.
2. :meth:`GapBook.claim_replays`: the open gaps nobody asked a replay for, and those not
   alerted whose last request is ``gaps.replay_every_seconds`` old, are stamped and returned
   in one ``UPDATE`` (rows locked, skipped if locked): exactly one instance sends each
   request.
3. :meth:`GapBook.fill`: gaps whose every ``seq`` is now archived get ``filled_at`` (once).
4. :meth:`GapBook.alert`: gaps open ``timeout`` seconds after they were recorded are stamped
   alerted, their missing ``seq`` values kept, and an ``alerts`` row written, in one
   transaction: one alert per gap, whichever instance gets there.

Times are the database's (``now()``), so instances on other machines agree on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True, slots=True)
class Gap:
    """Missing ``seq`` values ``lo..hi`` of one table, as recorded in ``gaps``.

    Attributes:
        gap_id: Its row.
        table: The table.
        lo: First missing ``seq``.
        hi: Last missing ``seq``.
        missing: The ``seq`` values still absent (known when alerted).
    """

    gap_id: int
    table: str
    lo: int
    hi: int
    missing: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Hole:
    """A run of ``seq`` values absent from the archive, found by a scan.

    Attributes:
        table: The table.
        lo: First absent ``seq``.
        hi: Last absent ``seq``.
        ripe: The ``seq`` after it arrived at least the grace period ago.
    """

    table: str
    lo: int
    hi: int
    ripe: bool


def advance(watermark: int, highest: int | None, holes: Sequence[Hole]) -> int:
    """A table's new watermark: below its first hole still in grace, else its highest seq.

    Args:
        watermark: The current watermark.
        highest: The highest archived ``seq`` above it (``None``: nothing above it).
        holes: The table's holes above the watermark.
    """
    young = [hole.lo for hole in holes if not hole.ripe]
    if young:
        return max(watermark, min(young) - 1)
    # Every hole is recorded now: past them all (a tail hole ends above the highest seq).
    return max(watermark, highest or 0, *(hole.hi for hole in holes))


_LOCK_MARKS = (
    "SELECT table_id, scanned_to FROM gap_watermarks WHERE table_id = ANY(%s)"
    " ORDER BY table_id FOR UPDATE SKIP LOCKED"
)
_HOLES = (
    # One statement, one snapshot: the holes, the tail holes and the highest seq must agree
    # (read apart, a commit in between could show a higher seq than the holes were computed
    # for, and the watermark would pass a hole unrecorded). Rows: (table, lo, hi, ripe) for
    # a hole; (table, NULL, highest, NULL) for each table's highest archived seq.
    "WITH w AS (SELECT * FROM unnest(%(tables)s::text[], %(marks)s::bigint[]) AS w(t, mark)),"
    " k AS (SELECT k.table_id, k.seq, min(k.received_at) AS received_at FROM entry_keys k"
    "  JOIN w ON k.table_id = w.t AND k.seq > w.mark GROUP BY k.table_id, k.seq),"
    " x AS (SELECT k.table_id, k.seq, k.received_at,"
    "  lag(k.seq, 1, w.mark) OVER (PARTITION BY k.table_id ORDER BY k.seq) AS prev"
    "  FROM k JOIN w ON k.table_id = w.t),"
    # The journal's head as the table's status messages state it (birth, stop, Last Will):
    # entries up to it exist, so what the archive lacks above its highest seq is a hole too.
    " h AS (SELECT st.table_id, max(st.chain_head_seq) AS head, max(st.received_at) AS at"
    "  FROM table_status st JOIN w ON st.table_id = w.t GROUP BY st.table_id)"
    " SELECT x.table_id, x.prev + 1, x.seq - 1,"
    "  x.received_at <= now() - make_interval(secs => %(grace)s) FROM x WHERE x.seq > x.prev + 1"
    # A tail ripens once the status and the table's last archived entry are both as old as
    # the grace: a backlog still draining (entries arriving) is not a gap.
    " UNION ALL SELECT w.t, coalesce(max(k.seq), w.mark) + 1, h.head,"
    "  greatest(h.at, max(k.received_at)) <= now() - make_interval(secs => %(grace)s)"
    "  FROM w JOIN h ON h.table_id = w.t LEFT JOIN k ON k.table_id = w.t"
    "  GROUP BY w.t, w.mark, h.head, h.at HAVING h.head > coalesce(max(k.seq), w.mark)"
    " UNION ALL SELECT k.table_id, NULL, max(k.seq), NULL FROM k GROUP BY k.table_id"
)
_RECORD = (
    "INSERT INTO gaps (table_id, from_seq, to_seq)"
    " SELECT h.t, h.lo, h.hi FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS h(t, lo, hi)"
    " WHERE NOT EXISTS (SELECT 1 FROM gaps g WHERE g.table_id = h.t"
    "  AND g.from_seq <= h.hi AND g.to_seq >= h.lo)"
    " ON CONFLICT DO NOTHING RETURNING id, table_id, from_seq, to_seq"
)
_MOVE_MARKS = (
    "UPDATE gap_watermarks m SET scanned_to = n.mark, updated_at = now()"
    " FROM unnest(%s::text[], %s::bigint[]) AS n(t, mark)"
    " WHERE m.table_id = n.t AND m.scanned_to <> n.mark"
)
_FILL = (
    "UPDATE gaps g SET filled_at = now(), missing = NULL"
    " FROM (SELECT id FROM gaps WHERE filled_at IS NULL AND table_id = ANY(%s)"
    "  AND (%s OR alerted_at IS NULL) FOR UPDATE SKIP LOCKED) due"
    " WHERE g.id = due.id AND (SELECT count(DISTINCT k.seq) FROM entry_keys k"
    "  WHERE k.table_id = g.table_id AND k.seq BETWEEN g.from_seq AND g.to_seq)"
    "  = g.to_seq - g.from_seq + 1"
    " RETURNING g.id, g.table_id, g.from_seq, g.to_seq"
)
_CLAIM = (
    # Never asked, or asked `every` seconds ago and still open and not alerted (a request
    # that failed, or an instance that claimed it and died): stamped (again) and returned.
    "UPDATE gaps g SET replay_requested_at = now()"
    " FROM (SELECT id FROM gaps WHERE filled_at IS NULL AND table_id = ANY(%s)"
    "  AND (replay_requested_at IS NULL OR (alerted_at IS NULL"
    "   AND replay_requested_at <= now() - make_interval(secs => %s)))"
    "  FOR UPDATE SKIP LOCKED) due"
    " WHERE g.id = due.id RETURNING g.id, g.table_id, g.from_seq, g.to_seq"
)
_ALERT = (
    # The first 10,000 missing (gap_tracker.MAX_LISTED), looked for in the first million.
    "UPDATE gaps g SET alerted_at = now(), missing = ARRAY(SELECT s FROM"
    "  generate_series(g.from_seq, LEAST(g.to_seq, g.from_seq + 999999)) AS s"
    "  WHERE NOT EXISTS (SELECT 1 FROM entry_keys k"
    "  WHERE k.table_id = g.table_id AND k.seq = s) ORDER BY s LIMIT 10000)"
    " FROM (SELECT id FROM gaps WHERE filled_at IS NULL AND alerted_at IS NULL"
    "  AND detected_at <= now() - make_interval(secs => %s) AND table_id = ANY(%s)"
    "  FOR UPDATE SKIP LOCKED) due"
    " WHERE g.id = due.id RETURNING g.id, g.table_id, g.from_seq, g.to_seq, g.missing"
)


class GapBook:
    """The ``gaps`` and ``gap_watermarks`` tables, through one connection.

    Args:
        conn: An autocommit connection (each method is its own transaction). Not the
            connection that stores entries: the gap checks run beside the ingest.
    """

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self._known: set[str] = set()

    async def scan(self, tables: Sequence[str], grace: float) -> list[Gap]:
        """Record the holes of ``tables`` older than ``grace`` seconds; the new gaps.

        Tables another instance is scanning right now are skipped (it records theirs).
        """
        await self._know(tables)
        async with self.conn.transaction():
            cursor = await self.conn.execute(_LOCK_MARKS, (list(tables),))
            marks = {str(row[0]): int(row[1]) for row in await cursor.fetchall()}
            if not marks:
                return []
            cursor = await self.conn.execute(
                _HOLES, {"tables": list(marks), "marks": list(marks.values()), "grace": grace}
            )
            holes: list[Hole] = []
            highest: dict[str, int] = {}
            for table, lo, hi, ripe in await cursor.fetchall():
                if lo is None:
                    highest[str(table)] = int(hi)
                else:
                    holes.append(Hole(str(table), int(lo), int(hi), bool(ripe)))
            ripe = [hole for hole in holes if hole.ripe]
            recorded: list[Gap] = []
            if ripe:
                cursor = await self.conn.execute(
                    _RECORD,
                    ([h.table for h in ripe], [h.lo for h in ripe], [h.hi for h in ripe]),
                )
                recorded = [_gap(row) for row in await cursor.fetchall()]
            moved = {
                table: advance(mark, highest.get(table), [h for h in holes if h.table == table])
                for table, mark in marks.items()
            }
            await self.conn.execute(_MOVE_MARKS, (list(moved), list(moved.values())))
        return recorded

    async def _know(self, tables: Sequence[str]) -> None:
        new = [table for table in tables if table not in self._known]
        if new:
            await self.conn.execute(
                "INSERT INTO gap_watermarks (table_id) SELECT unnest(%s::text[])"
                " ON CONFLICT DO NOTHING",
                (new,),
            )
            self._known.update(new)

    async def fill(self, tables: Sequence[str], *, alerted_too: bool = True) -> list[Gap]:
        """Stamp ``filled_at`` on the open gaps now wholly archived; those gaps.

        Args:
            tables: The tables to look at.
            alerted_too: Also look at gaps already alerted (a late fill is still noted).
        """
        async with self.conn.transaction():
            cursor = await self.conn.execute(_FILL, (list(tables), alerted_too))
            return [_gap(row) for row in await cursor.fetchall()]

    async def open_count(self, tables: Sequence[str]) -> int:
        """How many gaps of ``tables`` are not filled (alerted ones included)."""
        cursor = await self.conn.execute(
            "SELECT count(*) FROM gaps WHERE filled_at IS NULL AND table_id = ANY(%s)",
            (list(tables),),
        )
        row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def claim_replays(self, tables: Sequence[str], every: float) -> list[Gap]:
        """Stamp ``replay_requested_at`` on the gaps due a replay; the gaps this caller won.

        Due: open gaps never asked for, and open gaps not alerted yet whose last request is
        ``every`` seconds old or more (asked again).
        """
        async with self.conn.transaction():
            cursor = await self.conn.execute(_CLAIM, (list(tables), every))
            return [_gap(row) for row in await cursor.fetchall()]

    async def alert(self, tables: Sequence[str], after_seconds: float) -> list[Gap]:
        """Alert the gaps still open ``after_seconds`` after they were recorded (once each).

        Each gap is stamped alerted with its missing ``seq`` values and gets its ``alerts``
        row in the same transaction: a reader never sees one without the other.
        """
        async with self.conn.transaction():
            cursor = await self.conn.execute(_ALERT, (after_seconds, list(tables)))
            gaps = [
                Gap(int(r[0]), str(r[1]), int(r[2]), int(r[3]), tuple(int(s) for s in r[4] or ()))
                for r in await cursor.fetchall()
            ]
            if gaps:
                async with self.conn.cursor() as cur:
                    await cur.executemany(
                        "INSERT INTO alerts (table_id, kind, detail) VALUES (%s, 'gap', %s)",
                        [(gap.table, alert_detail(gap, after_seconds)) for gap in gaps],
                    )
        return gaps


def alert_detail(gap: Gap, timeout: float) -> str:
    """The text of a gap's alert: the range, the timeout, what is still missing."""
    return (
        f"seq {gap.lo}..{gap.hi} of table {gap.table} not filled within {timeout} s: "
        f"{len(gap.missing)} missing ({ranges(list(gap.missing))}); a replay re-sends results only"
    )


def _gap(row: Sequence[Any]) -> Gap:
    return Gap(int(row[0]), str(row[1]), int(row[2]), int(row[3]))


def ranges(values: list[int]) -> str:
    """``1-3,7`` for ``[1, 2, 3, 7]`` (at most 20 ranges shown)."""
    parts: list[str] = []
    start = prev = None
    for value in [*values, None]:
        if value is not None and prev is not None and value == prev + 1:
            prev = value
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = value
    shown = ",".join(parts[:20])
    return shown + (",..." if len(parts) > 20 else "")
