"""``tablectl recall ROUND_ID --archive URL``: a round as the archive holds it.

The same record (:class:`controller.recall.RoundRecord`, built by
:func:`controller.recall.round_record`, the journal recall's own code) from the archived
entries. Differences, by what the archive receives: entries carry their *public* view (a
hidden card is ``null`` until the result reveals it; secure table information and command
details are withheld, as on ``events``), and an entry's "delivered" time is when the archive
received it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg

from controller.archive.errors import ArchiveError
from controller.archive.sqlite_store import from_time_text, is_sqlite_url, read_rows
from controller.journal import JournalEntry
from controller.recall import RoundNotFound, RoundRecord, round_record


class ArchiveRoundNotFound(RoundNotFound, ArchiveError):
    """The archive holds no entry of the round asked for."""


def _entry(row: tuple[Any, ...]) -> JournalEntry:
    seq, session, round_id, kind, at, data, received_at = row
    return JournalEntry(
        seq=int(seq),
        session=int(session),
        round_id=round_id,
        kind=str(kind),
        happened_at=at,
        body=dict(data),
        delivered_at=received_at,
    )


async def recall_from_archive(url: str, round_id: str, table: str | None = None) -> RoundRecord:
    """The round ``round_id`` (of ``table``, when round ids could repeat across tables).

    ``table`` is a table id (every journal of it) or a chain id (``table/journal``: one).

    Raises:
        ArchiveRoundNotFound: No entry of that round is archived.
        ArchiveError: The archive database cannot be read, or the round id is on several
            tables and none was named.
    """
    rows = (
        await asyncio.to_thread(_sqlite_rows, url, round_id, table)
        if is_sqlite_url(url)
        else await _postgres_rows(url, round_id, table)
    )
    tables = sorted({str(row[7]) for row in rows})
    if not rows:
        raise ArchiveRoundNotFound("no such round in the archive", round_id=round_id, table=table)
    if len(tables) > 1:
        # Several tables, or several journals of one table (chains: docs/archive.md,
        # "Journals"; round ids carry the journal's short id since issue 22, so only rounds
        # journalled before it can meet here).
        raise ArchiveError(
            f"round {round_id} is archived for several tables or journals "
            f"({', '.join(tables)}): name one with --table",
            round_id=round_id,
        )
    record = round_record(round_id, [_entry(tuple(row[:7])) for row in rows])
    record.verification = verification([str(row[8]) for row in rows])
    return record


def verification(states: list[str]) -> str:
    """What a round's entries' states (``entry_keys.state``) say about trusting it."""
    if "unsigned" in states:
        return "unsigned: not verifiable (the table does not sign; the archive allows it)"
    waiting = sum(1 for state in states if state != "verified")
    if waiting:
        return (
            f"provisional: {waiting} of {len(states)} entries not yet covered by a signed chain "
            "head (docs/archive.md, Provisional entries)"
        )
    return "verified: every entry is on the table's signed chain"


async def _postgres_rows(url: str, round_id: str, table: str | None) -> list[tuple[Any, ...]]:
    try:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            cursor = await conn.execute(
                "SELECT e.seq, e.session, e.round_id, e.kind, e.at, e.envelope->'data',"
                " e.received_at, e.table_id, k.state FROM events e JOIN entry_keys k"
                " ON k.table_id = e.table_id AND k.session = e.session AND k.seq = e.seq"
                " WHERE e.round_id = %s AND (%s::text IS NULL OR e.table_id = %s"
                " OR starts_with(e.table_id, %s || '/')) ORDER BY e.table_id, e.seq",
                (round_id, table, table, table),
            )
            return list(await cursor.fetchall())
    except psycopg.Error as exc:
        raise ArchiveError(f"cannot read the archive: {exc}", round_id=round_id) from exc


def _sqlite_rows(url: str, round_id: str, table: str | None) -> list[tuple[Any, ...]]:
    """The same rows from an SQLite archive (times and the envelope's ``data`` decoded)."""
    rows = read_rows(
        url,
        "SELECT e.seq, e.session, e.round_id, e.kind, e.at, e.envelope, e.received_at,"
        " e.table_id, k.state FROM events e JOIN entry_keys k ON k.table_id = e.table_id"
        " AND k.session = e.session AND k.seq = e.seq"
        " WHERE e.round_id = ? AND (? IS NULL OR e.table_id = ?"
        " OR substr(e.table_id, 1, length(?) + 1) = ? || '/') ORDER BY e.table_id, e.seq",
        (round_id, table, table, table, table),
    )
    return [
        (
            seq,
            session,
            rid,
            kind,
            from_time_text(at),
            json.loads(text)["data"],
            from_time_text(received),
            table_id,
            state,
        )
        for seq, session, rid, kind, at, text, received, table_id, state in rows
    ]
