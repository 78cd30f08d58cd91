"""The archive consumer: tables' MQTT topics in, archive rows out, gaps chased.

:class:`ArchiveConsumer` subscribes (QoS 1, a persistent session under a stable client id, so
the broker keeps what arrives while the archive is away) to ``{prefix}/+/events``,
``{prefix}/+/results`` and ``{prefix}/+/status`` (with ``consumer.share_group``, MQTT 5 shared
subscriptions ``$share/{group}/...``: several instances share the load; ``only_known_tables``:
the configured tables' own topics), classifies each message
(:func:`controller.archive.ingest.classify_batch`), and stores it
(:mod:`controller.archive.backend`: PostgreSQL or SQLite): an entry once, a status as
history, anything else as rejected with its reason. Nothing a message holds can stop the
consumer: every payload is bounded by the shared parse's checks before the archive's decoder
sees it (:mod:`controller.inbound`), a ``seq`` beyond what its table could have sent is rejected
(``seq_ahead``, :class:`controller.inbound.SeqGuard`, anchored at the table's online status and
at the archive's highest ``seq`` of it), and each rejection is kept in ``rejected``, counted and
logged once (:class:`controller.inbound.RejectionLog`). While a batch is being committed the
next one is classified (:meth:`ArchiveConsumer.handle_batches`).

A message is **acknowledged only once its batch is committed**: a consumer killed between
receipt and commit loses nothing (the broker sends it again to the session), and while the
database is away the consumer stores nothing, acknowledges nothing and reconnects
(:class:`controller.archive.dblink.DbLink`), keeping the batch in hand.

Gaps (docs/archive.md, "Gaps"): on PostgreSQL they live in the database
(:class:`controller.archive.gaps.GapBook`), so that instances that each see part of a table's
``seq`` agree on them: a hole the database still has after ``gaps.grace_seconds`` is a gap;
one instance sends the table ``replay --from-seq`` for it (the existing command: the table
re-sends the *results* in the range); a gap not filled within ``gaps.timeout_seconds`` is an
alert: an error log line and a row in ``alerts``, once. On SQLite (one archive beside one
table, ``make run``) the consumer follows each table's ``seq`` in memory as it stores
(:class:`controller.archive.gap_tracker.GapTracker`), with the same replay and alert rules.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import typing
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from controller.archive.backend import Store, lost, refused
from controller.archive.config import ArchiveSettings
from controller.archive.dblink import DbLink
from controller.archive.errors import ArchiveError
from controller.archive.gap_tracker import GapTracker, TrackedGap
from controller.archive.gaps import Gap, GapBook, ranges
from controller.archive.ingest import (
    Entry,
    Rejected,
    Status,
    TableKeys,
    classify_batch,
    table_of,
)
from controller.archive.journals import JournalRecord
from controller.inbound import Code, Rejection, RejectionLog, SeqGuard
from controller.mqtt import drain
from controller.mqtt.connection import Connector
from controller.pitcli import Target, send_command

if TYPE_CHECKING:
    import psycopg

    from controller.broker import BrokerAddress
    from controller.mqtt.client import Client as MqttClient

log = structlog.get_logger("archive")

BatchHook = Callable[[Sequence[Entry | Status | Rejected], Sequence[str]], None]
"""What :attr:`ArchiveConsumer.on_batch` is called with: the messages classified, outcomes."""

BATCH_MAX = 2000
"""At most this many waiting messages are stored in one transaction (docs/archive.md)."""
CLASSIFY_SLICE = 250
"""Messages classified between two yields to the event loop, so a batch being committed
meanwhile is not held up (:meth:`ArchiveConsumer.handle_batches`)."""

ALERTED_FILL_EVERY = 25
"""Gap checks between two looks at alerted gaps (a late fill is still stamped)."""

Message = tuple[str, bytes]
Found = Entry | Status | Rejected

_CODES: dict[str, Code] = {code: code for code in typing.get_args(Code)}
_CODES["unknown_table"] = "wrong_table"
"""The shared codes of the archive's categories (the rest, its own, are ``invalid``, named in
the reason)."""
_CONFLICT = "archived with other content (kept in rejected; the archived copy stands)"


@dataclass(frozen=True, slots=True)
class Received:
    """A message as received, kept until its batch is committed and it is acknowledged.

    Attributes:
        topic: The topic.
        payload: The bytes.
        mid: The MQTT packet id (for the acknowledgement).
        qos: Its QoS (0: nothing to acknowledge).
    """

    topic: str
    payload: bytes
    mid: int = 0
    qos: int = 0


Committed = Callable[[Sequence[Received]], None]
"""Called with each batch once it is committed (the acknowledgements)."""


class _AckAfterCommit(Connector):
    """The shared :class:`Connector`, acknowledgements left to the consumer, the drain's paths."""

    def make_client(self, address: BrokerAddress) -> MqttClient:
        drain.install()  # the archive's only: paho's internals, on the pinned paho (drain.py)
        return super().make_client(address)


