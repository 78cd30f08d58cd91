"""Inbound commands over MQTT: the betting system's decisions and the pit boss's actions.

Wire format (``docs/mqtt.md``, "Commands"): a JSON object on ``{prefix}/{table}/cmd/...``:

===========================  =======  =========  ==============================================
topic                        role     name       body (besides ``command_id`` and ``round``)
===========================  =======  =========  ==============================================
``cmd/decision``             betting  decision   ``window`` (str), ``decision`` (object)
``cmd/replay``               betting  replay     ``from_seq`` (int >= 1), ``to_seq`` (int|null)
``cmd/pit/resume``           pit      resume     (nothing)
``cmd/pit/void``             pit      void       ``reason`` (str)
``cmd/pit/replay``           pit      replay     ``from_seq``, ``to_seq``
``cmd/pit/ack``              pit      ack        ``alert_seq`` (int >= 1)
``cmd/pit/enter-card``       pit      enter-card ``card``, ``reason``, ``operator`` (str),
                                                ``slot`` (str|null)
``cmd/pit/deck-check``       pit      deck-check a deck check's report (``controller.deckcheck``)
===========================  =======  =========  ==============================================

The role comes from the topic, which the broker's ACL ties to a credential (docs/security.md):
the payload cannot claim a role. :class:`CommandRouter` validates, journals
``command_received``, calls the controller's handler (bounded by a timeout), and journals
``command_answered``; the outbox publishes the answer on the command's v5 response topic
(with its correlation data) or on ``{prefix}/{table}/reply/{role}``. A repeated
``command_id`` (per role) is answered again with the first answer; the handler is not called
twice.

:class:`StatusWatcher` follows the betting system's retained presence topic.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.aio import first_completed
from controller.broker import BrokerAddress
from controller.errors import TablectlError
from controller.inbound import (
    BOUNDS,
    Rejection,
    RejectionLog,
    parse_betting_status,
    parse_object,
)
from controller.journal import (
    CommandAnsweredData,
    CommandReceivedData,
    Journal,
    JournalEntry,
    PitAlertData,
)
from controller.messages import Role, Topics
from controller.mqtt.connection import Connector
from controller.mqtt.receive import take_until_stopped
from controller.mqtt.settings import MqttSettings
from controller.settings import ReplayLimitSettings

if TYPE_CHECKING:
    from controller.mqtt.client import Client as MqttClient
    from controller.mqtt.client import Message as MqttMessage

_log = structlog.get_logger(__name__)

MAX_COMMAND_BYTES = 65536
"""Larger command payloads are refused unread."""

COMMAND_BOUNDS = dataclasses.replace(BOUNDS, max_bytes=MAX_COMMAND_BYTES)
"""The shared parse's bounds (:mod:`controller.inbound`), with a command's size limit."""


class CommandError(TablectlError):
    """A command that cannot be accepted as sent (wrong topic, malformed, wrong role)."""


# -- the bodies ------------------------------------------------------------------------------


class _CommandBody(BaseModel):
    """Fields every command carries. Unknown fields are refused (a typo must not pass)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command_id: str = Field(
        min_length=1, max_length=128, description="unique per sender; repeats are idempotent"
    )
    round: str | None = Field(default=None, description="the round it is meant for, if any")


class DecisionCommand(_CommandBody):
    """``cmd/decision``: a decision for an open decision window."""

    window: str = Field(min_length=1, description="the window id of decision_open")
    decision: dict[str, Any] = Field(description="game-specific (e.g. {'action': 'call'})")


OPERATOR_FIELD = Field(
    default=None,
    min_length=1,
    max_length=64,
    description="who asked, by name (the pit console's signed-in user); journalled with the "
    "command",
)
"""The optional ``operator`` of the commands a person sends (pit resume, void, replay)."""


class ReplayCommand(_CommandBody):
    """``cmd/replay``, ``cmd/pit/replay``: re-send results with ``from_seq <= seq <= to_seq``."""

    from_seq: int = Field(ge=1)
    to_seq: int | None = Field(default=None, ge=1, description="null: up to the last")
    operator: str | None = OPERATOR_FIELD


class ResumeCommand(_CommandBody):
    """``cmd/pit/resume``: continue a halted round."""

    operator: str | None = OPERATOR_FIELD


