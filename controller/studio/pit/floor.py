"""The floor model: every table at a glance, folded from the tables' public topics (pure).

:class:`Floor` takes each message the console receives (:meth:`Floor.apply`) and keeps, per
table (:class:`TableState`): online or offline (the retained ``status``: birth, clean stop or
Last Will), the current round and its state (the retained ``round`` snapshot, then the
``events`` after it), the alerts (``pit_alert``, ``round_halted``, ``table_status``,
``device_status``), the devices' states, the table's gate (``table_status``: ``waiting`` for
the broker or the betting system, ``ready`` again), results published late (``delayed:
true`` on ``results``) and the last lines of its feed (:func:`controller.watch.describe`).
The betting system's retained presence is kept for the whole floor.

What pages receive is built here (:meth:`Floor.view`, :meth:`Floor.table_view`): chosen
fields only, never a message as received, and nothing from a ``secure/`` topic (such a
message is ignored, whatever the broker delivered).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.messages import SCHEMA_VERSION
from controller.watch import SeqTracker, describe

ALERT_KINDS = frozenset({"pit_alert", "round_halted", "table_status", "device_status"})
"""Event kinds listed as alerts."""

QUIET_DEVICE_STATES = frozenset({"connected", "recovered", "boot", "ready"})
"""Device states that are good news: shown in the table's devices, not listed as alerts."""

KNOWN_SCHEMA_VERSIONS = frozenset({SCHEMA_VERSION})
"""Envelopes of another ``schema_version`` are refused (docs/mqtt.md, "Changelog")."""

FEED_LEAVES = ("status", "round", "events", "results")
"""The public topics of a table the console reads."""


@dataclass(frozen=True)
class Alert:
    """One alert of a table.

    Attributes:
        table: The table.
        seq: The entry's ``seq``.
        at: When it happened (UTC ISO, from the envelope).
        kind: ``pit_alert``, ``round_halted``, ``table_status`` or ``device_status``.
        text: What happened, for people.
        round_id: The round, if any.
        delayed: Published late.
    """

    table: str
    seq: int | None
    at: str | None
    kind: str
    text: str
    round_id: str | None
    delayed: bool

    def to_json(self) -> dict[str, Any]:
        """The page's form."""
        return {
            "table": self.table,
            "seq": self.seq,
            "at": self.at,
            "kind": self.kind,
            "text": self.text,
            "round": self.round_id,
            "delayed": self.delayed,
        }


@dataclass
class TableState:
    """What the floor knows of one table.

    Attributes:
        table: The table id.
        online: ``True`` after its birth, ``False`` after a clean stop or its Last Will,
            ``None`` before its status was seen.
        status_reason: Why it is offline (``stopped``, ``connection lost``).
        status_at: When the status was published (``None`` for a Last Will).
        game: Its game.
        session: The controller run.
        round_id: The current (or last) round.
        round_no: Its number.
        state: ``idle``, ``opening``, ``betting_open``, ``dealing``, ``settled``, ``voided``.
        halted: Whether the round is halted.
        awaiting_rescan: The slot waiting for a rescan, if any.
        decision: The open decision window, if any.
        betting_closes_at: When betting closes (UTC ISO).
        result: The last round's result, for people.
        last_seq: The highest ``seq`` folded in.
        devices: Device name -> ``{state, detail, at}``.
        gate: The last ``table_status``: ``{state, detail, at}``.
        alerts: The alerts, oldest first.
        delayed: Results published late: ``{seq, round, kind, at, replayed}``.
        lines: The last lines of the feed.
    """

    table: str
    online: bool | None = None
    status_reason: str | None = None
    status_at: str | None = None
    game: str | None = None
    session: int | None = None
    round_id: str | None = None
    round_no: int | None = None
    state: str | None = None
    halted: bool = False
    awaiting_rescan: str | None = None
    decision: str | None = None
    betting_closes_at: str | None = None
    result: str | None = None
    last_seq: int | None = None
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    gate: dict[str, Any] | None = None
    alerts: deque[Alert] = field(default_factory=deque)
    delayed: deque[dict[str, Any]] = field(default_factory=deque)
    lines: deque[str] = field(default_factory=deque)


@dataclass(frozen=True)
class Message:
    """A message the floor accepted.

    Attributes:
        table: The table it belongs to.
        leaf: ``status``, ``round``, ``events`` or ``results``.
        topic: Its topic.
        envelope: Its decoded JSON object.
    """

    table: str
    leaf: str
    topic: str
    envelope: Mapping[str, Any]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _data(envelope: Mapping[str, Any]) -> Mapping[str, Any]:
    raw = envelope.get("data")
    return raw if isinstance(raw, Mapping) else {}


