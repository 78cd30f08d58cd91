"""The archive's PostgreSQL side: store entries exactly once, fold rounds, record the rest.

One :class:`ArchiveStore` wraps one psycopg 3 async connection. :meth:`ArchiveStore.store_entry`
and :meth:`ArchiveStore.store_entries` (a batch, one transaction) are idempotent on
``(table, session, seq)``: the keys go into ``entry_keys`` with ``INSERT ... ON CONFLICT DO
NOTHING``, and only new keys write their entries into their monthly partitions of ``events``
(``COPY``) and refold their rounds (``controller.journal.fold.RoundFold``, the fold the
journal's recall and verifier use) into ``rounds``, once per round and batch. A copy whose
content differs from the stored one (same key, another digest) is stored as rejected.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb

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
        return (await self.store_entries([entry]))[0]

    async def store_entries(self, entries: Sequence[Entry]) -> list[Stored]:
        """Store a batch in one transaction; each entry's outcome, in order.

        The same rules as :meth:`store_entry`, for many entries at once: the keys go in with
        one ``INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING RETURNING``, the new
        entries into ``events`` with ``COPY``, and each round touched is refolded once. A
        key repeated inside the batch counts as arriving after its first copy (``duplicate``
        or ``conflict``, as if stored one by one).

        Raises:
            psycopg.Error: The database refused the batch (nothing of it was written).
        """
        if not entries:
            return []
        try:
            return await self._store_entries(entries)
        except psycopg.Error:
            self._partitions.clear()
            raise

    async def _store_entries(self, entries: Sequence[Entry]) -> list[Stored]:
        first: dict[tuple[str, int, int], Entry] = {}
        for entry in entries:
            first.setdefault((entry.table, entry.session, entry.seq), entry)
        keys = list(first.values())
        outcomes: list[Stored] = []
        async with self.conn.transaction():
            cursor = await self.conn.execute(
                "INSERT INTO entry_keys (table_id, session, seq, at, digest)"
                " SELECT * FROM unnest(%s::text[], %s::integer[], %s::bigint[],"
                " %s::timestamptz[], %s::text[]) ON CONFLICT DO NOTHING"
                " RETURNING table_id, session, seq",
                (
                    [e.table for e in keys],
                    [e.session for e in keys],
                    [e.seq for e in keys],
                    [e.at for e in keys],
                    [e.digest for e in keys],
                ),
            )
            new = {(str(r[0]), int(r[1]), int(r[2])) for r in await cursor.fetchall()}
            old = [key for key in first if key not in new]
            stored: dict[tuple[str, int, int], str] = {}
            if old:
                cursor = await self.conn.execute(
                    "SELECT k.table_id, k.session, k.seq, k.digest FROM entry_keys k"
                    " JOIN unnest(%s::text[], %s::integer[], %s::bigint[]) AS o(t, s, q)"
                    " ON k.table_id = o.t AND k.session = o.s AND k.seq = o.q",
                    ([k[0] for k in old], [k[1] for k in old], [k[2] for k in old]),
                )
                stored = {
                    (str(r[0]), int(r[1]), int(r[2])): str(r[3]) for r in await cursor.fetchall()
                }
            for key in new:
                stored[key] = first[key].digest
            fresh = [first[key] for key in first if key in new]
            for entry in fresh:
                await self._ensure_partition(entry)
            if fresh:
                async with (
                    self.conn.cursor() as cur,
                    cur.copy(
                        "COPY events (table_id, session, seq, at, round_id, kind, topic, delayed,"
                        " replayed, signed, envelope) FROM STDIN"
                    ) as copy,
                ):
                    for entry in fresh:
                        await copy.write_row(
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
                                json.dumps(entry.envelope),
                            )
                        )
            claimed: set[tuple[str, int, int]] = set()
            for entry in entries:
                key = (entry.table, entry.session, entry.seq)
                if key in new and key not in claimed and first[key] is entry:
                    claimed.add(key)
                    outcomes.append("new")
                elif stored.get(key) == entry.digest:
                    outcomes.append("duplicate")
                else:
                    await self._insert_rejected(_conflict(entry))
                    outcomes.append("conflict")
            rounds = sorted({(e.table, e.round_id) for e in fresh if e.round_id is not None})
            await self._refold_many(rounds)
        return outcomes

    async def _ensure_partition(self, entry: Entry) -> None:
        month = entry.at.astimezone(UTC).strftime("%Y_%m")
        if month not in self._partitions:
            await self.conn.execute("SELECT archive_events_partition(%s)", (entry.at,))
            self._partitions.add(month)

    async def _refold(self, table: str, round_id: str) -> None:
        await self._refold_many([(table, round_id)])

    async def _refold_many(self, rounds: Sequence[tuple[str, str]]) -> None:
        """Refold each ``(table, round)`` from its archived entries: one read, one upsert."""
        if not rounds:
            return
        await self._lock_rounds(rounds)
        cursor = await self.conn.execute(
            "SELECT e.table_id, e.round_id, e.kind, e.envelope->'data', e.at, e.seq, e.delayed"
            " FROM events e JOIN unnest(%s::text[], %s::text[]) AS r(t, rid)"
            " ON e.table_id = r.t AND e.round_id = r.rid ORDER BY e.table_id, e.round_id, e.seq",
            ([t for t, _ in rounds], [r for _, r in rounds]),
        )
        by_round: dict[tuple[str, str], list[Any]] = {key: [] for key in rounds}
        for row in await cursor.fetchall():
            by_round[(str(row[0]), str(row[1]))].append(row[2:])
        params = [_round_row(t, r, rows) for (t, r), rows in by_round.items()]
        async with self.conn.cursor() as cur:
            await cur.executemany(_UPSERT_ROUND, params)

    async def _lock_rounds(self, rounds: Sequence[tuple[str, str]]) -> None:
        """Hold each round's advisory lock until the transaction ends (several instances).

        Two archive instances may store entries of one round at once (shared
        subscriptions). Each refolds the round from what its snapshot shows; without a lock
        the later commit could be a fold that misses the other's entries (a lost update:
        a settled round folded without its result). Under the round's lock, taken in one
        order (sorted: no deadlock), a refold reads after the previous holder's commit.
        """
        keys = sorted({f"{table}/{round_id}" for table, round_id in rounds})
        await self.conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext('archive-round'), hashtext(k))"
            " FROM unnest(%s::text[]) AS k ORDER BY k",
            (keys,),
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

    async def raise_alert(
        self,
        table: str | None,
        kind: str,
        detail: str,
        *,
        gap_id: int | None = None,
        missing: Sequence[int] = (),
    ) -> None:
        """Keep an alert; with ``gap_id``, also stamp that gap alerted, ``missing`` kept.

        Both in one transaction: a reader never sees the alert without its gap's stamp.
        """
        async with self.conn.transaction():
            await self.conn.execute(
                "INSERT INTO alerts (table_id, kind, detail) VALUES (%s, %s, %s)",
                (table, kind, detail),
            )
            if gap_id is not None:
                await self.conn.execute(
                    "UPDATE gaps SET alerted_at = now(), missing = %s WHERE id = %s",
                    (list(missing) or None, gap_id),
                )


def _conflict(entry: Entry) -> Rejected:
    """The rejection of a copy of an archived key with other content."""
    return Rejected(
        entry.topic,
        entry.table,
        entry.seq,
        "conflict",
        f"seq {entry.seq} (session {entry.session}) is archived with other content",
        json.dumps(entry.envelope).encode(),
    )


_UPSERT_ROUND = (
    "INSERT INTO rounds (table_id, round_id, round_no, game, state, outcome, opened_at,"
    " finished_at, result_seq, delayed, result, bets, entries, updated_at)"
    " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s, now())"
    " ON CONFLICT (table_id, round_id) DO UPDATE SET round_no = EXCLUDED.round_no,"
    " game = EXCLUDED.game, state = EXCLUDED.state, outcome = EXCLUDED.outcome,"
    " opened_at = EXCLUDED.opened_at, finished_at = EXCLUDED.finished_at,"
    " result_seq = EXCLUDED.result_seq, delayed = EXCLUDED.delayed,"
    " result = EXCLUDED.result, bets = EXCLUDED.bets, entries = EXCLUDED.entries,"
    " updated_at = now()"
)


def _round_row(table: str, round_id: str, rows: Sequence[Any]) -> tuple[Any, ...]:
    """The ``rounds`` row of a round from its entries ``(kind, data, at, seq, delayed)``."""
    fold = RoundFold.replay(round_id, ((row[0], row[1]) for row in rows))
    opened = next((row[2] for row in rows if row[0] == "round_opened"), None)
    final = next((row for row in rows if row[0] in {"round_result", "round_voided"}), None)
    return (
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
    )


def _safe(url: str) -> str:
    """``url`` without its password."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    auth, host = rest.rsplit("@", 1)
    user = auth.split(":", 1)[0]
    return f"{scheme}://{user}@{host}"