class VoidCommand(_CommandBody):
    """``cmd/pit/void``: void the round (refund every bet)."""

    reason: str = Field(min_length=1, max_length=500)
    operator: str | None = OPERATOR_FIELD


class AckCommand(_CommandBody):
    """``cmd/pit/ack``: the pit boss acknowledges an alert (journalled; changes nothing else)."""

    alert_seq: int = Field(ge=1, description="the seq of the alert's entry (pit_alert, ...)")
    operator: str | None = OPERATOR_FIELD


class EnterCardCommand(_CommandBody):
    """``cmd/pit/enter-card``: the pit boss enters the card of the slot the round waits for.

    For a reader that is dead (or keeps misreading): the card is checked as a read card is
    (in the game's deck, not dealt yet) and journalled as ``card_dealt`` with ``source:
    manual``, the operator and the reason.
    """

    card: str = Field(min_length=1, max_length=16, description="the card's notation, e.g. `Qh`")
    slot: str | None = Field(
        default=None,
        min_length=1,
        max_length=32,
        description="the slot the sender means (refused if the round waits for another)",
    )
    reason: str = Field(min_length=1, max_length=500, description="why the card is entered")
    operator: str = Field(
        min_length=1, max_length=64, description="who enters it (the pit boss's name)"
    )


class DeckCheckCommand(_CommandBody):
    """``cmd/pit/deck-check``: a deck check's report, journalled at the table it is for.

    ``tablectl deck-check`` (and the pit console) scan a deck before it goes into play and
    send the report here: the table journals it (``command_received``) and answers; nothing
    else changes.
    """

    deck: str = Field(min_length=1, max_length=64, description="the deck's kind")
    device: str = Field(min_length=1, max_length=500, description="the reader's URL")
    ok: bool = Field(description="every card once and nothing else")
    expected: int = Field(ge=0, le=10000)
    read: int = Field(ge=0, le=100000)
    missing: list[str] = Field(default_factory=list, max_length=1000)
    extra: list[str] = Field(default_factory=list, max_length=1000)
    duplicated: dict[str, int] = Field(default_factory=dict, description="card -> times read")
    unknown: list[str] = Field(default_factory=list, max_length=1000)
    misreads: int = Field(default=0, ge=0)
    operator: str = Field(min_length=1, max_length=64, description="who ran the check")


class BettingStatusMessage(BaseModel):
    """The betting system's retained presence (``MqttSettings.betting_status_topic``)."""

    model_config = ConfigDict(extra="allow")

    state: Literal["online", "offline"]


class AnswerBody(BaseModel):
    """What the handler's :class:`Answer` becomes (``data`` of ``command_answered``)."""

    model_config = ConfigDict(extra="forbid")

    accepted: bool
    reason: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    """What a command topic means.

    Attributes:
        role: Who may publish there (tied to a credential by the ACL).
        name: The command.
        model: Its body model.
    """

    role: Role
    name: str
    model: type[_CommandBody]


ROUTES: dict[str, Route] = {
    "decision": Route("betting", "decision", DecisionCommand),
    "replay": Route("betting", "replay", ReplayCommand),
    "pit/resume": Route("pit", "resume", ResumeCommand),
    "pit/void": Route("pit", "void", VoidCommand),
    "pit/replay": Route("pit", "replay", ReplayCommand),
    "pit/ack": Route("pit", "ack", AckCommand),
    "pit/enter-card": Route("pit", "enter-card", EnterCardCommand),
    "pit/deck-check": Route("pit", "deck-check", DeckCheckCommand),
}
"""Topic (below ``{base}/cmd/``) -> route. Nothing else is accepted."""

_ROLE_NAMES = {"betting": "a betting-system", "pit": "a pit-boss"}
_WHAT = {
    "void": "void a round",
    "resume": "resume a round",
    "decision": "send decisions",
    "replay": "ask for a replay there",
    "ack": "acknowledge alerts",
    "enter-card": "enter cards",
    "deck-check": "report deck checks",
}


@dataclass(frozen=True)
class Command:
    """A validated command.

    Attributes:
        command_id: The sender's id for it.
        role: ``betting`` or ``pit`` (from the topic).
        name: ``decision``, ``replay``, ``resume`` or ``void``.
        round_id: The round it is meant for, or ``None``.
        data: The body without ``command_id`` and ``round``.
        response_topic: The MQTT v5 response topic, if the sender gave one.
        correlation_data: The MQTT v5 correlation data, if given.
    """

    command_id: str
    role: Role
    name: str
    round_id: str | None
    data: dict[str, Any]
    response_topic: str | None = None
    correlation_data: bytes | None = None


