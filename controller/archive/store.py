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
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

import orjson
import psycopg
from psycopg.types.json import Jsonb, set_json_loads

from controller.archive.batch import (
    GAP_STAMP_COLUMNS,
    ChainWalks,
    Copy,
    GapStamp,
    Key,
    Linked,
    RoundFolds,
    RoundKey,
    RoundRow,
    Stored,
    conflict,
    entry_of_copy,
    envelope_text,
    first_copies,
    forged,
    link_of,
    log_walks,
    outcomes,
    state_of,
)
from controller.archive.errors import ArchiveError
from controller.archive.ingest import Entry, Rejected, Status
from controller.archive.journals import NEW_JOURNAL, JournalRecord, place
from controller.archive.migrate import migrate

__all__ = ["ArchiveStore", "Stored"]


_INSERT_KEYS = (
    "INSERT INTO entry_keys (table_id, session, seq, at, digest, state, link_prev, link_hash)"
    " SELECT k.t, k.s, k.q, k.a, k.d, k.st, decode(k.lp, 'hex'), decode(k.lh, 'hex')"
    " FROM json_to_recordset(%s::json)"
    " AS k(t text, s integer, q bigint, a timestamptz, d text, st text, lp text, lh text)"
    " ON CONFLICT DO NOTHING RETURNING table_id, session, seq"
)
"""The batch's keys (one JSON document: orjson writes it, the server reads it) into
``entry_keys``; a key already there is left alone; answers the new ones."""

_CHAIN_KEYS = (
    "SELECT k.table_id, k.seq, k.session, encode(k.link_prev, 'hex'), encode(k.link_hash, 'hex'),"
    " k.state FROM entry_keys k"
    " JOIN json_to_recordset(%s::json) AS r(t text, lo bigint, hi bigint)"
    " ON k.table_id = r.t AND k.seq BETWEEN r.lo AND r.hi"
)
"""The keys in each table's range a walk down the signed chain reads."""
_CHAIN_COPIES = (
    "SELECT j.id, j.table_id, j.seq, j.payload FROM rejected j"
    " JOIN json_to_recordset(%s::json) AS r(t text, lo bigint, hi bigint)"
    " ON j.table_id = r.t AND j.category = 'conflict' AND j.seq BETWEEN r.lo AND r.hi"
)
"""The conflicting copies kept in the same ranges (the chain's own may be among them)."""
_VERIFY_KEYS = (
    "UPDATE entry_keys e SET state = 'verified' FROM json_to_recordset(%s::json)"
    " AS k(t text, s integer, q bigint, h text) WHERE e.table_id = k.t AND e.session = k.s"
    " AND e.seq = k.q AND e.link_hash = decode(k.h, 'hex') AND e.state <> 'verified'"
)
"""Keys a walk covered, verified (only the copy with the chain's hash, and only once)."""

_ARCHIVED_DIGESTS = (
    "SELECT e.table_id, e.session, e.seq, e.digest FROM entry_keys e"
    " JOIN json_to_recordset(%s::json) AS k(t text, s integer, q bigint)"
    " ON e.table_id = k.t AND e.session = k.s AND e.seq = k.q"
)
"""The archived digests of the batch's keys that were there before it."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a batch's walks decided before its keys went in (:meth:`ArchiveStore._prewalk`).

    Attributes:
        states: The state each new key goes in with (``verified``), by key.
        verified: Every key the walks covered, with the hash it must have.
        walks: The walks (logged).
    """

    states: dict[Key, str]
    verified: list[tuple[str, int, int, str | None]]
    walks: ChainWalks


