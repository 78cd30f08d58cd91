"""The floor model: every table at a glance, folded from the tables' public topics (pure).

:class:`Floor` takes each message the console receives (:meth:`Floor.apply`) and keeps, per
table (:class:`TableState`), the one table fold (:class:`controller.tablefold.TableFold`,
shared with the studio's views and ``tablectl watch``): online or offline (the retained
``status``: birth, clean stop or Last Will), the current round and its state (the retained
``round`` snapshot, then the ``events`` after it), the devices' states, the table's gate
(``table_status``: ``waiting`` for the broker or the betting system, ``ready`` again). Beside
it the floor keeps what only the console lists: the alerts (``pit_alert``, ``round_halted``,
``table_status``, ``device_status``), results published late (``delayed: true`` on
``results``) and the last lines of its feed (:func:`controller.watch.describe`). The betting
system's retained presence is kept for the whole floor.

Every payload is read with the one hardened parse (:mod:`controller.inbound`): one that
cannot be read, or whose ``seq`` is beyond what the table could have sent, is a rejection,
logged once and counted (reader ``pit``, :attr:`Floor.rejections`) and shown as the floor's
last problem; it changes no table. No payload raises.

What pages receive is built here (:meth:`Floor.view`, :meth:`Floor.table_view`): chosen
fields only, never a message as received, and nothing from a ``secure/`` topic (such a
message is ignored, whatever the broker delivered).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from controller.inbound import Rejection, RejectionLog, parse_betting_status, parse_object
from controller.journal.entries import (
    DeviceStatusData,
    PitAlertData,
    RoundHaltedData,
    RoundResultData,
    RoundVoidedData,
    TableStatusData,
)
from controller.messages import Envelope, StatusMessage
from controller.tablefold import Channel, TableFold, at_text, wire
from controller.watch import describe

ALERT_KINDS = frozenset({"pit_alert", "round_halted", "table_status", "device_status"})
"""Event kinds listed as alerts."""

QUIET_DEVICE_STATES = frozenset({"connected", "recovered", "boot", "ready"})
"""Device states that are good news: shown in the table's devices, not listed as alerts."""

FEED_LEAVES: dict[str, Channel] = {
    "status": "status",
    "round": "round",
    "events": "events",
    "results": "results",
}
"""The public topics of a table the console reads, and what each carries."""


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
        fold: The table fold (status, round, devices, gate, ``last_seq``).
        alerts: The alerts, oldest first.
        delayed: Results published late: ``{seq, round, kind, at, replayed, text}``.
        lines: The last lines of the feed.
    """

    table: str
    fold: TableFold
    alerts: deque[Alert] = field(default_factory=deque)
    delayed: deque[dict[str, Any]] = field(default_factory=deque)
    lines: deque[str] = field(default_factory=deque)

    @property
    def online(self) -> bool | None:
        """``True`` after its birth, ``False`` after a stop or its Last Will, ``None``: unknown."""
        return self.fold.online

    @property
    def status_reason(self) -> str | None:
        """Why it is offline (``stopped``, ``connection lost``)."""
        status = self.fold.status
        if status is None or status.state == "online":
            return None
        return status.reason or "offline"

    @property
    def status_at(self) -> str | None:
        """When the status was published (``None`` for a Last Will)."""
        status = self.fold.status
        return at_text(status.at) if status is not None else None

    @property
    def game(self) -> str | None:
        """Its game (the round's, else the status's)."""
        status = self.fold.status
        return self.fold.round.game or (status.game if status is not None else None)

    @property
    def session(self) -> int | None:
        """The controller run."""
        return self.fold.status.session if self.fold.status is not None else None

    @property
    def round_id(self) -> str | None:
        """The current (or last) round."""
        return self.fold.round.round_id

    @property
    def state(self) -> str | None:
        """The round's state (``None``: no round seen)."""
        round_ = self.fold.round
        seen = round_.round_id is not None or round_.state != "idle"
        return round_.state if seen else None

    @property
    def result(self) -> str | None:
        """The last round's result, for people."""
        return _result_text(self.fold.round.result)

    @property
    def last_seq(self) -> int | None:
        """The highest ``seq`` folded in (``None``: none yet)."""
        return self.fold.last_seq or None