@dataclass(frozen=True)
class Answer:
    """The controller's verdict on a command.

    Attributes:
        accepted: Whether it was applied (or will be).
        reason: Why not (or a note); shown to the sender.
        data: Anything to report (e.g. ``{"messages": 3}`` for a replay).
    """

    accepted: bool
    reason: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Refusal:
    """Why an inbound message is not a command we run, and where to answer.

    Attributes:
        role: Whose reply topic gets the refusal.
        name: The command name as far as it could be read.
        command_id: The id, if it could be read.
        reason: What was wrong and where.
        rejection: The same as the shared parse's rejection (code and reason), which the
            router logs and counts (:class:`~controller.inbound.RejectionLog`).
    """

    role: Role
    name: str
    command_id: str | None
    reason: str
    rejection: Rejection | None = None


def _describe_validation(error: ValidationError, topic: str) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(body)"
        parts.append(f"field {where!r}: {item['msg']}")
    return f"invalid command on {topic}: " + "; ".join(parts)


def parse_command(
    topics: Topics,
    topic: str,
    payload: bytes,
    *,
    response_topic: str | None = None,
    correlation_data: bytes | None = None,
) -> Command | Refusal:
    """Read one inbound message (pure).

    Args:
        topics: The table's topics.
        topic: Where it arrived.
        payload: Its body.
        response_topic: The v5 response topic, if any.
        correlation_data: The v5 correlation data, if any.

    Returns:
        The command, or a :class:`Refusal` naming what was wrong (and the field).
    """
    root = topics.cmd_root + "/"
    suffix = topic[len(root) :] if topic.startswith(root) else topic
    route = ROUTES.get(suffix)
    role: Role = "pit" if suffix.startswith("pit/") or suffix == "pit" else "betting"
    name = suffix.rsplit("/", 1)[-1] or suffix
    body = parse_object(payload, bounds=COMMAND_BOUNDS)  # bounded first: never raises
    command_id = _peek_id(body)
    if route is None:
        other = next((r for r in ROUTES.values() if r.name == name), None)
        if other is not None:
            reason = f"{_ROLE_NAMES[role]} credential cannot {_WHAT[name]} (topic {topic})"
        else:
            known = ", ".join(f"cmd/{key}" for key in ROUTES)
            reason = f"unknown command topic {topic} (known: {known})"
        return _invalid(role, name, command_id, reason)
    role, name = route.role, route.name
    if response_topic is not None and not topics.response_topic_allowed(response_topic, role):
        return _invalid(
            role,
            name,
            command_id,
            f"response topic {response_topic!r} is not under {topics.reply(role)}/ "
            "(the controller answers only inside its own table's reply tree)",
        )
    if isinstance(body, Rejection):
        return Refusal(role, name, command_id, _describe_rejection(body, topic), body)
    try:
        parsed = route.model.model_validate(body)
    except ValidationError as exc:
        return _invalid(role, name, command_id, _describe_validation(exc, topic))
    if (
        isinstance(parsed, ReplayCommand)
        and parsed.to_seq is not None
        and parsed.to_seq < parsed.from_seq
    ):
        return _invalid(
            role,
            name,
            parsed.command_id,
            f"invalid command on {topic}: field 'to_seq' ({parsed.to_seq}) is below "
            f"'from_seq' ({parsed.from_seq})",
        )
    data = parsed.model_dump(exclude={"command_id", "round"})
    if data.get("operator", "") is None:
        del data["operator"]  # optional: a command without one journals as before
    return Command(
        command_id=parsed.command_id,
        role=role,
        name=name,
        round_id=parsed.round,
        data=data,
        response_topic=response_topic,
        correlation_data=correlation_data,
    )


def _peek_id(body: dict[str, Any] | Rejection) -> str | None:
    """The ``command_id`` of a parsed body, if it has a readable one."""
    if isinstance(body, dict):
        value = body.get("command_id")
        if isinstance(value, str) and 0 < len(value) <= 128:
            return value
    return None