class ArchiveStore:
    """The archive database, through one async connection.

    Args:
        conn: An open connection (not autocommit: each call is its own transaction).

    Attributes:
        gaps_shared: Gaps are kept in the database, shared by the archive's instances
            (:class:`controller.archive.gaps.GapBook`).
    """

    gaps_shared: ClassVar[bool] = True

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn
        self._partitions: set[str] = set()
        self._folds = RoundFolds()
        self.resolved: list[Rejected] = []
        set_json_loads(_json_loads, conn)

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
        one ``INSERT ... SELECT FROM json_to_recordset(...) ON CONFLICT DO NOTHING
        RETURNING``, the new entries into ``events`` with ``COPY``, and each round touched is
        refolded once, its ``rounds`` row upserted in one statement for the batch. A
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
            self._folds.clear()
            raise

    async def _store_entries(self, entries: Sequence[Entry]) -> list[Stored]:
        first = first_copies(entries)
        keys = list(first.values())
        async with self.conn.transaction():
            plan = await self._prewalk(first)
            states = {} if plan is None else plan.states
            for entry in keys:
                if not entry.raw or b"\\u0000" in entry.raw:
                    # What the recall and the refold read (envelope->'data') must be readable:
                    # the server refuses a "\u0000" there (the batch then goes one by one).
                    await self.conn.execute("SELECT (%s::json)->'data'", (envelope_text(entry),))
            # orjson writes the aware ``at`` as RFC 3339, what ``timestamptz`` reads.
            document = orjson.dumps(
                [
                    {
                        "t": e.table,
                        "s": e.session,
                        "q": e.seq,
                        "a": e.at,
                        "d": e.digest,
                        "st": states.get(key, state_of(e)),
                        "lp": None if e.link is None else e.link[0],
                        "lh": None if e.link is None else e.link[1],
                    }
                    for key, e in first.items()
                ]
            ).decode()
            cursor = await self.conn.execute(_INSERT_KEYS, (document,))
            new = {(str(r[0]), int(r[1]), int(r[2])) for r in await cursor.fetchall()}
            stored = {key: first[key].digest for key in new}
            if len(new) < len(keys):
                old = [{"t": k[0], "s": k[1], "q": k[2]} for k in first if k not in new]
                cursor = await self.conn.execute(_ARCHIVED_DIGESTS, (orjson.dumps(old).decode(),))
                for table, session, seq, digest in await cursor.fetchall():
                    stored[(str(table), int(session), int(seq))] = str(digest)
            fresh = [first[key] for key in first if key in new]
            await self._copy_events(fresh)
            found = outcomes(entries, first, new, stored)
            for entry, outcome in zip(entries, found, strict=True):
                if outcome == "conflict":
                    await self._insert_rejected(conflict(entry))
            if plan is None:
                moved = await self._walk(fresh)
            else:
                # Verified as they went in; the keys of earlier batches the walks covered now.
                self.resolved, moved = [], set()
                await self._verify([k for k in plan.verified if k[:3] not in new])
                log_walks(plan.walks)
            await self._refold_many(fresh, moved)
        return found

    async def _prewalk(self, first: dict[Key, Entry]) -> _Plan | None:
        """The walks down the signed chain, before the batch's keys go in (their states).

        The keys around the batch are read first; the batch's keys not archived yet join
        them, and the walks run (:class:`ChainWalks`, as :meth:`_walk`): when they only
        verify, each new key goes in with its state and only keys of earlier batches are
        updated (a key written twice per entry costs the archive about a third of its
        speed). ``None`` when a walk found a copy off the chain, or the batch holds a copy
        of an archived key placed elsewhere in the chain (then the keys go in provisional
        and :meth:`_walk` runs after them and after the conflicts are kept, moving what it
        must).
        """
        probe = ChainWalks(first.values())
        ranges = probe.windows()
        if not ranges:
            return _Plan({}, [], probe)
        keys, copies = await self._read_ranges(ranges)
        archived = {(t, k.session, k.seq): k.hash for t, found in keys.items() for k in found}
        if any(
            key in archived and archived[key] != (None if e.link is None else e.link[1])
            for key, e in first.items()
        ):
            return None  # a conflicting copy: the chain's own may be among them
        fresh = [e for key, e in first.items() if key not in archived]
        walks = ChainWalks(fresh)
        for entry in fresh:
            if entry.link is not None and entry.table in ranges:
                linked = Linked(entry.seq, entry.session, *entry.link, state_of(entry))
                keys[entry.table].append(linked)
        for table, (lo, _) in ranges.items():
            walks.add(table, lo, keys[table], copies[table])
        await self._walk_on(walks)
        verified, forged_keys, promoted = walks.outcome()
        if forged_keys or promoted:
            return None
        hashes = {
            (table, key.session, key.seq): key.hash
            for table, chain in walks.chain.items()
            for found in chain.values()
            for key in found
        }
        states = {key: "verified" for key in verified}
        return _Plan(states, [(*key, hashes.get(key)) for key in verified], walks)

    async def _verify(self, keys: Sequence[tuple[str, int, int, str | None]]) -> None:
        if keys:
            rows = [{"t": t, "s": s, "q": q, "h": h} for t, s, q, h in keys]
            await self.conn.execute(_VERIFY_KEYS, (orjson.dumps(rows).decode(),))

    async def _walk_on(self, walks: ChainWalks) -> None:
        """Walk, reading further down while a walk asks for it."""
        ranges = walks.run()
        while ranges:
            keys, copies = await self._read_ranges(ranges)
            for table, (lo, _) in ranges.items():
                walks.add(table, lo, keys[table], copies[table])
            ranges = walks.run()

    async def _walk(self, fresh: Sequence[Entry]) -> set[RoundKey]:
        """Walk the signed chain from the batch's new entries; the rounds it changed.

        :class:`ChainWalks` decides (the same as on SQLite); here it is applied: keys verified,
        forged ones moved to ``rejected``, the chain's own copies archived in their place.
        """
        self.resolved = []
        walks = ChainWalks(fresh)
        ranges = walks.windows()
        if ranges:
            keys, copies = await self._read_ranges(ranges)
            for table, (lo, _) in ranges.items():
                walks.add(table, lo, keys[table], copies[table])
            await self._walk_on(walks)
        verified, forged_keys, promoted = walks.outcome()
        hashes = {
            (table, key.session, key.seq): key.hash
            for table, chain in walks.chain.items()
            for found in chain.values()
            for key in found
        }
        await self._verify([(*key, hashes.get(key)) for key in verified])
        moved: set[RoundKey] = set()
        for table, session, seq in forged_keys:
            moved |= await self._forge(table, session, seq)
        for table, copy in promoted:
            moved |= await self._promote(table, copy)
        log_walks(walks)
        return moved

    async def _read_ranges(
        self, ranges: dict[str, tuple[int, int]]
    ) -> tuple[dict[str, list[Linked]], dict[str, list[Copy]]]:
        """The archived keys and the conflicting copies in each table's ``seq`` range."""
        document = orjson.dumps(
            [{"t": t, "lo": lo, "hi": hi} for t, (lo, hi) in ranges.items()]
        ).decode()
        keys: dict[str, list[Linked]] = {table: [] for table in ranges}
        cursor = await self.conn.execute(_CHAIN_KEYS, (document,))
        for table, seq, session, prev, chained, state in await cursor.fetchall():
            keys[str(table)].append(Linked(int(seq), int(session), prev, chained, str(state)))
        copies: dict[str, list[Copy]] = {table: [] for table in ranges}
        cursor = await self.conn.execute(_CHAIN_COPIES, (document,))
        for row_id, table, seq, payload in await cursor.fetchall():
            link = link_of(bytes(payload))
            if link is not None:
                copies[str(table)].append(Copy(int(row_id), int(seq), *link))
        return keys, copies

    async def _forge(self, table: str, session: int, seq: int) -> set[RoundKey]:
        """Move an archived key off the signed chain to ``rejected`` (``forged``); its round."""
        moved: set[RoundKey] = set()
        cursor = await self.conn.execute(
            "DELETE FROM events WHERE table_id = %s AND session = %s AND seq = %s"
            " RETURNING topic, round_id, envelope::text",
            (table, session, seq),
        )
        for topic, round_id, envelope in await cursor.fetchall():
            rejected = forged(str(topic), table, seq, session, str(envelope))
            await self._insert_rejected(rejected)
            self.resolved.append(rejected)
            if round_id is not None:
                moved.add((table, str(round_id)))
        await self.conn.execute(
            "DELETE FROM entry_keys WHERE table_id = %s AND session = %s AND seq = %s",
            (table, session, seq),
        )
        return moved

    async def _promote(self, table: str, copy: Copy) -> set[RoundKey]:
        """Archive a conflicting copy the signed chain shows is the table's; its round."""
        cursor = await self.conn.execute(
            "DELETE FROM rejected WHERE id = %s RETURNING topic, payload", (copy.id,)
        )
        row = await cursor.fetchone()
        entry = None if row is None else entry_of_copy(str(row[0]), bytes(row[1]), table)
        if entry is None:
            return set()
        await self.conn.execute(
            "INSERT INTO entry_keys (table_id, session, seq, at, digest, state, link_prev,"
            " link_hash) VALUES (%s, %s, %s, %s, %s, 'verified', decode(%s, 'hex'),"
            " decode(%s, 'hex'))",
            (table, entry.session, entry.seq, entry.at, entry.digest, copy.prev, copy.hash),
        )
        await self._copy_events([entry])
        return set() if entry.round_id is None else {(table, entry.round_id)}

    async def _copy_events(self, fresh: Sequence[Entry]) -> None:
        """``COPY`` the new entries into ``events`` (their monthly partitions made first)."""
        if not fresh:
            return
        # One representative per distinct local minute (all an offset can move a month by).
        minutes = {
            (e.at.year, e.at.month, e.at.day, e.at.hour, e.at.minute, e.at.tzinfo): e for e in fresh
        }
        for entry in minutes.values():
            await self._ensure_partition(entry)
        async with (
            self.conn.cursor() as cur,
            cur.copy(
                "COPY events (table_id, session, seq, at, round_id, kind, topic, delayed,"
                " replayed, signed, envelope) FROM STDIN"
            ) as copy,
        ):
            for e in fresh:
                await copy.write_row(
                    (
                        e.table,
                        e.session,
                        e.seq,
                        e.at,
                        e.round_id,
                        e.kind,
                        e.topic,
                        e.delayed,
                        e.replayed,
                        e.signed,
                        envelope_text(e),
                    )
                )

    async def _ensure_partition(self, entry: Entry) -> None:
        month = entry.at.astimezone(UTC).strftime("%Y_%m")
        if month not in self._partitions:
            await self.conn.execute("SELECT archive_events_partition(%s)", (entry.at,))
            self._partitions.add(month)

    async def _refold_many(
        self, fresh: Sequence[Entry], moved: AbstractSet[RoundKey] = frozenset()
    ) -> None:
        """Refold each round with a new entry in ``fresh`` (:class:`RoundFolds`); one upsert.

        ``moved``: rounds a walk down the signed chain took an entry from or gave one to (read
        back whole; a round left with no entry loses its ``rounds`` row).
        """
        added = RoundFolds.touched(fresh)
        if not added and not moved:
            return
        self._folds.forget(moved)
        rounds = sorted(set(added) | set(moved))
        # Under each round's lock the count below reads after another instance's commit.
        await self._lock_rounds(rounds)
        cursor = await self.conn.execute(_ROUND_COUNTS, (_rounds_document(rounds),))
        archived = {(str(r[0]), str(r[1])): int(r[2]) for r in await cursor.fetchall()}
        reread = self._folds.fold_on(added, archived) + sorted(set(moved) - set(added))
        if reread:
            await self._read_folds(reread)
        gone = [key for key in rounds if not self._folds.kept(key)]
        if gone:
            await self.conn.execute(
                "DELETE FROM rounds r USING json_to_recordset(%s::json) AS k(t text, rid text)"
                " WHERE r.table_id = k.t AND r.round_id = k.rid",
                (_rounds_document(gone),),
            )
        rounds = [key for key in rounds if key not in gone]
        if rounds:
            await self.conn.execute(_UPSERT_ROUNDS, (_rows_document(self._folds.rows(rounds)),))

    async def _read_folds(self, rounds: Sequence[RoundKey]) -> None:
        """Fold ``rounds`` whole from their archived entries (one read) and keep them."""
        cursor = await self.conn.execute(
            "SELECT e.table_id, e.round_id, e.kind, e.envelope->'data', e.at, e.seq, e.delayed"
            " FROM events e JOIN json_to_recordset(%s::json) AS r(t text, rid text)"
            " ON e.table_id = r.t AND e.round_id = r.rid ORDER BY e.table_id, e.round_id, e.seq",
            (_rounds_document(rounds),),
        )
        self._folds.load(await cursor.fetchall())

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
            " FROM json_array_elements_text(%s::json) AS k ORDER BY k",
            (orjson.dumps(keys).decode(),),
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

    async def journals(self) -> list[JournalRecord]:
        """Every journal of every table the archive knows (``journals``)."""
        return await journal_records(self.conn)

    async def adopt_journal(
        self, table: str, journal: str, *, head_seq: int | None, at: datetime
    ) -> tuple[JournalRecord, bool]:
        """The chain of a journal of ``table`` met for the first time, recorded; whether new.

        One transaction under a lock per table (``pg_advisory_xact_lock``): two instances
        meeting the same new journal agree on one chain and raise one alert
        (``new_journal``; docs/archive.md, "Journals").
        """
        async with self.conn.transaction():
            await self.conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext('tablectl-journals'), hashtext(%s))",
                (table,),
            )
            known = await journal_records(self.conn, table)
            for record in known:
                if record.journal == journal:
                    return record, False
            cursor = await self.conn.execute(
                "SELECT max(seq) FROM entry_keys WHERE table_id = %s", (table,)
            )
            row = await cursor.fetchone()
            plain = None if row is None or row[0] is None else int(row[0])
            chain, previous = place(table, journal, known, plain_highest=plain, head_seq=head_seq)
            last = None
            if previous is not None:
                cursor = await self.conn.execute(
                    "SELECT max(seq) FROM entry_keys WHERE table_id = %s", (previous,)
                )
                row = await cursor.fetchone()
                last = None if row is None or row[0] is None else int(row[0])
            record = JournalRecord(table, journal, chain, at, previous, last)
            await self.conn.execute(
                "INSERT INTO journals (table_id, journal, chain_id, first_seen, previous_chain,"
                " previous_last_seq) VALUES (%s, %s, %s, %s, %s, %s)",
                (table, journal, chain, at, previous, last),
            )
            if record.alert is not None:
                await self.conn.execute(
                    "INSERT INTO alerts (table_id, kind, detail) VALUES (%s, %s, %s)",
                    (table, NEW_JOURNAL, record.alert),
                )
        return record, True

    async def highest_seqs(self, tables: Sequence[str] | None = None) -> dict[str, int]:
        """Each archived table's highest ``seq`` (of ``tables`` only: one index look-up each)."""
        if tables is None:
            cursor = await self.conn.execute(
                "SELECT table_id, max(seq) FROM entry_keys GROUP BY table_id"
            )
        else:
            cursor = await self.conn.execute(
                "SELECT t, (SELECT max(seq) FROM entry_keys WHERE table_id = t)"
                " FROM unnest(%s::text[]) AS t",
                (list(tables),),
            )
        return {str(row[0]): int(row[1]) for row in await cursor.fetchall() if row[1] is not None}

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
        what: GapStamp,
        missing: Sequence[int] = (),
    ) -> None:
        """Stamp a gap's replay request, fill or alert (``missing``: the seqs still absent)."""
        column = GAP_STAMP_COLUMNS[what]
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


