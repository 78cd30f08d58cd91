"""The archive's PostgreSQL side: store entries exactly once, fold rounds, record the rest.

One :class:`ArchiveStore` wraps one psycopg 3 async connection. :meth:`ArchiveStore.store_entry`
is idempotent on ``(table, session, seq)``: the key goes into ``entry_keys`` with
``INSERT ... ON CONFLICT DO NOTHING``, and only a new key writes the entry into its monthly
partition of ``events`` and refolds its round (``controller.journal.fold.RoundFold``, the fold
the journal's recall and verifier use) into ``rounds``, all in one transaction. A copy whose
content differs from the stored one (same key, another digest) is stored as rejected.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC
from typing import Any, Literal

import psycopg
from psycopg.types.json import Json, Jsonb

from controller.archive.errors import ArchiveError
from controller.archive.ingest import Entry, Rejected, Status
from controller.archive.migrate import migrate
from controller.journal.fold import RoundFold

Stored = Literal["new", "duplicate", "conflict"]


class ArchiveStore:
    """The archive database, through one async connection.

    Args:
        conn: An open connection (not autocommit: each call is its own transaction).
    """

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self._partitions: set[str] = set()

    @classmethod
    async def open(cls, url: str, *, run_migrations: bool = True) -> ArchiveStore:
        """Connect to ``url`` and bring the schema up to date.

        Raises:
            ArchiveError: The database cannot be reached, or a migration failed.
        """
        try:
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise ArchiveError(
                f"cannot connect to the archive database: {exc}", url=_safe(url)
            ) from exc
        if run_migrations:
            await migrate(conn)
        return cls(conn)

    async def close(self) -> None:
        """Close the connection."""
        await self.conn.close()

    # -- entries ---------------------------------------------------------------------------

    async def store_entry(self, entry: Entry) -> Stored:
        """Store ``entry`` once: ``new``, ``duplicate`` (absorbed) or ``conflict`` (rejected).

        Raises:
            psycopg.Error: The database refused it (nothing of it was written).
        """
        try:
            return await self._store_entry(entry)
        except psycopg.Error:
            # A partition made in the rolled-back transaction is gone with it.
            self._partitions.clear()
            raise

    async def _store_entry(self, entry: Entry) -> Stored:
        async with self.conn.transaction():
            cursor = await self.conn.execute(
                "INSERT INTO entry_keys (table_id, session, seq, at, digest)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING seq",
                (entry.table, entry.session, entry.seq, entry.at, entry.digest),
            )
            if await cursor.fetchone() is None:
                return await self._known(entry)
            await self._ensure_partition(entry)
            await self.conn.execute(
                "INSERT INTO events (table_id, session, seq, at, round_id, kind, topic, delayed,"
                " replayed, signed, envelope) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (
                    entry.table,
                    entry.session,
                    entry.seq,
                    entry.at,
                    entry.round_id,
                    entry.kind,
                    entry.topic,
                    entry.delayed,
                    entry.replayed,
                    entry.signed,
                    Json(entry.envelope),
                ),
            )
            if entry.round_id is not None:
                await self._refold(entry.table, entry.round_id)
        return "new"

    async def _known(self, entry: Entry) -> Stored:
        cursor = await self.conn.execute(
            "SELECT digest FROM entry_keys WHERE table_id = %s AND session = %s AND seq = %s",
            (entry.table, entry.session, entry.seq),
        )
        row = await cursor.fetchone()
        if row is not None and row[0] == entry.digest:
            return "duplicate"
        await self._insert_rejected(
            Rejected(
                entry.topic,
                entry.table,
                entry.seq,
                "conflict",
                f"seq {entry.seq} (session {entry.session}) is archived with other content",
                json.dumps(entry.envelope).encode(),
            )
        )
        return "conflict"

    async def _ensure_partition(self, entry: Entry) -> None:
        month = entry.at.astimezone(UTC).strftime("%Y_%m")
        if month not in self._partitions:
            await self.conn.execute("SELECT archive_events_partition(%s)", (entry.at,))
            self._partitions.add(month)

    async def _refold(self, table: str, round_id: str) -> None:
        cursor = await self.conn.execute(
            "SELECT kind, envelope->'data', at, seq, delayed FROM events"
            " WHERE table_id = %s AND round_id = %s ORDER BY seq",
            (table, round_id),
        )
        rows = await cursor.fetchall()
        fold = RoundFold.replay(round_id, ((row[0], row[1]) for row in rows))
        opened = next((row[2] for row in rows if row[0] == "round_opened"), None)
        final = next((row for row in rows if row[0] in {"round_result", "round_voided"}), None)
        await self.conn.execute(
            "INSERT INTO rounds (table_id, round_id, round_no, game, state, outcome, opened_at,"
            " finished_at, result_seq, delayed, result, bets, entries, updated_at)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s, now())"
            " ON CONFLICT (table_id, round_id) DO UPDATE SET round_no = EXCLUDED.round_no,"
            " game = EXCLUDED.game, state = EXCLUDED.state, outcome = EXCLUDED.outcome,"
            " opened_at = EXCLUDED.opened_at, finished_at = EXCLUDED.finished_at,"
            " result_seq = EXCLUDED.result_seq, delayed = EXCLUDED.delayed,"
            " result = EXCLUDED.result, bets = EXCLUDED.bets, entries = EXCLUDED.entries,"
            " updated_at = now()",
            (
                table,
                round_id,
                fold.round_no,
                fold.game,
                fold.state,
                fold.outcome,
                opened,
                None if final is None else final[2],
                None if final is None else final[3],
                False if final is None else final[4],
                None if fold.result is None else Jsonb(dict(fold.result)),
                None if fold.bets is None else Jsonb(fold.bets),
                len(rows),
            ),
        )

    # -- the rest --------------------------------------------------------------------------

    async def store_rejected(self, rejected: Rejected) -> None:
        """Keep a rejected message with its reason."""
        async with self.conn.transaction():
            await self._insert_rejected(rejected)

    async def _insert_rejected(self, rejected: Rejected) -> None:
        await self.conn.execute(
            "INSERT INTO rejected (topic, table_id, seq, reason, category, payload)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (
                rejected.topic,
                rejected.table,
                rejected.seq,
                rejected.reason,
                rejected.category,
                rejected.payload,
            ),
        )

    async def store_status(self, status: Status) -> None:
        """Keep a status message (history: every birth, stop and Last Will)."""
        head_seq, head_hash = status.chain_head if status.chain_head else (None, None)
        async with self.conn.transaction():
            await self.conn.execute(
                "INSERT INTO table_status (table_id, state, session, chain_head_seq,"
                " chain_head_hash, envelope) VALUES (%s, %s, %s, %s, %s, %s)",
                (
                    status.table,
                    status.state,
                    status.session,
                    head_seq,
                    head_hash,
                    Jsonb(status.envelope),
                ),
            )

    async def highest_seqs(self) -> dict[str, int]:
        """Each archived table's highest ``seq``."""
        cursor = await self.conn.execute(
            "SELECT table_id, max(seq) FROM entry_keys GROUP BY table_id"
        )
        return {str(row[0]): int(row[1]) for row in await cursor.fetchall()}

    async def open_gap(self, table: str, from_seq: int, to_seq: int) -> int:
        """Record a gap; its id."""
        async with self.conn.transaction():
            cursor = await self.conn.execute(
                "INSERT INTO gaps (table_id, from_seq, to_seq) VALUES (%s, %s, %s) RETURNING id",
                (table, from_seq, to_seq),
            )
            row = await cursor.fetchone()
        if row is None:  # pragma: no cover (RETURNING always answers)
            raise ArchiveError("gap insert returned nothing", table=table)
        return int(row[0])

    async def mark_gap(
        self,
        gap_id: int,
        what: Literal["replay_requested", "filled", "alerted"],
        missing: Sequence[int] = (),
    ) -> None:
        """Stamp a gap's replay request, fill or alert (``missing``: the seqs still absent)."""
        column = {
            "replay_requested": "replay_requested_at",
            "filled": "filled_at",
            "alerted": "alerted_at",
        }[what]
        async with self.conn.transaction():
            await self.conn.execute(
                f"UPDATE gaps SET {column} = now(), missing = %s WHERE id = %s",
                (list(missing) or None, gap_id),
            )

    async def raise_alert(self, table: str | None, kind: str, detail: str) -> None:
        """Keep an alert."""
        async with self.conn.transaction():
            await self.conn.execute(
                "INSERT INTO alerts (table_id, kind, detail) VALUES (%s, %s, %s)",
                (table, kind, detail),
            )


def _safe(url: str) -> str:
    """``url`` without its password."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    auth, host = rest.rsplit("@", 1)
    user = auth.split(":", 1)[0]
    return f"{scheme}://{user}@{host}"
