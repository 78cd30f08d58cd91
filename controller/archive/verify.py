"""What the archive holds of one table, checked: every ``seq`` once, rounds folded, gaps closed.

:func:`verify_table` (PostgreSQL) and :func:`verify_sqlite_table` (SQLite, ``make run``'s
archive; the same queries and the same judgement) read one table's archive and say what is
wrong with it, the way
``tablectl journal verify`` does for a journal: ``seq`` values missing below the highest one,
an ``events`` row without its key or a key without its row, a round whose entries are
archived but that has no ``rounds`` row, gaps still open, conflicts. :func:`archive_anchors`
gives the chain heads the table's results carried (``chain_head``: the ``seq`` and hash of
the result's own journal entry), so that the table's journal can be verified against what
the archive holds (``Journal.verify(anchors)``): the archive and the journal agree when the
journal's hash chain passes through every archived chain head.

A table whose journal was replaced has several chains (docs/archive.md, "Journals"): each is
checked on its own (:func:`table_chains`, :func:`sqlite_table_chains`), and a journal file is
checked against the chain of its own journal id (:func:`chain_of_journal`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from controller.archive.errors import ArchiveError
from controller.archive.gaps import ranges
from controller.archive.journals import JournalRecord
from controller.archive.sqlite_store import from_time_text, is_sqlite_url, reading
from controller.archive.store import journal_records
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
        verified: Entries a signed chain head covers (docs/archive.md, "Provisional entries").
        provisional: Entries no signed chain head covers yet.
        unsigned: Entries of a table the config allows to publish unsigned.
        forged: Copies a signed chain showed were not the table's (rejected, replaced).
        problems: What is wrong, one sentence each.
        notes: What is worth knowing and not wrong.
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
    verified: int = 0
    provisional: int = 0
    unsigned: int = 0
    forged: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether nothing is wrong."""
        return not self.problems


# The queries both engines run ("?" for SQLite, "%s" for PostgreSQL): the keys, the holes
# below the highest seq (as ranges: consecutive archived seqs more than one apart), the
# events rows, open gaps, conflicts, the rounds by outcome, and rounds with entries but no row.
_KEYS = (
    "SELECT count(*), count(DISTINCT seq), coalesce(max(seq), 0) FROM entry_keys WHERE table_id = ?"
)
_HOLES = (
    "SELECT prev + 1, seq - 1 FROM (SELECT seq, lag(seq, 1, 0) OVER (ORDER BY seq) AS prev"
    " FROM (SELECT DISTINCT seq FROM entry_keys WHERE table_id = ?) AS s) AS x"
    " WHERE seq > prev + 1 ORDER BY seq"
)
_ROWS = "SELECT count(*) FROM events WHERE table_id = ?"
_OPEN_GAPS = "SELECT count(*) FROM gaps WHERE table_id = ? AND filled_at IS NULL"
_CONFLICTS = "SELECT count(*) FROM rejected WHERE table_id = ? AND category = 'conflict'"
_FORGED = "SELECT count(*) FROM rejected WHERE table_id = ? AND category = 'forged'"
_STATES = "SELECT state, count(*) FROM entry_keys WHERE table_id = ? GROUP BY state"
_ROUNDS = (
    "SELECT count(*), coalesce(sum(CASE WHEN outcome = 'result' THEN 1 ELSE 0 END), 0),"
    " coalesce(sum(CASE WHEN outcome = 'void' THEN 1 ELSE 0 END), 0)"
    " FROM rounds WHERE table_id = ?"
)
_UNFOLDED = (
    "SELECT count(DISTINCT e.round_id) FROM events e WHERE e.table_id = ?"
    " AND e.round_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rounds r"
    " WHERE r.table_id = e.table_id AND r.round_id = e.round_id)"
)