class ArchiveConsumer:
    """Stores every table's entries, statuses and rejections; detects and chases gaps.

    Args:
        settings: The archive config.
        store: The database (PostgreSQL: its connection is made again if lost; SQLite: a
            write that failed for the file's sake is tried again).
        keys: Known tables and their public keys.
        clock: Monotonic seconds (tests may pass their own; the SQLite gap path's clock).
        only_known_tables: Subscribe to the configured tables' topics only, not ``+`` (the
            archive beside one table on a broker other tables use: ``make run``).
        wall_clock: Wall-clock seconds (the tables' status times anchor :attr:`seqs`).

    Attributes:
        counts: ``new``, ``duplicate``, ``conflict``, ``status``, ``rejected:<category>``,
            ``gap_opened``, ``replay_requested``, ``gap_alert``, ``gap_filled`` (the gaps
            this instance recorded, asked for, alerted, saw filled).
        subscribed: Set while subscribed to the broker.
        shared_gaps: Gaps are kept in the database (PostgreSQL, :class:`GapBook`), else in
            memory (SQLite, :attr:`gaps`).
        db: The ingest's database link (reconnects, bounds every call).
        gap_db: The gap checks' own connection (PostgreSQL only; they run beside the ingest).
        gaps: The SQLite path's gap tracker (:meth:`load_state` fills it at start).
        open_gaps: Gaps not filled (alerted ones included), as of the last gap check (on
            PostgreSQL the database's count, the same for every instance).
        on_batch: Called after each stored batch with what each message was and what became
            of it (the metrics' hook, :mod:`controller.archive.metrics`); must not raise. A
            batch retried after a lost database is reported once, when it is stored.
        seqs: What each table could have sent (a ``seq`` beyond it is ``seq_ahead``).
        rejections: Logs each rejection (and conflict) once, flood-bounded, and counts it.
    """

    def __init__(
        self,
        settings: ArchiveSettings,
        store: Store,
        keys: TableKeys,
        *,
        clock: Callable[[], float] = time.monotonic,
        only_known_tables: bool = False,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.keys = keys
        self.clock = clock
        self.only_known_tables = only_known_tables
        self.counts: Counter[str] = Counter()
        self.subscribed = asyncio.Event()
        self.shared_gaps = store.gaps_shared
        conn: psycopg.AsyncConnection[Any] | None = None
        if self.shared_gaps:
            # Imported only for a PostgreSQL archive: SQLite's runs without psycopg
            # (controller.archive.backend).
            from controller.archive.store import ArchiveStore

            conn = store.conn if isinstance(store, ArchiveStore) else None
        self.db = DbLink(settings.database, "ingest", conn=conn)
        if conn is not None:
            self.db.on_connect(self._new_store)
        self.gap_db: DbLink | None = DbLink(settings.database, "gaps") if self.shared_gaps else None
        self.gaps = GapTracker()
        self._gap_opened = asyncio.Event()
        self._books: dict[int, GapBook] = {}
        self._checks = 0
        self.open_gaps = 0
        self._replays: set[asyncio.Task[None]] = set()
        # A broker that binds client ids to users gives every replay connection of this
        # instance one id (mqtt.command_username): one at a time, or they evict each other.
        self._replay_turn = asyncio.Lock()
        self.on_batch: BatchHook | None = None
        consumer = settings.consumer
        self.linger = Linger(consumer.linger_seconds, min(LINGER_ENOUGH, consumer.receive_maximum))
        self.wall_clock = wall_clock
        self.seqs = SeqGuard()
        self.rejections = RejectionLog(reader="archive")
        self.chains: dict[tuple[str, str], str] = {}
        self.current: dict[str, str] = {}

    def _new_store(self, conn: psycopg.AsyncConnection[Any]) -> None:
        from controller.archive.store import ArchiveStore

        if not isinstance(self.store, ArchiveStore) or conn is not self.store.conn:
            self.store = ArchiveStore(conn)

    def topics(self) -> list[str]:
        """The subscriptions: ``{prefix}/+/events|results|status``, shared if configured.

        Partitioned (``consumer.partition``): each of this instance's tables' own topics;
        ``only_known_tables``: each configured table's own topics.
        """
        prefix = self.settings.mqtt.topic_prefix.rstrip("/")
        consumer = self.settings.consumer
        share = f"$share/{consumer.share_group}/" if consumer.share_group else ""
        tables = ["+"]
        if consumer.partition is not None or self.only_known_tables:
            tables = [t for t in sorted(self.keys.tables) if consumer.owns(t)]
        suffixes = ("events", "results", "status")
        return [f"{share}{prefix}/{table}/{suffix}" for table in tables for suffix in suffixes]

    def wildcard_topics(self) -> list[str]:
        """Every table's topics (``{prefix}/+/...``), plain and in the configured share group."""
        prefix = self.settings.mqtt.topic_prefix.rstrip("/")
        group = self.settings.consumer.share_group
        shares = ["", *([f"$share/{group}/"] if group else [])]
        suffixes = ("events", "results", "status")
        return [f"{share}{prefix}/+/{suffix}" for share in shares for suffix in suffixes]

    async def load_state(self) -> None:
        """Each configured table's highest archived ``seq``, per journal: where :attr:`seqs` starts.

        SQLite path: also the gap tracker's (a restart sees no old gaps); on PostgreSQL the
        gaps are the database's.
        """
        self._know(await self.store.journals())
        highest = await self.store.highest_seqs(self.chain_ids())
        now = self.wall_clock()
        for chain, seq in highest.items():
            self.seqs.admit(table_of(chain), seq, now)
        if not self.shared_gaps:
            self.gaps = GapTracker(highest)

    # -- journals: each of a table's journals is its own chain -------------------------------

    def _know(self, records: Sequence[JournalRecord]) -> None:
        """Remember which chain each journal is (and each table's latest journal)."""
        for record in sorted(records, key=lambda r: r.first_seen):
            self.chains[(record.table, record.journal)] = record.chain
            self.current[record.table] = record.chain

    def chain_ids(self) -> list[str]:
        """The configured tables and the chains of their journals (what gaps are kept for)."""
        tables = set(self.keys.tables)
        return sorted(tables | {c for (t, _), c in self.chains.items() if t in tables})

    async def _placed(self, found: Sequence[Found]) -> list[Found]:
        """Each entry and status placed in its journal's chain (a new journal recorded).

        A journal met for the first time is recorded (and, when it replaced another, alerted
        on: one ``new_journal`` alert; docs/archive.md, "Journals"). Placing is idempotent: a
        batch retried after a lost database is placed again to the same chains.
        """
        out: list[Found] = []
        for item in found:
            if isinstance(item, Entry | Status) and item.journal:  # version 3
                table = table_of(item.table)
                chain = self.chains.get((table, item.journal))
                if chain is None:
                    chain = await self._adopt(table, item)
                out.append(dataclasses.replace(item, table=chain))
            else:
                out.append(item)
        return out

    async def _adopt(self, table: str, item: Entry | Status) -> str:
        head = item.chain_head[0] if isinstance(item, Status) and item.chain_head else None
        at = _message_time(item.envelope.get("at")) or datetime.now(UTC)
        record, new = await self.store.adopt_journal(table, item.journal, head_seq=head, at=at)
        self._know([record])
        if new and record.alert is not None:
            self.counts["new_journal"] += 1
            log.error(
                "a table started a new journal",
                table=table,
                journal=record.journal,
                chain=record.chain,
                previous=record.previous_chain,
                previous_last_seq=record.previous_last_seq,
                alert=record.alert,
            )
        return record.chain

    # -- one message -------------------------------------------------------------------------

    async def handle(self, topic: str, payload: bytes) -> str:
        """Classify and store one message; what became of it (a :attr:`counts` key).

        Raises:
            psycopg.OperationalError: The database is gone (``backend.lost()``).
        """
        return (await self.handle_batch([(topic, payload)]))[0]

    async def handle_batch(
        self, messages: Sequence[Message], done: list[str] | None = None
    ) -> list[str]:
        """Classify and store messages (``(topic, payload)``), entries in one transaction.

        What became of each message, in order (:attr:`counts` keys). If the database refuses
        the batch, its entries are stored one by one, so only the message at fault is
        rejected (``store_error``).

        Args:
            messages: The batch.
            done: Outcomes of an earlier attempt at this batch that the database lost
                (``""``: not stored yet); what it holds is not stored again.

        Raises:
            psycopg.OperationalError: The database is gone (``backend.lost()``); ``done``
                then holds what was stored before.
        """
        return await self.store_classified(messages, self._classify(messages), done)

    def _classify(
        self, messages: Sequence[Message], seen: dict[bytes, Entry] | None = None
    ) -> list[Found]:
        return classify_batch(messages, self.keys, seen, guard=self.seqs, now=self.wall_clock())

    async def classify(self, messages: Sequence[Message]) -> list[Found]:
        """:func:`classify_batch` in slices, yielding to the event loop between them."""
        seen: dict[bytes, Entry] = {}
        found: list[Found] = []
        for first in range(0, len(messages), CLASSIFY_SLICE):
            found += self._classify(messages[first : first + CLASSIFY_SLICE], seen)
            await asyncio.sleep(0)
        return found

    async def handle_batches(
        self, batches: AsyncIterator[Sequence[Received]], committed: Committed | None = None
    ) -> None:
        """Store each batch as :meth:`store_batch` does, classifying the next meanwhile.

        While a batch's transaction is at the database the next batch is classified (JSON,
        digests, signatures: the consumer's CPU), so the two overlap; batches are still
        stored one at a time, in order, each retried after a lost database until it is
        stored, and only then handed to ``committed`` (the acknowledgements). Ends when
        ``batches`` does (its last batch stored).

        Raises:
            Exception: The source's (the broker connection's), once the batch in hand is
                stored.
        """
        storing: asyncio.Task[None] | None = None
        try:
            async for batch in batches:
                messages = [(m.topic, m.payload) for m in batch]
                found = await self.classify(messages)
                if storing is not None:
                    await storing
                storing = asyncio.create_task(
                    self._commit(batch, messages, found, committed), name="archive-store-batch"
                )
        except asyncio.CancelledError:
            if storing is not None:
                storing.cancel()
                await asyncio.gather(storing, return_exceptions=True)
            raise
        except Exception:
            # The source failed (the broker connection): the batch in hand is still stored.
            if storing is not None:
                await asyncio.gather(storing, return_exceptions=True)
            raise
        if storing is not None:
            await storing

    async def _commit(
        self,
        batch: Sequence[Received],
        messages: Sequence[Message],
        found: Sequence[Found],
        committed: Committed | None,
    ) -> None:
        await self.store_found(messages, found)
        if committed is not None:
            committed(batch)

    async def store_batch(self, messages: Sequence[Message]) -> list[str]:
        """:meth:`handle_batch`, bounded, and retried after a lost database until it is stored."""
        return await self.store_found(messages, self._classify(messages))

    async def store_found(self, messages: Sequence[Message], found: Sequence[Found]) -> list[str]:
        """:meth:`store_classified`, bounded, and retried after a lost database until stored.

        Returns once every message of the batch is stored (or rejected with its reason);
        while the database is away it waits (reconnecting with back-off), never drops.
        """
        done = [""] * len(messages)

        async def attempt() -> list[str]:
            return await self.store_classified(messages, found, done)

        if self.shared_gaps:
            return await self.db.call(lambda _: attempt())
        return await self.db.retry(attempt)

    async def store_classified(
        self, messages: Sequence[Message], found: Sequence[Found], done: list[str] | None = None
    ) -> list[str]:
        """Store classified messages (:meth:`handle_batch`'s second half); their outcomes.

        Args:
            messages: The batch.
            found: What each message is (:meth:`classify`).
            done: As in :meth:`handle_batch`.
        """
        outcomes = done if done is not None else [""] * len(found)
        found = await self._placed(found)
        entries = [(i, f) for i, f in enumerate(found) if isinstance(f, Entry) and not outcomes[i]]
        for i, item in enumerate(found):
            if not isinstance(item, Entry) and not outcomes[i]:
                outcomes[i] = await self._guarded(messages[i], item)
        if entries:
            await self._store_entries(messages, entries, outcomes)
            for i, entry in entries:
                if outcomes[i] == "conflict":
                    self._log_rejected(entry.topic, entry.table, entry.seq, "conflict", _CONFLICT)
        self.counts.update(outcomes)
        if self.on_batch is not None:
            self.on_batch(found, outcomes)
        return outcomes

    async def _store_entries(
        self,
        messages: Sequence[Message],
        entries: list[tuple[int, Entry]],
        outcomes: list[str],
    ) -> None:
        try:
            stored = await self.store.store_entries([e for _, e in entries])
        except lost():
            raise
        except refused():
            for i, entry in entries:
                outcomes[i] = await self._guarded(messages[i], entry)
        else:
            for (i, _), outcome in zip(entries, stored, strict=True):
                outcomes[i] = outcome
            for moved in self.store.resolved:
                self.counts["rejected:forged"] += 1
                self._log_rejected(moved.topic, moved.table, moved.seq, "forged", moved.reason)
        if not self.shared_gaps:
            for i, entry in entries:
                if not outcomes[i].startswith("rejected:"):
                    await self._track(entry)

    async def _guarded(self, message: Message, found: Found) -> str:
        topic, payload = message
        try:
            return await self._store(found)
        except lost():
            raise
        except refused() as exc:
            # The database refused this message (its transaction was rolled back, e.g. a
            # "\u0000" that jsonb cannot hold): keep it as rejected with the server's words
            # rather than stop the consumer.
            table = found.table
            seq = None if isinstance(found, Status) else found.seq
            await self.store.store_rejected(
                Rejected(topic, table, seq, "store_error", f"database: {exc}", payload)
            )
            self._log_rejected(topic, table, seq, "store_error", f"database: {exc}")
            return "rejected:store_error"

    def _log_rejected(
        self, topic: str, table: str | None, seq: int | None, category: str, reason: str
    ) -> None:
        """Log (once, flood-bounded) and count a rejection (:attr:`rejections`)."""
        code: Code = _CODES.get(category, "invalid")
        text = reason if code == category else f"{category}: {reason}"
        self.rejections.record(Rejection(code, text, topic, table, seq))

    async def _store(self, found: Found) -> str:
        if isinstance(found, Rejected):
            await self.store.store_rejected(found)
            self._log_rejected(found.topic, found.table, found.seq, found.category, found.reason)
            return f"rejected:{found.category}"
        if isinstance(found, Status):
            await self.store.store_status(found)
            return "status"
        return await self.store.store_entry(found)

    # -- gaps: SQLite (in memory, one process) -------------------------------------------------

    async def _track(self, entry: Entry) -> None:
        in_order = entry.topic.endswith("/events")
        gap = self.gaps.seen(entry.table, entry.seq, self.clock(), in_order_topic=in_order)
        if gap is not None:
            gap.gap_id = await self.store.open_gap(gap.table, gap.lo, gap.hi)
            self.counts["gap_opened"] += 1
            self._gap_opened.set()
            log.warning("gap in seq", table=gap.table, from_seq=gap.lo, to_seq=gap.hi)
        for filled in self.gaps.filled():
            self.counts["gap_filled"] += 1
            if filled.gap_id is not None:
                await self.store.mark_gap(filled.gap_id, "filled")
            log.info("gap filled", table=filled.table, from_seq=filled.lo, to_seq=filled.hi)

    async def _check_tracked_gaps(self) -> None:
        """Ask for replays of gaps past their grace, alert on gaps past their timeout."""
        now = self.clock()
        config = self.settings.gaps
        # Each gap is stamped before it is noted as done: a stamp the file refused is tried
        # again by the retry (DbLink.retry), and then the replay or alert follows it.
        for gap in self.gaps.due_for_replay(now, config.grace_seconds, config.replay_every_seconds):
            if gap.gap_id is not None:
                await self.store.mark_gap(gap.gap_id, "replay_requested", gap.missing())
            gap.requested_at = now
            self.counts["replay_requested"] += 1
            self._ask_replay(gap.table, gap.lo, gap.hi)
        for gap in self.gaps.due_for_alert(now, config.timeout_seconds):
            await self._alert_tracked(gap, config.timeout_seconds)
            gap.alerted = True
            self.counts["gap_alert"] += 1
        self.open_gaps = len(self.gaps.open)

    async def _alert_tracked(self, gap: TrackedGap, after_seconds: float) -> None:
        missing = gap.missing()
        listed = "" if len(missing) == gap.missing_count else f", the first {len(missing)}"
        detail = (
            f"seq {gap.lo}..{gap.hi} of table {gap.table} not filled within {after_seconds} s: "
            f"{gap.missing_count} missing ({ranges(missing)}{listed}); a replay re-sends "
            "results only"
        )
        log.error(
            "gap not filled",
            table=gap.table,
            from_seq=gap.lo,
            to_seq=gap.hi,
            missing=gap.missing_count,
        )
        await self.store.raise_alert(gap.table, "gap", detail, gap_id=gap.gap_id, missing=missing)

    # -- gaps: PostgreSQL (in the database, shared by the instances) ---------------------------

    async def check_gaps(self) -> None:
        """One look at the gaps.

        PostgreSQL: shared with the other instances through the database: record the holes
        past their grace, stamp the gaps now filled, send the replays this instance claimed,
        alert the gaps past their timeout (docs/archive.md, "Gaps"); each step bounded by
        ``database.timeout_seconds`` and retried after a lost connection. SQLite: the
        in-memory tracker's gaps past their grace or timeout.
        """
        if not self.shared_gaps:
            await self.db.retry(self._check_tracked_gaps)
            return
        if not self.keys.tables:
            return
        from controller.archive.store import journal_records

        self._know(await self._gap_link().call(journal_records))
        tables = self.chain_ids()
        config = self.settings.gaps
        self._checks += 1
        alerted_too = self._checks % ALERTED_FILL_EVERY == 1
        for gap in await self._book(lambda book: book.scan(tables, config.grace_seconds)):
            self.counts["gap_opened"] += 1
            log.warning("gap in seq", table=gap.table, from_seq=gap.lo, to_seq=gap.hi)
        for gap in await self._book(lambda book: book.fill(tables, alerted_too=alerted_too)):
            self.counts["gap_filled"] += 1
            log.info("gap filled", table=gap.table, from_seq=gap.lo, to_seq=gap.hi)
        every = config.replay_every_seconds
        for gap in await self._book(lambda book: book.claim_replays(tables, every)):
            self.counts["replay_requested"] += 1
            self._ask_replay(gap.table, gap.lo, gap.hi)
        for gap in await self._book(lambda book: book.alert(tables, config.timeout_seconds)):
            self.counts["gap_alert"] += 1
            log.error(
                "gap not filled",
                table=gap.table,
                from_seq=gap.lo,
                to_seq=gap.hi,
                missing=len(gap.missing),
            )
        self.open_gaps = await self._gap_link().call(
            lambda conn: self._book_for(conn).open_count(tables)
        )

    def _gap_link(self) -> DbLink:
        if self.gap_db is None:  # pragma: no cover (only the PostgreSQL path calls it)
            raise ArchiveError("the SQLite archive keeps no gap connection")
        return self.gap_db

    def _book_for(self, conn: psycopg.AsyncConnection[Any]) -> GapBook:
        """The gap book on ``conn`` (made again with each new connection)."""
        book = self._books.get(id(conn))
        if book is None or book.conn is not conn:
            self._books = {id(conn): GapBook(conn)}
            book = self._books[id(conn)]
        return book

    async def _book(self, step: Callable[[GapBook], Awaitable[list[Gap]]]) -> list[Gap]:
        async def work(conn: psycopg.AsyncConnection[Any]) -> list[Gap]:
            return await step(self._book_for(conn))

        return await self._gap_link().call(work)

    def _ask_replay(self, table: str, lo: int, hi: int) -> None:
        if self.current.get(table_of(table), table_of(table)) != table:
            # A gap in a journal the table replaced: the table cannot re-send it (its journal
            # is another now); the gap's alert follows.
            log.warning("gap in a replaced journal: no replay", chain=table, from_seq=lo, to_seq=hi)
            return
        table = table_of(table)
        task = asyncio.create_task(self._replay(table, lo, hi), name=f"replay-{table}-{lo}")
        self._replays.add(task)
        task.add_done_callback(self._replays.discard)

    async def _replay(self, table: str, lo: int, hi: int) -> None:
        config = self.settings.gaps
        mqtt = self.settings.mqtt
        target = Target(mqtt.for_connection("command"), table)
        turn = self._replay_turn if mqtt.command_username else contextlib.nullcontext()
        try:
            async with turn:
                outcome = await send_command(
                    target,
                    config.replay_role,
                    "replay",
                    {
                        "command_id": f"archive-{table}-{lo}-{uuid.uuid4().hex[:8]}",
                        "round": None,
                        "from_seq": lo,
                        "to_seq": hi,
                    },
                    timeout=config.replay_timeout_seconds,
                )
        except Exception as exc:  # a failed request is logged; the alert follows
            log.warning("replay not asked", table=table, from_seq=lo, to_seq=hi, error=str(exc))
            return
        log.info(
            "replay asked",
            table=table,
            from_seq=lo,
            to_seq=hi,
            code=outcome.code,
            answer=outcome.text,
        )

    async def _gap_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.gaps.check_seconds)
            try:
                await self.check_gaps()
            except refused() as exc:
                # Not the connection's (DbLink retries those): a statement the database
                # refused. Logged; the next check tries again.
                log.error("gap check failed", error=f"{type(exc).__name__}: {exc}")
                continue
            if not self.shared_gaps and not self.gaps.open:
                # SQLite: the gaps are this instance's own tracker's; with none open there is
                # nothing to check until one opens (``_track``), so no wake-up meanwhile.
                self._gap_opened.clear()
                await self._gap_opened.wait()

    # -- the broker ------------------------------------------------------------------------

    async def run(self) -> None:
        """Consume until cancelled: reconnect to the broker and the database, chase gaps."""
        mqtt = self.settings.mqtt
        connector = _AckAfterCommit(
            mqtt,
            client_id=mqtt.client_id or "tablectl-archive",
            name="archive",
            logger="archive.mqtt",
            persistent=True,
            manual_acks=True,
            receive_maximum=self.settings.consumer.receive_maximum,
            log=log,
        )
        await self.db.retry(self.load_state)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._gap_loop(), name="archive-gaps")
                group.create_task(
                    connector.run(self._serve, stop=asyncio.Event()), name="archive-mqtt"
                )
        finally:
            for task in list(self._replays):
                task.cancel()
            await asyncio.gather(*self._replays, return_exceptions=True)
            if self.gap_db is not None:
                await self.gap_db.close()

    async def _serve(self, client: MqttClient, address: BrokerAddress) -> None:
        """While connected: subscribe, then store what arrives in batches, ack after commit."""
        topics = self.topics()
        stale = [topic for topic in self.wildcard_topics() if topic not in topics]
        if stale:
            # A persistent session keeps what an earlier run subscribed to (every table, before
            # this one chose its own tables): let go of it, or other tables' messages come in.
            await client.unsubscribe(stale)
        if topics:
            await client.subscribe([(topic, 1) for topic in topics])
        self.subscribed.set()
        log.info("archive subscribed", url=address.url, topics=len(topics), first=topics[:3])
        queue: asyncio.Queue[Received | _ReadEnded] = asyncio.Queue()
        reader = asyncio.create_task(self._read(client, queue, self.linger), name="archive-read")

        def committed(batch: Sequence[Received]) -> None:
            # Committed: only now may the broker forget them (in the order received).
            drain.ack_all(client, [(m.mid, m.qos) for m in batch if m.qos > 0])

        try:
            await self.handle_batches(_waiting(queue, self.linger), committed)
        finally:
            self.subscribed.clear()
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    @staticmethod
    async def _read(
        client: MqttClient, queue: asyncio.Queue[Received | _ReadEnded], linger: Linger
    ) -> None:
        try:
            async for first in client.messages:
                for message in (first, *client.take_queued()):
                    queue.put_nowait(
                        Received(
                            str(message.topic), bytes(message.payload), message.mid, message.qos
                        )
                    )
                linger.queued(queue.qsize())
        except Exception as exc:  # the broker connection's error: told in the queue, after
            queue.put_nowait(_ReadEnded(exc))  # what was read before it
            raise
        queue.put_nowait(_ReadEnded(None))  # pragma: no cover (the message stream never ends)