@dataclass(frozen=True)
class Message:
    """A message the floor accepted.

    Attributes:
        table: The table it belongs to.
        leaf: ``status``, ``round``, ``events`` or ``results``.
        topic: Its topic.
        envelope: Its JSON object as received (read by the one parse; what a signature
            covers).
    """

    table: str
    leaf: str
    topic: str
    envelope: Mapping[str, Any]


def _as_received(
    payload: bytes | bytearray | str, message: Envelope | StatusMessage
) -> Mapping[str, Any]:
    """The JSON object as received (what a signature covers), parsed by the one parse."""
    body = parse_object(payload)
    return wire(message) if isinstance(body, Rejection) else body


def _decision_text(decision: Mapping[str, Any] | None) -> str | None:
    if decision is None:
        return None
    seat = f" seat {decision['seat']}" if decision.get("seat") else ""
    return f"{decision.get('window')} ({decision.get('kind')}{seat})"


def _result_text(result: Mapping[str, Any] | None) -> str | None:
    """A round's result (the round fold's), for people."""
    if result is None:
        return None
    if result.get("voided"):
        return f"voided: {result.get('reason')}"
    winner = result.get("winner")
    return "tie" if winner == "tie" else f"{winner} wins"


def _data_result_text(data: BaseModel | None) -> str | None:
    """A ``results`` message's outcome, for people."""
    if isinstance(data, RoundVoidedData):
        return f"voided: {data.reason}"
    if isinstance(data, RoundResultData):
        return "tie" if data.winner == "tie" else f"{data.winner} wins"
    return None


def _alert_text(data: BaseModel | None) -> str | None:
    """The alert an event raises, for people (``None``: not an alert)."""
    if isinstance(data, DeviceStatusData):
        if data.state in QUIET_DEVICE_STATES:
            return None  # a device coming back is no alert
        detail = f" ({data.detail})" if data.detail else ""
        return f"device {data.device}: {data.state}{detail}"
    if isinstance(data, TableStatusData):
        detail = f" ({data.detail})" if data.detail else ""
        return f"table {data.state}{detail}"
    if isinstance(data, RoundHaltedData):
        return f"round HALTED: {data.reason}"
    if isinstance(data, PitAlertData):
        where = f" at {data.slot}" if data.slot else ""
        return f"PIT ALERT{where}: {data.reason or 'the pit boss is needed'}"
    return None


