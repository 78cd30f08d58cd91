"""One table's public stream folded into what people see: the one table fold (pure: no I/O).

The studio's views (:mod:`controller.studio.view`), the pit console's floor
(:mod:`controller.studio.pit.floor`) and ``tablectl watch`` (:mod:`controller.watch`) follow a
table through a :class:`TableFold`. Every payload is read by the one hardened parse
(:mod:`controller.inbound`: :meth:`TableFold.read`), so what the fold gets is typed: the
table's :class:`~controller.messages.StatusMessage`, the retained round snapshot, and each
:class:`~controller.messages.Envelope` with its data validated as its kind's model. A reader
never folds a message itself; it reads what the fold says (:class:`Step`) and shows it.

What the fold keeps (docs/studio.md, "State"):

* the table's status (online or offline) and the journal it follows: a status naming another
  journal id (issue 22) is a new journal, whose ``seq`` starts over: the fold forgets the old
  journal's ``seq`` values and round and keeps a :class:`JournalChange` to show ("tp-01
  started a new journal at ...; the previous one ended at seq N"); a message of a journal the
  table left is refused (``other_journal``), as Sparkplug B's consumers ignore what an earlier
  birth sequence sends;
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
    DecisionOpenData,
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
    RoundResultPublicData,
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
        DealtCard(
            slot=c.slot,
            hand=c.hand,
            index=c.index,
            face=c.face,
            card=c.card,
            manual=c.source == "manual",
        )
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
        details: The result's ``details`` (the game's: Hold'em pots, the Mulligan paths,
            Break Poker's house way, Mahjong's positions), once the result is in.
        holdem: Hold'em only: the seats as the round goes (stacks, bets, last actions,
            folds, the pot), from the action windows' public info and the decisions.
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
    details: dict[str, Any] | None = None
    holdem: HoldemSeats | None = None


def _chips(value: Any) -> int | None:
    """A chip count as published (an int; ``None`` for anything else)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _names(value: Any) -> set[str]:
    """The seat names of a published list (anything else: none)."""
    return {s for s in value if isinstance(s, str)} if isinstance(value, list) else set()


def _seat_key(seat: str) -> tuple[int, str]:
    """Sort key of ``seat3``/``P3``: by the number in it, then the text."""
    digits = "".join(ch for ch in seat if ch in "0123456789")
    return (int(digits) if digits and len(digits) < 6 else 10**6, seat)


def chips_text(amount: int) -> str:
    """Chips as people read them (``12,500``)."""
    return f"{amount:,}"


def action_words(action: str, amount: int | None, to: int | None) -> str:
    """A Hold'em action in words: ``check``, ``call 300``, ``bet 330``, ``raise to 990``.

    Args:
        action: The normalised action (``fold check call bet raise all_in``).
        amount: The chips it put in.
        to: The seat's bet on the street after it (what a raise is "to").
    """
    if action == "all_in":
        return f"all-in {chips_text(amount)}" if amount else "all-in"
    if action in ("call", "bet") and amount:
        return f"{action} {chips_text(amount)}"
    if action == "raise" and to:
        return f"raise to {chips_text(to)}"
    return action.replace("_", " ")


@dataclass
class HoldemSeat:
    """One Hold'em seat as the overlay shows it.

    Attributes:
        stack: Chips behind (``None``: not known yet).
        bet: Chips put in on this street.
        action: The last action in words (``raise to 990``), this street's (a fold or an
            all-in stays).
        folded: Out of the hand.
        all_in: No chips behind.
    """

    stack: int | None = None
    bet: int = 0
    action: str | None = None
    folded: bool = False
    all_in: bool = False