@dataclass(frozen=True, slots=True)
class _ReadEnded:
    """The reader's end, queued after the last message it read: its error, if any."""

    error: Exception | None


LINGER_ENOUGH = 16
"""Messages waiting that end a batch's linger (fewer when ``consumer.receive_maximum`` is
lower): under Mosquitto's default ``max_inflight_messages`` (20), so a lingering archive is
never left waiting for what the broker holds back until it acknowledges."""


class Linger:
    """How long a batch waits for more after its first message (``consumer.linger_seconds``).

    A batch stops waiting when its time is up, when ``enough`` messages are waiting (a
    broker sends only so many before they are acknowledged: Mosquitto's
    ``max_inflight_messages``, 20 by default, and the archive's Receive Maximum; waiting on
    would stall the archive until the linger ends), or once :meth:`hurry` was called (the
    table stopped: what is read is stored at once from then on).

    Args:
        seconds: The linger (0: none).
        enough: Messages waiting that end it.
    """

    def __init__(self, seconds: float, enough: int = LINGER_ENOUGH) -> None:
        self.seconds = seconds
        self.enough = enough
        self.hurried = False
        self._lingering = False
        self._wake = asyncio.Event()

    def hurry(self) -> None:
        """No batch waits for more from now on (one that is waiting stops)."""
        self.hurried = True
        self._wake.set()

    def queued(self, waiting: int) -> None:
        """The reader queued messages: ``waiting`` wait behind a lingering batch's first."""
        if self._lingering and self._full(waiting):
            self._wake.set()

    async def wait(self, waiting: int) -> None:
        """Linger for a batch whose first message is taken and ``waiting`` more wait."""
        if self.seconds <= 0 or self.hurried or self._full(waiting):
            return
        self._wake.clear()
        self._lingering = True
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.seconds):
                    await self._wake.wait()
        finally:
            self._lingering = False

    def _full(self, waiting: int) -> bool:
        """Whether a batch's first message and ``waiting`` more are ``enough``."""
        return waiting + 1 >= self.enough


