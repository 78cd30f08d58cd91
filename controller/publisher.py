"""The outbox: publishes the journal to MQTT, in order, at least once.

:class:`Publisher` is a long-lived task. It connects (with the offline status as Last Will),
publishes the retained birth, then publishes every undelivered journal entry in ``seq`` order
with QoS 1 and marks each one delivered only once the broker acknowledged it (PUBACK). It is
woken by the journal's listener (no polling), so a card reaches the broker within a fraction
of a millisecond of its commit. When the link drops it backs off (jittered), reconnects, fails
over across the configured URLs in order, and resumes from the journal: a message may be
published twice, consumers de-duplicate on ``(table, seq)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import ssl
import threading
import time
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from controller.broker import BrokerAddress, parse_broker_url
from controller.errors import ConfigError, PublishError
from controller.journal import Journal, JournalEntry
from controller.messages import (
    Outbound,
    RoundSnapshot,
    Topics,
    birth_message,
    messages_for,
    offline_message,
)

if TYPE_CHECKING:
    import aiomqtt

_log = structlog.get_logger(__name__)


class MqttSettings(BaseModel):
    """How the controller talks to its broker(s).

    Attributes:
        urls: ``mqtt://host:port`` (``mqtts://`` for TLS); several are tried in order. Empty
            means "not configured": the caller picks one with :func:`~controller.broker.
            choose_broker` before starting a :class:`Publisher`.
        protocol: ``"5"`` (default) or ``"3.1.1"``.
        client_id: MQTT client id; ``tablectl-{table_id}`` if not set. Must be stable for a
            persistent session.
        username: Broker user name, if the broker wants one.
        password: Broker password.
        keepalive: MQTT keep-alive in seconds (a dead link is noticed after 1.5 times this).
        session_expiry_seconds: How long the broker keeps our v5 session while we are away
            (``clean_start=False``); v3.1.1 uses ``clean_session=False`` instead.
        connect_timeout: Seconds for TCP connect + CONNACK.
        publish_timeout: Seconds to wait for one PUBACK before giving up on the link.
        stop_timeout: Seconds :meth:`Publisher.stop` may take in all.
        topic_prefix: Topic prefix (``tables``).
        reconnect_min_seconds: First back-off delay.
        reconnect_max_seconds: Longest back-off delay.
        delayed_after_seconds: An entry published later than this after it happened (or
            journalled while disconnected) carries ``delayed: true``.
        window: Entries published before their acknowledgements are awaited (backlog speed).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    urls: list[str] = Field(default_factory=list)
    protocol: Literal["5", "3.1.1"] = "5"
    client_id: str | None = None
    username: str | None = None
    password: SecretStr | None = None
    keepalive: int = Field(default=15, ge=2, le=65535)
    session_expiry_seconds: int = Field(default=3600, ge=0)
    connect_timeout: float = Field(default=5.0, gt=0)
    publish_timeout: float = Field(default=3.0, gt=0)
    stop_timeout: float = Field(default=3.0, gt=0)
    topic_prefix: str = "tables"
    reconnect_min_seconds: float = Field(default=0.2, gt=0)
    reconnect_max_seconds: float = Field(default=10.0, gt=0)
    delayed_after_seconds: float = Field(default=2.0, ge=0)
    window: int = Field(default=100, ge=1, le=10000)

    @field_validator("urls")
    @classmethod
    def _check_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            parse_broker_url(url)  # raises ConfigError naming the URL
        return urls

    @model_validator(mode="after")
    def _check_backoff(self) -> MqttSettings:
        if self.reconnect_max_seconds < self.reconnect_min_seconds:
            raise ConfigError(
                "reconnect_max_seconds is below reconnect_min_seconds",
                reconnect_min_seconds=self.reconnect_min_seconds,
                reconnect_max_seconds=self.reconnect_max_seconds,
            )
        return self

    @property
    def addresses(self) -> list[BrokerAddress]:
        """The URLs, read."""
        return [parse_broker_url(url) for url in self.urls]


class _Stopping(Exception):
    """Internal: the outbox was asked to stop."""