@dataclass
class HoldemSeats:
    """The Hold'em table as a round goes, from public facts only (never a hole card).

    An action window's ``info`` gives every seat's stack, street bet, folds, all-ins, the
    pot and the button; each ``decision_applied`` then moves the acting seat's chips into
    the pot and names its action; the result's ``details`` give the pots (main and side)
    and the stacks after.

    Attributes:
        seats: By seat id (``seat3``), in seat order.
        pot: Chips in the middle (``None``: not known yet).
        pots: The result's pots, main first: ``amount``, ``winners``.
        button: The button's seat.
        street: The street of the last window.
    """

    seats: dict[str, HoldemSeat] = field(default_factory=dict)
    pot: int | None = None
    pots: list[dict[str, Any]] = field(default_factory=list)
    button: str | None = None
    street: str | None = None

    @classmethod
    def sitting(cls, seats: tuple[str, ...]) -> HoldemSeats:
        """A table of these seats, nothing known of their chips yet."""
        return cls(seats={seat: HoldemSeat() for seat in seats})

    def window(self, info: Mapping[str, Any]) -> None:
        """An action window's public ``info``: stacks, bets, folds, pot, button, street."""
        street = info.get("street")
        new_street = isinstance(street, str) and street != self.street
        if isinstance(street, str):
            self.street = street
        stacks = info.get("stacks")
        bets = info.get("street_bets")
        folded = _names(info.get("folded"))
        all_in = _names(info.get("all_in"))
        if isinstance(stacks, Mapping):
            for named in sorted((s for s in stacks if isinstance(s, str)), key=_seat_key):
                self.seats.setdefault(named, HoldemSeat())
        self.seats = dict(sorted(self.seats.items(), key=lambda item: _seat_key(item[0])))
        for name, seat in self.seats.items():
            if isinstance(stacks, Mapping) and _chips(stacks.get(name)) is not None:
                seat.stack = _chips(stacks.get(name))
            if isinstance(bets, Mapping):
                seat.bet = _chips(bets.get(name)) or 0
            seat.folded = seat.folded or name in folded
            seat.all_in = name in all_in
            if new_street and not seat.folded and not seat.all_in:
                seat.action = None
        pot = _chips(info.get("pot"))
        if pot is not None:
            self.pot = pot
        if isinstance(info.get("button"), str):
            self.button = info["button"]

    def decided(self, decision: Mapping[str, Any]) -> None:
        """A ``decision_applied``'s normalised decision: the seat's action and chips."""
        name, action = decision.get("seat"), decision.get("action")
        if not isinstance(name, str) or not isinstance(action, str):
            return
        seat = self.seats.setdefault(name, HoldemSeat())
        amount = _chips(decision.get("amount")) or 0
        if amount > 0:
            seat.bet += amount
            if seat.stack is not None:
                seat.stack = max(0, seat.stack - amount)
            if self.pot is not None:
                self.pot += amount
        seat.folded = seat.folded or action == "fold"
        seat.all_in = seat.all_in or action == "all_in" or (seat.stack == 0 and amount > 0)
        seat.action = action_words(action, amount, seat.bet)

    def settled(self, details: Mapping[str, Any]) -> None:
        """The result's details: the pots, the stacks after, the button."""
        pots = details.get("pots")
        if isinstance(pots, list):
            self.pots = [
                {
                    "amount": _chips(p.get("amount")),
                    "winners": sorted(_names(p.get("winners")), key=_seat_key),
                }
                for p in pots
                if isinstance(p, Mapping)
            ]
            self.pot = sum(p["amount"] or 0 for p in self.pots)
        after = details.get("stacks_after")
        if isinstance(after, Mapping):
            for name, chips in after.items():
                if isinstance(name, str) and _chips(chips) is not None:
                    self.seats.setdefault(name, HoldemSeat()).stack = _chips(chips)
            self.seats = dict(sorted(self.seats.items(), key=lambda item: _seat_key(item[0])))
        if isinstance(details.get("button"), str):
            self.button = details["button"]

    def to_wire(self) -> dict[str, Any]:
        """The seats as the pages get them (JSON-able)."""
        return {
            "seats": [
                {
                    "seat": name,
                    "stack": seat.stack,
                    "stack_text": None if seat.stack is None else chips_text(seat.stack),
                    "bet": seat.bet,
                    "action": seat.action,
                    "folded": seat.folded,
                    "all_in": seat.all_in,
                }
                for name, seat in self.seats.items()
            ],
            "pot": self.pot,
            "pot_text": None if self.pot is None else chips_text(self.pot),
            "pots": [
                {**p, "amount_text": None if p["amount"] is None else chips_text(p["amount"])}
                for p in self.pots
            ],
            "button": self.button,
            "street": self.street,
        }


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


