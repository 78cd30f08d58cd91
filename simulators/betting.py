"""A simulated betting system: a seeded decision policy and an MQTT client that applies it.

:class:`BettingPolicy` is pure: ``decide(step_info)`` looks at one ``decision_open`` event's
data (window, kind, seat, seconds, options, info) and returns the decision to send, or
``None`` to let the table's deadline default apply. Its randomness is seeded from the policy
seed, the round id and the window id, so the same window always gets the same answer,
whatever order windows arrive in.

:func:`run_simulated_betting` is the betting system's side of the wire: it subscribes to
``{prefix}/{table}/events``, answers each ``decision_open`` envelope after a random think time
on ``{prefix}/{table}/cmd/decision`` with ``{"command_id", "round", "window", "decision"}``,
reads the answers on ``{prefix}/{table}/reply/betting`` (the controller's
``command_answered`` envelopes; refusals are logged), and keeps its presence retained on
``betting/status`` (``{"state": "online"}``; ``offline`` on a clean stop and as its Last
Will), the topic the controller's ``StatusWatcher`` follows. A presence another client says
there while it is up (a forged offline) is answered with its online again, at most once a
second.

Every message it reads goes through the one hardened parse (:mod:`controller.inbound`): the
events and the answers as typed envelopes, the table's retained ``status`` to anchor a
:class:`~controller.inbound.SeqGuard` (a ``seq`` far ahead of what the table could have sent
is a rejection, so it cannot make the real events look like repeats). What is not taken is
logged once and counted (``RejectionLog``, reader ``betting-sim``); no payload stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import socket
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

import structlog

from controller.inbound import (
    Rejection,
    RejectionLog,
    SeqGuard,
    parse_envelope,
    parse_status,
    validate,
)
from controller.journal.entries import CommandAnsweredData, DecisionOpenData
from simulators.errors import SimulatorConfigError

log = structlog.get_logger(__name__)

DECISION_OPEN: Final = "decision_open"
"""The journal kind (and envelope kind on ``events``) of an opened decision window."""

Protocol = Literal["5", "3.1.1"]


# --------------------------------------------------------------------------------------------
# The policy (pure)

_ACTION_WEIGHTS: Final = {
    "fold": 0.14,
    "check": 0.34,
    "call": 0.30,
    "bet": 0.12,
    "raise": 0.07,
    "all_in": 0.03,
}
"""How often each Hold'em action is chosen when offered (renormalised over the options)."""


def _house_way_mulligans(info: Mapping[str, Any]) -> bool:
    """Whether the house way mulligans, as the decision window publishes it (``house_way``).

    The simulated betting system knows a game only by what its decision windows publish, as
    the real one does: it imports no game's rules. No ``house_way``: stay, the safe default.
    """
    return info.get("house_way") == "mulligan"


_JOURNAL_IN_ROUND_ID = re.compile(r"-[0-9a-f]{8}(-\d{6,})$")
"""The journal's short id in a round id (``tp-01-3f9a1c2e-000042``: ``-3f9a1c2e``)."""