def _decision_text(decision: Any) -> str | None:
    if not isinstance(decision, Mapping):
        return None
    seat = f" seat {decision['seat']}" if decision.get("seat") else ""
    return f"{decision.get('window')} ({decision.get('kind')}{seat})"


def _is_alert(kind: str, data: Mapping[str, Any]) -> bool:
    """Whether an event goes to the alert list (a device coming back does not)."""
    if kind == "device_status":
        return str(data.get("state")) not in QUIET_DEVICE_STATES
    return kind in ALERT_KINDS


def _alert_text(kind: str, data: Mapping[str, Any]) -> str:
    detail = f" ({data['detail']})" if data.get("detail") else ""
    if kind == "device_status":
        return f"device {data.get('device')}: {data.get('state')}{detail}"
    if kind == "table_status":
        return f"table {data.get('state')}{detail}"
    if kind == "round_halted":
        return f"round HALTED: {data.get('reason')}"
    where = f" at {data['slot']}" if data.get("slot") else ""
    return f"PIT ALERT{where}: {data.get('reason') or 'the pit boss is needed'}"


def _result_text(kind: str, data: Mapping[str, Any]) -> str:
    if kind == "round_voided":
        return f"voided: {data.get('reason')}"
    winner = data.get("winner")
    return "tie" if winner == "tie" else f"{winner} wins"


_Fold = Callable[[TableState, Mapping[str, Any], Mapping[str, Any]], None]