async def journal_records(
    conn: psycopg.AsyncConnection[Any], table: str | None = None
) -> list[JournalRecord]:
    """The ``journals`` rows (of ``table`` only, if given), on any connection."""
    cursor = await conn.execute(
        "SELECT table_id, journal, chain_id, first_seen, previous_chain, previous_last_seq"
        " FROM journals WHERE %s::text IS NULL OR table_id = %s",
        (table, table),
    )
    return [
        JournalRecord(
            str(row[0]),
            str(row[1]),
            str(row[2]),
            row[3],
            None if row[4] is None else str(row[4]),
            None if row[5] is None else int(row[5]),
        )
        for row in await cursor.fetchall()
    ]


def _json_loads(data: bytes | bytearray | memoryview | str) -> Any:
    """The ``json`` loader of psycopg: orjson, the standard library for what orjson refuses."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(bytes(data) if isinstance(data, memoryview) else data)


_ROUND_COUNTS = (
    "SELECT e.table_id, e.round_id, count(*) FROM events e"
    " JOIN json_to_recordset(%s::json) AS r(t text, rid text)"
    " ON e.table_id = r.t AND e.round_id = r.rid GROUP BY 1, 2"
)
"""Each round's archived entry count (the rounds as :func:`_rounds_document`)."""

_UPSERT_ROUNDS = (
    "INSERT INTO rounds (table_id, round_id, round_no, game, state, outcome, opened_at,"
    " finished_at, result_seq, delayed, result, bets, entries, updated_at)"
    " SELECT r.t, r.r, r.n, r.g, r.s, r.o, r.oa, r.fa, r.rs, r.d, r.res, r.b, r.e, now()"
    " FROM json_to_recordset(%s::json) AS r(t text, r text, n integer, g text, s text,"
    " o text, oa timestamptz, fa timestamptz, rs bigint, d boolean, res jsonb, b jsonb,"
    " e integer)"
    " ON CONFLICT (table_id, round_id) DO UPDATE SET round_no = EXCLUDED.round_no,"
    " game = EXCLUDED.game, state = EXCLUDED.state, outcome = EXCLUDED.outcome,"
    " opened_at = EXCLUDED.opened_at, finished_at = EXCLUDED.finished_at,"
    " result_seq = EXCLUDED.result_seq, delayed = EXCLUDED.delayed,"
    " result = EXCLUDED.result, bets = EXCLUDED.bets, entries = EXCLUDED.entries,"
    " updated_at = now()"
)
"""The batch's ``rounds`` rows (one JSON document, :func:`_rows_document`), inserted or
replaced: one statement however many rounds the batch touched (a JSON ``null`` is SQL NULL)."""


