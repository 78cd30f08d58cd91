"""The outbox: publishes the journal to MQTT, in order, at least once.

:class:`Publisher` is a long-lived task. It connects (with the offline status as Last Will),
publishes the retained birth, then publishes every undelivered journal entry in ``seq`` order
with QoS 1 and marks each one delivered only once the broker acknowledged it (PUBACK). It is
woken by the journal's listener (no polling), so a card reaches the broker within a fraction
of a millisecond of its commit. When the link drops it backs off (jittered), reconnects, fails
over across the configured URLs in order, and resumes from the journal: a message may be
published twice, consumers de-duplicate on ``(table, seq)``.

:class:`Publisher` is the façade :mod:`controller.app` uses; the work is split by job:

* :class:`~controller.mqtt.connection.Connector`: the connection life-cycle (connect timeout,
  URL failover, back-off; paho internals in :mod:`controller.mqtt.adapter`).
* :class:`~controller.outbox.delivery.Delivery`: the pipelined hand-off, settled in ``seq``
  order; ``wait_idle``, ``flush``.
* :class:`~controller.outbox.sending.Sender` and :class:`~controller.outbox.sending.Refusals`:
  one message to the client, and the broker's refusals.
* :class:`~controller.outbox.snapshots.SnapshotFolder`: the retained round snapshot.
* :func:`~controller.outbox.replay.replay`: ``replay --from-seq``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from controller.errors import ConfigError, PublishError
from controller.journal import Journal, JournalEntry
from controller.messages import Topics
from controller.mqtt.ack import PublishRefused
from controller.mqtt.connection import Connector
from controller.mqtt.settings import MqttSettings
from controller.outbox.delivery import Delivery
from controller.outbox.link import OutboxLink
from controller.outbox.replay import replay
from controller.outbox.sending import Refusals, Sender
from controller.outbox.snapshots import SnapshotFolder

if TYPE_CHECKING:
    from controller.signing import Signer

_log = structlog.get_logger(__name__)


class Publisher:
    """Publishes a table's journal to MQTT. Run :meth:`run` as a task; end it with :meth:`stop`.

    Args:
        settings: Broker settings.
        table_id: The table id (one topic level).
        journal: The table's open journal.
        game: The game id announced in the status messages.
        version: The controller version announced in the status messages.
        signer: Signs ``round_result`` and ``round_voided`` envelopes (``events`` and
            ``results``), if given.
        on_delivered: Called with each entry once the broker acknowledged it (after it is
            marked delivered); for latency and backlog metrics. Must be quick; an exception is
            logged and ignored.
        on_refused: Called when the broker refuses a publish (MQTT v5 PUBACK reason code
            >= 0x80), with the refusal and the entry (``None`` for the birth). Called once per
            refused (entry, topic) until the outbox flows again, so an alert is raised once,
            not at every retry. Must be quick; an exception is logged and ignored.
        on_takeover: Called with the broker URL when the broker ended the connection because
            another client took the session over (MQTT 5 reason 0x8E): the publisher then
            stops, instead of taking it back (:class:`~controller.mqtt.connection.Connector`).

    Attributes:
        connected: Set while a connection is up (birth published).
        topics: The table's topics.
    """

    def __init__(
        self,
        settings: MqttSettings,
        table_id: str,
        journal: Journal,
        *,
        game: str,
        version: str,
        signer: Signer | None = None,
        on_delivered: Callable[[JournalEntry], None] | None = None,
        on_refused: Callable[[PublishRefused, JournalEntry | None], None] | None = None,
        on_takeover: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.signer = signer
        self.table_id = table_id
        self.journal = journal
        self.game = game
        self.version = version
        self.topics = Topics(prefix=settings.topic_prefix, table=table_id)
        self.client_id = settings.client_id or f"tablectl-{table_id}"
        self.connected = asyncio.Event()
        self.log = _log.bind(table=table_id)
        self._stop_requested = asyncio.Event()
        self._finished = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._refusals = Refusals(on_refused, self.log)
        self._sender = Sender(settings, self._refusals)
        self._delivery = Delivery(
            journal,
            settings,
            self.topics,
            self._sender,
            SnapshotFolder(journal),
            connected=self.connected,
            stopping=self._stop_requested,
            signer=signer,
            on_delivered=on_delivered,
            log=self.log,
        )
        self._link = OutboxLink(
            settings,
            journal,
            self.topics,
            self._sender,
            self._delivery,
            connected=self.connected,
            client_id=self.client_id,
            game=game,
            version=version,
            log=self.log,
        )
        self._connector = Connector(
            settings,
            client_id=self.client_id,
            name="publisher",
            logger="tablectl.publisher.paho",
            persistent=True,
            will=self._link.will,
            max_inflight=100,
            # A backlog keeps many publishes pending by design; do not warn about it.
            pending_calls_threshold=10 * settings.window,
            write_through=True,
            log=self.log,
            on_takeover=(lambda address: on_takeover(address.url)) if on_takeover else None,
        )
        journal.add_listener(self._delivery.on_entry)

    # -- counters, for logs, tests and benchmarks ----------------------------------------------

    @property
    def refused(self) -> PublishRefused | None:
        """The refusal holding the outbox back, or ``None`` while it flows."""
        return self._refusals.refused

    @property
    def connections(self) -> int:
        """How many times a connection was made."""
        return self._connector.connections

    @property
    def current_url(self) -> str | None:
        """The URL of the current connection (the last one while reconnecting)."""
        return self._connector.current_url

    @property
    def published_messages(self) -> int:
        """Messages given to the client so far."""
        return self._sender.published_messages

    @property
    def delivered_entries(self) -> int:
        """Entries the broker acknowledged so far."""
        return self._delivery.delivered_entries

    # -- public API --------------------------------------------------------------------------

    def backlog(self) -> int:
        """How many journal entries the broker has not acknowledged yet."""
        return self.journal.undelivered_count()

    async def replay(
        self,
        from_seq: int,
        to_seq: int | None = None,
        kinds: tuple[str, ...] | frozenset[str] = ("round_result", "round_voided"),
    ) -> int:
        """Re-send journalled entries of ``kinds`` with ``from_seq <= seq <= to_seq``.

        Each goes out with its original ``seq``, ``session`` and ``at``, ``delayed: true`` and
        ``replayed: true``: results and voids on ``results`` (signed when the publisher has a
        signer), other kinds' public view on ``events``. Nothing is journalled; consumers
        de-duplicate on ``seq``. At most :data:`~controller.outbox.replay.MAX_REPLAY_MESSAGES`
        are sent per call (the answer tells the count; ask again from the next ``seq`` for
        more).

        Returns:
            How many messages were sent (each acknowledged by the broker).

        Raises:
            PublishError: Not connected, a publish timed out, or the broker refused one
                (:class:`~controller.mqtt.ack.PublishRefused`).
            ValueError: ``from_seq < 1`` or ``to_seq < from_seq``.
        """
        if from_seq < 1 or (to_seq is not None and to_seq < from_seq):
            raise ValueError(f"bad replay range {from_seq}..{to_seq}")
        client = self._link.client
        if client is None or not self.connected.is_set():
            raise PublishError("cannot replay: not connected to a broker", table=self.table_id)
        return await replay(
            self.journal,
            self.topics,
            lambda message: self._sender.send(client, message),
            from_seq=from_seq,
            to_seq=to_seq,
            kinds=frozenset(kinds),
            window=self.settings.window,
            signer=self.signer,
            log=self.log,
        )

    async def wait_connected(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait until connected (birth published); ``False`` if ``timeout`` expired first."""
        try:
            async with asyncio.timeout(timeout):
                await self.connected.wait()
        except TimeoutError:
            return False
        return True

    async def flush(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait until everything journalled so far is acknowledged by the broker.

        Returns early (``False``) once a connect attempt has failed while no broker was ever
        reachable in this run: a stop then does not wait out ``timeout`` for a broker that
        never answered (the outbox resumes at the next start).

        Returns:
            ``True`` if it was, ``False`` if ``timeout`` expired first or no broker was ever
            reachable.
        """
        target = self.journal.last_seq
        progress = self._delivery.progress
        connector = self._connector
        try:
            async with asyncio.timeout(timeout):
                while True:
                    progress.clear()
                    pending = self.journal.undelivered(limit=1)
                    if not pending or pending[0].seq > target:
                        return True
                    if connector.connections == 0 and connector.failed_connects > 0:
                        self.log.warning(
                            "no broker was reachable in this run: the outbox is not flushed",
                            undelivered=self.journal.undelivered_count(),
                        )
                        return False
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.25):  # also notice a failed connect
                            await progress.wait()
        except TimeoutError:
            return False

    async def wait_idle(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Wait until nothing handed to the broker awaits its PUBACK, at most ``timeout`` s.

        Returns at once (``False``) while not connected: there is nothing to wait for then.

        Returns:
            Whether the outbox is connected and idle.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        progress = self._delivery.progress
        while True:
            if not self.connected.is_set():
                return False
            if self._delivery.idle():
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            progress.clear()
            try:
                async with asyncio.timeout(remaining):
                    await progress.wait()
            except TimeoutError:
                return False

    async def stop(self) -> None:
        """Publish the retained offline status, disconnect cleanly, and end :meth:`run`.

        Bounded by ``settings.stop_timeout``; past it the run task is cancelled.
        """
        self._stop_requested.set()
        self._delivery.wake.set()
        if self._task is None or self._task.done():
            return
        try:
            async with asyncio.timeout(self.settings.stop_timeout):
                await self._finished.wait()
        except TimeoutError:
            self.log.warning("publisher did not stop in time; cancelling it")
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    # -- the task ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, publish the birth and the outbox; reconnect on loss until :meth:`stop`.

        Runs once: a stopped publisher is not restarted (make a new one). A refused publish
        is a configuration fault: the back-off grows at every repeat.

        Raises:
            ConfigError: No broker URL in the settings.
        """
        if not self.settings.urls:
            raise ConfigError(
                "no broker URL to publish to (choose_broker picks one when none is configured)",
                table=self.table_id,
            )
        self._task = asyncio.current_task()
        self._finished.clear()
        self._delivery.start()
        try:
            self._delivery.folder.prepare()
            await self._connector.run(
                self._link.serve,
                stop=self._stop_requested,
                on_error=self._link.on_error,
                penalty=lambda: self._refusals.count,
            )
        finally:
            self.connected.clear()
            self.journal.remove_listener(self._delivery.on_entry)
            self._delivery.flush_marks()
            self._finished.set()