def _check(table: str, fetch: Callable[[str], list[tuple[Any, ...]]], anchors: int) -> ArchiveCheck:
    """The check from the queries above, each run by ``fetch`` with the table as parameter."""
    keys, distinct, last = (int(value) for value in fetch(_KEYS)[0])
    rounds, settled, voided = (int(value) for value in fetch(_ROUNDS)[0])
    check = ArchiveCheck(
        table,
        entries=distinct,
        last_seq=last,
        missing=[seq for lo, hi in fetch(_HOLES) for seq in range(int(lo), int(hi) + 1)],
        rounds=rounds,
        settled=settled,
        voided=voided,
        anchors=anchors,
        open_gaps=int(fetch(_OPEN_GAPS)[0][0]),
        conflicts=int(fetch(_CONFLICTS)[0][0]),
    )
    states = {str(state): int(count) for state, count in fetch(_STATES)}
    check.verified, check.provisional = states.get("verified", 0), states.get("provisional", 0)
    check.unsigned, check.forged = states.get("unsigned", 0), int(fetch(_FORGED)[0][0])
    _judge_chain(check)
    rows, unfolded = int(fetch(_ROWS)[0][0]), int(fetch(_UNFOLDED)[0][0])
    if keys != distinct:
        check.problems.append(f"{keys - distinct} seq archived under two sessions")
    if rows != keys:
        check.problems.append(f"{rows} events rows for {keys} archived keys")
    if unfolded:
        check.problems.append(f"{unfolded} round(s) archived without their rounds row")
    if check.missing:
        check.problems.append(
            f"{len(check.missing)} seq missing below {check.last_seq}: {ranges(check.missing)}"
        )
    if check.open_gaps:
        check.problems.append(f"{check.open_gaps} gap(s) not filled")
    if check.conflicts:
        check.problems.append(f"{check.conflicts} conflicting copies rejected")
    return check


def _judge_chain(check: ArchiveCheck) -> None:
    """What the entries' states say (docs/archive.md, "Provisional entries")."""
    if check.unsigned:
        check.problems.append(
            f"unsigned: not verifiable ({check.unsigned} entries of a table that does not sign,"
            " archived because the config allows it)"
        )
    if check.provisional:
        check.notes.append(
            f"{check.provisional} entries provisional: no signed chain head covers them yet"
        )
    if check.forged:
        check.notes.append(
            f"{check.forged} copies were not on the table's signed chain: rejected as forged, "
            "the chain's own entries archived in their place (someone published them with "
            "this table's credential)"
        )


async def verify_table(conn: psycopg.AsyncConnection[Any], table: str) -> ArchiveCheck:
    """Check what the PostgreSQL archive holds of ``table`` (read only, one snapshot)."""
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        results: dict[str, list[tuple[Any, ...]]] = {}
        queries = (_KEYS, _HOLES, _ROWS, _OPEN_GAPS, _CONFLICTS, _FORGED, _STATES, _ROUNDS)
        for query in (*queries, _UNFOLDED):
            cursor = await conn.execute(query.replace("?", "%s").encode(), (table,))
            results[query] = list(await cursor.fetchall())
        anchors = len(await archive_anchors(conn, table))
    return _check(table, results.__getitem__, anchors)


def verify_sqlite_table(url: str, table: str) -> tuple[ArchiveCheck, list[Anchor]]:
    """:func:`verify_table` and :func:`archive_anchors` on an SQLite archive (``make run``'s).

    Blocking (a local file; the command runs it in a thread): one read-only connection, one
    read transaction, so the figures come from one snapshot as on PostgreSQL.

    Raises:
        ArchiveError: No such archive file, or a query failed.
    """
    with reading(url) as conn:
        conn.execute("BEGIN")

        def fetch(query: str) -> list[tuple[Any, ...]]:
            return list(conn.execute(query, (table,)).fetchall())

        anchors = [
            Anchor(int(seq), str(digest), table, f"archive seq {at_seq} ({kind})")
            for at_seq, kind, seq, digest in conn.execute(
                "SELECT e.seq, e.kind, json_extract(e.envelope, '$.chain_head.seq'),"
                " json_extract(e.envelope, '$.chain_head.hash') FROM events e"
                " JOIN entry_keys k ON k.table_id = e.table_id AND k.session = e.session"
                " AND k.seq = e.seq WHERE e.table_id = ? AND (e.signed = 1 OR k.state = 'unsigned')"
                " AND json_extract(e.envelope, '$.chain_head') IS NOT NULL ORDER BY e.seq",
                (table,),
            )
        ]
        check = _check(table, fetch, len(anchors))
        conn.execute("COMMIT")
    return check, anchors