class Publisher:
    """Publishes a table's journal to MQTT. Run :meth:`run` as a task; end it with :meth:`stop`.

    Args:
        settings: Broker settings.
        table_id: The table id (one topic level).
        journal: The table's open journal.
        game: The game id announced in the status messages.
        version: The controller version announced in the status messages.

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
    ) -> None:
        self.settings = settings
        self.table_id = table_id
        self.journal = journal
        self.game = game
        self.version = version
        self.topics = Topics(prefix=settings.topic_prefix, table=table_id)
        self.client_id = settings.client_id or f"tablectl-{table_id}"
        self.connected = asyncio.Event()
        self.log = _log.bind(table=table_id)
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self._finished = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._offline_seqs: set[int] = set()
        self._delayed_upto = 0
        self._snapshot = RoundSnapshot()
        self._snapshots: dict[int, RoundSnapshot] = {}
        self._snapshot_ready = False
        self._random = random.Random()
        # Counters, for logs, tests and benchmarks.
        self.connections = 0
        self.published_messages = 0
        self.delivered_entries = 0
        self.current_url: str | None = None
        journal.add_listener(self._on_entry)

    # -- journal listener --------------------------------------------------------------------

    def _on_entry(self, entry: JournalEntry) -> None:
        """Called by the journal after each commit (usually in the event loop thread)."""
        if not self.connected.is_set():
            self._offline_seqs.add(entry.seq)
        loop = self._loop
        if loop is None:
            return  # not running yet: run() starts from the journal anyway
        if threading.get_ident() == self._loop_thread:
            self._wake.set()
        else:
            loop.call_soon_threadsafe(self._wake.set)

    # -- public API --------------------------------------------------------------------------

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

        Returns:
            ``True`` if it was, ``False`` if ``timeout`` expired first.
        """
        target = self.journal.last_seq
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._progress.clear()
                    pending = self.journal.undelivered(limit=1)
                    if not pending or pending[0].seq > target:
                        return True
                    await self._progress.wait()
        except TimeoutError:
            return False

    async def stop(self) -> None:
        """Publish the retained offline status, disconnect cleanly, and end :meth:`run`.

        Bounded by ``settings.stop_timeout``; past it the run task is cancelled.
        """
        self._stop_requested.set()
        self._wake.set()
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

        Runs once: a stopped publisher is not restarted (make a new one).

        Raises:
            ConfigError: No broker URL in the settings.
        """
        if not self.settings.urls:
            raise ConfigError(
                "no broker URL to publish to (choose_broker picks one when none is configured)",
                table=self.table_id,
            )
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._task = asyncio.current_task()
        self._finished.clear()
        self._wake.set()
        failures = 0
        try:
            self._prepare_snapshot()
            while not self._stop_requested.is_set():
                was_up = False
                for address in self.settings.addresses:
                    if self._stop_requested.is_set():
                        break
                    before = self.connections
                    try:
                        await self._connection(address)
                    except _Stopping:
                        return
                    except Exception as exc:
                        self._log_failure(address, exc)
                    if self.connections != before:
                        # We were connected and lost the link: start over from the first URL.
                        was_up = True
                        break
                if self._stop_requested.is_set():
                    break
                failures = 1 if was_up else failures + 1
                await self._backoff(failures)
        finally:
            self.connected.clear()
            self.current_url = None
            self.journal.remove_listener(self._on_entry)
            self._finished.set()

    def _log_failure(self, address: BrokerAddress, exc: Exception) -> None:
        import aiomqtt

        if isinstance(exc, aiomqtt.MqttError | OSError | TimeoutError | PublishError):
            self.log.warning(
                "broker connection lost or refused",
                url=address.url,
                error=f"{type(exc).__name__}: {exc}",
                undelivered=self.journal.undelivered_count(),
            )
        else:
            self.log.exception("publisher failed; reconnecting", url=address.url)

    async def _backoff(self, failures: int) -> None:
        ceiling = min(
            self.settings.reconnect_max_seconds,
            self.settings.reconnect_min_seconds * 2 ** min(failures - 1, 30),
        )
        delay = self._random.uniform(self.settings.reconnect_min_seconds, ceiling)
        self.log.info("reconnecting after back-off", seconds=round(delay, 3))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._stop_requested.wait()

    def _make_client(self, address: BrokerAddress) -> aiomqtt.Client:
        import aiomqtt
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        will = offline_message(
            self.topics,
            session=self.journal.session,
            game=self.game,
            version=self.version,
            at=None,
            reason="connection lost",
        )
        password = self.settings.password.get_secret_value() if self.settings.password else None
        paho_logger = logging.getLogger("tablectl.publisher.paho")
        common = {
            "identifier": self.client_id,
            "username": self.settings.username,
            "password": password,
            "will": aiomqtt.Will(will.topic, will.payload, qos=1, retain=True),
            "timeout": self.settings.publish_timeout,
            "keepalive": self.settings.keepalive,
            "tls_context": ssl.create_default_context() if address.tls else None,
            "logger": paho_logger,
            "max_inflight_messages": 100,
            # Small packets must not wait for Nagle (a QoS 1 stream is many small packets).
            "socket_options": ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
        }
        if self.settings.protocol == "5":
            properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            properties.SessionExpiryInterval = self.settings.session_expiry_seconds
            client = aiomqtt.Client(
                address.host,
                address.port,
                protocol=aiomqtt.ProtocolVersion.V5,
                clean_start=False,
                properties=properties,
                **common,  # type: ignore[arg-type]
            )
        else:
            client = aiomqtt.Client(
                address.host,
                address.port,
                protocol=aiomqtt.ProtocolVersion.V311,
                clean_session=False,
                **common,  # type: ignore[arg-type]
            )
        # paho's blocking TCP connect runs in an executor thread: bound it as well.
        client._client.connect_timeout = self.settings.connect_timeout
        # A backlog keeps many publishes pending by design; do not warn about it.
        client.pending_calls_threshold = 10 * self.settings.window
        return client

    async def _connection(self, address: BrokerAddress) -> None:
        """One connection's life: connect, birth, outbox until the link drops or we stop."""
        client = self._make_client(address)
        try:
            async with asyncio.timeout(self.settings.connect_timeout):
                await client.__aenter__()
        except BaseException:
            # A connect still running in aiomqtt's executor thread must not come alive later
            # with our client id (it would kick our next connection off the broker).
            with contextlib.suppress(Exception):
                client._client.disconnect()
            raise
        clean_exit = False
        try:
            self.connections += 1
            self.current_url = address.url
            birth = birth_message(
                self.topics,
                session=self.journal.session,
                game=self.game,
                version=self.version,
                at=datetime.now(UTC),
            )
            await self._publish(client, birth)
            self.connected.set()
            self.log.info(
                "connected",
                url=address.url,
                protocol=self.settings.protocol,
                client_id=self.client_id,
                session=self.journal.session,
                undelivered=self.journal.undelivered_count(),
            )
            await self._serve(client, address)
            # Stop requested: say goodbye while the link is still up.
            await self._goodbye(client)
            clean_exit = True
        finally:
            self.connected.clear()
            if clean_exit:
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(self.settings.publish_timeout):
                        await client.__aexit__(None, None, None)
            else:
                # Whatever was journalled and not acknowledged by now misses its live moment:
                # it is published after the outage, flagged delayed.
                self._delayed_upto = self.journal.last_seq
                await self._abandon(client)
        raise _Stopping

    async def _serve(self, client: aiomqtt.Client, address: BrokerAddress) -> None:
        """Run the outbox until a stop is requested (returns) or the link fails (raises)."""
        import aiomqtt

        watcher = asyncio.ensure_future(self._watch_link(client))
        outbox = asyncio.ensure_future(self._outbox(client))
        try:
            done, _pending = await asyncio.wait(
                {watcher, outbox}, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for task in (watcher, outbox):
                task.cancel()
            await asyncio.gather(watcher, outbox, return_exceptions=True)
        if outbox in done and not outbox.cancelled():
            error = outbox.exception()
            if isinstance(error, _Stopping):
                return
            if isinstance(error, TimeoutError):
                raise PublishError(
                    "broker did not acknowledge a publish in time",
                    url=address.url,
                    timeout=self.settings.publish_timeout,
                ) from error
            if error is not None:
                raise error
        error = watcher.exception() if watcher in done and not watcher.cancelled() else None
        if error is not None:
            raise error
        raise aiomqtt.MqttError("connection to the broker ended")

    async def _abandon(self, client: aiomqtt.Client) -> None:
        """Drop a broken connection without waiting on the network."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(min(1.0, self.settings.publish_timeout)):
                await client.__aexit__(None, None, None)

    async def _goodbye(self, client: aiomqtt.Client) -> None:
        message = offline_message(
            self.topics,
            session=self.journal.session,
            game=self.game,
            version=self.version,
            at=datetime.now(UTC),
            reason="stopped",
        )
        try:
            await self._publish(client, message)
        except Exception as exc:
            self.log.warning("could not publish the offline status", error=str(exc))
        self.log.info("stopped", undelivered=self.journal.undelivered_count())

    async def _watch_link(self, client: aiomqtt.Client) -> None:
        """Raise ``MqttError`` as soon as the connection drops (aiomqtt's only public signal).

        Inbound messages (none today: the publisher subscribes to nothing) are dropped.
        """
        async for _message in client.messages:
            pass

    async def _publish(self, client: aiomqtt.Client, message: Outbound) -> None:
        await client.publish(
            message.topic,
            message.payload,
            qos=message.qos,
            retain=message.retain,
            timeout=self.settings.publish_timeout,
        )
        self._check_acknowledged(message)
        self.published_messages += 1

    def _check_acknowledged(self, message: Outbound) -> None:
        """Hook: detect a publish the broker refused (PUBACK reason code >= 0x80).

        TODO(refused-publish): aiomqtt 2.5 does not surface the v5 PUBACK reason code (a
        publish refused by an ACL, 135 Not authorized, returns normally) and a v3.1.1 broker
        silently drops a refused publish. Detecting this needs paho's ``on_publish`` reason
        code (v5) or a loop-back subscription (v3.1.1); until then refused publishes are
        marked delivered. Raise :class:`PublishError` here once the code is available
        (``controller.mqtt_ack.publish_checked`` reads the v5 code; wiring it into
        :meth:`_publish` for protocol 5 is that later issue).
        """
        del message

    # -- the outbox ----------------------------------------------------------------------------

    def _prepare_snapshot(self) -> None:
        """Fold the delivered part of the current round, so the retained snapshot is whole."""
        if self._snapshot_ready:
            return
        pending = self.journal.undelivered(limit=1)
        first = pending[0].seq if pending else self.journal.last_seq + 1
        opened = self.journal.last_of_kind("round_opened", before_seq=first)
        snapshot = RoundSnapshot()
        if opened is not None:
            for entry in self.journal.entries(from_seq=opened.seq):
                if entry.seq >= first:
                    break
                snapshot = snapshot.apply(entry)
        self._snapshot = snapshot
        self._snapshot_ready = True

    def _snapshot_for(self, entry: JournalEntry) -> RoundSnapshot:
        cached = self._snapshots.get(entry.seq)
        if cached is not None:
            return cached
        if entry.seq > self._snapshot.last_seq:
            self._snapshot = self._snapshot.apply(entry)
        self._snapshots[entry.seq] = self._snapshot
        return self._snapshot

    def _is_delayed(self, entry: JournalEntry, now: datetime) -> bool:
        if (
            entry.seq <= self._delayed_upto
            or entry.seq in self._offline_seqs
            or entry.session != self.journal.session
        ):
            return True
        late = (now - entry.happened_at).total_seconds()
        return late > self.settings.delayed_after_seconds

    async def _outbox(self, client: aiomqtt.Client) -> None:
        while True:
            if self._stop_requested.is_set():
                raise _Stopping
            self._wake.clear()
            batch = self.journal.undelivered(limit=self.settings.window)
            if not batch:
                self._offline_seqs.clear()
                self._progress.set()
                await self._wake.wait()
                continue
            await self._publish_batch(client, batch)

    async def _publish_batch(self, client: aiomqtt.Client, batch: list[JournalEntry]) -> None:
        """Publish entries in order (pipelined), mark each delivered once all its PUBACKs came.

        The first message is handed to paho at once (awaited inline: aiomqtt gives it to paho
        before its first suspension), which spares the live card one loop iteration. Every
        other message becomes a task; asyncio starts tasks in creation order and aiomqtt hands
        the message to paho in the task's first step, so the wire order is the ``seq`` order.
        """
        now = datetime.now(UTC)
        started = time.perf_counter()
        # The round topic is retained: in a backlog only the last snapshot matters, the
        # earlier ones would be overwritten at once. Skip them (halves a backlog's messages).
        last_in_round = max(
            (i for i, entry in enumerate(batch) if entry.round_id is not None), default=-1
        )
        per_entry: list[tuple[JournalEntry, list[asyncio.Task[None]]]] = []
        head: Coroutine[Any, Any, None] | None = None
        for index, entry in enumerate(batch):
            messages = messages_for(
                entry,
                self.topics,
                delayed=self._is_delayed(entry, now),
                snapshot=self._snapshot_for(entry),
                with_snapshot=index == last_in_round,
            )
            tasks = []
            for message in messages:
                if head is None:
                    head = self._publish(client, message)
                else:
                    tasks.append(asyncio.ensure_future(self._publish(client, message)))
            per_entry.append((entry, tasks))
        delivered: list[int] = []
        try:
            if head is not None:
                await head
            for entry, tasks in per_entry:
                for task in tasks:
                    await task
                delivered.append(entry.seq)
        finally:
            for _entry, tasks in per_entry:
                for task in tasks:
                    if not task.done():
                        task.cancel()
            # Retrieve exceptions of failed tasks so asyncio does not warn about them.
            for _entry, tasks in per_entry:
                for task in tasks:
                    if task.done() and not task.cancelled():
                        task.exception()
            if delivered:
                self.journal.mark_delivered_many(delivered)
                for seq in delivered:
                    self._snapshots.pop(seq, None)
                    self._offline_seqs.discard(seq)
                self.delivered_entries += len(delivered)
                self._progress.set()
        if len(batch) > 1:
            self.log.debug(
                "backlog published",
                entries=len(batch),
                first_seq=batch[0].seq,
                last_seq=batch[-1].seq,
                ms=round((time.perf_counter() - started) * 1000, 2),
            )