def _invalid(role: Role, name: str, command_id: str | None, reason: str) -> Refusal:
    """A refusal of a message that parsed but is no command we run (code ``invalid``)."""
    return Refusal(role, name, command_id, reason, Rejection("invalid", reason))


def _describe_rejection(rejection: Rejection, topic: str) -> str:
    """What the bounded parse found wrong, said as the command refusals say it."""
    if rejection.code == "not_object":
        found = rejection.reason.removeprefix("payload is ").removesuffix(", not an object")
        return f"command on {topic} must be a JSON object, not {found}"
    if rejection.code == "not_json":
        return f"command on {topic} {rejection.reason.removeprefix('payload ')}"
    return f"command on {topic} refused unread: {rejection.reason}"


# -- replay limits ---------------------------------------------------------------------------

REPLAY_WINDOW = 60.0
"""Seconds over which :class:`ReplayLimiter` counts a role's replays."""


class ReplayLimiter:
    """Replays per role over the last :data:`REPLAY_WINDOW` seconds (pure: the clock is given).

    A replay is admitted while the role has had fewer than ``commands_per_minute`` replays
    admitted and fewer than ``messages_per_minute`` messages re-sent in the window; the
    admission counts at once (so a burst arriving together is counted as it arrives), the
    messages when the replay has run (:meth:`charge`).

    Args:
        limits: The limits (``[replay]`` of the table's settings).
    """

    def __init__(self, limits: ReplayLimitSettings) -> None:
        self.limits = limits
        self._admitted: dict[str, deque[float]] = {}
        self._sent: dict[str, deque[tuple[float, int]]] = {}

    def _expire(self, role: str, now: float) -> tuple[deque[float], deque[tuple[float, int]]]:
        admitted = self._admitted.setdefault(role, deque())
        sent = self._sent.setdefault(role, deque())
        while admitted and admitted[0] <= now - REPLAY_WINDOW:
            admitted.popleft()
        while sent and sent[0][0] <= now - REPLAY_WINDOW:
            sent.popleft()
        return admitted, sent

    def admit(self, role: str, now: float) -> tuple[float, str] | None:
        """Admit one replay for ``role`` at ``now``, or say why not.

        Returns:
            ``None`` (admitted, counted), or the seconds until one may be asked again and
            which limit was reached.
        """
        admitted, sent = self._expire(role, now)
        if len(admitted) >= self.limits.commands_per_minute:
            return (
                admitted[0] + REPLAY_WINDOW - now,
                f"{len(admitted)} replays in the last {REPLAY_WINDOW:g} s "
                f"(replay.commands_per_minute = {self.limits.commands_per_minute})",
            )
        used = sum(count for _, count in sent)
        if used >= self.limits.messages_per_minute:
            # Until enough of the oldest charges leave the window to go below the limit.
            left = used
            for at, count in sent:
                left -= count
                if left < self.limits.messages_per_minute:
                    return (
                        at + REPLAY_WINDOW - now,
                        f"{used} messages re-sent in the last {REPLAY_WINDOW:g} s "
                        f"(replay.messages_per_minute = {self.limits.messages_per_minute})",
                    )
        admitted.append(now)
        return None

    def charge(self, role: str, now: float, messages: int) -> None:
        """Count ``messages`` re-sent to ``role`` by a replay that ended at ``now``."""
        if messages > 0:
            self._expire(role, now)[1].append((now, messages))


def _requester(command: Command) -> str:
    """Who asked, as far as the command says (unauthenticated: for logs and answers only)."""
    operator = command.data.get("operator")
    if isinstance(operator, str) and operator:
        return f"operator {operator!r}"
    if command.response_topic:
        return f"response topic {command.response_topic!r}"
    return "no name given"


# -- the router ------------------------------------------------------------------------------

Handler = Callable[[Command], Awaitable[Answer]]


