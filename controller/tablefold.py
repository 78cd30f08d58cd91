"""One table's public stream folded into what people see: the one table fold (pure: no I/O).

The studio's views (:mod:`controller.studio.view`), the pit console's floor
(:mod:`controller.studio.pit.floor`) and ``tablectl watch`` (:mod:`controller.watch`) follow a
table through a :class:`TableFold`. Every payload is read by the one hardened parse
(:mod:`controller.inbound`: :meth:`TableFold.read`), so what the fold gets is typed: the
table's :class:`~controller.messages.StatusMessage`, the retained round snapshot, and each
:class:`~controller.messages.Envelope` with its data validated as its kind's model. A reader
never folds a message itself; it reads what the fold says (:class:`Step`) and shows it.

What the fold keeps (docs/studio.md, "State"):

* the table's status (online or offline; a lower ``session`` is a new journal: its ``seq``
  starts over);
* the current round: the shared round fold :class:`~controller.journal.RoundFold`, the one
  the retained snapshot, the outbox and the archive are built with, rebuilt from a retained
  snapshot at least as new as what the fold holds, then followed by ``events`` in ``seq``
  order;
* what the round fold does not keep but a page needs (:class:`RoundExtras`): the misread
  awaiting a rescan, the last refused card, the halt's reason, the decisions, the equities,
  the settlement, and on a secure fold the hidden cards' values;
* the devices, the table's gate (``table_status``), the last pit alerts;
* ``last_seq`` and the de-duplication: an ``events`` or ``results`` ``seq`` is new once; an
  event at or below ``last_seq`` (late: a replay, or already in the snapshot) is new to a
  feed of lines but never folded into the round; a gap in ``events`` is reported.

A ``seq`` beyond what the table could have sent (:class:`~controller.inbound.SeqGuard`) is a
rejection, never the new ``last_seq``: the fold keeps following the real table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from controller.errors import TablectlError
from controller.inbound import (
    BOUNDS,
    Bounds,
    Rejection,
    SeqGuard,
    parse_envelope,
    parse_snapshot,
    parse_status,
    validate,
)
from controller.journal.entries import (
    CardDealtData,
    CardRefusedData,
    DecisionAppliedData,
    DeviceStatusData,
    PitAlertData,
    RescanRequestedData,
    RoundHaltedData,
    RoundResultData,
    RoundResumedData,
    RoundVoidedData,
    TableInfoData,
    TableStatusData,
)
from controller.journal.fold import DealtCard, RoundFold
from controller.messages import (
    DATA_MODELS,
    PUBLIC_DATA_MODELS,
    Envelope,
    RoundSnapshotData,
    StatusMessage,
    utc_text,
)

Channel = Literal["status", "round", "events", "results", "secure"]
"""What a topic carries, from its levels after the table id."""

KEEP_DECISIONS = 12
"""Decisions of the current round kept."""

KEEP_PIT_ALERTS = 5
"""Pit alerts kept (the latest last)."""

KEEP_SEQS = 2000
"""``seq`` values remembered per stream to drop repeats (the newest are kept)."""


def at_text(moment: datetime | None) -> str | None:
    """``moment`` as the wire writes it (UTC ISO with ``Z``); as it reads when it cannot be.

    A message's time is whatever its sender wrote: one without a time zone, or one that
    leaves the calendar when moved to UTC, is shown as written (never raises).
    """
    if moment is None:
        return None
    try:
        return utc_text(moment)
    except (TablectlError, OverflowError, ValueError):
        return moment.isoformat()


def wire(message: Envelope | StatusMessage) -> dict[str, Any]:
    """A parsed message as its JSON object (for :func:`controller.watch.describe`, pages).

    Never raises: its time is written by :func:`at_text`.
    """
    body = message.model_dump(exclude={"at"})
    body["at"] = at_text(message.at)
    return body


def typed_data(envelope: Envelope, *, secure: bool = False) -> BaseModel | None:
    """An envelope's data as its kind's model (``None``: a kind this release does not know).

    ``envelope`` comes from :func:`controller.inbound.parse_envelope`, which validated the
    data already; never raises.
    """
    model = (DATA_MODELS if secure else PUBLIC_DATA_MODELS).get(envelope.kind)
    if model is None:
        return None
    data = validate(model, envelope.data, envelope.kind)
    return None if isinstance(data, Rejection) else data


def snapshot_fold(round_id: str | None, data: RoundSnapshotData) -> RoundFold:
    """A round fold rebuilt from a retained ``round_snapshot``'s data."""
    cards = tuple(
        DealtCard(slot=c.slot, hand=c.hand, index=c.index, face=c.face, card=c.card)
        for c in data.cards
    )
    indices = [card.index for card in cards if card.index is not None]
    result = data.result
    return RoundFold(
        round_id=round_id,
        round_no=data.round_no,
        game=data.game,
        state=data.state,
        betting_closes_at=data.betting_closes_at,
        betting_closed=data.state in ("dealing", "settled"),
        cards=cards,
        next_index=max(indices) + 1 if indices else 0,
        awaiting_rescan=data.awaiting_rescan,
        halted=data.halted,
        decision=dict(data.decision) if data.decision is not None else None,
        result=dict(result) if result is not None else None,
        outcome=None if result is None else ("void" if result.get("voided") else "result"),
    )


