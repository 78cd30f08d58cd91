"""The pit console's engine: one MQTT connection feeding the floor, the pit actions, the pages.

:class:`PitConsole` connects with the pit role's credential through
:class:`controller.mqtt.connection.Connector` (bounded connect, failover, back-off), subscribes
to the tables' public topics (:meth:`Floor.subscriptions`: never ``secure/``) and to its own
reply topics, folds every message into the :class:`~controller.studio.pit.floor.Floor` and
pushes the changed views to every page subscribed (:meth:`PitConsole.updates`). When the link
drops the floor says so; on reconnect the subscriptions deliver the retained status and round
snapshot again, so the floor re-reads the state.

A pit action (:meth:`PitConsole.act`) is sent on the same connection exactly as ``tablectl
pit`` sends it (:func:`controller.pitcli.prepare_command`, :func:`~controller.pitcli.
publish_command`, :func:`~controller.pitcli.match_answer`) with the user's name as
``operator``. Its ``command_id`` is made from the page's nonce, so an action clicked twice is
one command: a second click while the first waits shares its answer, a click after the answer
gets the same answer again, and after "no answer" the same id is sent again (the table answers
a repeated id with its first answer).

The answer is shown as a sentence (:func:`controller.studio.pit.words.action_sentence`), the
technical text (command id, the answer's data) behind it. A replay is asked by round: the
console maps the round to the ``seq`` range it saw (:meth:`PitConsole.round_span`; the app
asks the archive otherwise); an alert is acknowledged with ``cmd/pit/ack`` and, once the table
accepted it, shown acknowledged (who, when) on every page. Every final answer is kept per round
(:attr:`PitConsole.actions`) for the recall view.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from controller.broker import BrokerAddress
from controller.messages import Topics
from controller.mqtt.connection import Connector
from controller.mqtt.receive import take_until_stopped
from controller.mqtt.settings import MqttSettings
from controller.pitcli import (
    EXIT_ACCEPTED,
    EXIT_REFUSED,
    Outcome,
    PreparedCommand,
    match_answer,
    no_answer,
    prepare_command,
    publish_command,
    refused_by_broker,
)
from controller.studio.pit.floor import Floor
from controller.studio.pit.recall import SeenRounds
from controller.studio.pit.settings import ACTING_ROLES, PitSettings, PitUser
from controller.studio.pit.words import action_record, action_sentence
from controller.tablefold import at_text

if TYPE_CHECKING:
    from controller.mqtt.client import Client as MqttClient
    from controller.mqtt.client import Message as MqttMessage

ConnectorFactory = Callable[[MqttSettings], Connector]
"""Builds the console's broker connection from its settings (tests may pass their own)."""

ACTIONS = ("resume", "void", "replay", "ack", "enter-card", "deck-check")
NONCE = re.compile(r"^[A-Za-z0-9_-]{8,40}$")
UPDATES_QUEUE = 1000
"""Updates a page may fall behind by before it is dropped (it reconnects and re-reads)."""
ANSWERS_KEPT = 1000
ACTIONS_PER_ROUND = 50
"""Pit actions kept per round for the recall view (the table's journal keeps them all)."""


def default_connector(settings: MqttSettings) -> Connector:
    """The console's connection: a clean session (what it missed is re-read on reconnect)."""
    client_id = settings.client_id or f"tablectl-studio-pit-{uuid.uuid4().hex[:8]}"
    return Connector(settings, client_id=client_id, name="pit console", logger="tablectl.pit")


