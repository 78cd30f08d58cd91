"""What the archive holds of one table, checked: every ``seq`` once, rounds folded, gaps closed.

:func:`verify_table` reads one table's archive and says what is wrong with it, the way
``tablectl journal verify`` does for a journal: ``seq`` values missing below the highest one,
an ``events`` row without its key or a key without its row, a round whose entries are
archived but that has no ``rounds`` row, gaps still open, conflicts. :func:`archive_anchors`
gives the chain heads the table's results carried (``chain_head``: the ``seq`` and hash of
the result's own journal entry), so that the table's journal can be verified against what
the archive holds (``Journal.verify(anchors)``): the archive and the journal agree when the
journal's hash chain passes through every archived chain head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

from controller.archive.gaps import ranges
from controller.journal.anchors import Anchor


@dataclass(slots=True)
class ArchiveCheck:
    """What :func:`verify_table` found.

    Attributes:
        table: The table.
        entries: Distinct ``seq`` values archived.
        last_seq: The highest one (0: nothing archived).
        missing: ``seq`` values absent below ``last_seq``.
        rounds: Rounds with a ``rounds`` row.
        settled: Of which with a result.
        voided: Of which voided.
        anchors: Chain heads the archived results and voids carry.
        open_gaps: Gaps recorded and not filled.
        conflicts: Copies of archived keys with other content (rejected).
        problems: What is wrong, one sentence each.
    """

    table: str
    entries: int = 0
    last_seq: int = 0
    missing: list[int] = field(default_factory=list)
    rounds: int = 0
    settled: int = 0
    voided: int = 0
    anchors: int = 0
    open_gaps: int = 0
    conflicts: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether nothing is wrong."""
        return not self.problems


async def _one(conn: psycopg.AsyncConnection[Any], query: str, *params: Any) -> tuple[Any, ...]:
    cursor = await conn.execute(query.encode(), params)
    row = await cursor.fetchone()
    return tuple(row) if row is not None else ()


async def verify_table(conn: psycopg.AsyncConnection[Any], table: str) -> ArchiveCheck:
    """Check what the archive holds of ``table`` (read only, one snapshot)."""
    check = ArchiveCheck(table)
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        await _counts(conn, check)
        await _rounds(conn, check)
        check.anchors = len(await archive_anchors(conn, table))
    if check.missing:
        check.problems.append(
            f"{len(check.missing)} seq missing below {check.last_seq}: {ranges(check.missing)}"
        )
    if check.open_gaps:
        check.problems.append(f"{check.open_gaps} gap(s) not filled")
    if check.conflicts:
        check.problems.append(f"{check.conflicts} conflicting copies rejected")
    return check


async def _counts(conn: psycopg.AsyncConnection[Any], check: ArchiveCheck) -> None:
    table = check.table
    keys, distinct, last = await _one(
        conn,
        "SELECT count(*), count(DISTINCT seq), coalesce(max(seq), 0) FROM entry_keys"
        " WHERE table_id = %s",
        table,
    )
    check.entries, check.last_seq = int(distinct), int(last)
    if keys != distinct:
        check.problems.append(f"{keys - distinct} seq archived under two sessions")
    cursor = await conn.execute(
        "SELECT s FROM generate_series(1, %s::bigint) AS s WHERE NOT EXISTS"
        " (SELECT 1 FROM entry_keys k WHERE k.table_id = %s AND k.seq = s) ORDER BY s",
        (check.last_seq, table),
    )
    check.missing = [int(row[0]) for row in await cursor.fetchall()]
    (rows,) = await _one(conn, "SELECT count(*) FROM events WHERE table_id = %s", table)
    if rows != keys:
        check.problems.append(f"{rows} events rows for {keys} archived keys")
    (open_gaps,) = await _one(
        conn, "SELECT count(*) FROM gaps WHERE table_id = %s AND filled_at IS NULL", table
    )
    check.open_gaps = int(open_gaps)
    (conflicts,) = await _one(
        conn, "SELECT count(*) FROM rejected WHERE table_id = %s AND category = 'conflict'", table
    )
    check.conflicts = int(conflicts)


async def _rounds(conn: psycopg.AsyncConnection[Any], check: ArchiveCheck) -> None:
    table = check.table
    rounds, settled, voided = await _one(
        conn,
        "SELECT count(*), count(*) FILTER (WHERE outcome = 'result'),"
        " count(*) FILTER (WHERE outcome = 'void') FROM rounds WHERE table_id = %s",
        table,
    )
    check.rounds, check.settled, check.voided = int(rounds), int(settled), int(voided)
    (unfolded,) = await _one(
        conn,
        "SELECT count(DISTINCT e.round_id) FROM events e WHERE e.table_id = %s"
        " AND e.round_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rounds r"
        " WHERE r.table_id = e.table_id AND r.round_id = e.round_id)",
        table,
    )
    if unfolded:
        check.problems.append(f"{unfolded} round(s) archived without their rounds row")


async def archive_anchors(conn: psycopg.AsyncConnection[Any], table: str) -> list[Anchor]:
    """The chain heads of ``table``'s archived results and voids, in ``seq`` order."""
    cursor = await conn.execute(
        "SELECT seq, kind, envelope->'chain_head'->>'seq', envelope->'chain_head'->>'hash'"
        " FROM events WHERE table_id = %s AND envelope->'chain_head' IS NOT NULL ORDER BY seq",
        (table,),
    )
    return [
        Anchor(int(row[2]), str(row[3]), table, f"archive seq {row[0]} ({row[1]})")
        for row in await cursor.fetchall()
    ]
