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
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from controller.aio import first_completed
from controller.broker import BrokerAddress, parse_broker_url
from controller.errors import ConfigError, JournalError, PublishError
from controller.journal import Journal, JournalEntry
from controller.messages import (
    SNAPSHOT_VIEW_KINDS,
    Outbound,
    RoundSnapshot,
    Topics,
    birth_message,
    messages_for,
    offline_message,
    replay_message,
    round_snapshot_message,
)
from controller.mqtt_ack import PublishRefused, hand_off, publish_checked, refusal

if TYPE_CHECKING:
    import aiomqtt
    from paho.mqtt.properties import Properties
    from paho.mqtt.reasoncodes import ReasonCode

    from controller.signing import Signer

MAX_REPLAY_MESSAGES = 10_000
"""At most this many messages are re-sent by one :meth:`Publisher.replay` call."""

MARK_BATCH = 1000
"""Delivery marks are written at the latest once this many are noted (a long backlog)."""


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
        ca_file: PEM file of the CA(s) that signed the broker's certificate (``mqtts://``);
            the system trust store when not set.
        cert_file: PEM client certificate, for brokers that demand one (mutual TLS).
        key_file: Its private key (PEM, unencrypted); the certificate file if not set.
        tls_insecure: Do not check that the broker's certificate names the host of the URL
            (the chain is still verified against ``ca_file``). For tests and labs only.
        betting_status_topic: The retained presence topic of the betting system
            (``{"state": "online"|"offline"}``), watched by
            :class:`controller.commands.StatusWatcher`; ``None`` to not watch it.
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
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    tls_insecure: bool = False
    betting_status_topic: str | None = "betting/status"

    @field_validator("betting_status_topic")
    @classmethod
    def _check_status_topic(cls, topic: str | None) -> str | None:
        if topic is not None and (not topic or any(ch in topic for ch in "+#\0")):
            raise ValueError("betting_status_topic must be a topic without wildcards")
        return topic

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

    @model_validator(mode="after")
    def _check_tls_files(self) -> MqttSettings:
        if self.key_file is not None and self.cert_file is None:
            raise ConfigError("key_file is set without cert_file", key_file=str(self.key_file))
        return self

    @property
    def addresses(self) -> list[BrokerAddress]:
        """The URLs, read."""
        return [parse_broker_url(url) for url in self.urls]

    @property
    def uses_tls(self) -> bool:
        """Whether any URL is ``mqtts://``."""
        return any(address.tls for address in self.addresses)


def tls_context(settings: MqttSettings) -> ssl.SSLContext:
    """The TLS context for ``mqtts://`` URLs: verify the broker, optionally present a cert.

    Built once, when the client is created, so a missing or unreadable file stops the
    controller at start with the file named (not at the first connect).

    Raises:
        ConfigError: A CA, certificate or key file that cannot be read or used.
    """
    try:
        context = ssl.create_default_context(
            cafile=str(settings.ca_file) if settings.ca_file is not None else None
        )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"mqtt.ca_file {settings.ca_file} cannot be used: {exc}",
            field="mqtt.ca_file",
            file=str(settings.ca_file),
        ) from exc
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if settings.cert_file is not None:
        key = settings.key_file if settings.key_file is not None else settings.cert_file
        try:
            context.load_cert_chain(str(settings.cert_file), str(key))
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"mqtt.cert_file {settings.cert_file} / key_file {key} cannot be used: {exc}",
                field="mqtt.cert_file",
                file=str(settings.cert_file),
            ) from exc
    if settings.tls_insecure:
        context.check_hostname = False
    return context


def client_options(
    settings: MqttSettings, address: BrokerAddress, context: ssl.SSLContext | None
) -> dict[str, Any]:
    """``aiomqtt.Client`` keyword arguments every tablectl client shares.

    User name and password (the secret is unwrapped only here, never logged), TLS for
    ``mqtts://``, timeouts, keep-alive and ``TCP_NODELAY``.
    """
    password = settings.password.get_secret_value() if settings.password else None
    return {
        "username": settings.username,
        "password": password,
        "timeout": settings.publish_timeout,
        "keepalive": settings.keepalive,
        "tls_context": context if address.tls else None,
        # Small packets must not wait for Nagle (a QoS 1 stream is many small packets).
        "socket_options": ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
    }


