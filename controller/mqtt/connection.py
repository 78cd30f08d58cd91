"""One MQTT connection life-cycle, shared by every long-lived tablectl client.

:class:`Connector` owns what the outbox (:class:`~controller.publisher.Publisher`), the
command router and the betting-status watcher (:mod:`controller.commands`) used to write
three times: building the :class:`~controller.mqtt.client.Client` (credentials, TLS,
keep-alive, ``TCP_NODELAY``, session, Last Will), the bounded connect, the close, URL
failover over ``mqtt.urls`` and the capped, jittered back-off. A client only says what it
does while connected (``serve``).

The loop (:meth:`Connector.run`), until ``stop`` is set:

1. Try the URLs in order. A connect (TCP + CONNACK) is bounded by ``mqtt.connect_timeout``;
   one that fails or times out moves on to the next URL.
2. Once connected, ``serve(client, address)`` runs. It returns when ``stop`` is set (the
   connection is then closed cleanly, bounded by ``mqtt.publish_timeout``) or raises when the
   link fails (the connection is dropped, bounded by 1 s).
3. After a connection that was up (or a failure the client says counts as one: the
   publisher's refused publish), start over from the first URL after the shortest back-off;
   after a round of URLs that all failed, back off longer:
   ``uniform(reconnect_min, min(reconnect_max, reconnect_min * 2 ** (failures - 1)))``
   (:func:`~controller.mqtt.settings.backoff_seconds`). A client may ask for a longer one
   (``penalty``: the publisher's count of repeated refusals). The wait ends early on ``stop``.
4. A connection the broker ends with MQTT 5 reason code 0x8E "Session taken over" (another
   client connected with the same client id: a second controller for the table, or a
   credential using its id) is **not** retried at once: reconnecting would take the session
   back and the two would evict each other about once a second. Mosquitto 2.0.11 (Debian 12)
   closes the old connection without that DISCONNECT, so the pattern counts as well: the
   broker dropping :data:`TAKEOVER_LOSSES` connections in a row, each within
   :data:`TAKEOVER_WINDOW` seconds of its CONNACK. The loop logs one error line, calls
   ``on_takeover`` (the table raises a pit alert), sets :attr:`Connector.taken_over` and stands
   down for ``mqtt.takeover_pause_seconds`` (300 s by default) before it tries once more, so a
   table left alone recovers by itself once the other client is gone (or when the pattern was
   a broker in a crash loop, not a second client); 0 stands down until the controller is
   restarted.
5. An unreachable broker is not logged once per attempt: the first failed connect of a
   streak is reported (``on_error``; a host name that does not resolve is named as such),
   then one summary line per doubling of the attempts ("still unreachable after N attempts,
   next in S s"; at most every :data:`SUMMARY_EVERY` s otherwise), and one line when the
   broker answers again.

The clients are :class:`~controller.mqtt.client.Client`: paho-mqtt through its public API only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import structlog

from controller.broker import BrokerAddress
from controller.mqtt.adapter import connect_properties, session_taken_over
from controller.mqtt.client import READ_PACKETS_MAX, Client, Will
from controller.mqtt.settings import MqttSettings, backoff_seconds, client_options, tls_context

if TYPE_CHECKING:
    from controller.mqtt.client import Message as Message  # noqa: PLC0414 (for annotations)

__all__ = ["SUMMARY_EVERY", "TAKEOVER_LOSSES", "TAKEOVER_WINDOW", "Connector", "Serve"]

SUMMARY_EVERY = 60.0
"""Seconds between "still unreachable" lines once the attempts no longer double quickly."""

TAKEOVER_LOSSES = 3
"""Connections in a row the broker drops soon after accepting them: a session takeover fight."""

TAKEOVER_WINDOW = 2.0
"""Seconds after a CONNACK within which a dropped link counts towards :data:`TAKEOVER_LOSSES`."""

Serve = Callable[[Client, BrokerAddress], Awaitable[None]]
"""What a client does while connected: return once stopping, raise when the link fails."""


class Connector:
    """Connects one kind of client, fails over across the URLs, backs off, reconnects.

    Args:
        settings: Broker settings (URLs, credentials, TLS, timeouts, back-off).
        client_id: The MQTT client id.
        name: What the connection is for, in logs (``"publisher"``, ``"command"``...).
        logger: Name of the standard logger paho logs to.
        persistent: Keep the session while away (v5 ``clean_start=False`` with
            ``session_expiry_seconds``; v3.1.1 ``clean_session=False``); otherwise every
            connection starts clean.
        will: Gives the Last Will's topic and payload (QoS 1, retained) for each connection.
        max_inflight: paho's limit of QoS 1 publishes awaiting their PUBACK.
        pending_calls_threshold: Kept for callers written for aiomqtt (not used).
        write_through: Write a packet to the socket inside the call that queued it
            (``publish()``, ``ack()``, a keep-alive) when made in the loop thread
            (:class:`~controller.mqtt.client.Client`): the card's hot path, and no writable
            event and pass of the loop of its own for a consumer's acknowledgement. On by
            default; ``False`` waits for the socket's writable event.
        read_packets: paho ``loop_read`` calls per readable event at most (paho alone reads
            one packet per call for a client that only receives).
        manual_acks: Leave acknowledgements to the caller (the archive's, after its commit).
        receive_maximum: MQTT 5: messages the broker sends before they are acknowledged.
        on_takeover: Called once when the broker ends the connection because another client
            took the session over (the loop then ends instead of fighting back).

    Attributes:
        connections: How many times a connection was made.
        failed_connects: How many connect attempts failed (refused, unreachable, timed out).
        current_url: The URL of the connection up (or last up) while :meth:`run` runs.
        taken_over: Whether the last connection ended in a session takeover (set until the
            next connection is up).
        log: The bound logger.

    Raises:
        ConfigError: A TLS file that cannot be used (read once, here, so the controller stops
            at start with the file named).
    """

    def __init__(
        self,
        settings: MqttSettings,
        *,
        client_id: str,
        name: str,
        logger: str,
        persistent: bool = False,
        will: Callable[[], tuple[str, bytes]] | None = None,
        max_inflight: int | None = None,
        pending_calls_threshold: int | None = None,
        write_through: bool = True,
        read_packets: int = READ_PACKETS_MAX,
        manual_acks: bool = False,
        receive_maximum: int | None = None,
        log: Any = None,
        on_takeover: Callable[[BrokerAddress], None] | None = None,
    ) -> None:
        self.settings = settings
        self.client_id = client_id
        self.name = name
        self.log = log if log is not None else structlog.get_logger(__name__)
        self.connections = 0
        self.failed_connects = 0
        self.current_url: str | None = None
        self.taken_over = False
        self._on_takeover = on_takeover
        self._connected_at = 0.0
        self._logger = logger
        self._persistent = persistent
        self._will = will
        self._max_inflight = max_inflight
        self._pending_calls_threshold = pending_calls_threshold
        self._write_through = write_through
        self._read_packets = read_packets
        self._manual_acks = manual_acks
        self._receive_maximum = receive_maximum
        self._tls = tls_context(settings) if settings.uses_tls else None
        self._random = random.Random()

    def backoff(self, failures: int) -> float:
        """The jittered delay after ``failures`` rounds of failed attempts (1, 2, ...)."""
        return backoff_seconds(self.settings, failures, self._random)

    def make_client(self, address: BrokerAddress) -> Client:
        """A new, unconnected client for ``address`` with every shared option."""
        settings = self.settings
        if address.url.startswith("memory://"):
            from controller.mqtt.memory import MemoryClient

            memory_will: Will | None = None
            if self._will is not None:
                topic, payload = self._will()
                memory_will = Will(topic, payload, qos=1, retain=True)
            return MemoryClient(
                address.host, identifier=self.client_id, will=memory_will, timeout=5.0
            )
        options: dict[str, Any] = {
            **client_options(settings, address, self._tls),
            "identifier": self.client_id,
            "logger": logging.getLogger(self._logger),
        }
        if self._will is not None:
            topic, payload = self._will()
            options["will"] = Will(topic, payload, qos=1, retain=True)
        if self._max_inflight is not None:
            options["max_inflight_messages"] = self._max_inflight
        options["protocol"] = settings.protocol
        if settings.protocol == "5":
            options["clean_start"] = not self._persistent
            if self._persistent:
                options["properties"] = connect_properties(settings.session_expiry_seconds)
        else:
            options["clean_session"] = not self._persistent
        client = Client(
            address.host,
            address.port,
            # paho's blocking TCP connect runs in an executor thread: bounded with the CONNACK.
            connect_timeout=settings.connect_timeout,
            write_through=self._write_through,
            read_packets=self._read_packets,
            manual_acks=self._manual_acks,
            receive_maximum=self._receive_maximum,
            **options,
        )
        if self._pending_calls_threshold is not None:
            client.pending_calls_threshold = self._pending_calls_threshold
        return client

    @contextlib.asynccontextmanager
    async def connect(self, address: BrokerAddress) -> AsyncIterator[Client]:
        """Connect to ``address`` (bounded by ``connect_timeout``); close on the way out.

        A body that returns closes the connection cleanly (DISCONNECT, bounded by
        ``publish_timeout``); a body that raises drops it without waiting on the network
        (bounded by 1 s).

        Raises:
            ConnectTimeout: No CONNACK within ``connect_timeout`` (a ``TimeoutError``).
            MqttLinkError: The broker refused or could not be reached (an
                ``aiomqtt.MqttError`` too).
        """
        client = self.make_client(address)
        # Bounded by connect_timeout; a connect given up on (timed out, cancelled) that still
        # runs in its executor thread never sends its CONNECT (it would kick our next
        # connection off the broker with our client id).
        await client.__aenter__()
        self.connections += 1
        self.taken_over = False
        self.current_url = address.url
        self._connected_at = asyncio.get_running_loop().time()
        clean = False
        try:
            yield client
            clean = True
        finally:
            bound = self.settings.publish_timeout
            if not clean:
                bound = min(1.0, bound)
            with contextlib.suppress(Exception):
                async with asyncio.timeout(bound):
                    await client.__aexit__(None, None, None)

    async def run(
        self,
        serve: Serve,
        *,
        stop: asyncio.Event,
        on_error: Callable[[BrokerAddress, Exception], bool] | None = None,
        penalty: Callable[[], int] | None = None,
    ) -> None:
        """Serve connection after connection until ``stop`` is set (see the module notes).

        Args:
            serve: Runs while connected.
            stop: Ends the loop (and the back-off wait).
            on_error: Logs a failed connect or a lost link; returns whether it counts as a
                connection that was up (start over from the first URL). By default: logged
                as a warning, counts only if the connection was up.
            penalty: The least number of failures to back off for (read at each back-off).
        """
        state = _RunState(report=on_error if on_error is not None else self._warn)
        try:
            while not stop.is_set():
                was_up = False
                for address in self.settings.addresses:
                    if stop.is_set():
                        return
                    outcome = await self._attempt(address, serve, state)
                    if outcome is None:
                        pause = self.settings.takeover_pause_seconds
                        if pause == 0:
                            return
                        state.quick_losses = 0
                        await self._wait(pause, stop)
                        was_up = True  # then start over from the first URL
                        break
                    if stop.is_set():
                        return
                    if outcome:
                        was_up = True
                        break
                state.failures = 1 if was_up else state.failures + 1
                delay = self.backoff(max(state.failures, penalty() if penalty is not None else 0))
                self._log_backoff(state.streak, delay)
                await self._wait(delay, stop)
        finally:
            self.current_url = None

    async def _attempt(self, address: BrokerAddress, serve: Serve, state: _RunState) -> bool | None:
        """One connection to ``address``, served until it ends.

        Returns:
            Whether to start over from the first URL (a connection was up, or the error
            handler says so); ``None`` when the session was taken over (stand down).
        """
        before = self.connections
        start_over = False
        current: Client | None = None
        try:
            async with self.connect(address) as client:
                current = client
                await serve(client, address)
        except Exception as exc:
            if current is not None and self._takeover(address, current, exc, state):
                return None
            if current is None:
                self.failed_connects += 1
                exc = _named(address, exc)
                state.streak.failed(exc)
            if current is not None or state.streak.attempts == 1:
                # Later failures of a streak are in its summary lines.
                start_over = state.report(address, exc)
        connected = self.connections != before
        if connected and state.streak.attempts:
            self.log.info(
                f"{self.name}: broker reachable again",
                url=address.url,
                failed_attempts=state.streak.attempts,
            )
            state.streak = _Streak()
        return connected or start_over

    def _takeover(
        self, address: BrokerAddress, client: Client, exc: Exception, state: _RunState
    ) -> bool:
        """Whether the lost link was a session takeover (then it is reported, once)."""
        state.quick_losses = self._quick_loss(exc, state.quick_losses)
        if session_taken_over(client, exc):
            self._taken_over(address, "reason code 0x8E")
            return True
        if state.quick_losses >= TAKEOVER_LOSSES:
            self._taken_over(
                address,
                f"the broker dropped {state.quick_losses} connections in a row "
                f"within {TAKEOVER_WINDOW:g} s of accepting them",
            )
            return True
        return False

    def _log_backoff(self, streak: _Streak, delay: float) -> None:
        """A streak of failed connects is summarised now and then; a reconnect is noted."""
        if streak.attempts and streak.due(asyncio.get_running_loop().time()):
            self.log.warning(
                f"{self.name}: broker still unreachable after {streak.attempts} "
                f"attempts, next in {delay:.1f} s",
                urls=[a.url for a in self.settings.addresses],
                last_error=streak.last,
            )
        elif not streak.attempts:
            self.log.info(
                "reconnecting after back-off", connection=self.name, seconds=round(delay, 3)
            )

    def _quick_loss(self, exc: Exception, losses: int) -> int:
        """The count of links dropped by the broker soon after their CONNACK, ``exc`` included."""
        import aiomqtt

        soon = asyncio.get_running_loop().time() - self._connected_at <= TAKEOVER_WINDOW
        return losses + 1 if soon and isinstance(exc, aiomqtt.MqttError) else 0

    def _taken_over(self, address: BrokerAddress, evidence: str) -> None:
        self.taken_over = True
        self.log.error(
            f"MQTT session taken over: another client connected as {self.client_id!r}; the "
            f"{self.name} connection stands down for {self.settings.takeover_pause_seconds:g} s "
            "(0: until restarted) instead of taking it back (a second controller for this "
            "table, or a credential using its client id: the pit boss must check)",
            url=address.url,
            client_id=self.client_id,
            user=self.settings.username,
            connection=self.name,
            evidence=evidence,
        )
        if self._on_takeover is not None:
            self._on_takeover(address)

    def _warn(self, address: BrokerAddress, exc: Exception) -> bool:
        self.log.warning(
            f"{self.name} link lost or refused",
            url=address.url,
            error=f"{type(exc).__name__}: {exc}",
        )
        return False

    async def _wait(self, delay: float, stop: asyncio.Event) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await stop.wait()


class _RunState:
    """What :meth:`Connector.run` carries from one connection attempt to the next."""

    def __init__(self, report: Callable[[BrokerAddress, Exception], bool]) -> None:
        self.report = report
        self.failures = 0
        self.quick_losses = 0
        self.streak = _Streak()


class _Streak:
    """Connect attempts that failed in a row (none: the broker answered last time)."""

    def __init__(self) -> None:
        self.attempts = 0
        self.last = ""
        self._reported = 0
        self._reported_at: float | None = None

    def failed(self, exc: Exception) -> None:
        self.attempts += 1
        self.last = f"{type(exc).__name__}: {exc}"

    def due(self, now: float) -> bool:
        """Whether to log a summary now: at 2, 4, 8... attempts, else every SUMMARY_EVERY s."""
        if self._reported_at is None:  # the first failure was reported on its own
            self._reported, self._reported_at = 1, now
            return False
        doubled = self.attempts >= 2 * self._reported
        if doubled or now - self._reported_at >= SUMMARY_EVERY:
            self._reported = self.attempts
            self._reported_at = now
            return True
        return False


def _named(address: BrokerAddress, exc: Exception) -> Exception:
    """``exc``, or an ``OSError`` naming the host when its name does not resolve."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, socket.gaierror):
            named = OSError(f"broker host {address.host!r} does not resolve (DNS: {error})")
            named.__cause__ = exc
            return named
        error = error.__cause__ or error.__context__
    return exc