@dataclass(frozen=True)
class ActionRequest:
    """A pit action as a page asks for it.

    Attributes:
        table: The table.
        name: ``resume``, ``void``, ``replay`` or ``ack``.
        nonce: The page's id for this action (the same on a second click or a retry).
        round_id: The round the page shows (the table refuses it if it is not current); for
            a replay, the round to re-send (mapped to its ``seq`` range).
        reason: Why (``void`` only).
        from_seq: First ``seq`` to re-send (``replay`` only).
        to_seq: Last ``seq`` (``replay``; ``None``: up to the last).
        alert_seq: The alert's ``seq`` (``ack`` only).
        card: The card entered by hand (``enter-card`` only).
        slot: The slot the page shows waiting (``enter-card``; the table refuses another).
        report: The deck check's report (``deck-check``: made by the console on the pit's
            reader before the command is sent; never from the page).
    """

    table: str
    name: str
    nonce: str
    round_id: str | None = None
    reason: str | None = None
    from_seq: int | None = None
    to_seq: int | None = None
    alert_seq: int | None = None
    card: str | None = None
    slot: str | None = None
    report: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ActionResult:
    """What became of a pit action, for the page.

    Attributes:
        status: ``accepted``, ``refused``, ``no_answer`` or ``invalid`` (not sent).
        text: The technical answer (``tablectl pit``'s text: command id, the answer's data),
            shown behind a click.
        command_id: The command's id, once one was made.
        repeated: The answer is the one a first click got.
        sentence: The answer in words (what the page shows).
    """

    status: str
    text: str
    command_id: str | None = None
    repeated: bool = False
    sentence: str = ""
    reason: str = ""
    data: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The page's form."""
        return {
            "status": self.status,
            "text": self.text,
            "sentence": self.sentence or self.text,
            "command_id": self.command_id,
            "repeated": self.repeated,
        }


def _result(
    outcome: Outcome,
    command_id: str,
    request: ActionRequest,
    *,
    timeout: float,
    repeated: bool = False,
) -> ActionResult:
    status = {EXIT_ACCEPTED: "accepted", EXIT_REFUSED: "refused"}.get(outcome.code, "no_answer")
    answer = outcome.answer.get("data") if outcome.answer is not None else None
    body: dict[str, Any] = answer if isinstance(answer, dict) else {}
    data = body.get("data")
    reason = str(body.get("reason") or "")
    not_sent = outcome.text.startswith("NOT SENT")
    by_broker = status == "refused" and outcome.answer is None
    if by_broker:
        reason = outcome.text.split(": ", 1)[-1].split(" (reason code", 1)[0]
    elif not_sent:
        reason = outcome.text.split("(", 1)[-1].split(")", 1)[0] if "(" in outcome.text else ""
    sentence = action_sentence(
        request.name,
        table=request.table,
        round_id=request.round_id,
        status="not_sent" if not_sent else status,
        reason=reason,
        data=data if isinstance(data, dict) else None,
        timeout=timeout,
        by_broker=by_broker,
    )
    answer_data = dict(data) if isinstance(data, dict) else {}
    return ActionResult(status, outcome.text, command_id, repeated, sentence, reason, answer_data)


def _invalid(request: ActionRequest, text: str) -> ActionResult:
    sentence = action_sentence(
        request.name, table=request.table, round_id=request.round_id, status="invalid", reason=text
    )
    return ActionResult("invalid", text, sentence=sentence)


class ActionInvalid(ValueError):
    """A pit action a page asked for that cannot be sent as it is."""


def check_action(user: PitUser, request: ActionRequest, known_tables: set[str]) -> dict[str, Any]:
    """The command's body for a page's request (pure).

    Returns:
        The body: ``round``, ``operator`` and the action's own fields.

    Raises:
        ActionInvalid: The user may not act, or a field is missing or wrong (named).
    """
    if user.role not in ACTING_ROLES:
        raise ActionInvalid(f"user {user.name} ({user.role}) may not send pit actions")
    if request.name not in ACTIONS:
        raise ActionInvalid(f"unknown action {request.name!r} (known: {', '.join(ACTIONS)})")
    if request.table not in known_tables:
        raise ActionInvalid(f"unknown table {request.table!r}")
    if not NONCE.match(request.nonce):
        raise ActionInvalid("the page's action id must be 8-40 letters, digits, '-' or '_'")
    body: dict[str, Any] = {"round": request.round_id or None, "operator": user.name}
    fields = _ACTION_FIELDS.get(request.name)
    return {**body, **fields(request)} if fields is not None else body