@dataclass(frozen=True, slots=True)
class JournalChange:
    """A table that came up with a new journal (issue 22): what the pages show.

    Attributes:
        table: The table id.
        journal: The new journal's id.
        previous: The journal it replaced.
        previous_last_seq: The last ``seq`` the fold saw of the previous journal (0: none).
        at: When the new journal's status says it came up (``None``: a Last Will, or a status
            without a time).
    """

    table: str
    journal: str
    previous: str
    previous_last_seq: int
    at: datetime | None

    @property
    def text(self) -> str:
        """The notice, as the studio, the pit console and ``tablectl watch`` show it."""
        when = at_text(self.at) or "an unknown time"
        return (
            f"{self.table} started a new journal at {when}; the previous one ended at seq "
            f"{self.previous_last_seq}"
        )

    def to_wire(self) -> dict[str, Any]:
        """The notice for a page (JSON)."""
        return {
            "journal": self.journal,
            "previous": self.previous,
            "previous_last_seq": self.previous_last_seq,
            "at": at_text(self.at),
            "text": self.text,
        }


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
        seats: The places of the table's game as last seen (Hold'em's seats from an action
            window or a result, Mahjong's positions from the bank offers or a result): the
            pages reserve them from a round's start (``()``: not seen yet).
        events: The ``seq`` values seen on ``events``.
        results: The ``seq`` values seen on ``results``.
        guard: What ``seq`` the table could have sent.
        journal: The journal id the fold follows (``None``: no message read yet).
        left: The journal ids the table left (their late messages are refused).
        journal_change: The last new journal the fold saw the table start (``None``: none).
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
    seats: tuple[str, ...] = ()
    events: SeqWindow = field(default_factory=SeqWindow)
    results: SeqWindow = field(default_factory=SeqWindow)
    guard: SeqGuard = field(init=False)
    journal: str | None = None
    left: set[str] = field(default_factory=set)
    journal_change: JournalChange | None = None

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
            step = self.on_status(status, now)
            return step if isinstance(step, Rejection) else (step, status)
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

    def on_status(self, status: StatusMessage, now: float) -> Step | Rejection:
        """The table's status (birth, clean stop, Last Will), or why it is not taken.

        A status whose chain head the table could not have reached (:class:`SeqGuard`) is a
        rejection: it changes nothing.
        """
        other = self._other_journal(status.journal, status=True)
        if other is not None:
            return other
        refused = self.guard.on_status(status, now)
        if refused is not None:
            return refused
        if self.journal is not None and status.journal != self.journal:
            self._new_journal(status.journal, status.at, anchored=True)
        self.journal = status.journal
        limit = self.guard.limit(self.table, now)
        if limit is not None and self.last_seq > limit:
            # Taken before the status anchored the table (the first seq read anchors until
            # then), yet beyond what it could have sent: not where the table is.
            self.last_seq = status.chain_head.seq if status.chain_head is not None else 0
            self.events.clear()
            self.results.clear()
        self.status = status
        return Step(changed=True, new=True)

    def _other_journal(self, journal: str, *, status: bool = False) -> Rejection | None:
        """Why a message of ``journal`` is not folded, or ``None`` (it is, or it starts one).

        The journal the fold follows, or the first one it reads, is folded. A status naming
        another journal starts that journal (its birth: how a consumer learns a new journal;
        :class:`~controller.inbound.SeqGuard` judges its chain head). An envelope of a journal
        not seen before starts it too when the table is offline or its status unknown (its
        birth was missed: a retained Last Will of the old journal can outlive the new
        journal's birth); otherwise, and always for a journal the table left, it is refused.
        """
        if self.journal is None or journal == self.journal or status:
            return None
        if journal not in self.left:
            if self.status is None or self.status.state != "online":
                self._new_journal(journal, None)
                self.journal = journal
                return None
            why = f"the table's birth announced journal {self.journal[:8]}"
        else:
            why = f"the table left it for journal {self.journal[:8]}"
        return Rejection(
            "other_journal",
            f"journal {journal[:8]} is not the one table {self.table!r} follows ({why}): "
            "not folded",
            table=self.table,
        )

    def _new_journal(self, journal: str, at: datetime | None, *, anchored: bool = False) -> None:
        """Leave the followed journal for ``journal``: its ``seq`` starts over.

        ``anchored``: the guard already follows the new journal (its birth anchored it).
        """
        previous = self.journal
        if previous is None:
            return
        self.journal_change = JournalChange(
            table=self.table,
            journal=journal,
            previous=previous,
            previous_last_seq=max(self.last_seq, self.events.high or 0),
            at=at,
        )
        self.left.add(previous)
        self.left.discard(journal)
        if not anchored:
            self.guard.forget(self.table)
        self.last_seq = 0
        self.events.clear()
        self.results.clear()
        self.round = RoundFold()
        self.extras = RoundExtras()

    def _follow(self, envelope: Envelope) -> Rejection | None:
        """``None`` when ``envelope`` is of the journal the fold follows (adopting a first)."""
        other = self._other_journal(envelope.journal)
        if other is not None:
            return Rejection(other.code, other.reason, table=self.table, seq=envelope.seq)
        self.journal = envelope.journal
        return None

    def on_snapshot(
        self, envelope: Envelope, data: RoundSnapshotData, now: float
    ) -> Step | Rejection:
        """The retained round snapshot: rebuilds the round when not older than the fold."""
        other = self._follow(envelope)
        if other is not None:
            return other
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
        seen = self._seen(envelope, now, self.events)
        if not isinstance(seen, tuple):
            return seen
        gap = seen[0]
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

    def _seen(
        self, envelope: Envelope, now: float, window: SeqWindow
    ) -> tuple[tuple[int, int] | None] | Step | Rejection:
        """``(gap,)`` for an entry new on ``window``; else what to answer.

        What to answer: a rejection (a journal the table has left, a ``seq`` beyond the
        guard), or :data:`NOTHING` for a repeat.
        """
        other = self._follow(envelope)
        if other is not None:
            return other
        ahead = self.guard.admit(self.table, envelope.seq, now)
        if ahead is not None:
            return ahead
        new, gap = window.see(envelope.seq)
        return (gap,) if new else NOTHING

    def on_result(self, envelope: Envelope, now: float) -> Step | Rejection:
        """One ``results`` message: the settlement of the current round."""
        seen = self._seen(envelope, now, self.results)
        if not isinstance(seen, tuple):
            return seen
        data = typed_data(envelope)
        if envelope.round is None or envelope.round != self.round.round_id:
            return Step(changed=False, new=True, data=data)  # a replayed result of an earlier round
        if isinstance(data, RoundResultData | RoundVoidedData):
            self.extras.settlement = envelope.data.get("bets")
        if isinstance(data, RoundResultData) and self.extras.details is None:
            self._round_result(envelope, data)
        return Step(changed=True, new=True, data=data)

    def on_secure(self, envelope: Envelope) -> Step:
        """One ``secure/events`` entry (a secure fold only): a hidden card's value, equities."""
        if not self.secure or envelope.round is None or envelope.round != self.round.round_id:
            return NOTHING
        if envelope.journal != self.journal:
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

    def _decision_applied(self, envelope: Envelope, data: DecisionAppliedData) -> None:
        self.extras.decisions = [*self.extras.decisions, dict(envelope.data)][-KEEP_DECISIONS:]
        if self.extras.holdem is not None and data.decision.get("seat") is not None:
            self._holdem().decided(data.decision)  # a seat's action at a betting table

    def _decision_open(self, _envelope: Envelope, data: DecisionOpenData) -> None:
        # By the window's kind, as the betting system answers it (docs/live-play.md): an
        # ``action`` window is a seat's turn at a betting table (stacks, actions, pots), a
        # ``bank`` window names the positions in their order.
        if data.kind == "action":
            holdem = self._holdem()
            holdem.window(data.info)
            self.seats = tuple(holdem.seats)
        elif data.kind == "bank":
            order = data.info.get("order")
            if isinstance(order, list) and all(isinstance(p, str) for p in order) and order:
                self.seats = tuple(sorted(order, key=_seat_key))

    def _round_result(self, _envelope: Envelope, data: RoundResultData) -> None:
        self.extras.details = dict(data.details)
        if self.extras.holdem is not None or "stacks_after" in data.details:
            holdem = self._holdem()
            holdem.settled(data.details)
            self.seats = tuple(holdem.seats)
        elif "dealing_order" in data.details:
            order = data.details.get("dealing_order")
            if isinstance(order, list) and all(isinstance(p, str) for p in order) and order:
                self.seats = tuple(sorted(order, key=_seat_key))

    def _holdem(self) -> HoldemSeats:
        if self.extras.holdem is None:
            self.extras.holdem = HoldemSeats.sitting(self.seats)
        return self.extras.holdem

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
    DecisionOpenData: TableFold._decision_open,
    RoundResultData: TableFold._round_result,
    RoundResultPublicData: TableFold._round_result,
    TableInfoData: TableFold._table_info,
    DeviceStatusData: TableFold._device,
    TableStatusData: TableFold._table_status,
    PitAlertData: TableFold._pit_alert,
}
"""What an event adds to the fold besides the round fold, by its data's model."""