@dataclass(frozen=True, slots=True)
class BettingPolicy:
    """A seeded crowd of online players, as the betting system reports them.

    Attributes:
        seed: Makes every decision reproducible.
        abstain: Chance of sending nothing (the table's default applies at the deadline).
        contrarian_mulligan: Chance that some player mulligans a hand the house way stays on.
        bank_decline: Chance that an offered banker declines.
    """

    seed: int = 0
    abstain: float = 0.08
    contrarian_mulligan: float = 0.3
    bank_decline: float = 0.25

    def _rng(self, step_info: Mapping[str, Any]) -> random.Random:
        # Seeded by the round as numbered, not by the journal's id in it (issue 22: random):
        # a seed repeats the same decisions whatever journal the table runs on.
        rounds = _JOURNAL_IN_ROUND_ID.sub(r"\1", str(step_info.get("round")))
        return random.Random(f"{self.seed}:{rounds}:{step_info.get('window')}")

    def think_time(self, most: float, step_info: Mapping[str, Any]) -> float:
        """How long a player thinks before answering: a quarter of ``most`` to ``most``.

        Random, seeded like the decision (the same window thinks as long in every run with the
        seed), so a crowd's answers do not come like a metronome.
        """
        rng = random.Random(f"think:{self._rng(step_info).random()}")
        return most * (0.25 + 0.75 * rng.random())

    def decide(self, step_info: Mapping[str, Any]) -> dict[str, Any] | None:
        """The decision for one open window, or ``None`` to let the deadline default apply.

        Args:
            step_info: A ``decision_open`` event's data (``window``, ``kind``, ``seat``,
                ``options``, ``info``...), optionally with the envelope's ``round``.
        """
        rng = self._rng(step_info)
        options = [str(option) for option in step_info.get("options", ())]
        info = step_info.get("info") or {}
        kind = step_info.get("kind")
        if not options or rng.random() < self.abstain:
            return None
        if kind == "mulligan":
            mulligan = _house_way_mulligans(info) or rng.random() < self.contrarian_mulligan
            choice = "mulligan" if mulligan and "mulligan" in options else "stay"
            return {"choice": choice} if choice in options else None
        if kind == "setting":
            return {"choice": "close"} if "close" in options else None
        if kind == "bank":
            decline = rng.random() < self.bank_decline and "decline" in options
            return {"choice": "decline" if decline else "accept"}
        if kind == "action":
            return self._action(rng, options, info)
        return None

    def _action(
        self, rng: random.Random, options: Sequence[str], info: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        weighted = [(name, _ACTION_WEIGHTS.get(name, 0.0)) for name in options]
        weighted = [(name, weight) for name, weight in weighted if weight > 0]
        if not weighted:
            return None
        names = [name for name, _ in weighted]
        action = rng.choices(names, weights=[weight for _, weight in weighted])[0]
        if action == "bet":
            shares = _members(info, "bets", "share") or [
                f"{s}%" for s in _items(info, "bet_shares")
            ]
            if not shares:
                return None
            return {"action": "bet", "share": rng.choice(shares)}
        if action == "raise":
            multiples = _members(info, "raises", "multiple") or _items(info, "raise_multiples")
            if not multiples:
                return None
            return {"action": "raise", "multiple": rng.choice(multiples)}
        return {"action": action}


def _items(info: Mapping[str, Any], key: str) -> list[Any]:
    """``info[key]`` when it is a list of plain values (what a window publishes), else ``[]``."""
    value = info.get(key)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str | int | float)]


def _members(info: Mapping[str, Any], key: str, member: str) -> list[Any]:
    """``item[member]`` of each object of the list ``info[key]`` that has it."""
    value = info.get(key)
    if not isinstance(value, list):
        return []
    return [item[member] for item in value if isinstance(item, dict) and member in item]


# --------------------------------------------------------------------------------------------
# The MQTT client


