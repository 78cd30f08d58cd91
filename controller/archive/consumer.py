"""The archive consumer: tables' MQTT topics in, PostgreSQL rows out, gaps chased.

:class:`ArchiveConsumer` subscribes (QoS 1, a persistent session under a stable client id, so
the broker keeps what arrives while the archive is away) to ``{prefix}/+/events``,
``{prefix}/+/results`` and ``{prefix}/+/status``, classifies each message
(:func:`controller.archive.ingest.classify`), and stores it
(:mod:`controller.archive.backend`: PostgreSQL or SQLite): an entry once, a status as
history, anything else as rejected with its reason. Nothing a message holds can stop the consumer.

A jump in a table's ``seq`` on ``events`` opens a gap (:class:`controller.archive.gaps.Gap`);
after ``gaps.grace_seconds`` the archive sends the table ``replay --from-seq`` for it (the
existing command: the table re-sends the *results* in the range); a gap not filled within
``gaps.timeout_seconds`` is an alert: an error log line and a row in ``alerts``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import structlog

from controller.archive.backend import LOST, REFUSED, Store
from controller.archive.config import ArchiveSettings
from controller.archive.gaps import Gap, GapTracker
from controller.archive.ingest import Entry, Rejected, Status, TableKeys, classify_batch
from controller.mqtt.settings import backoff_seconds, client_options, tls_context
from controller.pitcli import Target, send_command

log = structlog.get_logger("archive")

BatchHook = Callable[[Sequence[Entry | Status | Rejected], Sequence[str]], None]
"""What :attr:`ArchiveConsumer.on_batch` is called with: the messages classified, outcomes."""

BATCH_MAX = 2000
"""At most this many waiting messages are stored in one transaction (docs/archive.md)."""
CLASSIFY_SLICE = 250
"""Messages classified between two yields to the event loop, so a batch being committed
meanwhile is not held up (:meth:`ArchiveConsumer.handle_batches`)."""

Message = tuple[str, bytes]
Found = Entry | Status | Rejected


class ArchiveConsumer:
    """Stores every table's entries, statuses and rejections; detects and chases gaps.

    Args:
        settings: The archive config.
        store: The database.
        keys: Known tables and their public keys.
        clock: Monotonic seconds (tests may pass their own).
        only_known_tables: Subscribe to the configured tables' topics only, not ``+`` (the
            archive beside one table on a broker other tables use: ``make run``).

    Attributes:
        counts: ``new``, ``duplicate``, ``conflict``, ``status``, ``rejected:<category>``,
            ``replay_requested``, ``gap_alert``, ``gap_filled``.
        on_batch: Called after each stored batch with what each message was and what became
            of it (the metrics' hook, :mod:`controller.archive.metrics`); must not raise.
    """

    def __init__(
        self,
        settings: ArchiveSettings,
        store: Store,
        keys: TableKeys,
        *,
        clock: Callable[[], float] = time.monotonic,
        only_known_tables: bool = False,
    ) -> None:
        self.settings = settings
        self.store = store
        self.keys = keys
        self.clock = clock
        self.gaps = GapTracker()
        self.counts: Counter[str] = Counter()
        self.subscribed = asyncio.Event()
        self.only_known_tables = only_known_tables
        self._replays: set[asyncio.Task[None]] = set()
        self.on_batch: BatchHook | None = None

    async def load_state(self) -> None:
        """Read each table's highest archived ``seq`` (so a restart does not see old gaps)."""
        self.gaps = GapTracker(await self.store.highest_seqs())

    # -- one message -------------------------------------------------------------------------

    async def handle(self, topic: str, payload: bytes) -> str:
        """Classify and store one message; what became of it (a :attr:`counts` key).

        Raises:
            psycopg.OperationalError: The database is gone (``backend.LOST``).
        """
        return (await self.handle_batch([(topic, payload)]))[0]

    async def handle_batch(self, messages: Sequence[tuple[str, bytes]]) -> list[str]:
        """Classify and store messages (``(topic, payload)``), entries in one transaction.

        What became of each message, in order (:attr:`counts` keys). If the database refuses
        the batch, its entries are stored one by one, so only the message at fault is
        rejected (``store_error``).

        Raises:
            psycopg.OperationalError: The database is gone (``backend.LOST``).
        """
        return await self.store_classified(messages, classify_batch(messages, self.keys))

    async def classify(self, messages: Sequence[Message]) -> list[Found]:
        """:func:`classify_batch` in slices, yielding to the event loop between them."""
        seen: dict[bytes, Entry] = {}
        found: list[Found] = []
        for first in range(0, len(messages), CLASSIFY_SLICE):
            found += classify_batch(messages[first : first + CLASSIFY_SLICE], self.keys, seen)
            await asyncio.sleep(0)
        return found

    async def handle_batches(self, batches: AsyncIterator[Sequence[Message]]) -> None:
        """Store each batch as :meth:`handle_batch`, classifying the next meanwhile.

        While a batch's transaction is at the database the next batch is classified (JSON,
        digests, signatures: the consumer's CPU), so the two overlap; batches are still
        stored one at a time, in order. Ends when ``batches`` does (its last batch stored).

        Raises:
            psycopg.OperationalError: The database is gone (``backend.LOST``).
        """
        storing: asyncio.Task[list[str]] | None = None
        try:
            async for batch in batches:
                found = await self.classify(batch)
                if storing is not None:
                    await storing
                storing = asyncio.create_task(
                    self.store_classified(batch, found), name="archive-store-batch"
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

    async def store_classified(
        self, messages: Sequence[Message], found: Sequence[Found]
    ) -> list[str]:
        """Store classified messages (:meth:`handle_batch`'s second half); their outcomes."""
        outcomes: list[str] = [""] * len(found)
        entries = [(i, f) for i, f in enumerate(found) if isinstance(f, Entry)]
        for i, item in enumerate(found):
            if not isinstance(item, Entry):
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
        except LOST:
            raise
        except REFUSED:
            for i, entry in entries:
                outcomes[i] = await self._guarded(messages[i], entry)
        else:
            for (i, _), outcome in zip(entries, stored, strict=True):
                outcomes[i] = outcome
        for i, entry in entries:
            if not outcomes[i].startswith("rejected:"):
                await self._track(entry)

    async def _guarded(self, message: tuple[str, bytes], found: Entry | Status | Rejected) -> str:
        topic, payload = message
        try:
            return await self._store(found)
        except LOST:
            raise
        except REFUSED as exc:
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

    async def _track(self, entry: Entry) -> None:
        in_order = entry.topic.endswith("/events")
        gap = self.gaps.seen(entry.table, entry.seq, self.clock(), in_order_topic=in_order)
        if gap is not None:
            gap.gap_id = await self.store.open_gap(gap.table, gap.lo, gap.hi)
            log.warning("gap in seq", table=gap.table, from_seq=gap.lo, to_seq=gap.hi)
        for done in self.gaps.filled():
            self.counts["gap_filled"] += 1
            if done.gap_id is not None:
                await self.store.mark_gap(done.gap_id, "filled")
            log.info("gap filled", table=done.table, from_seq=done.lo, to_seq=done.hi)

    # -- gaps ----------------------------------------------------------------------------------

    async def check_gaps(self) -> None:
        """Ask for replays of gaps past their grace, alert on gaps past their timeout."""
        now = self.clock()
        config = self.settings.gaps
        for gap in self.gaps.due_for_replay(now, config.grace_seconds):
            gap.requested = True
            self.counts["replay_requested"] += 1
            if gap.gap_id is not None:
                await self.store.mark_gap(gap.gap_id, "replay_requested", gap.missing())
            task = asyncio.create_task(self._replay(gap), name=f"replay-{gap.table}-{gap.lo}")
            self._replays.add(task)
            task.add_done_callback(self._replays.discard)
        for gap in self.gaps.due_for_alert(now, config.timeout_seconds):
            gap.alerted = True
            self.counts["gap_alert"] += 1
            missing = gap.missing()
            detail = (
                f"seq {gap.lo}..{gap.hi} of table {gap.table} not filled within "
                f"{config.timeout_seconds} s: {len(missing)} missing "
                f"({_ranges(missing)}); a replay re-sends results only"
            )
            log.error(
                "gap not filled",
                table=gap.table,
                from_seq=gap.lo,
                to_seq=gap.hi,
                missing=len(missing),
            )
            await self.store.raise_alert(
                gap.table, "gap", detail, gap_id=gap.gap_id, missing=missing
            )

    async def _replay(self, gap: Gap) -> None:
        config = self.settings.gaps
        target = Target(self.settings.mqtt, gap.table)
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
            await self.check_gaps()

    # -- the broker ------------------------------------------------------------------------

    async def run(self) -> None:
        """Consume until cancelled: reconnect with back-off, chase gaps meanwhile."""
        import random

        import aiomqtt

        mqtt = self.settings.mqtt
        context = tls_context(mqtt) if mqtt.uses_tls else None
        prefix = mqtt.topic_prefix.rstrip("/")
        v5 = mqtt.protocol == "5"
        rng = random.Random()
        failures = 0
        await self.load_state()
        gap_task = asyncio.create_task(self._gap_loop(), name="archive-gaps")
        try:
            while True:
                for address in mqtt.addresses:
                    try:
                        await self._consume(aiomqtt, address, context, prefix, v5)
                    except (aiomqtt.MqttError, OSError) as exc:
                        self.subscribed.clear()
                        log.warning("broker connection lost", url=address.url, error=str(exc))
                failures += 1
                await asyncio.sleep(backoff_seconds(mqtt, failures, rng))
        finally:
            gap_task.cancel()
            for task in list(self._replays):
                task.cancel()
            await asyncio.gather(gap_task, *self._replays, return_exceptions=True)

    async def _consume(
        self, aiomqtt: Any, address: Any, context: Any, prefix: str, v5: bool
    ) -> None:
        mqtt = self.settings.mqtt
        extra: dict[str, Any] = {}
        if v5:
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            properties.SessionExpiryInterval = mqtt.session_expiry_seconds
            extra = {"clean_start": False, "properties": properties}
        else:
            extra = {"clean_session": False}
        client = aiomqtt.Client(
            address.host,
            address.port,
            identifier=mqtt.client_id or "tablectl-archive",
            protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311,
            **client_options(mqtt, address, context),
            **extra,
        )
        async with client:
            levels = sorted(self.keys.tables) if self.only_known_tables else ["+"]
            for level in levels:
                for suffix in ("events", "results", "status"):
                    await client.subscribe(f"{prefix}/{level}/{suffix}", qos=1)
            self.subscribed.set()
            log.info("archive subscribed", url=address.url)
            queue: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue()
            reader = asyncio.create_task(self._read(client, queue), name="archive-read")
            try:
                await self.handle_batches(_waiting(queue, reader))
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)

    @staticmethod
    async def _read(client: Any, queue: asyncio.Queue[tuple[str, bytes]]) -> None:
        async for message in client.messages:
            queue.put_nowait((str(message.topic), bytes(message.payload)))


async def _waiting(
    queue: asyncio.Queue[Message], reader: asyncio.Task[None]
) -> AsyncIterator[list[Message]]:
    """Batch after batch, what waits in ``queue`` (one message at least, BATCH_MAX at most).

    What arrived while the last batch was classified and handed over is the next one.

    Raises:
        Exception: The reader's (the broker connection's error) when it ends.
    """
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
        batch = [getter.result()]
        while len(batch) < BATCH_MAX and not queue.empty():
            batch.append(queue.get_nowait())
        yield batch


def _ranges(values: list[int]) -> str:
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