def backoff_seconds(settings: MqttSettings, failures: int, rng: random.Random) -> float:
    """The jittered back-off after ``failures`` rounds of failed attempts (1, 2, ...)."""
    ceiling = min(
        settings.reconnect_max_seconds,
        settings.reconnect_min_seconds * 2 ** min(max(failures, 1) - 1, 30),
    )
    return rng.uniform(settings.reconnect_min_seconds, ceiling)


class _Stopping(Exception):
    """Internal: the outbox was asked to stop."""


@dataclass(slots=True)
class _Sent:
    """One entry handed to paho: the PUBACK future of each of its messages, and its deadline.

    Attributes:
        entry: The journal entry.
        acks: Each message with the future of its PUBACK (``None`` for QoS 0).
        deadline: ``loop.time()`` by which every PUBACK must have come.
    """

    entry: JournalEntry
    acks: list[tuple[Outbound, asyncio.Future[ReasonCode] | None]]
    deadline: float
    retired: bool = False


class _Flow:
    """The outbox of one connection: the next ``seq`` to hand off and what awaits its PUBACK.

    Attributes:
        client: The connected client.
        cursor: The ``seq`` of the next entry to hand to paho.
        sent: Entries handed off and not yet acknowledged, in ``seq`` order.
        failure: Set when an essential publish was refused: the connection must end.
        open: ``False`` once the connection's outbox ended (late PUBACKs are ignored).
        snapshot_due: The entry whose round snapshot is to be published (the latest one
            handed off), with its ``delayed`` flag.
        snapshot_scheduled: Whether :meth:`Publisher._publish_snapshot` is scheduled.
    """

    def __init__(self, client: aiomqtt.Client, cursor: int) -> None:
        self.client = client
        self.cursor = cursor
        self.sent: deque[_Sent] = deque()
        self.failure: PublishRefused | None = None
        self.open = True
        self.snapshot_due: tuple[_Sent, bool] | None = None
        self.snapshot_scheduled = False


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

    Attributes:
        connected: Set while a connection is up (birth published).
        topics: The table's topics.
        refused: The refusal holding the outbox back, or ``None`` while it flows.
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
    ) -> None:
        self.settings = settings
        self.signer = signer
        self.on_delivered = on_delivered
        self.on_refused = on_refused
        self.refused: PublishRefused | None = None
        self._refusals = 0
        self._reported: set[tuple[int | None, str]] = set()
        self._client: aiomqtt.Client | None = None
        self._tls = tls_context(settings) if settings.uses_tls else None
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
        self._unfolded: deque[JournalEntry] = deque()
        self._snapshot_ready = False
        self._flow: _Flow | None = None
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
            self._take(entry)
        else:
            loop.call_soon_threadsafe(self._take, entry)

    def _take(self, entry: JournalEntry) -> None:
        """A new entry (loop thread): hand it to paho at once if the outbox is caught up.

        This is the live card's path: its messages reach the socket inside the journal's
        append, before the appending task goes on. Otherwise (a backlog, a full window, no
        connection, a stop) the outbox task is woken and takes the entry from the journal.
        """
        flow = self._flow
        if (
            flow is not None
            and flow.open
            and flow.failure is None
            and entry.seq == flow.cursor
            and len(flow.sent) < self.settings.window
            and not self._stop_requested.is_set()
        ):
            try:
                self._hand_off(flow, [entry])
                return
            except Exception as exc:  # the outbox task meets it again and handles it
                self.log.debug("direct hand-off failed", seq=entry.seq, error=str(exc))
        self._wake.set()

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
        de-duplicate on ``seq``. At most :data:`MAX_REPLAY_MESSAGES` are sent per call (the
        answer tells the count; ask again from the next ``seq`` for more).

        Returns:
            How many messages were sent (each acknowledged by the broker).

        Raises:
            PublishError: Not connected, a publish timed out, or the broker refused one
                (:class:`~controller.mqtt_ack.PublishRefused`).
            ValueError: ``from_seq < 1`` or ``to_seq < from_seq``.
        """
        if from_seq < 1 or (to_seq is not None and to_seq < from_seq):
            raise ValueError(f"bad replay range {from_seq}..{to_seq}")
        client = self._client
        if client is None or not self.connected.is_set():
            raise PublishError("cannot replay: not connected to a broker", table=self.table_id)
        wanted = frozenset(kinds)
        last = self.journal.last_seq if to_seq is None else min(to_seq, self.journal.last_seq)
        # Fold from the round that was open at from_seq, so refusals naming a hidden card
        # stay withheld.
        opened = self.journal.last_of_kind("round_opened", before_seq=from_seq + 1)
        snapshot = RoundSnapshot()
        tasks: list[asyncio.Task[None]] = []
        sent = 0
        try:
            for entry in self.journal.entries(from_seq=opened.seq if opened else from_seq):
                if entry.seq > last:
                    break
                snapshot = snapshot.apply(entry)
                if entry.seq < from_seq or entry.kind not in wanted:
                    continue
                if sent >= MAX_REPLAY_MESSAGES:
                    self.log.warning(
                        "replay cut short", limit=MAX_REPLAY_MESSAGES, next_seq=entry.seq
                    )
                    break
                message = replay_message(entry, self.topics, snapshot=snapshot, signer=self.signer)
                tasks.append(asyncio.ensure_future(self._send(client, message)))
                sent += 1
                if len(tasks) >= self.settings.window:
                    await asyncio.gather(*tasks)
                    tasks.clear()
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self.log.info("replayed", from_seq=from_seq, to_seq=to_seq, messages=sent)
        return sent

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

    async def wait_idle(self, timeout: float) -> bool:  # noqa: ASYNC109
        """Wait until nothing handed to the broker awaits its PUBACK, at most ``timeout`` s.

        Returns at once (``False``) while not connected: there is nothing to wait for then.

        Returns:
            Whether the outbox is connected and idle.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if not self.connected.is_set():
                return False
            flow = self._flow  # None for a moment after connecting: the outbox is starting
            if (
                flow is not None
                and flow.open
                and not flow.sent
                and not flow.snapshot_scheduled
                and flow.cursor > self.journal.last_seq
            ):
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            self._progress.clear()
            try:
                async with asyncio.timeout(remaining):
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
                    refused = False
                    try:
                        await self._connection(address)
                    except _Stopping:
                        return
                    except PublishRefused as exc:
                        refused = True
                        self._log_refusal(address, exc)
                    except Exception as exc:
                        self._log_failure(address, exc)
                    if self.connections != before or refused:
                        # We were connected and lost the link: start over from the first URL.
                        was_up = True
                        break
                if self._stop_requested.is_set():
                    break
                failures = 1 if was_up else failures + 1
                # A refusal is a configuration fault: back off further at every repeat.
                await self._backoff(max(failures, self._refusals))
        finally:
            self.connected.clear()
            self.current_url = None
            self.journal.remove_listener(self._on_entry)
            self._flush_marks()
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

    def _log_refusal(self, address: BrokerAddress, exc: PublishRefused) -> None:
        self.log.error(
            "broker refused a publish; the outbox holds it (and what follows) and retries "
            "after a back-off",
            url=address.url,
            topic=exc.topic,
            reason_code=exc.reason_code,
            reason=exc.reason,
            seq=exc.context.get("seq"),
            undelivered=self.journal.undelivered_count(),
        )

    async def _backoff(self, failures: int) -> None:
        delay = backoff_seconds(self.settings, failures, self._random)
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
        paho_logger = logging.getLogger("tablectl.publisher.paho")
        common = {
            **client_options(self.settings, address, self._tls),
            "identifier": self.client_id,
            "will": aiomqtt.Will(will.topic, will.payload, qos=1, retain=True),
            "logger": paho_logger,
            "max_inflight_messages": 100,
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
                **common,
            )
        else:
            client = aiomqtt.Client(
                address.host,
                address.port,
                protocol=aiomqtt.ProtocolVersion.V311,
                clean_session=False,
                **common,
            )
        # paho's blocking TCP connect runs in an executor thread: bound it as well.
        client._client.connect_timeout = self.settings.connect_timeout
        # A backlog keeps many publishes pending by design; do not warn about it.
        client.pending_calls_threshold = 10 * self.settings.window
        self._write_through(client)
        return client

    def _write_through(self, client: aiomqtt.Client) -> None:
        """Make paho write a queued packet to the socket at once, in the event loop thread.

        aiomqtt asks the loop to watch the socket for writability when paho queues a packet
        (``call_soon_threadsafe(add_writer)``): the bytes leave two loop iterations after
        ``publish()`` returned, after whatever else is ready (the orchestrator journalling
        the round's next entries, each with an fsync). paho without an external loop writes
        at once, in ``publish()``; this restores that for calls made in the loop thread. A
        partial write, or a write that fails, falls back to aiomqtt's callback (the writer
        watch finishes the write, or reports the broken link as aiomqtt always does). Calls
        from other threads (paho's connect runs in an executor) keep aiomqtt's callback.
        """
        paho = client._client
        deferred = paho.on_socket_register_write
        if deferred is None:  # pragma: no cover - aiomqtt always installs one
            return

        def register_write(paho_client: Any, userdata: Any, sock: Any) -> None:
            if threading.get_ident() == self._loop_thread:
                try:
                    paho_client.loop_write()
                except Exception:  # aiomqtt's writer callback meets it again and reports it
                    deferred(paho_client, userdata, sock)
                    return
                if not paho_client.want_write():
                    return
            deferred(paho_client, userdata, sock)

        paho.on_socket_register_write = register_write

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
            self._client = client
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
            self._progress.set()  # wake wait_idle: nothing to wait for without a link
            self._client = None
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
        done = await first_completed(watcher, outbox)
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

    async def _send(self, client: aiomqtt.Client, message: Outbound) -> None:
        """Publish one message and wait for its PUBACK.

        MQTT v5, QoS 1: through :func:`~controller.mqtt_ack.publish_checked`, so a PUBACK with
        a failure reason code raises :class:`PublishRefused`. MQTT 3.1.1 has no reason code:
        a refused publish is acknowledged like any other and cannot be detected.
        """
        if self.settings.protocol == "5" and message.qos == 1:
            await publish_checked(
                client,
                message.topic,
                message.payload,
                message.qos,
                retain=message.retain,
                properties=self._properties(message),
                timeout=self.settings.publish_timeout,
            )
        else:
            await client.publish(
                message.topic,
                message.payload,
                qos=message.qos,
                retain=message.retain,
                timeout=self.settings.publish_timeout,
            )
        self.published_messages += 1

    async def _publish(
        self, client: aiomqtt.Client, message: Outbound, entry: JournalEntry | None = None
    ) -> None:
        """:meth:`_send`, with refusals reported.

        A refused essential message (an entry's ``events``/``results``/``secure`` message, the
        birth) raises: the entry stays undelivered and the connection is dropped, then retried
        after a growing back-off. A refused non-essential one (retained snapshot, an answer on
        a reply topic) is reported and skipped.
        """
        try:
            await self._send(client, message)
        except PublishRefused as exc:
            seq = entry.seq if entry is not None else None
            exc.context["seq"] = seq
            self._report_refusal(exc, entry)
            if message.essential:
                self.refused = exc
                self._refusals += 1
                raise
            self.log.error(
                "broker refused a non-essential publish; skipped",
                topic=exc.topic,
                reason_code=exc.reason_code,
                reason=exc.reason,
                seq=seq,
            )

    def _report_refusal(self, exc: PublishRefused, entry: JournalEntry | None) -> None:
        key = (entry.seq if entry is not None else None, exc.topic)
        if key in self._reported or self.on_refused is None:
            return
        self._reported.add(key)
        try:
            self.on_refused(exc, entry)
        except Exception:
            self.log.exception("on_refused callback failed", topic=exc.topic)

    def _flowing(self) -> None:
        """The outbox delivered again: forget past refusals."""
        if self.refused is not None:
            self.log.info("outbox flows again after a refused publish", topic=self.refused.topic)
        self.refused = None
        self._refusals = 0
        self._reported.clear()

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
        """The round snapshot after ``entry``: entries handed off before it are folded first.

        Folding is lazy (the live card's event needs no snapshot; its snapshot message is
        built after the event left), and each entry's snapshot is kept until it is delivered,
        for a re-send after a reconnect.
        """
        cached = self._snapshots.get(entry.seq)
        if cached is not None:
            return cached
        unfolded = self._unfolded
        while unfolded and unfolded[0].seq <= entry.seq:
            self._fold(unfolded.popleft())
        self._fold(entry)
        return self._snapshots.get(entry.seq, self._snapshot)

    def _fold(self, entry: JournalEntry) -> None:
        if entry.seq > self._snapshot.last_seq:
            self._snapshot = self._snapshot.apply(entry)
            self._snapshots[entry.seq] = self._snapshot

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
        """Hand every undelivered entry to paho, in ``seq`` order, and see each acknowledged.

        Publishing is pipelined: up to ``window`` entries are out at once, and an entry is
        never held back waiting for an earlier PUBACK. Entries are marked delivered in
        ``seq`` order as their acknowledgements come (:meth:`_settle`). While the outbox is
        caught up, a new entry is handed off by the journal listener itself (:meth:`_take`);
        this task serves the backlog, enforces the PUBACK deadline and ends the connection
        on a refusal or a stop.

        Raises:
            TimeoutError: An entry's PUBACK did not come within ``publish_timeout``.
            PublishRefused: The broker refused an essential publish.
            _Stopping: A stop was requested (after the PUBACKs still awaited came).
        """
        loop = asyncio.get_running_loop()
        pending = self.journal.undelivered(limit=1)
        flow = _Flow(client, pending[0].seq if pending else self.journal.last_seq + 1)
        self._flow = flow
        window = self.settings.window
        try:
            while True:
                self._wake.clear()
                if flow.failure is not None:
                    raise flow.failure
                stopping = self._stop_requested.is_set()
                if stopping and not flow.sent:
                    raise _Stopping
                room = window - len(flow.sent)
                if not stopping and room > 0 and flow.cursor <= self.journal.last_seq:
                    batch = self.journal.undelivered(limit=room, from_seq=flow.cursor)
                    if batch:
                        self._hand_off(flow, batch)
                        continue
                    flow.cursor = self.journal.last_seq + 1  # delivered meanwhile
                if not flow.sent:
                    if self._refusals:
                        self._flowing()
                    self._offline_seqs.clear()
                    self._progress.set()
                    await self._wake.wait()
                    continue
                remaining = flow.sent[0].deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self._wake.wait()
        finally:
            flow.open = False
            if self._flow is flow:
                self._flow = None

    def _hand_off(self, flow: _Flow, batch: list[JournalEntry]) -> None:
        """Give the messages of ``batch`` (entries from ``flow.cursor`` on) to paho.

        The retained round snapshot is not published with each entry: it is built and
        published once the current loop step ends (:meth:`_publish_snapshot`), for the latest
        entry handed off by then. The live card's event thus reaches the socket without
        waiting for its snapshot to be built, and entries journalled in a row (a round's end,
        a backlog) publish one snapshot, not one each: the round topic is retained, the
        earlier ones would be overwritten at once.

        Raises:
            PublishError: paho did not take a publish (not connected...).
        """
        loop = asyncio.get_running_loop()
        now = datetime.now(UTC)
        deadline = loop.time() + self.settings.publish_timeout
        awaited = False

        def settle(_future: asyncio.Future[ReasonCode]) -> None:
            self._settle(flow)

        for entry in batch:
            delayed = self._is_delayed(entry, now)
            snapshot = None
            if entry.kind in SNAPSHOT_VIEW_KINDS or entry.round_id is None:
                snapshot = self._snapshot_for(entry)  # needed now, or nothing would fold it
            elif entry.seq > self._snapshot.last_seq and (
                not self._unfolded or entry.seq > self._unfolded[-1].seq
            ):
                self._unfolded.append(entry)  # folded when its snapshot is needed
            messages = messages_for(
                entry,
                self.topics,
                delayed=delayed,
                snapshot=snapshot,
                with_snapshot=False,
                signer=self.signer,
            )
            acks = [(message, self._hand_message(flow.client, message)) for message in messages]
            sent = _Sent(entry, acks, deadline)
            flow.sent.append(sent)
            flow.cursor = entry.seq + 1
            if entry.round_id is not None:
                flow.snapshot_due = (sent, delayed)
            for _message, future in acks:
                if future is not None:
                    future.add_done_callback(settle)
                    awaited = True
        if flow.snapshot_due is not None and not flow.snapshot_scheduled:
            flow.snapshot_scheduled = True
            loop.call_soon(self._publish_snapshot, flow)
        if not awaited:
            self._settle(flow)  # QoS 0 only: nothing to wait for

    def _publish_snapshot(self, flow: _Flow) -> None:
        """Publish the retained round snapshot of the latest entry handed off.

        Scheduled by :meth:`_hand_off` to run after the current loop step, so it always runs
        before any acknowledgement of that step's publishes is read (I/O callbacks queue
        behind it): the snapshot's PUBACK joins its entry's before the entry can be settled.
        The snapshot is not essential: a failure is logged, the entry still delivers.
        """
        flow.snapshot_scheduled = False
        due, flow.snapshot_due = flow.snapshot_due, None
        if due is None or not flow.open:
            return
        sent, delayed = due
        try:
            snapshot = self._snapshot_for(sent.entry)
            message = round_snapshot_message(
                snapshot, self.topics, entry=sent.entry, delayed=delayed
            )
            future = self._hand_message(flow.client, message)
        except Exception as exc:
            self.log.warning("round snapshot not published", seq=sent.entry.seq, error=str(exc))
            return
        if future is not None and not sent.retired:
            sent.acks.append((message, future))
            future.add_done_callback(lambda _future: self._settle(flow))

    def _hand_message(
        self, client: aiomqtt.Client, message: Outbound
    ) -> asyncio.Future[ReasonCode] | None:
        future = hand_off(
            client,
            message.topic,
            message.payload,
            message.qos,
            retain=message.retain,
            properties=self._properties(message),
        )
        self.published_messages += 1
        return future

    def _properties(self, message: Outbound) -> Properties | None:
        """The MQTT v5 PUBLISH properties of ``message`` (its correlation data), if any."""
        if self.settings.protocol != "5" or message.correlation_data is None:
            return None
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        properties.CorrelationData = message.correlation_data
        return properties

    def _settle(self, flow: _Flow) -> None:
        """Retire the acknowledged head of ``flow.sent``, in ``seq`` order (a PUBACK came).

        A refused essential message stops the flow there (its entry stays undelivered and the
        outbox task ends the connection); a refused non-essential one is reported and skipped.
        """
        if not flow.open:
            return
        done: list[JournalEntry] = []
        while flow.sent and flow.failure is None:
            head = flow.sent[0]
            if not all(future is None or future.done() for _m, future in head.acks):
                break
            for message, future in head.acks:
                if future is None or future.cancelled():
                    continue
                refused = refusal(message.topic, future.result(), seq=head.entry.seq)
                if refused is None:
                    continue
                self._report_refusal(refused, head.entry)
                if message.essential:
                    self.refused = refused
                    self._refusals += 1
                    flow.failure = refused
                    break
                self.log.error(
                    "broker refused a non-essential publish; skipped",
                    topic=refused.topic,
                    reason_code=refused.reason_code,
                    reason=refused.reason,
                    seq=head.entry.seq,
                )
            if flow.failure is not None:
                break
            flow.sent.popleft()
            head.retired = True
            done.append(head.entry)
        if done:
            if self._refusals and flow.failure is None and not flow.sent:
                self._flowing()
            self._delivered(done)
            if not flow.sent or self.journal.unwritten_marks >= MARK_BATCH:
                # Nothing in flight: the table is between cards (or it is a long backlog).
                # Write the marks now, before anyone waiting for an idle outbox (the cue of
                # the next slot) goes on.
                self._flush_marks()
        if (
            flow.failure is not None
            or (not flow.sent and self._stop_requested.is_set())
            or flow.cursor <= self.journal.last_seq
        ):
            self._wake.set()  # the outbox task has something to do

    def _delivered(self, entries: list[JournalEntry]) -> None:
        """Entries the broker acknowledged: note the marks, tell the metrics and waiters."""
        seqs = [entry.seq for entry in entries]
        try:
            self.journal.note_delivered(seqs)
        except JournalError as exc:  # closed under us (shutdown): published again next time
            self.log.warning("cannot note deliveries", error=str(exc), seqs=len(seqs))
        for seq in seqs:
            self._snapshots.pop(seq, None)
            self._offline_seqs.discard(seq)
        self.delivered_entries += len(seqs)
        self._progress.set()
        if self.on_delivered is not None:
            for entry in entries:
                try:
                    self.on_delivered(entry)
                except Exception:
                    self.log.exception("on_delivered callback failed", seq=entry.seq)

    def _flush_marks(self) -> None:
        try:
            self.journal.flush_delivered()
        except JournalError as exc:
            self.log.warning("cannot write delivery marks", error=str(exc))