class CommandRouter:
    """Receives commands, journals them and their answers, and calls the handler.

    Run :meth:`run` as a long-lived task in the controller's task group; end it with
    :meth:`stop` (or cancel it).

    A session takeover of the router's connection (another client connected with its client
    id) is journalled at once as a ``pit_alert`` (:func:`takeover_alert`): while it stands
    down (``mqtt.takeover_pause_seconds``) no command reaches the table.

    Args:
        settings: Broker settings (the router connects as ``<client_id>-cmd``, with
            ``mqtt.command_username`` if set, :meth:`MqttSettings.for_connection`).
        table_id: The table.
        journal: The table's journal (answers go out through its outbox).
        handler: The controller's decision on a command; must return an :class:`Answer`.
        handler_timeout: Seconds the handler may take; after that the command is refused.
        status: A :class:`StatusWatcher` fed from this router's connection (one connection
            less than running it on its own), if given.
        replay_limits: How many replays each role may ask for (``[replay]``; defaults if
            not given); a replay beyond them is refused, saying when to ask again.

    Attributes:
        subscribed: Set while connected and subscribed.
        connections: How many times it connected.
        rejections: Every message on ``cmd/#`` that was no command we run, logged once and
            counted by code (each is still answered and journalled).
    """

    def __init__(
        self,
        settings: MqttSettings,
        table_id: str,
        journal: Journal,
        handler: Handler,
        *,
        handler_timeout: float,
        status: StatusWatcher | None = None,
        replay_limits: ReplayLimitSettings | None = None,
    ) -> None:
        self.settings = settings
        self.table_id = table_id
        self.journal = journal
        self.handler = handler
        self.handler_timeout = handler_timeout
        self.status = status
        self.topics = Topics(prefix=settings.topic_prefix, table=table_id)
        self.client_id = f"{settings.client_id or f'tablectl-{table_id}'}-cmd"
        self.subscribed = asyncio.Event()
        self.log = _log.bind(table=table_id)
        self.rejections = RejectionLog(reader="commands")
        self._answers: dict[tuple[str, str], dict[str, Any]] = {}
        self.replays = ReplayLimiter(
            replay_limits if replay_limits is not None else ReplayLimitSettings()
        )
        self._inflight: dict[tuple[str, str], asyncio.Future[dict[str, Any]]] = {}
        self._stop = asyncio.Event()
        # Commands sent while the controller is away are stale: no persistent session.
        self._connector = Connector(
            settings.for_connection("command"),
            client_id=self.client_id,
            name="command",
            logger="tablectl.commands.paho",
            log=self.log,
            on_takeover=lambda address: takeover_alert(journal, "command", address, settings),
        )
        self._loaded = False

    @property
    def connections(self) -> int:
        """How many times it connected."""
        return self._connector.connections

    # -- idempotence -------------------------------------------------------------------------

    def _load_answers(self) -> None:
        """Index the journal's earlier answers by (role, command_id).

        Reads the journal's command entries once at start (through the kind index: a
        100,000-round journal is not decoded entry by entry before the table publishes).
        """
        if self._loaded:
            return
        received: set[tuple[str, str]] = set()
        for entry in self.journal.entries_of_kinds(("command_received", "command_answered")):
            key = (str(entry.body.get("role")), str(entry.body.get("command_id")))
            if entry.kind == "command_received":
                received.add(key)
            elif entry.kind == "command_answered" and key in received:
                # (Answers without a command_received were messages that were no valid
                # command: not remembered, so a corrected one may reuse the id.)
                self._remember(entry.body)
        self._loaded = True

    def _remember(self, body: Mapping[str, Any]) -> None:
        if body.get("duplicate"):
            return
        key = (str(body.get("role")), str(body.get("command_id")))
        self._answers.setdefault(key, dict(body))

    # -- handling (no network: tests call it directly) ---------------------------------------

    async def handle(
        self,
        topic: str,
        payload: bytes,
        *,
        response_topic: str | None = None,
        correlation_data: bytes | None = None,
    ) -> JournalEntry:
        """Process one inbound message to its journalled answer.

        Returns:
            The ``command_answered`` entry (the outbox publishes it).
        """
        self._load_answers()
        parsed = parse_command(
            self.topics,
            topic,
            payload,
            response_topic=response_topic,
            correlation_data=correlation_data,
        )
        if isinstance(parsed, Refusal):
            code = parsed.rejection.code if parsed.rejection is not None else "invalid"
            self.rejections.record(Rejection(code, parsed.reason, topic, self.table_id))
            return self._answer(
                role=parsed.role,
                name=parsed.name,
                command_id=parsed.command_id or "",
                answer=AnswerBody(accepted=False, reason=parsed.reason),
                # Published there only if it is inside the role's reply tree (else reply/role).
                response_topic=response_topic,
                correlation_data=correlation_data,
                remember=False,
            )
        command = parsed
        key = (command.role, command.command_id)
        clog = self.log.bind(
            command=command.name,
            command_id=command.command_id,
            role=command.role,
            round=command.round_id,
        )
        first = self._answers.get(key)
        if first is None and key in self._inflight:
            first = await asyncio.shield(self._inflight[key])
        if first is not None:
            clog.info("repeated command answered again with the first answer")
            return self._answer(
                role=command.role,
                name=command.name,
                command_id=command.command_id,
                answer=AnswerBody(
                    accepted=bool(first.get("accepted")),
                    reason=str(first.get("reason", "")),
                    data=dict(first.get("data") or {}),
                ),
                response_topic=command.response_topic,
                correlation_data=command.correlation_data,
                duplicate=True,
            )
        if command.name == "replay":
            limited = self._limit_replay(command, clog)
            if limited is not None:
                return limited
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            self.journal.record(
                CommandReceivedData.model_construct(
                    command_id=command.command_id,
                    role=command.role,
                    name=command.name,
                    round=command.round_id,
                    data=command.data,
                )
            )
            answer = await self._call_handler(command, clog)
            if command.name == "replay":
                resent = answer.data.get("resent")
                if isinstance(resent, int):
                    self.replays.charge(command.role, time.monotonic(), resent)
            entry = self._answer(
                role=command.role,
                name=command.name,
                command_id=command.command_id,
                answer=answer,
                response_topic=command.response_topic,
                correlation_data=command.correlation_data,
            )
            future.set_result(entry.body)
            return entry
        finally:
            if not future.done():
                future.cancel()
            self._inflight.pop(key, None)

    def _limit_replay(self, command: Command, clog: Any) -> JournalEntry | None:
        """Refuse a replay beyond the role's limits (journalled like a malformed command).

        The refusal is not remembered (no ``command_received``): the same command id may be
        asked again once the time given has passed.
        """
        refused = self.replays.admit(command.role, time.monotonic())
        if refused is None:
            return None
        wait, why = refused
        seconds = max(1, int(wait + 0.999))
        again = (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%H:%M:%SZ")
        reason = (
            f"too many replays for the {command.role} role: {why}; ask again in {seconds} s "
            f"(after {again})"
        )
        clog.warning("replay refused: limit", reason=reason, requester=_requester(command))
        return self._answer(
            role=command.role,
            name=command.name,
            command_id=command.command_id,
            answer=AnswerBody(accepted=False, reason=reason, data={"retry_after": seconds}),
            response_topic=command.response_topic,
            correlation_data=command.correlation_data,
            remember=False,
        )

    async def _call_handler(self, command: Command, clog: Any) -> AnswerBody:
        try:
            async with asyncio.timeout(self.handler_timeout):
                answer = await self.handler(command)
        except TimeoutError:
            clog.error("command handler timed out", seconds=self.handler_timeout)
            return AnswerBody(
                accepted=False,
                reason=f"the controller did not decide within {self.handler_timeout} s",
            )
        except TablectlError as exc:
            clog.warning("command handler refused", error=str(exc))
            return AnswerBody(accepted=False, reason=exc.message)
        except Exception as exc:
            clog.exception("command handler failed")
            return AnswerBody(accepted=False, reason=f"internal error: {type(exc).__name__}")
        if not isinstance(answer, Answer):
            clog.error("command handler returned no Answer", got=type(answer).__name__)
            return AnswerBody(accepted=False, reason="internal error: no answer")
        try:
            body = AnswerBody(accepted=answer.accepted, reason=answer.reason, data=answer.data)
            json.dumps(body.data)
        except (ValidationError, TypeError, ValueError) as exc:
            clog.error("command handler answer is not JSON-able", error=str(exc))
            return AnswerBody(accepted=False, reason="internal error: answer not JSON-able")
        clog.info("command answered", accepted=body.accepted, reason=body.reason)
        return body

    def _answer(
        self,
        *,
        role: Role,
        name: str,
        command_id: str,
        answer: AnswerBody,
        response_topic: str | None,
        correlation_data: bytes | None,
        duplicate: bool = False,
        remember: bool = True,
    ) -> JournalEntry:
        body: dict[str, Any] = {
            "command_id": command_id,
            "role": role,
            "name": name,
            "accepted": answer.accepted,
            "reason": answer.reason,
            "data": answer.data,
            "response_topic": response_topic,
            "correlation_data": (
                base64.b64encode(correlation_data).decode("ascii")
                if correlation_data is not None
                else None
            ),
        }
        if duplicate:
            body["duplicate"] = True
        entry = self.journal.record(CommandAnsweredData.model_construct(**body))
        if command_id and remember and not duplicate:
            # A message that was not a valid command is not remembered: the sender may fix
            # it and send it again under the same id.
            self._remember(body)
        return entry

    # -- the connection ----------------------------------------------------------------------

    async def stop(self) -> None:
        """End :meth:`run` (commands being handled are finished first, bounded)."""
        self._stop.set()

    async def run(self) -> None:
        """Connect, subscribe to ``{base}/cmd/#``, handle commands; reconnect until stopped.

        The connection, failover and back-off are :class:`~controller.mqtt.connection.
        Connector`'s.
        """
        self._load_answers()
        if not self.settings.addresses:
            raise CommandError("no broker URL for the command router", table=self.table_id)
        await self._connector.run(self._serve, stop=self._stop)

    async def _serve(self, client: MqttClient, address: BrokerAddress) -> None:
        """One connection: subscribe, read commands until stopped (returns) or lost (raises)."""
        try:
            await client.subscribe(f"{self.topics.cmd_root}/#", qos=1)
            if self.status is not None:
                await client.subscribe(self.status.topic, qos=1)
            self.subscribed.set()
            self.log.info("command router subscribed", url=address.url, client_id=self.client_id)
            error: BaseException | None = None
            # Commands being handled when the link drops are finished (bounded by the handler
            # timeout): their answers are journalled and go out with the outbox.
            async with asyncio.TaskGroup() as handlers:
                reader = asyncio.ensure_future(self._read(client, handlers))
                done = await first_completed(reader, self._stop.wait())
                if reader in done and not reader.cancelled():
                    error = reader.exception()
            if error is not None:
                raise error
        finally:
            self.subscribed.clear()

    async def _read(self, client: MqttClient, group: asyncio.TaskGroup) -> None:
        async for message in client.messages:
            topic = str(message.topic)
            payload = message.payload if isinstance(message.payload, bytes) else b""
            if self.status is not None and topic == self.status.topic:
                self.status.feed(payload)
                continue
            properties = message.properties
            response = getattr(properties, "ResponseTopic", None) if properties else None
            correlation = getattr(properties, "CorrelationData", None) if properties else None
            group.create_task(
                self._handle_logged(topic, payload, response, correlation),
                name=f"command-{uuid.uuid4().hex[:8]}",
            )

    async def _handle_logged(
        self, topic: str, payload: bytes, response: str | None, correlation: bytes | None
    ) -> None:
        try:
            await self.handle(topic, payload, response_topic=response, correlation_data=correlation)
        except Exception:
            self.log.exception("command could not be handled", topic=topic)


# -- a connection taken over -----------------------------------------------------------------

_WHAT_STOPS = {
    "command": "no command reaches the table (decisions default, pit resume/void/replay get "
    "no answer)",
    "status": "the table does not hear the betting system's presence (new rounds wait while "
    "it is unknown or offline)",
}


def takeover_alert(
    journal: Journal,
    connection: Literal["command", "status"],
    address: BrokerAddress,
    settings: MqttSettings,
) -> None:
    """Journal a ``pit_alert``: another client took one of the table's sessions over.

    The outbox publishes it on ``events`` (the pit console lists it) as soon as the
    publisher's own connection is up, which a takeover of the command or status connection
    does not touch.

    Args:
        journal: The table's journal.
        connection: Which connection was taken (``command`` or ``status``).
        address: The broker where it happened.
        settings: The table's broker settings (for the pause). The alert goes out on the
            public ``events`` topic: it names no user.
    """
    journal.record(
        PitAlertData.model_construct(
            slot=None,
            reason=(
                f"MQTT session taken over at {address.url}: another client connected with this "
                f"table's {connection} client id (a second controller, or a credential not "
                f"bound to its client id); {_WHAT_STOPS[connection]} for "
                f"{settings.takeover_pause_seconds:g} s (mqtt.takeover_pause_seconds), then it "
                "tries again"
            ),
        )
    )


# -- the betting system's presence -----------------------------------------------------------


class StatusWatcher:
    """Follows the betting system's retained presence topic.

    The betting system publishes ``{"state": "online"}`` retained when it connects and
    registers ``{"state": "offline"}`` as its Last Will (and publishes it when it stops).
    Until a valid message arrives the state is ``unknown`` (``online`` not set). While this
    watcher's own link to the broker is down the last known state is kept (the retained
    message is received again at the reconnect).

    Either run :meth:`run` as a task (its own connection, client id ``<client_id>-status``,
    user ``mqtt.status_username`` if set),
    or give the watcher to a :class:`CommandRouter` (``status=``), which feeds it from the
    command connection.

    Args:
        settings: Broker settings (``betting_status_topic`` names the topic).
        table_id: The table (for the client id and logs).
        topic: Overrides ``settings.betting_status_topic``.
        journal: Where a session takeover of :meth:`run`'s own connection is journalled as a
            ``pit_alert`` (:func:`takeover_alert`); not journalled if ``None``.

    Attributes:
        topic: The presence topic.
        online: Set while the betting system is online.
        state: ``online``, ``offline`` or ``unknown``.
        since: When the state last changed (UTC), ``None`` before any message.
        changed: Set at every change (clear it to wait for the next one).
        rejections: Messages on the topic that were no presence (logged once, counted).

    Raises:
        CommandError: No topic (``betting_status_topic`` is ``None`` and none given).
    """

    def __init__(
        self,
        settings: MqttSettings,
        table_id: str,
        *,
        topic: str | None = None,
        journal: Journal | None = None,
    ) -> None:
        chosen = topic if topic is not None else settings.betting_status_topic
        if not chosen:
            raise CommandError(
                "no betting status topic (mqtt.betting_status_topic is not set)", table=table_id
            )
        self.settings = settings
        self.table_id = table_id
        self.topic = chosen
        self.client_id = f"{settings.client_id or f'tablectl-{table_id}'}-status"
        self.online = asyncio.Event()
        self.changed = asyncio.Event()
        self.state: Literal["online", "offline", "unknown"] = "unknown"
        self.since: datetime | None = None
        self.log = _log.bind(table=table_id, topic=chosen)
        self.rejections = RejectionLog(reader="betting-status")
        self._journal = journal
        self._stop = asyncio.Event()

    def feed(self, payload: bytes) -> None:
        """Apply one message of the presence topic; never raises on any bytes.

        The payload is read through the shared bounded parse
        (:func:`controller.inbound.parse_betting_status`): anything but
        ``{"state": "online"|"offline"}`` is a rejection, logged once and counted
        (:attr:`rejections`), and the state stays as it was.
        """
        status = parse_betting_status(payload)
        if isinstance(status, Rejection):
            self.rejections.record(status.at(self.topic, self.table_id))
            return
        state = status.state
        if state == self.state:
            return
        self.state = state
        self.since = datetime.now(UTC)
        if state == "online":
            self.online.set()
        else:
            self.online.clear()
        self.changed.set()
        self.log.info("betting system presence changed", state=state)

    async def stop(self) -> None:
        """End :meth:`run`."""
        self._stop.set()

    async def run(self) -> None:
        """Watch on a connection of its own until :meth:`stop`, reconnecting with back-off.

        The connection, failover and back-off are :class:`~controller.mqtt.connection.
        Connector`'s (a clean session each time: the retained message comes again).
        """
        journal = self._journal
        connector = Connector(
            self.settings.for_connection("status"),
            client_id=self.client_id,
            name="status",
            logger="tablectl.commands.paho",
            log=self.log,
            on_takeover=(
                (lambda address: takeover_alert(journal, "status", address, self.settings))
                if journal is not None
                else None
            ),
        )
        await connector.run(self._serve, stop=self._stop)

    async def _serve(self, client: MqttClient, address: BrokerAddress) -> None:
        """One connection: follow the topic until stopped (returns) or lost (raises)."""
        await client.subscribe(self.topic, qos=1)
        await take_until_stopped(client, self._take, self._stop)

    def _take(self, message: MqttMessage) -> None:
        self.feed(message.payload if isinstance(message.payload, bytes) else b"")
