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

An alert is **resolved** when its cause ends (:meth:`Floor.apply` sees it): a halt when the
round resumes or ends, a pit alert when its round ends, a device's alert when the device is
back, a table's ``table_status`` alert when the table says ``ready``. It is **acknowledged**
when the table accepted a pit boss's ``cmd/pit/ack`` for it (:meth:`Floor.acknowledge`, who
and when). Device states are kept in words (:mod:`.words`), the raw detail beside them.

Every payload is read with the one hardened parse (:mod:`controller.inbound`): one that
cannot be read, or whose ``seq`` is beyond what the table could have sent, is a rejection,
logged once and counted (reader ``pit``, :attr:`Floor.rejections`) and shown as the floor's
last problem; it changes no table. No payload raises.

What pages receive is built here (:meth:`Floor.view`, :meth:`Floor.table_view`): chosen
fields only, never a message as received, and nothing from a ``secure/`` topic (such a
message is ignored, whatever the broker delivered).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from controller.inbound import (
    Rejection,
    RejectionLog,
    parse_betting_status,
    parse_shared_object,
)
from controller.journal.entries import (
    DeviceStatusData,
    PitAlertData,
    RoundHaltedData,
    RoundResultData,
    RoundVoidedData,
    TableStatusData,
)
from controller.messages import Envelope, StatusMessage
from controller.studio.pit.words import device_label, device_words, state_words
from controller.studio.view import next_slot
from controller.tablefold import Channel, JournalChange, TableFold, at_text, wire
from controller.watch import describe

ALERT_KINDS = frozenset({"pit_alert", "round_halted", "table_status", "device_status"})
"""Event kinds listed as alerts."""

QUIET_DEVICE_STATES = frozenset({"connected", "recovered", "boot", "ready"})
"""Device states that are good news: shown in the table's devices, not listed as alerts."""

QUIET_TABLE_STATES = frozenset({"ready"})
"""``table_status`` states that are good news: they resolve the table's earlier alerts."""

RESOLVED_KEPT = 20
"""Resolved alerts kept per table (shown dimmed, newest first, under the active ones)."""

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
        detail: The raw detail behind the words (a device's error, a gate's detail).
        device: The device a ``device_status`` alert is about.
    """

    table: str
    seq: int | None
    at: str | None
    kind: str
    text: str
    round_id: str | None
    delayed: bool
    detail: str | None = None
    device: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The page's form (without its acknowledgement and resolution: see ``TableState``)."""
        return {
            "table": self.table,
            "seq": self.seq,
            "at": self.at,
            "kind": self.kind,
            "text": self.text,
            "round": self.round_id,
            "delayed": self.delayed,
            "detail": self.detail,
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
        acks: Acknowledged alerts, by the alert's ``seq``: ``{by, at}``.
        resolved: Resolved alerts, by the alert's ``seq``: ``{at, why}``.
        losses: When each device was last lost (UTC ISO), while it is lost and after.
        rounds: The ``seq`` range of each round seen on ``events``/``results``
            (``[first, last]``, the last rounds only): what a replay of a round asks for.
    """

    table: str
    fold: TableFold
    alerts: deque[Alert] = field(default_factory=deque)
    delayed: deque[dict[str, Any]] = field(default_factory=deque)
    lines: deque[str] = field(default_factory=deque)
    acks: dict[int, dict[str, str]] = field(default_factory=dict)
    resolved: dict[int, dict[str, str | None]] = field(default_factory=dict)
    losses: dict[str, str | None] = field(default_factory=dict)
    rounds: dict[str, list[int]] = field(default_factory=dict)

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
    body = parse_shared_object(payload)  # the parse the fold's read made: not another
    return wire(message) if isinstance(body, Rejection) else body


_SEAT = re.compile(r"\bseat(\d+)\b")


def _people(text: str) -> str:
    """A hand or seat token for people: ``seat5`` reads ``seat 5``."""
    return _SEAT.sub(r"seat \1", text)


def game_name(game: str | None) -> str | None:
    """The game's name for people (the registry's), ``None`` for no or an unknown game."""
    from controller.games.registry import game_spec

    if not game:
        return None
    try:
        return game_spec(game).name
    except Exception:
        return None


def _decision_text(decision: Mapping[str, Any] | None) -> str | None:
    if decision is None:
        return None
    seat = str(decision["seat"]).removeprefix("seat") if decision.get("seat") else ""
    return _people(
        f"{decision.get('window')} ({decision.get('kind')}{' seat ' + seat if seat else ''})"
    )


def _result_text(result: Mapping[str, Any] | None) -> str | None:
    """A round's result (the round fold's), for people."""
    if result is None:
        return None
    if result.get("voided"):
        return f"voided: {result.get('reason')}"
    winner = result.get("winner")
    return "tie" if winner == "tie" else _people(f"{winner} wins")


def _data_result_text(data: BaseModel | None) -> str | None:
    """A ``results`` message's outcome, for people."""
    if isinstance(data, RoundVoidedData):
        return f"voided: {data.reason}"
    if isinstance(data, RoundResultData):
        return "tie" if data.winner == "tie" else _people(f"{data.winner} wins")
    return None


