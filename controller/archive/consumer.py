"""The archive consumer: tables' MQTT topics in, PostgreSQL rows out, gaps chased.

:class:`ArchiveConsumer` subscribes (QoS 1, a persistent session under a stable client id, so
the broker keeps what arrives while the archive is away) to ``{prefix}/+/events``,
``{prefix}/+/results`` and ``{prefix}/+/status`` (with ``consumer.share_group``, MQTT 5 shared
subscriptions ``$share/{group}/...``: several instances share the load), classifies each
message (:func:`controller.archive.ingest.classify`), and stores it
(:class:`controller.archive.store.ArchiveStore`): an entry once, a status as history, anything
else as rejected with its reason. Nothing a message holds can stop the consumer.

A message is **acknowledged only once its batch is committed**: a consumer killed between
receipt and commit loses nothing (the broker sends it again to the session), and while the
database is away the consumer stores nothing, acknowledges nothing and reconnects
(:class:`controller.archive.dblink.DbLink`), keeping the batch in hand.

Gaps live in the database (:class:`controller.archive.gaps.GapBook`), so that instances that
each see part of a table's ``seq`` agree on them: a hole the database still has after
``gaps.grace_seconds`` is a gap; one instance sends the table ``replay --from-seq`` for it (the
existing command: the table re-sends the *results* in the range); a gap not filled within
``gaps.timeout_seconds`` is an alert: an error log line and a row in ``alerts``, once.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
import structlog

from controller.archive.config import ArchiveSettings
from controller.archive.dblink import DbLink
from controller.archive.gaps import Gap, GapBook
from controller.archive.ingest import Entry, Rejected, Status, TableKeys, classify
from controller.archive.store import ArchiveStore
from controller.mqtt.adapter import ack, manual_acks
from controller.mqtt.connection import Connector
from controller.pitcli import Target, send_command

if TYPE_CHECKING:
    import aiomqtt

    from controller.broker import BrokerAddress

log = structlog.get_logger("archive")

BatchHook = Callable[[Sequence[Entry | Status | Rejected], Sequence[str]], None]
"""What :attr:`ArchiveConsumer.on_batch` is called with: the messages classified, outcomes."""

BATCH_MAX = 2000
"""At most this many waiting messages are stored in one transaction (docs/archive.md)."""

ALERTED_FILL_EVERY = 25
"""Gap checks between two looks at alerted gaps (a late fill is still stamped)."""

_LINK_LOST = (psycopg.OperationalError, psycopg.InterfaceError)
"""The database's failures that are not a message's fault."""


@dataclass(frozen=True, slots=True)
class Received:
    """A message as received, kept until its batch is committed and it is acknowledged.

    Attributes:
        topic: The topic.
        payload: The bytes.
        mid: The MQTT packet id (for the acknowledgement).
        qos: Its QoS.
    """

    topic: str
    payload: bytes
    mid: int
    qos: int


class _AckAfterCommit(Connector):
    """The shared :class:`Connector`, with acknowledgements left to the consumer."""

    def __init__(self, *args: Any, receive_maximum: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._receive_maximum = receive_maximum

    def make_client(self, address: BrokerAddress) -> aiomqtt.Client:
        client = super().make_client(address)
        manual_acks(client, self._receive_maximum)
        return client


class ArchiveConsumer:
    """Stores every table's entries, statuses and rejections; detects and chases gaps.

    Args:
        settings: The archive config.
        store: The database (its connection is made again if lost).
        keys: Known tables and their public keys.
        clock: Monotonic seconds (tests may pass their own).

    Attributes:
        counts: ``new``, ``duplicate``, ``conflict``, ``status``, ``rejected:<category>``,
            ``gap_opened``, ``replay_requested``, ``gap_alert``, ``gap_filled`` (the gaps
            this instance recorded, asked for, alerted, saw filled).
        subscribed: Set while subscribed to the broker.
        db: The ingest's database connection.
        gap_db: The gap checks' own connection (they run beside the ingest).
        open_gaps: Gaps in the database not filled (alerted ones included), as of the last
            gap check (every instance counts the same gaps).
        on_batch: Called after each stored batch with what each message was and what became
            of it (the metrics' hook, :mod:`controller.archive.metrics`); must not raise. A
            batch retried after a lost database is reported once, when it is stored.
    """

    def __init__(
        self,
        settings: ArchiveSettings,
        store: ArchiveStore,
        keys: TableKeys,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.store = store
        self.keys = keys
        self.clock = clock
        self.counts: Counter[str] = Counter()
        self.subscribed = asyncio.Event()
        self.db = DbLink(settings.database, "ingest", conn=store.conn)
        self.db.on_connect(self._new_store)
        self.gap_db = DbLink(settings.database, "gaps")
        self._books: dict[int, GapBook] = {}
        self._checks = 0
        self.open_gaps = 0
        self._replays: set[asyncio.Task[None]] = set()
        self.on_batch: BatchHook | None = None

    def _new_store(self, conn: psycopg.AsyncConnection[Any]) -> None:
        if conn is not self.store.conn:
            self.store = ArchiveStore(conn)

    def topics(self) -> list[str]:
        """The subscriptions: ``{prefix}/+/events|results|status``, shared if configured.

        Partitioned (``consumer.partition``): each of this instance's tables' own topics.
        """
        prefix = self.settings.mqtt.topic_prefix.rstrip("/")
        consumer = self.settings.consumer
        share = f"$share/{consumer.share_group}/" if consumer.share_group else ""
        tables = ["+"]
        if consumer.partition is not None:
            tables = [t for t in sorted(self.keys.tables) if consumer.owns(t)]
        suffixes = ("events", "results", "status")
        return [f"{share}{prefix}/{table}/{suffix}" for table in tables for suffix in suffixes]

    # -- one message -------------------------------------------------------------------------

    async def handle(self, topic: str, payload: bytes) -> str:
        """Classify and store one message; what became of it (a :attr:`counts` key).

        Raises:
            psycopg.OperationalError: The database is gone (not this message's fault).
        """
        return (await self.handle_batch([(topic, payload)]))[0]

    async def handle_batch(
        self, messages: Sequence[tuple[str, bytes]], done: list[str] | None = None
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
            psycopg.OperationalError: The database is gone (not a message's fault); ``done``
                then holds what was stored before.
        """
        outcomes = done if done is not None else [""] * len(messages)
        found = [classify(topic, payload, self.keys) for topic, payload in messages]
        entries = [(i, f) for i, f in enumerate(found) if isinstance(f, Entry) and not outcomes[i]]
        for i, item in enumerate(found):
            if not isinstance(item, Entry) and not outcomes[i]:
                outcomes[i] = await self._guarded(messages[i], item)
        if entries:
            await self._store_entries(messages, entries, outcomes)
        self.counts.update(outcomes)
        if self.on_batch is not None:
            self.on_batch(found, outcomes)
        return outcomes

    async def _store_entries(
        self,
        messages: Sequence[tuple[str, bytes]],
        entries: list[tuple[int, Entry]],
        outcomes: list[str],
    ) -> None:
        try:
            stored = await self.store.store_entries([e for _, e in entries])
        except _LINK_LOST:
            raise
        except psycopg.Error:
            for i, entry in entries:
                outcomes[i] = await self._guarded(messages[i], entry)
        else:
            for (i, _), outcome in zip(entries, stored, strict=True):
                outcomes[i] = outcome

    async def _guarded(self, message: tuple[str, bytes], found: Entry | Status | Rejected) -> str:
        topic, payload = message
        try:
            return await self._store(found)
        except _LINK_LOST:
            raise
        except psycopg.Error as exc:
            # The database refused this message (its transaction was rolled back, e.g. a
            # "\u0000" that jsonb cannot hold): keep it as rejected with the server's words
            # rather than stop the consumer.
            table = found.table
            seq = None if isinstance(found, Status) else found.seq
            await self.store.store_rejected(
                Rejected(topic, table, seq, "store_error", f"database: {exc}", payload)
            )
            log.error("message not stored", topic=topic, seq=seq, error=str(exc))
            return "rejected:store_error"

    async def _store(self, found: Entry | Status | Rejected) -> str:
        if isinstance(found, Rejected):
            await self.store.store_rejected(found)
            log.warning(
                "message rejected", topic=found.topic, category=found.category, reason=found.reason
            )
            return f"rejected:{found.category}"
        if isinstance(found, Status):
            await self.store.store_status(found)
            return "status"
        return await self.store.store_entry(found)

    async def store_batch(self, messages: Sequence[tuple[str, bytes]]) -> list[str]:
        """:meth:`handle_batch`, bounded, and retried after a lost database until it is stored.

        Returns once every message of the batch is stored (or rejected with its reason);
        while the database is away it waits (reconnecting with back-off), never drops.
        """
        done = [""] * len(messages)

        async def attempt(_: psycopg.AsyncConnection[Any]) -> list[str]:
            return await self.handle_batch(messages, done)

        return await self.db.call(attempt)

    # -- gaps ----------------------------------------------------------------------------------

    async def check_gaps(self) -> None:
        """One look at the gaps, shared with the other instances through the database.

        Record the holes past their grace, stamp the gaps now filled, send the replays this
        instance claimed, alert the gaps past their timeout (docs/archive.md, "Gaps").
        Each step is bounded by ``database.timeout_seconds`` and retried after a lost
        connection.
        """
        tables = sorted(self.keys.tables)
        if not tables:
            return
        config = self.settings.gaps
        self._checks += 1
        alerted_too = self._checks % ALERTED_FILL_EVERY == 1
        for gap in await self._book(lambda book: book.scan(tables, config.grace_seconds)):
            self.counts["gap_opened"] += 1
            log.warning("gap in seq", table=gap.table, from_seq=gap.lo, to_seq=gap.hi)
        for gap in await self._book(lambda book: book.fill(tables, alerted_too=alerted_too)):
            self.counts["gap_filled"] += 1
            log.info("gap filled", table=gap.table, from_seq=gap.lo, to_seq=gap.hi)
        for gap in await self._book(lambda book: book.claim_replays(tables)):
            self.counts["replay_requested"] += 1
            task = asyncio.create_task(self._replay(gap), name=f"replay-{gap.table}-{gap.lo}")
            self._replays.add(task)
            task.add_done_callback(self._replays.discard)
        for gap in await self._book(lambda book: book.alert(tables, config.timeout_seconds)):
            self.counts["gap_alert"] += 1
            log.error(
                "gap not filled",
                table=gap.table,
                from_seq=gap.lo,
                to_seq=gap.hi,
                missing=len(gap.missing),
            )
        self.open_gaps = await self.gap_db.call(
            lambda conn: self._book_for(conn).open_count(tables)
        )

    def _book_for(self, conn: psycopg.AsyncConnection[Any]) -> GapBook:
        """The gap book on ``conn`` (made again with each new connection)."""
        book = self._books.get(id(conn))
        if book is None or book.conn is not conn:
            self._books = {id(conn): GapBook(conn)}
            book = self._books[id(conn)]
        return book

    async def _book(self, step: Callable[[GapBook], Any]) -> list[Gap]:
        async def work(conn: psycopg.AsyncConnection[Any]) -> list[Gap]:
            found: list[Gap] = await step(self._book_for(conn))
            return found

        return await self.gap_db.call(work)

    async def _replay(self, gap: Gap) -> None:
        config = self.settings.gaps
        target = Target(self.settings.mqtt, gap.table)
        try:
            outcome = await send_command(
                target,
                config.replay_role,
                "replay",
                {
                    "command_id": f"archive-{gap.table}-{gap.lo}-{uuid.uuid4().hex[:8]}",
                    "round": None,
                    "from_seq": gap.lo,
                    "to_seq": gap.hi,
                },
                timeout=config.replay_timeout_seconds,
            )
        except Exception as exc:  # a failed request is logged; the alert follows
            log.warning(
                "replay not asked", table=gap.table, from_seq=gap.lo, to_seq=gap.hi, error=str(exc)
            )
            return
        log.info(
            "replay asked",
            table=gap.table,
            from_seq=gap.lo,
            to_seq=gap.hi,
            code=outcome.code,
            answer=outcome.text,
        )

    async def _gap_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.gaps.check_seconds)
            try:
                await self.check_gaps()
            except psycopg.Error as exc:
                # Not the connection's (DbLink retries those): a statement the server
                # refused. Logged; the next check tries again.
                log.error("gap check failed", error=f"{type(exc).__name__}: {exc}")

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
            receive_maximum=self.settings.consumer.receive_maximum,
            log=log,
        )
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
            await self.gap_db.close()

    async def _serve(self, client: aiomqtt.Client, address: BrokerAddress) -> None:
        """While connected: subscribe, then store what arrives in batches, ack after commit."""
        topics = self.topics()
        if topics:
            await client.subscribe([(topic, 1) for topic in topics])
        self.subscribed.set()
        log.info("archive subscribed", url=address.url, topics=len(topics), first=topics[:3])
        queue: asyncio.Queue[Received] = asyncio.Queue()
        reader = asyncio.create_task(self._read(client, queue), name="archive-read")
        try:
            while True:
                getter = asyncio.ensure_future(queue.get())
                try:
                    await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not getter.done():
                        getter.cancel()
                if getter.cancelled():
                    reader.result()  # the broker connection's error
                    return  # pragma: no cover (the message stream never ends)
                # What arrived while the last batch was stored is the next batch.
                batch = [getter.result()]
                while len(batch) < BATCH_MAX and not queue.empty():
                    batch.append(queue.get_nowait())
                await self.store_batch([(m.topic, m.payload) for m in batch])
                # Committed: only now may the broker forget them (in the order received).
                for message in batch:
                    if message.qos > 0:
                        ack(client, message.mid, message.qos)
        finally:
            self.subscribed.clear()
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    @staticmethod
    async def _read(client: aiomqtt.Client, queue: asyncio.Queue[Received]) -> None:
        async for message in client.messages:
            queue.put_nowait(
                Received(str(message.topic), bytes(message.payload), message.mid, message.qos)
            )