def _rounds_document(rounds: Sequence[RoundKey]) -> str:
    """``rounds`` as the JSON document ``_ROUND_COUNTS`` and the read-back join read."""
    return orjson.dumps([{"t": table, "rid": round_id} for table, round_id in rounds]).decode()


def _rows_document(rows: Sequence[RoundRow]) -> str:
    """``rows`` as the JSON document ``_UPSERT_ROUNDS`` reads.

    orjson writes it (times as RFC 3339); a value orjson cannot write (an integer beyond
    64 bits, which a table's JSON may carry) makes the standard library write the document.
    """
    document = [
        {
            "t": row.table,
            "r": row.round_id,
            "n": row.round_no,
            "g": row.game,
            "s": row.state,
            "o": row.outcome,
            "oa": row.opened_at,
            "fa": row.finished_at,
            "rs": row.result_seq,
            "d": row.delayed,
            "res": row.result,
            "b": row.bets,
            "e": row.entries,
        }
        for row in rows
    ]
    try:
        return orjson.dumps(document).decode()
    except orjson.JSONEncodeError:
        return json.dumps(document, default=_iso)


def _iso(value: object) -> str:
    """A time as ISO-8601 (``json.dumps``'s ``default`` in :func:`_rows_document`)."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {type(value).__name__}")


def _safe(url: str) -> str:
    """``url`` without its password."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    auth, host = rest.rsplit("@", 1)
    user = auth.split(":", 1)[0]
    return f"{scheme}://{user}@{host}"