def _alert_seq(request: ActionRequest) -> dict[str, Any]:
    if request.alert_seq is None or request.alert_seq < 1:
        raise ActionInvalid("an acknowledgement needs the alert's seq (1 or more)")
    return {"alert_seq": request.alert_seq}


def _deck_report(request: ActionRequest) -> dict[str, Any]:
    if request.report is None:
        raise ActionInvalid("no deck check was made")
    return {"round": None, **request.report}


def _entered_card(request: ActionRequest) -> dict[str, Any]:
    """A card entered by hand: the card, the reason and the slot the page showed."""
    card = (request.card or "").strip()
    if not card or len(card) > 16:
        raise ActionInvalid("type the card to enter (e.g. Qh), 16 characters at most")
    reason = (request.reason or "").strip()
    if not reason:
        raise ActionInvalid("a card entered by hand needs a reason")
    if len(reason) > 500:
        raise ActionInvalid("the reason is longer than 500 characters")
    slot = (request.slot or "").strip() or None
    if slot is not None and len(slot) > 32:
        raise ActionInvalid("the slot is longer than 32 characters")
    return {"card": card, "reason": reason, "slot": slot}


def _void(request: ActionRequest) -> dict[str, Any]:
    return {"reason": _void_reason(request)}


def _void_reason(request: ActionRequest) -> str:
    reason = (request.reason or "").strip()
    if not reason:
        raise ActionInvalid("a void needs a reason")
    if len(reason) > 500:
        raise ActionInvalid("the reason is longer than 500 characters")
    return reason


def _replay_range(request: ActionRequest) -> dict[str, int | None]:
    if request.from_seq is None or request.from_seq < 1:
        if request.round_id:
            raise ActionInvalid(
                f"round {request.round_id} was not seen by this console (nor found in the "
                "archive): its entries' range is unknown"
            )
        raise ActionInvalid("replay needs a round (or a sequence number of 1 or more)")
    if request.to_seq is not None and request.to_seq < request.from_seq:
        raise ActionInvalid("the last seq is below the first")
    return {"from_seq": request.from_seq, "to_seq": request.to_seq}


_ACTION_FIELDS: dict[str, Callable[[ActionRequest], dict[str, Any]]] = {
    "void": _void,
    "replay": _replay_range,
    "ack": _alert_seq,
    "enter-card": _entered_card,
    "deck-check": _deck_report,
}
"""Each action's own fields (besides ``round`` and ``operator``), checked."""