def _opened(state: TableState, envelope: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    state.round_id = _text(envelope.get("round"))
    state.round_no = _int(data.get("round_no"))
    state.game = _text(data.get("game")) or state.game
    state.state = "opening" if data.get("before_betting") else "betting_open"
    state.betting_closes_at = _text(data.get("betting_closes_at"))
    state.halted = False
    state.awaiting_rescan = None
    state.decision = None
    state.result = None


def _betting_opened(state: TableState, _e: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    state.state = "betting_open"
    state.betting_closes_at = _text(data.get("betting_closes_at"))


def _betting_closed(state: TableState, _e: Mapping[str, Any], _d: Mapping[str, Any]) -> None:
    state.state = "dealing"
    state.betting_closes_at = None


def _card(state: TableState, _e: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    if state.awaiting_rescan == data.get("slot"):
        state.awaiting_rescan = None


def _rescan(state: TableState, _e: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    state.awaiting_rescan = _text(data.get("slot"))


def _halted(state: TableState, _e: Mapping[str, Any], _d: Mapping[str, Any]) -> None:
    state.halted = True


def _resumed(state: TableState, _e: Mapping[str, Any], _d: Mapping[str, Any]) -> None:
    state.halted = False


def _finished(state: TableState, envelope: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    kind = str(envelope.get("kind"))
    state.state = "voided" if kind == "round_voided" else "settled"
    state.halted = False
    state.awaiting_rescan = None
    state.decision = None
    state.result = _result_text(kind, data)


def _decision_open(state: TableState, _e: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    state.decision = _decision_text(data)


def _decision_applied(state: TableState, _e: Mapping[str, Any], _d: Mapping[str, Any]) -> None:
    state.decision = None


def _device(state: TableState, envelope: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    state.devices[str(data.get("device"))] = {
        "state": _text(data.get("state")),
        "detail": _text(data.get("detail")),
        "at": _text(envelope.get("at")),
    }


def _table_status(state: TableState, envelope: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    state.gate = {
        "state": _text(data.get("state")),
        "detail": _text(data.get("detail")),
        "at": _text(envelope.get("at")),
    }


_FOLDS: dict[str, _Fold] = {
    "round_opened": _opened,
    "betting_opened": _betting_opened,
    "betting_closed": _betting_closed,
    "card_dealt": _card,
    "rescan_requested": _rescan,
    "round_halted": _halted,
    "round_resumed": _resumed,
    "round_result": _finished,
    "round_voided": _finished,
    "decision_open": _decision_open,
    "decision_applied": _decision_applied,
    "device_status": _device,
    "table_status": _table_status,
}
"""How an ``events`` entry changes a table's state, by kind (others change only the lines)."""


class Floor:
    """Every table of the studio, folded from their public topics.

    Args:
        prefix: The topic prefix (``tables``; may have several levels).
        tables: The tables shown; ``None``: every table seen.
        betting_status_topic: The betting system's retained presence topic, if watched.
        alerts_per_table: Alerts kept per table.
        lines_per_table: Feed lines kept per table.
        delayed_per_table: Delayed results kept per table.

    Attributes:
        tables: The tables' states, by id.
        betting: The betting system's presence (``online``/``offline``; ``None``: unknown).
        broker: Whether the console's broker connection is up.
        broker_detail: What the connection last said (the URL, or the error).
        problems: Messages refused (not JSON, unknown schema version...), counted.
        last_problem: The last of them, for people.
        last_message: The last message accepted (what :meth:`apply` folded in last).
    """

    def __init__(
        self,
        prefix: str = "tables",
        tables: list[str] | None = None,
        *,
        betting_status_topic: str | None = "betting/status",
        alerts_per_table: int = 50,
        lines_per_table: int = 30,
        delayed_per_table: int = 20,
    ) -> None:
        self.prefix = prefix.rstrip("/")
        self.wanted = set(tables) if tables is not None else None
        self.betting_status_topic = betting_status_topic
        self.betting: str | None = None
        self.broker = False
        self.broker_detail = "not connected yet"
        self.problems = 0
        self.last_problem: str | None = None
        self.last_message: Message | None = None
        self._alerts_per_table = alerts_per_table
        self._lines_per_table = lines_per_table
        self._delayed_per_table = delayed_per_table
        self._trackers: dict[str, SeqTracker] = {}
        self.tables: dict[str, TableState] = {table: self._new(table) for table in tables or []}

    # -- what the console subscribes to ------------------------------------------------------

    def subscriptions(self) -> list[str]:
        """The topic filters that feed the floor: public topics only, never ``secure/``."""
        tables = sorted(self.wanted) if self.wanted is not None else ["+"]
        filters = [f"{self.prefix}/{table}/{leaf}" for table in tables for leaf in FEED_LEAVES]
        if self.betting_status_topic is not None:
            filters.append(self.betting_status_topic)
        return filters

    # -- input ---------------------------------------------------------------------------------

    def apply(self, topic: str, payload: bytes | bytearray | str) -> str | None:
        """Fold one received message in.

        Args:
            topic: Where it arrived.
            payload: Its body.

        Returns:
            The id of the table whose view changed, ``""`` when the floor-wide part changed
            (the betting system's presence, a problem counted), ``None`` when nothing did (a
            repeat, a topic the floor does not read, a table not shown).
        """
        if topic == self.betting_status_topic:
            return self._betting(payload)
        before = self.problems
        message = self._accept(topic, payload)
        if message is None:
            return "" if self.problems != before else None
        self.last_message = message
        state = self.tables.get(message.table)
        if state is None:
            state = self.tables[message.table] = self._new(message.table)
        if message.leaf == "status":
            self._status(state, message.envelope)
        elif message.leaf == "round":
            self._snapshot(state, message.envelope)
        elif not self._fresh(message):
            return None
        elif message.leaf == "events":
            self._event(state, message)
        else:
            self._result(state, message.envelope)
        return message.table

    def set_broker(self, connected: bool, detail: str) -> None:
        """Note the console's own broker connection (up, or lost and why)."""
        self.broker = connected
        self.broker_detail = detail

    # -- output --------------------------------------------------------------------------------

    def table_view(self, table: str) -> dict[str, Any]:
        """One table, as pages show it."""
        state = self.tables[table]
        return {
            "table": state.table,
            "online": state.online,
            "status_reason": state.status_reason,
            "status_at": state.status_at,
            "game": state.game,
            "session": state.session,
            "round": state.round_id,
            "round_no": state.round_no,
            "state": state.state,
            "halted": state.halted,
            "awaiting_rescan": state.awaiting_rescan,
            "decision": state.decision,
            "betting_closes_at": state.betting_closes_at,
            "result": state.result,
            "last_seq": state.last_seq,
            "devices": dict(state.devices),
            "gate": state.gate,
            "alerts": [alert.to_json() for alert in state.alerts],
            "delayed": list(state.delayed),
            "lines": list(state.lines),
        }

    def floor_view(self) -> dict[str, Any]:
        """The floor-wide part: broker, betting system, problems."""
        return {
            "broker": self.broker,
            "broker_detail": self.broker_detail,
            "betting": self.betting,
            "problems": self.problems,
            "last_problem": self.last_problem,
        }

    def view(self) -> dict[str, Any]:
        """Everything, as a page first receives it."""
        return {
            **self.floor_view(),
            "tables": [self.table_view(table) for table in sorted(self.tables)],
        }

    def alerts(self) -> list[Alert]:
        """Every table's alerts, oldest first (``at``; those without a time last)."""
        every = [alert for state in self.tables.values() for alert in state.alerts]
        return sorted(every, key=lambda alert: (alert.at is None, alert.at or "", alert.table))

    # -- the parts -----------------------------------------------------------------------------

    def _new(self, table: str) -> TableState:
        return TableState(
            table=table,
            alerts=deque(maxlen=self._alerts_per_table),
            delayed=deque(maxlen=self._delayed_per_table),
            lines=deque(maxlen=self._lines_per_table),
        )

    def _problem(self, text: str) -> None:
        self.problems += 1
        self.last_problem = text

    def _accept(self, topic: str, payload: bytes | bytearray | str) -> Message | None:
        """The message, if it is a public message of a shown table with a readable body."""
        root = self.prefix + "/"
        if not topic.startswith(root):
            return None
        levels = topic[len(root) :].split("/")
        if len(levels) != 2 or levels[1] not in FEED_LEAVES or "secure" in levels:
            return None
        table, leaf = levels
        if self.wanted is not None and table not in self.wanted:
            return None
        if not payload:
            return None  # a retained message cleared
        try:
            envelope = json.loads(payload)
        except (ValueError, TypeError):
            self._problem(f"{topic}: not JSON")
            return None
        if not isinstance(envelope, dict):
            self._problem(f"{topic}: not a JSON object")
            return None
        version = envelope.get("schema_version")
        if version not in KNOWN_SCHEMA_VERSIONS:
            self._problem(f"{topic}: schema_version {version!r} is not one this console knows")
            return None
        return Message(table, leaf, topic, envelope)

    def _fresh(self, message: Message) -> bool:
        tracker = self._trackers.setdefault(message.table, SeqTracker())
        show, gap = tracker.check(message.topic, message.envelope)
        if gap:
            self._line(self.tables[message.table], gap)
        return show

    def _line(self, state: TableState, text: str | None) -> None:
        if text:
            state.lines.append(text)

    def _betting(self, payload: bytes | bytearray | str) -> str | None:
        try:
            body = json.loads(payload) if payload else {}
        except (ValueError, TypeError):
            self._problem(f"{self.betting_status_topic}: not JSON")
            return ""
        found = body.get("state") if isinstance(body, dict) else None
        self.betting = found if found in ("online", "offline") else None
        return ""

    def _status(self, state: TableState, envelope: Mapping[str, Any]) -> None:
        state.online = envelope.get("state") == "online"
        state.status_at = _text(envelope.get("at"))
        state.status_reason = None if state.online else _text(envelope.get("reason")) or "offline"
        state.game = _text(envelope.get("game")) or state.game
        state.session = _int(envelope.get("session")) or state.session
        self._line(state, describe(f"{self.prefix}/{state.table}/status", envelope))

    def _snapshot(self, state: TableState, envelope: Mapping[str, Any]) -> None:
        data = _data(envelope)
        last = _int(data.get("last_seq")) or _int(envelope.get("seq"))
        if state.last_seq is not None and last is not None and last < state.last_seq:
            return  # older than the events already folded in
        state.round_id = _text(envelope.get("round")) or state.round_id
        state.round_no = _int(data.get("round_no"))
        state.game = _text(data.get("game")) or state.game
        state.state = _text(data.get("state"))
        state.halted = bool(data.get("halted"))
        state.awaiting_rescan = _text(data.get("awaiting_rescan"))
        state.decision = _decision_text(data.get("decision"))
        state.betting_closes_at = _text(data.get("betting_closes_at"))
        result = data.get("result")
        if isinstance(result, Mapping):
            voided = result.get("voided")
            state.result = f"voided: {result.get('reason')}" if voided else _result_text("", result)
        if last is not None:
            state.last_seq = max(last, state.last_seq or 0)

    def _event(self, state: TableState, message: Message) -> None:
        envelope = message.envelope
        kind = str(envelope.get("kind"))
        data = _data(envelope)
        fold = _FOLDS.get(kind)
        if fold is not None:
            fold(state, envelope, data)
        seq = _int(envelope.get("seq"))
        if seq is not None:
            state.last_seq = max(seq, state.last_seq or 0)
        if _is_alert(kind, data):
            state.alerts.append(
                Alert(
                    table=state.table,
                    seq=seq,
                    at=_text(envelope.get("at")),
                    kind=kind,
                    text=_alert_text(kind, data),
                    round_id=_text(envelope.get("round")),
                    delayed=bool(envelope.get("delayed")),
                )
            )
        self._line(state, describe(message.topic, envelope))

    def _result(self, state: TableState, envelope: Mapping[str, Any]) -> None:
        if not envelope.get("delayed"):
            return
        state.delayed.append(
            {
                "seq": _int(envelope.get("seq")),
                "round": _text(envelope.get("round")),
                "kind": _text(envelope.get("kind")),
                "at": _text(envelope.get("at")),
                "replayed": bool(envelope.get("replayed")),
                "text": _result_text(str(envelope.get("kind")), _data(envelope)),
            }
        )