def _alert_text(data: BaseModel | None) -> tuple[str, str | None] | None:
    """The alert an event raises, in words, and its raw detail (``None``: not an alert)."""
    if isinstance(data, DeviceStatusData):
        if data.state in QUIET_DEVICE_STATES:
            return None  # a device coming back is no alert
        detail = f"{data.device}: {data.state}" + (f" ({data.detail})" if data.detail else "")
        return f"{device_label(data.device)} {state_words(data.state)}", detail
    if isinstance(data, TableStatusData):
        if data.state in QUIET_TABLE_STATES:
            return None
        words = data.state.replace("_", " ")
        return f"Table {words}" + (f": {data.detail}" if data.detail else ""), data.detail
    if isinstance(data, RoundHaltedData):
        return f"Round halted: {data.reason}", data.reason
    if isinstance(data, PitAlertData):
        where = f" at {data.slot}" if data.slot else ""
        return f"Pit alert{where}: {data.reason or 'the dealer asks for the pit boss'}", data.reason
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
        change = state.fold.journal_change
        read = state.fold.read(channel, payload, self.clock())
        if isinstance(read, Rejection):
            self._reject(read.at(topic, table))
            return ""
        step, message = read
        if message is None or not step.new:
            return None  # a repeat, or a retained message cleared
        self.tables[table] = state
        self.last_message = Message(table, channel, topic, _as_received(payload, message))
        self._new_journal(state, change)
        if step.gap_text:
            self._line(state, step.gap_text)
        if isinstance(message, Envelope) and channel in ("events", "results"):
            self._span(state, message)
            self._resolve(state, message, step.data)
        if channel == "events" and isinstance(message, Envelope):
            self._alert(state, message, step.data)
        elif channel == "results" and isinstance(message, Envelope):
            self._delayed(state, message, step.data)
        if channel in ("events", "status"):  # (a retained snapshot is worded as no line)
            self._line(state, describe(topic, wire(message)))
        return table

    def _new_journal(self, state: TableState, before: JournalChange | None) -> None:
        """A new journal the message started (issue 22): said in the feed.

        Its ``seq`` starts over, so the rounds' ``seq`` ranges seen so far are another
        journal's: a replay by round must not ask the new journal for them.
        """
        change = state.fold.journal_change
        if change is None or change is before:
            return
        state.rounds.clear()
        self._line(state, f"! {change.text}")

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
            "game_name": game_name(state.game),
            "session": state.session,
            "round": round_.round_id,
            "round_no": round_.round_no,
            "state": state.state,
            "halted": round_.halted,
            "awaiting_rescan": round_.awaiting_rescan,
            "next_slot": next_slot(round_),
            "decision": _decision_text(round_.decision),
            "betting_closes_at": round_.betting_closes_at,
            "result": state.result,
            "last_seq": state.last_seq,
            "devices": {
                name: {
                    **device_words(
                        name,
                        device.state,
                        at=device.at,
                        detail=device.detail,
                        lost_at=state.losses.get(name),
                    ).to_json(),
                    "state": device.state,
                }
                for name, device in fold.devices.items()
            },
            "gate": None
            if gate is None
            else {"state": gate.state, "detail": gate.detail, "at": gate.at},
            "alerts": [self._alert_view(state, alert) for alert in state.alerts],
            "rounds": {round_id: list(span) for round_id, span in state.rounds.items()},
            "delayed": list(state.delayed),
            "lines": list(state.lines),
            "journal": fold.journal,
            "journal_change": None
            if fold.journal_change is None
            else fold.journal_change.to_wire(),
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

    @staticmethod
    def _alert_view(state: TableState, alert: Alert) -> dict[str, Any]:
        seq = alert.seq if alert.seq is not None else -1
        return {
            **alert.to_json(),
            "ack": state.acks.get(seq),
            "resolved": state.resolved.get(seq),
        }

    def acknowledge(self, table: str, seq: int, *, by: str, at: str) -> bool:
        """Note an alert acknowledged (the table accepted the ack).

        Returns:
            Whether the table's view changed (a known table, not acknowledged before).
        """
        state = self.tables.get(table)
        if state is None or seq in state.acks:
            return False
        state.acks[seq] = {"by": by, "at": at}
        while len(state.acks) > 4 * max(1, self._alerts_per_table):
            del state.acks[next(iter(state.acks))]
        return True

    def alert(self, table: str, seq: int) -> Alert | None:
        """A table's listed alert by its ``seq``."""
        state = self.tables.get(table)
        if state is None:
            return None
        return next((alert for alert in state.alerts if alert.seq == seq), None)

    def round_span(self, table: str, round_id: str) -> tuple[int, int] | None:
        """The ``seq`` range the floor saw of a round (``None``: not seen)."""
        state = self.tables.get(table)
        span = state.rounds.get(round_id) if state is not None else None
        return (span[0], span[1]) if span else None

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
        said = _alert_text(data) if envelope.kind in ALERT_KINDS else None
        if said is None:
            return
        text, detail = said
        state.alerts.append(
            Alert(
                table=state.table,
                seq=envelope.seq,
                at=at_text(envelope.at),
                kind=envelope.kind,
                text=text,
                round_id=envelope.round,
                delayed=envelope.delayed,
                detail=detail,
                device=data.device if isinstance(data, DeviceStatusData) else None,
            )
        )
        listed = {alert.seq for alert in state.alerts}
        for gone in [seq for seq in state.resolved if seq not in listed]:
            del state.resolved[gone]

    def _span(self, state: TableState, envelope: Envelope) -> None:
        """Widen the ``seq`` range of the envelope's round (the last rounds only)."""
        if envelope.round is None:
            return
        span = state.rounds.get(envelope.round)
        if span is None:
            state.rounds[envelope.round] = [envelope.seq, envelope.seq]
            while len(state.rounds) > max(1, self._alerts_per_table):
                del state.rounds[next(iter(state.rounds))]
        else:
            span[0], span[1] = min(span[0], envelope.seq), max(span[1], envelope.seq)

    def _resolve(self, state: TableState, envelope: Envelope, data: BaseModel | None) -> None:
        """Resolve the alerts whose cause this entry ends (and note a device's loss)."""
        at = at_text(envelope.at)
        if isinstance(data, DeviceStatusData):
            if data.state == "lost":
                state.losses[data.device] = at
                return
            if data.state not in QUIET_DEVICE_STATES:
                return
            why = f"{device_label(data.device)} {state_words(data.state)}"
            self._close(state, at, why, lambda a: a.device == data.device)
        elif isinstance(data, TableStatusData) and data.state in QUIET_TABLE_STATES:
            self._close(state, at, f"table {data.state}", lambda a: a.kind == "table_status")
        elif envelope.kind == "round_resumed":
            by = getattr(data, "by", None)
            why = f"round resumed by {by}" if by else "round resumed"
            self._close(
                state,
                at,
                why,
                lambda a: a.kind == "round_halted" and a.round_id == envelope.round,
            )
        elif envelope.kind in ("round_result", "round_voided"):
            why = "round voided" if envelope.kind == "round_voided" else "round finished"
            self._close(
                state,
                at,
                why,
                lambda a: a.kind in ("round_halted", "pit_alert") and a.round_id == envelope.round,
            )

    @staticmethod
    def _close(
        state: TableState, at: str | None, why: str, matches: Callable[[Alert], bool]
    ) -> None:
        for alert in state.alerts:
            if alert.seq is None or alert.seq in state.resolved or not matches(alert):
                continue
            state.resolved[alert.seq] = {"at": at, "why": why}

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