class Floor:
    """Every table of the studio, folded from their public topics.

    Args:
        prefix: The topic prefix (``tables``; may have several levels).
        tables: The tables shown; ``None``: every table seen.
        betting_status_topic: The betting system's retained presence topic, if watched.
        alerts_per_table: Alerts kept per table.
        lines_per_table: Feed lines kept per table.
        delayed_per_table: Delayed results kept per table.
        clock: Epoch seconds (what a table could have sent by now).

    Attributes:
        tables: The tables' states, by id.
        betting: The betting system's presence (``online``/``offline``; ``None``: unknown).
        broker: Whether the console's broker connection is up.
        broker_detail: What the connection last said (the URL, or the error).
        rejections: The messages rejected (reader ``pit``): logged once, counted by code.
        last_problem: The last of them, for people (``topic: reason``).
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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.prefix = prefix.rstrip("/")
        self.wanted = set(tables) if tables is not None else None
        self.betting_status_topic = betting_status_topic
        self.betting: str | None = None
        self.broker = False
        self.broker_detail = "not connected yet"
        self.rejections = RejectionLog(reader="pit")
        self.last_problem: str | None = None
        self.last_message: Message | None = None
        self.clock = clock
        self._alerts_per_table = alerts_per_table
        self._lines_per_table = lines_per_table
        self._delayed_per_table = delayed_per_table
        self.tables: dict[str, TableState] = {table: self._new(table) for table in tables or []}

    @property
    def problems(self) -> int:
        """Messages rejected since start."""
        return self.rejections.total

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
        """Fold one received message in (never raises).

        Args:
            topic: Where it arrived.
            payload: Its body.

        Returns:
            The id of the table whose view changed, ``""`` when the floor-wide part changed
            (the betting system's presence, a rejection counted), ``None`` when nothing did
            (a repeat, a topic the floor does not read, a table not shown).
        """
        if topic == self.betting_status_topic:
            return self._betting(topic, payload)
        found = self._topic(topic)
        if found is None:
            return None
        table, channel = found
        state = self.tables.get(table) or self._new(table)
        read = state.fold.read(channel, payload, self.clock())
        if isinstance(read, Rejection):
            self._reject(read.at(topic, table))
            return ""
        step, message = read
        if message is None or not step.new:
            return None  # a repeat, or a retained message cleared
        self.tables[table] = state
        self.last_message = Message(table, channel, topic, _as_received(payload, message))
        if step.gap_text:
            self._line(state, step.gap_text)
        if channel == "events" and isinstance(message, Envelope):
            self._alert(state, message, step.data)
        elif channel == "results" and isinstance(message, Envelope):
            self._delayed(state, message, step.data)
        if channel != "results":
            self._line(state, describe(topic, wire(message)))
        return table

    def set_broker(self, connected: bool, detail: str) -> None:
        """Note the console's own broker connection (up, or lost and why)."""
        self.broker = connected
        self.broker_detail = detail

    # -- output --------------------------------------------------------------------------------

    def table_view(self, table: str) -> dict[str, Any]:
        """One table, as pages show it."""
        state = self.tables[table]
        fold = state.fold
        round_, gate = fold.round, fold.gate
        return {
            "table": state.table,
            "online": state.online,
            "status_reason": state.status_reason,
            "status_at": state.status_at,
            "game": state.game,
            "session": state.session,
            "round": round_.round_id,
            "round_no": round_.round_no,
            "state": state.state,
            "halted": round_.halted,
            "awaiting_rescan": round_.awaiting_rescan,
            "decision": _decision_text(round_.decision),
            "betting_closes_at": round_.betting_closes_at,
            "result": state.result,
            "last_seq": state.last_seq,
            "devices": {
                name: {"state": device.state, "detail": device.detail, "at": device.at}
                for name, device in fold.devices.items()
            },
            "gate": None
            if gate is None
            else {"state": gate.state, "detail": gate.detail, "at": gate.at},
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
            fold=TableFold(table),
            alerts=deque(maxlen=self._alerts_per_table),
            delayed=deque(maxlen=self._delayed_per_table),
            lines=deque(maxlen=self._lines_per_table),
        )

    def _topic(self, topic: str) -> tuple[str, Channel] | None:
        """``(table, channel)`` of a public topic of a shown table, else ``None``."""
        root = self.prefix + "/"
        if not topic.startswith(root):
            return None
        levels = topic[len(root) :].split("/")
        if len(levels) != 2 or levels[1] not in FEED_LEAVES:
            return None
        table, leaf = levels
        if not table or (self.wanted is not None and table not in self.wanted):
            return None
        return table, FEED_LEAVES[leaf]

    def _reject(self, rejection: Rejection) -> None:
        self.rejections.record(rejection)
        self.last_problem = f"{rejection.topic}: {rejection.reason}"

    def _line(self, state: TableState, text: str | None) -> None:
        if text:
            state.lines.append(text)

    def _betting(self, topic: str, payload: bytes | bytearray | str) -> str:
        if not payload:
            self.betting = None  # the retained presence cleared
            return ""
        presence = parse_betting_status(payload)
        if isinstance(presence, Rejection):
            self.betting = None
            self._reject(presence.at(topic))
            return ""
        self.betting = presence.state
        return ""

    def _alert(self, state: TableState, envelope: Envelope, data: BaseModel | None) -> None:
        text = _alert_text(data) if envelope.kind in ALERT_KINDS else None
        if text is None:
            return
        state.alerts.append(
            Alert(
                table=state.table,
                seq=envelope.seq,
                at=at_text(envelope.at),
                kind=envelope.kind,
                text=text,
                round_id=envelope.round,
                delayed=envelope.delayed,
            )
        )

    def _delayed(self, state: TableState, envelope: Envelope, data: BaseModel | None) -> None:
        if not envelope.delayed:
            return
        state.delayed.append(
            {
                "seq": envelope.seq,
                "round": envelope.round,
                "kind": envelope.kind,
                "at": at_text(envelope.at),
                "replayed": bool(envelope.replayed),
                "text": _data_result_text(data),
            }
        )