@dataclass(frozen=True, slots=True)
class Device:
    """A device's last ``device_status``.

    Attributes:
        state: Its state (``connected``, ``lost``...).
        detail: What it said, if anything.
        at: When (the envelope's time).
    """

    state: str
    detail: str | None
    at: str | None


@dataclass(frozen=True, slots=True)
class Gate:
    """The table's last ``table_status`` (``waiting`` for the broker or betting, ``ready``).

    Attributes:
        state: The gate's state.
        detail: What it waits for, if said.
        at: When (the envelope's time).
        data: The data as published (what pages show).
    """

    state: str
    detail: str | None
    at: str | None
    data: Mapping[str, Any]


@dataclass
class RoundExtras:
    """What a page shows of a round beyond the round fold (reset when a new round starts).

    Attributes:
        rescan: The misread awaiting its rescan: ``slot``, ``attempt``, ``cause``, ``detail``.
        refused: The last refused card: ``slot``, ``card`` (``None`` when withheld),
            ``reason``; cleared by the next card dealt.
        halt_reason: Why the round is halted.
        decisions: The decisions applied in this round (the latest last).
        equity: Public win probabilities by street (``table_info`` ``equity`` not secure).
        info: Other public ``table_info`` by kind (Mahjong's ``bank``...).
        settlement: The round's settlement lines (``results``).
        hidden: Secure folds only: each hidden slot's value (``secure/events``).
        secure_equity: Secure folds only: the secure win probabilities by street.
    """

    rescan: dict[str, Any] | None = None
    refused: dict[str, Any] | None = None
    halt_reason: str | None = None
    decisions: list[dict[str, Any]] = field(default_factory=list)
    equity: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    settlement: Any = None
    hidden: dict[str, str] = field(default_factory=dict)
    secure_equity: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Step:
    """What one message did.

    Attributes:
        changed: The fold changed (a page is told).
        new: Its ``seq`` was not seen before on its stream (a feed of lines shows it; a late
            event is new but does not change the round).
        gap: ``events`` skipped: the first and last ``seq`` not received.
        data: An envelope's data as its kind's model (``None``: unknown kind, or not an
            envelope).
    """

    changed: bool
    new: bool
    gap: tuple[int, int] | None = None
    data: BaseModel | None = None

    @property
    def gap_text(self) -> str | None:
        """The gap as ``tablectl watch`` prints it."""
        if self.gap is None:
            return None
        return f"! gap: events {self.gap[0]}..{self.gap[1]} not received"


NOTHING = Step(changed=False, new=False)
"""A message that changes nothing and is not shown (a repeat, a cleared retained message)."""


@dataclass(slots=True)
class SeqWindow:
    """The ``seq`` values seen on one stream (bounded) and the highest of them.

    Attributes:
        keep: How far below the highest a late ``seq`` is still recognised as a repeat.
        high: The highest seen (``None``: none yet).
    """

    keep: int = KEEP_SEQS
    high: int | None = None
    _seen: set[int] = field(default_factory=set)

    def see(self, seq: int) -> tuple[bool, tuple[int, int] | None]:
        """Whether ``seq`` is new, and the ``seq`` values skipped when it is above the highest."""
        if seq in self._seen:
            return False, None
        self._seen.add(seq)
        if len(self._seen) > 2 * self.keep:
            floor = max(self._seen) - self.keep
            self._seen = {old for old in self._seen if old >= floor}
        last = self.high
        if last is not None and seq <= last:
            return True, None  # late, not a repeat
        self.high = seq
        return True, (last + 1, seq - 1) if last is not None and seq > last + 1 else None

    def clear(self) -> None:
        """Forget every ``seq`` (a new journal)."""
        self._seen.clear()
        self.high = None


