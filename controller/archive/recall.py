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
        raise ArchiveError(
            f"round {round_id} is archived for several tables ({', '.join(tables)}): "
            "name one with --table",
            round_id=round_id,
        )
    return round_record(round_id, [_entry(tuple(row[:7])) for row in rows])


async def _postgres_rows(url: str, round_id: str, table: str | None) -> list[tuple[Any, ...]]:
    try:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            cursor = await conn.execute(
                "SELECT seq, session, round_id, kind, at, envelope->'data', received_at, table_id"
                " FROM events WHERE round_id = %s AND (%s::text IS NULL OR table_id = %s)"
                " ORDER BY table_id, seq",
                (round_id, table, table),
            )
            return list(await cursor.fetchall())
    except psycopg.Error as exc:
        raise ArchiveError(f"cannot read the archive: {exc}", round_id=round_id) from exc


def _sqlite_rows(url: str, round_id: str, table: str | None) -> list[tuple[Any, ...]]:
    """The same rows from an SQLite archive (times and the envelope's ``data`` decoded)."""
    rows = read_rows(
        url,
        "SELECT seq, session, round_id, kind, at, envelope, received_at, table_id FROM events"
        " WHERE round_id = ? AND (? IS NULL OR table_id = ?) ORDER BY table_id, seq",
        (round_id, table, table),
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
        )
        for seq, session, rid, kind, at, text, received, table_id in rows
    ]