async def _waiting(
    queue: asyncio.Queue[Received | _ReadEnded], linger: Linger | None = None
) -> AsyncIterator[list[Received]]:
    """Batch after batch, what waits in ``queue`` (one message at least, BATCH_MAX at most).

    What arrived while the last batch was classified and handed over is the next one. With
    a ``linger``, a batch first waits for more after its first message (:class:`Linger`:
    one timer a batch; the reader's queueing wakes nothing until enough are waiting). One
    ``queue.get()`` a batch (it used to wait on the getter and the reader task together:
    a task and a wait for every message the archive received).

    Raises:
        Exception: The reader's (the broker connection's error) when it ends, once every
            message it read before has been handed on.
    """
    ended: _ReadEnded | None = None
    while ended is None:
        first = await queue.get()
        if isinstance(first, _ReadEnded):
            ended = first
            break
        if linger is not None:
            await linger.wait(queue.qsize())
        batch = [first]
        while len(batch) < BATCH_MAX and not queue.empty():
            item = queue.get_nowait()
            if isinstance(item, _ReadEnded):
                ended = item
                break
            batch.append(item)
        yield batch
    if ended.error is not None:
        raise ended.error


def _message_time(value: Any) -> datetime | None:
    """A message's ``at`` as an aware time, or ``None`` (absent, not a time, no zone)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