class PitConsole:
    """The floor, fed from the broker, and the pit actions sent on the same connection.

    Args:
        settings: The console's settings.
        connector_factory: Builds the broker connection (default: :func:`default_connector`).
        log: A structlog logger.

    Attributes:
        floor: The floor model.
        seen: The rounds seen, for recall without the archive.
        reply_leaf: The last level of this console's v5 response topics.
    """

    def __init__(
        self,
        settings: PitSettings,
        *,
        connector_factory: ConnectorFactory | None = None,
        log: Any = None,
    ) -> None:
        self.settings = settings
        mqtt = settings.mqtt
        self.log = log if log is not None else structlog.get_logger(__name__)
        self.floor = Floor(
            mqtt.topic_prefix,
            settings.tables,
            betting_status_topic=mqtt.betting_status_topic,
            alerts_per_table=settings.alerts_per_table,
            lines_per_table=settings.lines_per_table,
        )
        self.seen = SeenRounds(settings.recent_rounds)
        self.reply_leaf = f"studio-pit-{uuid.uuid4().hex[:12]}"
        self._v5 = mqtt.protocol == "5"
        self._connector = (connector_factory or default_connector)(mqtt)
        self._client: MqttClient | None = None
        self._pending: dict[str, tuple[PreparedCommand, asyncio.Future[Outcome]]] = {}
        self._answers: OrderedDict[str, ActionResult] = OrderedDict()
        self._deck_lock = asyncio.Lock()
        self._pages: set[asyncio.Queue[dict[str, Any] | None]] = set()
        self.actions: OrderedDict[str, deque[dict[str, Any]]] = OrderedDict()
        """Final answers to pit actions, by round (the last ``recent_rounds`` rounds)."""
        self.connected = asyncio.Event()
        self._stop = asyncio.Event()
        self._floor_shared = False

    # -- the connection ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the connection (reconnecting with back-off) until ``stop`` is set."""
        self._stop = stop
        await self._connector.run(self._serve, stop=stop, on_error=self._lost)

    def share_feed(self) -> None:
        """Take the floor's tables from a feed the studio already holds (call before :meth:`run`).

        For a console mounted in a studio whose feed is the same link (same broker, same
        credentials: ``make run``'s demo): the studio hands each message of its feed to
        :meth:`take_floor`, and this console's own connection subscribes only to its answers
        and the betting system's presence. One connection and one read fewer per message.
        """
        self._floor_shared = True

    def take_floor(self, topic: str, payload: bytes) -> None:
        """One message of the studio's feed, for the floor (see :meth:`share_feed`).

        Only the floor reads it (a table's public topics; anything else is ignored there):
        answers to this console come on its own connection only.
        """
        self._fold(topic, payload)

    def reply_filters(self) -> list[str]:
        """Where the tables' answers to this console come."""
        prefix = self.settings.mqtt.topic_prefix.rstrip("/")
        tables = self.settings.tables or ["+"]
        leaf = f"/{self.reply_leaf}" if self._v5 else ""
        return [f"{prefix}/{table}/reply/pit{leaf}" for table in tables]

    async def _serve(self, client: MqttClient, address: BrokerAddress) -> None:
        floor = self.floor.subscriptions()
        if self._floor_shared:  # the tables' topics come through the studio's feed
            floor = [topic for topic in floor if topic == self.floor.betting_status_topic]
        for topic in [*floor, *self.reply_filters()]:
            await client.subscribe(topic, qos=1)
        self._client = client
        self.connected.set()
        self.floor.set_broker(True, f"connected to {address.url}")
        self._broadcast({"type": "floor", "floor": self.floor.floor_view()})
        self.log.info("pit console connected", url=address.url)
        try:
            await take_until_stopped(client, self._take, self._stop)
        finally:
            self._client = None
            self.connected.clear()
            if self._stop.is_set():
                self.floor.set_broker(False, "the console is stopping")

    def _take(self, message: MqttMessage) -> None:
        self._received(str(message.topic), message.payload, message.properties)

    def _lost(self, address: BrokerAddress, exc: Exception) -> bool:
        was_up = self.floor.broker
        self.floor.set_broker(False, f"broker {address.url}: {type(exc).__name__}: {exc}")
        self._broadcast({"type": "floor", "floor": self.floor.floor_view()})
        self.log.warning("pit console: broker link lost", url=address.url, error=str(exc))
        return was_up

    def _received(self, topic: str, payload: Any, properties: Any) -> None:
        raw = payload if isinstance(payload, bytes | bytearray | str) else b""
        if "/reply/pit" in topic:
            self._answer(raw, getattr(properties, "CorrelationData", None))
            return
        self._fold(topic, raw)

    def _fold(self, topic: str, raw: bytes | bytearray | str) -> None:
        changed = self.floor.apply(topic, raw)
        if changed is None:
            return
        if changed == "":
            if self._pages:  # (a view is built only for pages to send it to)
                self._broadcast({"type": "floor", "floor": self.floor.floor_view()})
            return
        message = self.floor.last_message
        if message is not None:
            self.seen.add(message.table, message.leaf, message.envelope)
        if self._pages:
            self._broadcast({"type": "table", "table": self.floor.table_view(changed)})

    def _answer(self, payload: bytes | bytearray | str, correlation: bytes | None) -> None:
        for prepared, future in list(self._pending.values()):
            outcome = match_answer(prepared, payload, correlation)
            if outcome is not None and not future.done():
                future.set_result(outcome)
                return

    # -- pages ---------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def updates(self) -> AsyncIterator[asyncio.Queue[dict[str, Any] | None]]:
        """A page's queue of updates, the whole floor first (``None``: fell behind, reload)."""
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(UPDATES_QUEUE)
        queue.put_nowait({"type": "snapshot", "floor": self.floor.view()})
        self._pages.add(queue)
        try:
            yield queue
        finally:
            self._pages.discard(queue)

    def _broadcast(self, update: dict[str, Any]) -> None:
        for queue in list(self._pages):
            try:
                queue.put_nowait(update)
            except asyncio.QueueFull:
                self._pages.discard(queue)
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
                queue.put_nowait(None)

    # -- pit actions ---------------------------------------------------------------------------

    def round_span(self, table: str, round_id: str) -> tuple[int, int] | None:
        """The ``seq`` range of a round this console saw (the floor's, else the seen rounds')."""
        span = self.floor.round_span(table, round_id)
        if span is not None:
            return span
        found = self.seen.find(round_id)
        if found is None or found[0] != table:
            return None
        seqs = [entry.seq for entry in found[1]] + [
            int(envelope["seq"]) for envelope in found[2] if isinstance(envelope.get("seq"), int)
        ]
        return (min(seqs), max(seqs)) if seqs else None

    def _with_alert(self, request: ActionRequest) -> ActionRequest | ActionResult:
        """An ack names its alert's round (for the journal and recall); unknown: invalid."""
        if request.name != "ack":
            return request
        alert = self.floor.alert(request.table, request.alert_seq or 0)
        if alert is None:
            return _invalid(
                request, f"no alert at seq {request.alert_seq} is listed for {request.table}"
            )
        return dataclasses.replace(request, round_id=alert.round_id)

    async def deck_checked(self, request: ActionRequest) -> ActionRequest | ActionResult:
        """A deck check on the pit's reader for ``request.table``'s game.

        Returns the request with its report, or why there is none (no reader configured, no
        card read, the reader lost, a check already running). The deck is the table's game's;
        the reader and its code table are ``[pit.deck_check]``. One check at a time (the pit
        has one reader).
        """
        from controller.deckcheck import DeckCheckError, public_url, scan_deck, with_codes
        from controller.games.registry import game_spec
        from drivers.errors import DriverError
        from drivers.source import DriverSettings, open_card_source

        settings = self.settings.deck_check
        if settings is None:
            return _invalid(request, "no deck check reader is configured ([pit.deck_check])")
        state = self.floor.tables.get(request.table)
        game = state.game if state is not None else None
        try:
            deck = game_spec(game).facts.new_deck() if game else None
        except Exception:
            deck = None
        if deck is None:
            return _invalid(request, f"the game of table {request.table} is not known yet")
        if self._deck_lock.locked():
            return _invalid(request, "a deck check is already running on the pit's reader")
        async with self._deck_lock:
            source = open_card_source(
                with_codes(settings.device, settings.codes),
                DriverSettings(heartbeat_timeout=None),
            )
            try:
                await source.open()
                try:
                    report = await scan_deck(
                        source,
                        deck,
                        idle_seconds=settings.idle_seconds,
                        first_read_seconds=settings.first_read_seconds,
                    )
                finally:
                    await source.close()
            except (DeckCheckError, DriverError) as exc:
                return _invalid(request, f"deck check not made: {exc}")
        body = {"device": public_url(settings.device), **report.to_dict()}
        return dataclasses.replace(request, report=body)

    async def act(self, user: PitUser, request: ActionRequest) -> ActionResult:
        """Send a pit action as ``user`` and wait (bounded) for the table's answer."""
        if request.name == "deck-check" and request.report is None:
            if user.role not in ACTING_ROLES:
                return _invalid(request, f"user {user.name} ({user.role}) may not check decks")
            checked = await self.deck_checked(request)
            if isinstance(checked, ActionResult):
                return checked
            request = checked
        named = self._with_alert(request)
        if isinstance(named, ActionResult):
            return named
        request = named
        try:
            body = check_action(user, request, set(self.floor.tables))
        except ActionInvalid as exc:
            return _invalid(request, str(exc))
        command_id = f"{request.name}-{user.name}-{request.nonce}"[:128]
        answered = self._answers.get(command_id)
        if answered is not None:
            return dataclasses.replace(answered, repeated=True)
        pending = self._pending.get(command_id)
        if pending is not None:
            outcome = await asyncio.shield(pending[1])
            timeout = self.settings.command_timeout
            return _result(outcome, command_id, request, timeout=timeout, repeated=True)
        result = await self._send(request, {"command_id": command_id, **body}, command_id)
        if result.status in ("accepted", "refused"):
            self._answers[command_id] = result
            while len(self._answers) > ANSWERS_KEPT:
                self._answers.popitem(last=False)
            self._note(user, request, result)
        return result

    def _note(self, user: PitUser, request: ActionRequest, result: ActionResult) -> None:
        """Keep a final answer for recall; an accepted ack marks its alert on every page."""
        now = at_text(datetime.now(UTC)) or ""
        acked = request.name == "ack" and result.status == "accepted" and request.alert_seq
        if acked and self.floor.acknowledge(request.table, acked, by=user.name, at=now):
            self._broadcast({"type": "table", "table": self.floor.table_view(request.table)})
        if request.round_id is None:
            return
        kept = self.actions.get(request.round_id)
        if kept is None:
            kept = self.actions[request.round_id] = deque(maxlen=ACTIONS_PER_ROUND)
            while len(self.actions) > max(1, self.settings.recent_rounds):
                self.actions.popitem(last=False)
        kept.append(
            {
                "at": now,
                "table": request.table,
                "by": user.name,
                "action": request.name,
                "status": result.status,
                "sentence": result.sentence,
                "said": action_record(
                    request.name,
                    status=result.status,
                    reason=result.reason,
                    data=result.data,
                    void_reason=request.reason if request.name == "void" else None,
                ),
                "command_id": result.command_id,
                "reason": request.reason if request.name == "void" else None,
                "alert_seq": request.alert_seq,
            }
        )

    async def _send(
        self, request: ActionRequest, body: dict[str, Any], command_id: str
    ) -> ActionResult:
        import aiomqtt

        from controller.errors import PublishError
        from controller.mqtt.ack import PublishRefused

        topics = Topics(prefix=self.settings.mqtt.topic_prefix, table=request.table)
        prepared = prepare_command(
            topics, "pit", request.name, body, v5=self._v5, reply_leaf=self.reply_leaf
        )
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._pending[command_id] = (prepared, future)
        timeout = self.settings.command_timeout
        try:
            client = self._client
            if client is None:
                outcome = Outcome(
                    2,
                    "NOT SENT: the console is not connected to the broker "
                    f"({self.floor.broker_detail}); try again once it is",
                )
                return _result(outcome, command_id, request, timeout=timeout)
            async with asyncio.timeout(timeout):
                await publish_command(client, prepared, timeout=self.settings.mqtt.publish_timeout)
                outcome = await asyncio.shield(future)
        except PublishRefused as exc:
            outcome = refused_by_broker(prepared, exc)
        except TimeoutError:
            outcome = no_answer(prepared, timeout)
        except (PublishError, aiomqtt.MqttError) as exc:
            outcome = Outcome(2, f"NOT SENT (the broker link failed: {exc}); try again")
        finally:
            self._pending.pop(command_id, None)
            if not future.done():
                future.set_result(no_answer(prepared, timeout))
        self.log.info(
            "pit action",
            command_id=command_id,
            table=request.table,
            action=request.name,
            operator=body.get("operator"),
            outcome=outcome.code,
        )
        return _result(outcome, command_id, request, timeout=timeout)