@dataclass
class BettingStats:
    """What a run did.

    Attributes:
        windows: ``decision_open`` windows seen (each once).
        sent: Commands published.
        abstained: Windows left to the deadline default.
        skipped: Windows already closed (or malformed) when seen.
        accepted: Answers that accepted a command.
        refused: Answers that refused one.
        refusals: ``(command_id, reason)`` of each refusal.
        commands: Every command sent, in order.
        rejected: Messages read that were not taken (the shared parse's rejections and seqs
            beyond what the table could have sent), by code.
        reasserted: Times its presence, overwritten by another client, was said again.
    """

    windows: int = 0
    sent: int = 0
    abstained: int = 0
    skipped: int = 0
    accepted: int = 0
    refused: int = 0
    refusals: list[tuple[str, str]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    rejected: Counter[str] = field(default_factory=Counter)
    reasserted: int = 0


def _status(state: str) -> bytes:
    return json.dumps({"state": state}, separators=(",", ":")).encode()


class _Session:
    """One run's state across connections."""

    def __init__(
        self,
        *,
        base: str,
        policy: BettingPolicy,
        think_seconds: float,
        timeout: float,
        protocol: Protocol,
        stop: asyncio.Event,
        stats: BettingStats,
        status_topic: str,
        table: str,
    ) -> None:
        self.table = table
        self.events = f"{base}/events"
        self.table_status = f"{base}/status"
        self.command = f"{base}/cmd/decision"
        self.reply = f"{base}/reply/betting"
        self.status = status_topic
        self.policy = policy
        self.think_seconds = think_seconds
        self.timeout = timeout
        self.protocol = protocol
        self.stop = stop
        self.stats = stats
        self.seen: set[tuple[str | None, str]] = set()
        self.last_seq = -1
        self.run_id = uuid.uuid4().hex[:12]
        self.counter = 0
        self.pending: set[asyncio.Task[None]] = set()
        self.guard = SeqGuard()
        self.rejections = RejectionLog(reader="betting-sim")
        self.reasserted_at = -1.0

    async def serve(self, client: Any) -> None:
        """Birth, subscriptions, then read until ``stop``; offline on the way out."""
        async with asyncio.timeout(self.timeout):
            # The table's retained status first: it anchors what seq the table could send.
            await client.subscribe(self.table_status, qos=1)
            await client.subscribe(self.events, qos=1)
            await client.subscribe(self.reply, qos=1)
            # Its own presence too: one overwritten by another client is said again.
            await client.subscribe(self.status, qos=1)
            # Online once subscribed: a window opened after this is never missed.
            await client.publish(self.status, _status("online"), qos=1, retain=True)
        log.info("simulated betting online", topic=self.events)
        async with asyncio.TaskGroup() as group:
            reader = group.create_task(self._read(client, group), name="betting-reader")
            await self.stop.wait()
            reader.cancel()
            for task in self.pending:
                task.cancel()
        async with asyncio.timeout(self.timeout):
            await client.publish(self.status, _status("offline"), qos=1, retain=True)

    async def _read(self, client: Any, group: asyncio.TaskGroup) -> None:
        async for message in client.messages:
            topic = str(message.topic)
            payload = message.payload if isinstance(message.payload, bytes) else b""
            if topic == self.events:
                self._on_event(client, group, payload)
            elif topic == self.reply:
                self._on_reply(payload)
            elif topic == self.table_status:
                self._on_status(payload)
            elif topic == self.status and payload != _status("online"):
                self._reassert(client, group)

    def _reassert(self, client: Any, group: asyncio.TaskGroup) -> None:
        """Say online again: another client said this system's presence while it is up.

        Retained, at most once a second: a flood of forged presences costs one publish a
        second, and its own online never loops.
        """
        now = time.monotonic()
        if now - self.reasserted_at < 1.0:
            return
        self.reasserted_at = now
        self.stats.reasserted += 1
        log.warning("betting presence overwritten by another client: online again")
        group.create_task(self._publish_online(client), name="betting-presence-reasserted")

    async def _publish_online(self, client: Any) -> None:
        with contextlib.suppress(Exception):  # the link's loss is the reader's to report
            async with asyncio.timeout(self.timeout):
                await client.publish(self.status, _status("online"), qos=1, retain=True)

    def _reject(self, rejection: Rejection, topic: str) -> None:
        self.stats.rejected[rejection.code] += 1
        self.rejections.record(rejection.at(topic, self.table))

    def _on_status(self, payload: bytes) -> None:
        status = parse_status(payload, table=self.table)
        if isinstance(status, Rejection):
            self._reject(status, self.table_status)
            return
        refused = self.guard.on_status(status, time.time())
        if refused is not None:
            self._reject(refused, self.table_status)

    def _on_event(self, client: Any, group: asyncio.TaskGroup, payload: bytes) -> None:
        envelope = parse_envelope(payload, table=self.table)
        if isinstance(envelope, Rejection):
            self._reject(envelope, self.events)
            return
        ahead = self.guard.admit(self.table, envelope.seq, time.time())
        if ahead is not None:
            self._reject(ahead, self.events)
            return
        if envelope.seq <= self.last_seq:
            return  # a duplicate (delivery is at least once)
        self.last_seq = envelope.seq
        if envelope.kind != DECISION_OPEN:
            return
        opened = validate(DecisionOpenData, envelope.data, "decision_open data")
        if isinstance(opened, Rejection):  # parse_envelope checked it: kept for the types
            self._reject(opened, self.events)
            return
        data = envelope.data
        window = opened.window
        key = (envelope.round, window)
        if key in self.seen:
            return
        self.seen.add(key)
        self.stats.windows += 1
        bound = log.bind(round=envelope.round, window=window, table=envelope.table)
        remaining = _seconds_left(opened.closes_at, opened.seconds)
        if remaining is not None and remaining <= 0:
            self.stats.skipped += 1
            bound.info("window already closed", delayed=envelope.delayed)
            return
        decision = self.policy.decide({**data, "round": envelope.round})
        if decision is None:
            self.stats.abstained += 1
            bound.debug("leaving the window to its default")
            return
        delay = self.policy.think_time(self.think_seconds, {**data, "round": envelope.round})
        if remaining is not None:
            delay = min(delay, remaining / 2)
        self.counter += 1
        command = {
            "command_id": f"betting-{self.run_id}-{self.counter}",
            "round": envelope.round,
            "window": window,
            "decision": decision,
        }
        task = group.create_task(
            self._send(client, command, delay), name=f"betting-decide-{self.counter}"
        )
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _send(self, client: Any, command: dict[str, Any], delay: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self.stop.wait()
                return
        properties = None
        if self.protocol == "5":
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            properties.ResponseTopic = self.reply
            properties.CorrelationData = str(command["command_id"]).encode()
        payload = json.dumps(command, separators=(",", ":")).encode()
        async with asyncio.timeout(self.timeout):
            await client.publish(self.command, payload, qos=1, properties=properties)
        self.stats.sent += 1
        self.stats.commands.append(command)
        log.info(
            "decision sent",
            round=command["round"],
            window=command["window"],
            decision=command["decision"],
        )

    def _on_reply(self, payload: bytes) -> None:
        """One message on ``reply/betting``: the controller's ``command_answered`` envelope."""
        envelope = parse_envelope(payload, table=self.table, secure=True)
        if isinstance(envelope, Rejection):
            self._reject(envelope, self.reply)
            return
        if envelope.kind != "command_answered":
            wrong = f"kind {envelope.kind[:40]!r} on the reply topic (expected command_answered)"
            self._reject(Rejection("invalid", wrong, seq=envelope.seq), self.reply)
            return
        answer = validate(CommandAnsweredData, envelope.data, "command_answered data")
        if isinstance(answer, Rejection):  # parse_envelope checked it: kept for the types
            self._reject(answer, self.reply)
            return
        command_id = answer.command_id
        if not command_id.startswith(f"betting-{self.run_id}-"):
            return
        if answer.accepted:
            self.stats.accepted += 1
            return
        reason = answer.reason or "no reason given"
        self.stats.refused += 1
        self.stats.refusals.append((command_id, reason))
        log.warning("decision refused", command_id=command_id, reason=reason)


def _seconds_left(closes_at: str, seconds: float) -> float | None:
    """Seconds until ``closes_at`` (UTC when it names no zone), else ``seconds`` (or ``None``)."""
    try:
        moment = datetime.fromisoformat(closes_at.replace("Z", "+00:00"))
    except ValueError:
        return seconds or None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return (moment - datetime.now(UTC)).total_seconds()
    except OverflowError:  # a time at the calendar's edge: its window is long closed or far off
        return seconds or None


def _client(
    url: str,
    session: _Session,
    *,
    client_id: str,
    username: str | None,
    password: str | None,
) -> Any:
    import aiomqtt

    from controller.broker import parse_broker_url

    address = parse_broker_url(url)
    version = (
        aiomqtt.ProtocolVersion.V5 if session.protocol == "5" else aiomqtt.ProtocolVersion.V311
    )
    return aiomqtt.Client(
        address.host,
        address.port,
        identifier=client_id,
        username=username,
        password=password,
        protocol=version,
        will=aiomqtt.Will(session.status, _status("offline"), qos=1, retain=True),
        timeout=session.timeout,
        keepalive=max(5, int(session.timeout * 3)),
        socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
    )


def _check_run_arguments(
    urls: Sequence[str],
    think_seconds: float,
    network_timeout: float,
    retry_seconds: float,
    status_topic: str,
) -> None:
    """Refuse what :func:`run_simulated_betting` cannot run with."""
    if not urls:
        raise SimulatorConfigError("the simulated betting system needs a broker URL", urls=[])
    if think_seconds < 0 or network_timeout <= 0 or retry_seconds <= 0:
        raise SimulatorConfigError(
            "think_seconds must be >= 0, network_timeout and retry_seconds > 0",
            think_seconds=think_seconds,
            network_timeout=network_timeout,
            retry_seconds=retry_seconds,
        )
    if not status_topic or any(ch in status_topic for ch in "+#\0"):
        raise SimulatorConfigError(
            "status_topic must be a topic without wildcards", status_topic=status_topic
        )


async def _serve_url(
    url: str,
    session: _Session,
    *,
    client_id: str,
    username: str | None,
    password: str | None,
) -> Exception | None:
    """Connect to one broker and play until the link drops or the run stops.

    Returns:
        Why the broker could not be reached, or ``None`` once it was (and the link is over).
    """
    import aiomqtt

    from controller.errors import ConfigError

    network_timeout = session.timeout
    try:
        client = _client(url, session, client_id=client_id, username=username, password=password)
    except ConfigError as exc:
        raise SimulatorConfigError(exc.message, url=url) from exc
    try:
        async with asyncio.timeout(network_timeout):
            await client.__aenter__()
    except (aiomqtt.MqttError, OSError, TimeoutError) as exc:
        return exc
    try:
        await session.serve(client)
    except* (aiomqtt.MqttError, OSError, TimeoutError) as group:
        log.warning("connection lost", url=url, error=str(group.exceptions[0]))
    finally:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(network_timeout):
                await client.__aexit__(None, None, None)
    return None


async def run_simulated_betting(
    urls: Sequence[str],
    table_id: str,
    *,
    protocol: Protocol = "5",
    prefix: str = "tables",
    seed: int = 0,
    stop: asyncio.Event,
    think_seconds: float = 0.5,
    network_timeout: float = 5.0,
    retry_seconds: float = 1.0,
    username: str | None = None,
    password: str | None = None,
    client_id: str | None = None,
    policy: BettingPolicy | None = None,
    stats: BettingStats | None = None,
    status_topic: str = "betting/status",
) -> BettingStats:
    """Play the betting system for one table until ``stop`` is set.

    Connects to the first broker of ``urls`` that answers (trying them in order again after
    ``retry_seconds`` when none does, or when the link drops), and answers every decision
    window the table opens with :class:`BettingPolicy`'s choice.

    Args:
        urls: Broker URLs (``mqtt://host:port``), tried in order.
        table_id: The table.
        protocol: ``"5"`` (commands carry a response topic and correlation data) or
            ``"3.1.1"``.
        prefix: The tables' topic prefix.
        seed: The policy's seed (when ``policy`` is not given).
        stop: Set it to end the run (the offline status is published first).
        think_seconds: The longest a "player" thinks before the decision is sent (each
            thinks a random, seeded quarter to whole of it: :meth:`BettingPolicy.think_time`;
            never more than half of what is left of the window).
        network_timeout: Bound of every network wait (connect, subscribe, publish).
        retry_seconds: Pause between rounds of connection attempts.
        username: Broker user name (the betting system's credentials), if any.
        password: Its password.
        client_id: MQTT client id (default ``betting-sim-{table}``).
        policy: The policy (default ``BettingPolicy(seed)``).
        stats: Filled in as the run goes (to watch it live); a fresh one by default.
        status_topic: The retained presence topic (the controller's
            ``mqtt.betting_status_topic``, ``betting/status`` by default: not per table).

    Returns:
        What the run did (:class:`BettingStats`).

    Raises:
        SimulatorConfigError: No URL, or a bad timing argument.
    """
    from controller.messages import Topics

    _check_run_arguments(urls, think_seconds, network_timeout, retry_seconds, status_topic)
    try:
        base = Topics(prefix=prefix, table=table_id).base
    except Exception as exc:
        raise SimulatorConfigError(str(exc), table=table_id, prefix=prefix) from exc
    session = _Session(
        base=base,
        policy=policy or BettingPolicy(seed),
        think_seconds=think_seconds,
        timeout=network_timeout,
        protocol=protocol,
        stop=stop,
        stats=BettingStats() if stats is None else stats,
        status_topic=status_topic,
        table=table_id,
    )
    misses = 0  # failed connects in a row: the first and each doubling are logged
    while not stop.is_set():
        for url in urls:
            if stop.is_set():
                break
            error = await _serve_url(
                url,
                session,
                client_id=client_id or f"betting-sim-{table_id}",
                username=username,
                password=password,
            )
            if error is not None:
                misses += 1
                if misses & (misses - 1) == 0:
                    text = "broker unreachable" if misses == 1 else "broker still unreachable"
                    log.warning(
                        f"{text} after {misses} attempts, retrying every {retry_seconds:g} s",
                        url=url,
                        error=str(error),
                    )
                continue
            if misses:
                log.info("broker reachable again", url=url, failed_attempts=misses)
                misses = 0
            if stop.is_set():
                return session.stats
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(retry_seconds):
                await stop.wait()
    return session.stats


__all__ = [
    "DECISION_OPEN",
    "BettingPolicy",
    "BettingStats",
    "run_simulated_betting",
]