@dataclass
class TableFold:
    """One table, folded from its typed public messages (see the module notes).

    Args:
        table: The table id (a message naming another is rejected).
        secure: Whether ``secure/events`` are folded (the secure-delay view only).
        bounds: The parse's bounds and the table's maximum rate.

    Attributes:
        status: The last status (``None``: none seen).
        round: The current round.
        extras: The round's other facts.
        last_seq: The highest ``seq`` folded in from ``events`` (or a snapshot's
            ``last_seq``).
        devices: Each device's last state.
        gate: The last ``table_status``.
        pit_alerts: The last pit alerts' data (the latest last).
        events: The ``seq`` values seen on ``events``.
        results: The ``seq`` values seen on ``results``.
        guard: What ``seq`` the table could have sent.
    """

    table: str
    secure: bool = False
    bounds: Bounds = BOUNDS
    status: StatusMessage | None = None
    round: RoundFold = field(default_factory=RoundFold)
    extras: RoundExtras = field(default_factory=RoundExtras)
    last_seq: int = 0
    devices: dict[str, Device] = field(default_factory=dict)
    gate: Gate | None = None
    pit_alerts: list[dict[str, Any]] = field(default_factory=list)
    events: SeqWindow = field(default_factory=SeqWindow)
    results: SeqWindow = field(default_factory=SeqWindow)
    guard: SeqGuard = field(init=False)

    def __post_init__(self) -> None:
        self.guard = SeqGuard(self.bounds)

    # -- in -----------------------------------------------------------------------------------

    def read(
        self, channel: Channel, payload: bytes | bytearray | str, now: float
    ) -> tuple[Step, Envelope | StatusMessage | None] | Rejection:
        """Parse one payload of ``channel`` with the one parse and fold it in (never raises).

        Args:
            channel: What the topic carries.
            payload: The message's bytes (empty: a retained message cleared, which changes
                nothing).
            now: Epoch seconds (what the table could have sent by now).

        Returns:
            What it did and the typed message, or the rejection (the reader places it on its
            topic and records it).
        """
        if not payload:
            return NOTHING, None
        if channel == "status":
            status = parse_status(payload, table=self.table, bounds=self.bounds)
            if isinstance(status, Rejection):
                return status
            return self.on_status(status, now), status
        if channel == "round":
            snapshot = parse_snapshot(payload, table=self.table, bounds=self.bounds)
            if isinstance(snapshot, Rejection):
                return snapshot
            step = self.on_snapshot(*snapshot, now)
            return step if isinstance(step, Rejection) else (step, snapshot[0])
        secure = channel == "secure"
        envelope = parse_envelope(payload, table=self.table, secure=secure, bounds=self.bounds)
        if isinstance(envelope, Rejection):
            return envelope
        if channel == "events":
            step = self.on_event(envelope, now)
        elif channel == "results":
            step = self.on_result(envelope, now)
        else:
            step = self.on_secure(envelope)
        return step if isinstance(step, Rejection) else (step, envelope)

    def on_status(self, status: StatusMessage, now: float) -> Step:
        """The table's status (birth, clean stop, Last Will)."""
        if self.status is not None and status.session < self.status.session:
            # A lower session: a new journal for this table id; its seq starts over.
            self.last_seq = 0
            self.events.clear()
            self.results.clear()
            self.guard.forget(self.table)
        self.guard.on_status(status, now)
        limit = self.guard.limit(self.table, now)
        if limit is not None and self.last_seq > limit:
            # Taken before the status anchored the table (the first seq read anchors until
            # then), yet beyond what it could have sent: not where the table is.
            self.last_seq = status.chain_head.seq if status.chain_head is not None else 0
            self.events.clear()
            self.results.clear()
        self.status = status
        return Step(changed=True, new=True)

    def on_snapshot(
        self, envelope: Envelope, data: RoundSnapshotData, now: float
    ) -> Step | Rejection:
        """The retained round snapshot: rebuilds the round when not older than the fold."""
        ahead = self.guard.admit(self.table, data.last_seq, now)
        if ahead is not None:
            return ahead
        last = data.last_seq
        if last < self.last_seq:
            return NOTHING  # older than what the events told
        fold = snapshot_fold(envelope.round, data)
        if fold == self.round and last == self.last_seq:
            return NOTHING  # the snapshot of what the events already told
        if envelope.round != self.round.round_id:
            self.extras = RoundExtras()
        self.round = fold
        if fold.awaiting_rescan is None:
            self.extras.rescan = None
        if not fold.halted:
            self.extras.halt_reason = None
        self.last_seq = last
        return Step(changed=True, new=True)

    def on_event(self, envelope: Envelope, now: float) -> Step | Rejection:
        """One ``events`` entry: folded in when above ``last_seq``."""
        ahead = self.guard.admit(self.table, envelope.seq, now)
        if ahead is not None:
            return ahead
        new, gap = self.events.see(envelope.seq)
        if not new:
            return NOTHING
        data = typed_data(envelope)
        if envelope.seq <= self.last_seq:
            return Step(changed=False, new=True, gap=gap, data=data)
        self.last_seq = envelope.seq
        if envelope.round is not None:
            if envelope.round != self.round.round_id:
                self.extras = RoundExtras()
            self.round = self.round.follow(envelope.round, envelope.kind, envelope.data)
        self._extras(envelope, data)
        return Step(changed=True, new=True, gap=gap, data=data)

    def on_result(self, envelope: Envelope, now: float) -> Step | Rejection:
        """One ``results`` message: the settlement of the current round."""
        ahead = self.guard.admit(self.table, envelope.seq, now)
        if ahead is not None:
            return ahead
        new, _ = self.results.see(envelope.seq)
        if not new:
            return NOTHING
        data = typed_data(envelope)
        if envelope.round is None or envelope.round != self.round.round_id:
            return Step(changed=False, new=True, data=data)  # a replayed result of an earlier round
        if isinstance(data, RoundResultData | RoundVoidedData):
            self.extras.settlement = envelope.data.get("bets")
        return Step(changed=True, new=True, data=data)

    def on_secure(self, envelope: Envelope) -> Step:
        """One ``secure/events`` entry (a secure fold only): a hidden card's value, equities."""
        if not self.secure or envelope.round is None or envelope.round != self.round.round_id:
            return NOTHING
        data = typed_data(envelope, secure=True)
        if isinstance(data, CardDealtData) and data.card is not None:
            self.extras.hidden[data.slot] = data.card
            return Step(changed=True, new=True, data=data)
        if isinstance(data, TableInfoData) and data.kind == "equity" and data.data is not None:
            self.extras.secure_equity[str(data.data.get("street", "?"))] = dict(data.data)
            return Step(changed=True, new=True, data=data)
        return NOTHING

    def _extras(self, envelope: Envelope, data: BaseModel | None) -> None:
        """What an event adds besides the round fold, by its typed data."""
        add = None if data is None else _EXTRAS.get(type(data))
        if add is not None:
            add(self, envelope, data)

    def _card_dealt(self, _envelope: Envelope, _data: CardDealtData) -> None:
        self.extras.rescan = self.extras.refused = None

    def _rescan(self, _envelope: Envelope, data: RescanRequestedData) -> None:
        self.extras.rescan = {
            "slot": data.slot,
            "attempt": data.attempt,
            "cause": data.cause,
            "detail": data.detail,
        }

    def _refused(self, _envelope: Envelope, data: CardRefusedData) -> None:
        self.extras.refused = {"slot": data.slot, "card": data.card, "reason": data.reason}

    def _halted(self, _envelope: Envelope, data: RoundHaltedData) -> None:
        self.extras.halt_reason = data.reason or "halted"

    def _resumed(self, _envelope: Envelope, _data: RoundResumedData) -> None:
        self.extras.halt_reason = self.extras.rescan = None

    def _decision_applied(self, envelope: Envelope, _data: DecisionAppliedData) -> None:
        self.extras.decisions = [*self.extras.decisions, dict(envelope.data)][-KEEP_DECISIONS:]

    def _table_info(self, _envelope: Envelope, data: TableInfoData) -> None:
        if data.secure or data.data is None:
            return  # the public view of a secure entry: kind and secure only
        if data.kind == "equity":
            self.extras.equity[str(data.data.get("street", "?"))] = dict(data.data)
        else:
            self.extras.info[data.kind] = dict(data.data)

    def _device(self, envelope: Envelope, data: DeviceStatusData) -> None:
        self.devices[data.device] = Device(data.state, data.detail, at_text(envelope.at))

    def _table_status(self, envelope: Envelope, data: TableStatusData) -> None:
        self.gate = Gate(data.state, data.detail, at_text(envelope.at), dict(envelope.data))

    def _pit_alert(self, envelope: Envelope, _data: PitAlertData) -> None:
        self.pit_alerts = [*self.pit_alerts, dict(envelope.data)][-KEEP_PIT_ALERTS:]

    # -- out ----------------------------------------------------------------------------------

    @property
    def online(self) -> bool | None:
        """Whether the table's controller is online (``None``: no status seen)."""
        return None if self.status is None else self.status.state == "online"


_EXTRAS: dict[type[BaseModel], Callable[[TableFold, Envelope, Any], None]] = {
    CardDealtData: TableFold._card_dealt,
    RescanRequestedData: TableFold._rescan,
    CardRefusedData: TableFold._refused,
    RoundHaltedData: TableFold._halted,
    RoundResumedData: TableFold._resumed,
    DecisionAppliedData: TableFold._decision_applied,
    TableInfoData: TableFold._table_info,
    DeviceStatusData: TableFold._device,
    TableStatusData: TableFold._table_status,
    PitAlertData: TableFold._pit_alert,
}
"""What an event adds to the fold besides the round fold, by its data's model."""