async def archive_anchors(conn: psycopg.AsyncConnection[Any], table: str) -> list[Anchor]:
    """The chain heads of ``table``'s archived results and voids, in ``seq`` order.

    Only signed ones (or, of a table allowed unsigned, whatever it sent: "unsigned: not
    verifiable" says what they are worth): an unsigned message of a signing table is anyone's
    word, and the journal must not be judged by it.
    """
    cursor = await conn.execute(
        "SELECT e.seq, e.kind, e.envelope->'chain_head'->>'seq',"
        " e.envelope->'chain_head'->>'hash' FROM events e JOIN entry_keys k"
        " ON k.table_id = e.table_id AND k.session = e.session AND k.seq = e.seq"
        " WHERE e.table_id = %s AND (e.signed OR k.state = 'unsigned')"
        " AND e.envelope->'chain_head' IS NOT NULL ORDER BY e.seq",
        (table,),
    )
    return [
        Anchor(int(row[2]), str(row[3]), table, f"archive seq {row[0]} ({row[1]})")
        for row in await cursor.fetchall()
    ]


def ordered_chains(table: str, records: list[JournalRecord]) -> list[JournalRecord | None]:
    """A table's chains in the order its journals came.

    ``None`` stands for the table's own chain when no journal id is recorded for it (entries
    of version 2 only, or none).
    """
    ordered = sorted(records, key=lambda record: record.first_seen)
    own: list[JournalRecord | None] = [] if any(r.chain == table for r in ordered) else [None]
    return own + list(ordered)


def chain_of_journal(table: str, records: list[JournalRecord], journal: str | None) -> str:
    """The chain a journal file's entries are archived in (the table's own when unknown)."""
    return next((r.chain for r in records if r.journal == journal), table)


async def table_chains(conn: psycopg.AsyncConnection[Any], table: str) -> list[JournalRecord]:
    """The journals the PostgreSQL archive recorded for ``table``."""
    return await journal_records(conn, table)


def sqlite_table_chains(url: str, table: str) -> list[JournalRecord]:
    """The journals an SQLite archive recorded for ``table`` (blocking)."""
    with reading(url) as conn:
        rows = conn.execute(
            "SELECT table_id, journal, chain_id, first_seen, previous_chain, previous_last_seq"
            " FROM journals WHERE table_id = ?",
            (table,),
        ).fetchall()
    return [
        JournalRecord(
            str(row[0]),
            str(row[1]),
            str(row[2]),
            from_time_text(str(row[3])) or datetime.now(UTC),
            None if row[4] is None else str(row[4]),
            None if row[5] is None else int(row[5]),
        )
        for row in rows
    ]


@dataclass(slots=True)
class ChainCheck:
    """One journal (chain) of a table, checked.

    Attributes:
        record: The journal as recorded (``None``: the table's own chain, no id recorded).
        check: What the archive holds of it, checked.
        anchors: The chain heads its signed results carry.
    """

    record: JournalRecord | None
    check: ArchiveCheck
    anchors: list[Anchor]


async def verify_archive(url: str, table: str) -> tuple[list[JournalRecord], list[ChainCheck]]:
    """Every journal (chain) of ``table`` the archive at ``url`` holds, checked on its own.

    Raises:
        ArchiveError: The archive cannot be read.
    """
    out: list[ChainCheck] = []
    if is_sqlite_url(url):
        records = await asyncio.to_thread(sqlite_table_chains, url, table)
        for record in ordered_chains(table, records):
            chain = table if record is None else record.chain
            check, anchors = await asyncio.to_thread(verify_sqlite_table, url, chain)
            out.append(ChainCheck(record, check, anchors))
        return records, out
    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    except psycopg.Error as exc:
        raise ArchiveError(f"cannot connect to the archive database: {exc}") from exc
    async with conn:
        records = await table_chains(conn, table)
        for record in ordered_chains(table, records):
            chain = table if record is None else record.chain
            check = await verify_table(conn, chain)
            out.append(ChainCheck(record, check, await archive_anchors(conn, chain)))
    return records, out
