"""The MQTT message contract: topics, the envelope, and what each journal entry publishes.

Pure: no I/O, no clock (times are passed in). ``docs/mqtt.md`` is the reference for consumers;
this module is its implementation.

Topics, under a configurable prefix (``tables`` by default), per table:

========================  ========  =====================================================
topic                     retained  content
========================  ========  =====================================================
``{p}/{t}/status``        yes       birth (``online``) / death (``offline``, Last Will)
``{p}/{t}/round``         yes       snapshot of the current round (public cards only)
``{p}/{t}/events``        no        the public view of every journal entry, in ``seq`` order
``{p}/{t}/results``       no        ``round_result`` and ``round_voided``
``{p}/{t}/secure/events`` no        full entries that carry a hidden value
``{p}/{t}/cmd/...``       no        inbound commands (:mod:`controller.commands`)
``{p}/{t}/reply/{role}``  no        answers to commands (or the command's v5 response topic)
========================  ========  =====================================================

The ``data`` of every entry kind is described by a pydantic model below (``DATA_MODELS``);
:mod:`controller.schema` turns them into the AsyncAPI document and JSON Schemas.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from controller.errors import TablectlError
from controller.journal import JournalEntry

if TYPE_CHECKING:
    from controller.signing import Signer

SCHEMA_VERSION: Literal["1"] = "1"
"""The ``schema_version`` every envelope carries."""

ROUND_SNAPSHOT_KIND = "round_snapshot"
"""The ``kind`` of the envelope on the retained ``round`` topic."""

PUBLIC_KINDS = frozenset(
    {
        "round_opened",
        "betting_closed",
        "card_dealt",
        "rescan_requested",
        "card_refused",
        "round_result",
        "round_voided",
        "device_status",
        "table_status",
        "pit_alert",
        "decision_open",
        "decision_applied",
        "cards_revealed",
        "table_info",
        "round_halted",
        "round_resumed",
        "command_received",
        "command_answered",
    }
)
"""The journal kinds of the version 1 contract (others are published as they are)."""

ROLES = ("betting", "pit")
"""Who may send commands: the betting system and the pit boss."""

Role = Literal["betting", "pit"]

RESULT_KINDS = frozenset({"round_result", "round_voided"})
"""Kinds also published on the ``results`` topic."""


def utc_text(moment: datetime) -> str:
    """UTC ISO-8601 with microseconds and ``Z``: ``2026-11-22T02:10:59.123456Z``.

    Raises:
        TablectlError: ``moment`` is naive.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise TablectlError(f"time {moment.isoformat()} has no time zone", moment=str(moment))
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _compact(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Topics(BaseModel):
    """The topics of one table.

    Attributes:
        prefix: Topic prefix (``tables``); may contain ``/`` but no wildcard.
        table: The table id (one topic level: no ``/``, ``+`` or ``#``).
    """

    model_config = ConfigDict(frozen=True)

    prefix: str = "tables"
    table: str

    def model_post_init(self, context: Any, /) -> None:
        """Check the table id and prefix are usable as topic levels.

        Raises:
            TablectlError: A wildcard, empty level or ``/`` in the table id.
        """
        if not self.table or any(ch in self.table for ch in "/+#\0"):
            raise TablectlError(
                "table id must be one MQTT topic level (no '/', '+', '#', not empty)",
                table=self.table,
            )
        if any(ch in self.prefix for ch in "+#\0") or self.prefix.startswith("/"):
            raise TablectlError(
                "topic prefix must not contain wildcards or start with '/'", prefix=self.prefix
            )

    @property
    def base(self) -> str:
        """``{prefix}/{table}`` (just ``{table}`` with an empty prefix)."""
        prefix = self.prefix.rstrip("/")
        return f"{prefix}/{self.table}" if prefix else self.table

    @property
    def status(self) -> str:
        """Retained birth/death of the controller."""
        return f"{self.base}/status"

    @property
    def round(self) -> str:
        """Retained snapshot of the current round."""
        return f"{self.base}/round"

    @property
    def events(self) -> str:
        """Every public event, in order."""
        return f"{self.base}/events"

    @property
    def results(self) -> str:
        """Results and voids."""
        return f"{self.base}/results"

    @property
    def secure_events(self) -> str:
        """Full entries with hidden values (stream production only)."""
        return f"{self.base}/secure/events"

    @property
    def all_public(self) -> tuple[str, ...]:
        """The topics a public consumer subscribes to."""
        return (self.status, self.round, self.events, self.results)

    @property
    def cmd_root(self) -> str:
        """The subtree of inbound commands (``{base}/cmd``; subscribe to ``/#``)."""
        return f"{self.base}/cmd"

    def reply(self, role: str) -> str:
        """Where answers to ``role``'s commands go when the command named no response topic."""
        if role not in ROLES:
            raise TablectlError(f"unknown command role {role!r}", role=role)
        return f"{self.base}/reply/{role}"

    def response_topic_allowed(self, topic: str, role: str) -> bool:
        """Whether a command's v5 response topic is inside ``role``'s reply tree.

        Only ``{base}/reply/{role}`` and topics below it are answered on: the controller never
        publishes where a command tells it to outside its own table (see docs/security.md).
        """
        if not topic or any(ch in topic for ch in "+#\0"):
            return False
        root = self.reply(role)
        return topic == root or topic.startswith(root + "/")

    def cmd(self, name: str) -> str:
        """The inbound command topic ``name`` (``decision``, ``void``...)."""
        if not name or any(ch in name for ch in "+#\0"):
            raise TablectlError("command name must not be empty or hold wildcards", name=name)
        return f"{self.base}/cmd/{name}"


class Signature(BaseModel):
    """The ``signature`` member of a signed result (docs/security.md, "Signed results").

    Attributes:
        alg: Always ``"Ed25519"``.
        key_id: Which of the table's keys signed it.
        value: The base64 signature (64 bytes) over the envelope's canonical form.
    """

    model_config = ConfigDict(frozen=True)

    alg: Literal["Ed25519"] = "Ed25519"
    key_id: str
    value: str


class Envelope(BaseModel):
    """The envelope of every journalled message (DESIGN.md §6).

    Attributes:
        schema_version: ``"1"``.
        table: The table id.
        round: The round id, or ``None`` for table-level events.
        seq: The per-table sequence number (gap-free on ``events``; consumers de-duplicate on
            ``(table, seq)`` per topic).
        session: The controller's session counter when the entry was journalled.
        kind: What happened.
        at: When it happened (UTC; serialized ISO-8601 with ``Z``).
        delayed: ``True`` when published late (after an outage or a restart).
        data: The event's fields.
        replayed: ``True`` on a result re-sent by a replay command (same ``seq`` as the
            original); absent otherwise.
        signature: The Ed25519 signature of a result (:mod:`controller.signing`); absent on
            other messages and when the table has no signing key.
    """

    model_config = ConfigDict(frozen=True)

    schema_version: Literal["1"] = SCHEMA_VERSION
    table: str
    round: str | None
    seq: int = Field(ge=1)
    session: int
    kind: str
    at: datetime
    delayed: bool = False
    data: dict[str, Any]
    replayed: bool | None = None
    signature: Signature | None = None

    @field_serializer("at")
    def _serialize_at(self, value: datetime) -> str:
        return utc_text(value)

    def to_wire(self) -> dict[str, Any]:
        """The JSON object (``replayed`` and ``signature`` left out when not set)."""
        data = self.model_dump(mode="json")
        for optional in ("replayed", "signature"):
            if data[optional] is None:
                del data[optional]
        return data

    def to_bytes(self) -> bytes:
        """Compact UTF-8 JSON (serialized by pydantic-core: on every card's path)."""
        unset = {name for name in ("replayed", "signature") if getattr(self, name) is None}
        return self.model_dump_json(exclude=unset or None).encode()

    def signed_bytes(self, signer: Signer | None) -> bytes:
        """Compact UTF-8 JSON, with a signature member when ``signer`` is given."""
        if signer is None:
            return self.to_bytes()
        return _compact(signer.sign(self.to_wire()))


class StatusMessage(BaseModel):
    """The retained ``status`` payload: birth, clean stop, or Last Will.

    Attributes:
        state: ``online`` or ``offline``.
        table: The table id.
        session: The controller's session counter.
        game: The game id the table runs.
        version: The controller's version.
        at: When it was published; ``None`` in the Last Will (registered at connect time,
            published by the broker whenever the link dies).
        reason: Why the table is offline (``stopped``, ``connection lost``); absent online.
    """

    model_config = ConfigDict(frozen=True)

    schema_version: Literal["1"] = SCHEMA_VERSION
    state: Literal["online", "offline"]
    table: str
    session: int
    game: str
    version: str
    at: datetime | None
    reason: str | None = None

    @field_serializer("at")
    def _serialize_at(self, value: datetime | None) -> str | None:
        return None if value is None else utc_text(value)

    def to_bytes(self) -> bytes:
        """Compact UTF-8 JSON (``reason`` omitted when ``None``)."""
        data = self.model_dump(mode="json")
        if data["reason"] is None:
            del data["reason"]
        return _compact(data)


# -- the data of each entry kind -------------------------------------------------------------


class _Data(BaseModel):
    """Base of the ``data`` models: consumers must ignore fields they do not know."""

    model_config = ConfigDict(extra="allow")


class RoundOpenedData(_Data):
    """``round_opened``: betting is open."""

    round_id: str | None = Field(default=None, description="the round id (also in `round`)")
    round_no: int = Field(description="the table's round counter, from 1")
    game: str = Field(description="game id")
    betting_seconds: float = Field(description="length of the betting window")
    betting_closes_at: str = Field(description="UTC ISO-8601 time betting closes")
    slots: list[str] | None = Field(default=None, description="the deal plan's slots, in order")


class BettingClosedData(_Data):
    """``betting_closed``: the round has started (it will be completed, not voided)."""


class CardDealtData(_Data):
    """``card_dealt``: a card or tile accepted into a slot."""

    slot: str
    hand: str | None
    index: int = Field(ge=0, description="0-based position in the deal plan")
    card: str | None = Field(description="notation; null on public topics while face down")
    face: Literal["up", "hidden"]


class RescanRequestedData(_Data):
    """``rescan_requested``: a misread; the dealer scans the same card again."""

    slot: str
    cause: str = Field(description="device, crc, malformed or gap")
    detail: str | None = None
    attempt: int = Field(ge=1)


class CardRefusedData(_Data):
    """``card_refused``: an impossible card (not in the deck, a duplicate); the slot waits."""

    slot: str | None
    card: str | None = Field(description="null when withheld (hidden slot or hidden duplicate)")
    reason: str
    hand: str | None = None
    index: int | None = None
    face: Literal["up", "hidden"] | None = None


class SettledBet(_Data):
    """One bet type's settlement, per unit staked."""

    outcome: Literal["win", "lose", "push", "refund"]
    payout: str = Field(
        pattern=r"^[0-9]+(\.[0-9]+)?$",
        description="exact decimal returned per unit staked, stake included ('1.95', '0', '1')",
    )
    reason: str | None = None


class HandSummary(_Data):
    """A hand's evaluation in a result."""

    category: str | None = None
    description: str | None = None


class RoundResultData(_Data):
    """``round_result``: every card, the winner, each hand, and every bet settled."""

    game: str
    round_no: int | None = None
    cards: dict[str, list[str]]
    winner: str | None
    hands: dict[str, HandSummary]
    bets: dict[str, SettledBet]
    details: dict[str, Any] = Field(default_factory=dict)


class RoundVoidedData(_Data):
    """``round_voided``: the round is void; every bet is refunded."""

    reason: str
    bets: dict[str, SettledBet]


class DeviceStatusData(_Data):
    """``device_status``: the card source changed state."""

    device: str
    state: str
    detail: str | None = None


class TableStatusData(_Data):
    """``table_status``: table-level state (e.g. ``publish_refused``, ``held``)."""

    state: str
    detail: str | None = None


class PitAlertData(_Data):
    """``pit_alert``: the pit boss is needed (repeated misreads...)."""

    slot: str | None = None
    reason: str


class DecisionOpenData(_Data):
    """``decision_open``: a decision window opens (a player action, a dealer choice)."""

    window: str = Field(description="the window id; decisions name it")
    kind: str = Field(description="what is decided (game-specific)")
    seat: str | None
    seconds: float
    options: list[str]
    info: dict[str, Any] = Field(default_factory=dict)
    closes_at: str = Field(description="UTC ISO-8601; the default applies then")


class DecisionAppliedData(_Data):
    """``decision_applied``: a decision took effect."""

    window: str
    decision: dict[str, Any]
    default: bool = Field(description="true when applied at the deadline, without a command")
    command_id: str | None


class CardsRevealedData(_Data):
    """``cards_revealed``: hidden cards of a hand shown (the reveal)."""

    hand: str
    cards: list[str]


class TableInfoData(_Data):
    """``table_info``: information for the stream (e.g. equities).

    A secure one carries ``data`` only on ``secure/events``.
    """

    kind: str
    secure: bool
    data: dict[str, Any] | None = Field(
        default=None, description="absent on public topics when secure"
    )


class RoundHaltedData(_Data):
    """``round_halted``: dealing paused (pit boss needed)."""

    reason: str


class RoundResumedData(_Data):
    """``round_resumed``: dealing continues."""

    by: str


class CommandReceivedData(_Data):
    """``command_received`` (full, on ``secure/events``): a command as it arrived."""

    command_id: str
    role: Role
    name: str
    round: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class CommandReceivedPublicData(_Data):
    """``command_received`` on ``events``: who sent what, without its fields."""

    command_id: str
    role: Role
    name: str


class CommandAnsweredData(_Data):
    """``command_answered`` (full, on the reply or response topic): the answer to a command."""

    command_id: str
    role: Role
    name: str
    accepted: bool
    reason: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    response_topic: str | None = None
    correlation_data: str | None = Field(default=None, description="base64, as received")
    duplicate: bool | None = Field(
        default=None, description="true when a repeated command_id got the first answer again"
    )


class CommandAnsweredPublicData(_Data):
    """``command_answered`` on ``events``."""

    command_id: str
    role: Role
    name: str
    accepted: bool
    reason: str = ""


class SnapshotCardData(_Data):
    """A dealt slot in the round snapshot."""

    slot: str
    hand: str | None
    index: int | None
    face: str
    card: str | None


class RoundSnapshotData(_Data):
    """``round_snapshot`` (retained ``round`` topic): the current round, public facts only."""

    round_no: int | None
    game: str | None
    state: Literal["idle", "betting_open", "dealing", "settled", "voided"]
    halted: bool = Field(default=False, description="dealing paused (round_halted)")
    betting_closes_at: str | None
    cards: list[SnapshotCardData]
    awaiting_rescan: str | None
    result: dict[str, Any] | None
    last_seq: int
    decision: dict[str, Any] | None = Field(
        default=None, description="the open decision window (decision_open data), if any"
    )


DATA_MODELS: dict[str, type[BaseModel]] = {
    "round_opened": RoundOpenedData,
    "betting_closed": BettingClosedData,
    "card_dealt": CardDealtData,
    "rescan_requested": RescanRequestedData,
    "card_refused": CardRefusedData,
    "round_result": RoundResultData,
    "round_voided": RoundVoidedData,
    "device_status": DeviceStatusData,
    "table_status": TableStatusData,
    "pit_alert": PitAlertData,
    "decision_open": DecisionOpenData,
    "decision_applied": DecisionAppliedData,
    "cards_revealed": CardsRevealedData,
    "table_info": TableInfoData,
    "round_halted": RoundHaltedData,
    "round_resumed": RoundResumedData,
    "command_received": CommandReceivedData,
    "command_answered": CommandAnsweredData,
}
"""The ``data`` model of each entry kind, as journalled (full)."""

PUBLIC_DATA_MODELS: dict[str, type[BaseModel]] = {
    **DATA_MODELS,
    "command_received": CommandReceivedPublicData,
    "command_answered": CommandAnsweredPublicData,
}
"""The ``data`` model of each kind on ``events`` (where it differs from the full one)."""


@dataclass(frozen=True, slots=True)
class Outbound:
    """One MQTT message to publish.

    Attributes:
        topic: Where.
        payload: UTF-8 JSON.
        qos: Always 1 for journalled messages.
        retain: Whether the broker keeps it for new subscribers.
        correlation_data: MQTT v5 correlation data (answers to v5 commands); ignored on 3.1.1.
        essential: Whether the entry counts as delivered only once this message is
            acknowledged. The retained round snapshot and command answers are not essential:
            a broker refusing them is reported but does not hold back the table's events.
    """

    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = False
    correlation_data: bytes | None = None
    essential: bool = True


def birth_message(
    topics: Topics, *, session: int, game: str, version: str, at: datetime
) -> Outbound:
    """The retained ``online`` status published after each connect."""
    status = StatusMessage(
        state="online", table=topics.table, session=session, game=game, version=version, at=at
    )
    return Outbound(topics.status, status.to_bytes(), qos=1, retain=True)


def offline_message(
    topics: Topics,
    *,
    session: int,
    game: str,
    version: str,
    at: datetime | None,
    reason: str,
) -> Outbound:
    """The retained ``offline`` status: the Last Will (``at=None``) or a clean stop."""
    status = StatusMessage(
        state="offline",
        table=topics.table,
        session=session,
        game=game,
        version=version,
        at=at,
        reason=reason,
    )
    return Outbound(topics.status, status.to_bytes(), qos=1, retain=True)


# -- round snapshot -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotCard:
    """One dealt slot as the public sees it.

    Attributes:
        slot: The slot (``"A1"``).
        hand: The hand (``"A"``).
        index: Position in the deal plan.
        face: ``"up"`` or ``"hidden"``.
        card: The notation, or ``None`` while hidden.
    """

    slot: str
    hand: str | None
    index: int | None
    face: str
    card: str | None

    def to_wire(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "slot": self.slot,
            "hand": self.hand,
            "index": self.index,
            "face": self.face,
            "card": self.card,
        }


_STATE_AFTER = {
    "round_opened": "betting_open",
    "betting_closed": "dealing",
    "card_dealt": "dealing",
    "rescan_requested": "dealing",
    "card_refused": "dealing",
    "round_result": "settled",
    "round_voided": "voided",
}


@dataclass(frozen=True, slots=True)
class RoundSnapshot:
    """The current round folded from journal entries (immutable; :meth:`apply` returns new).

    Only public facts are serialized (:meth:`to_wire`). ``hidden_cards`` keeps the values of
    hidden cards dealt so far, never serialized, so a refusal that names one of them can be
    kept off the public topics.

    Attributes:
        round_id: The current round, ``None`` before the first one.
        round_no: Its number, if known.
        game: The game id.
        state: ``idle``, ``betting_open``, ``dealing``, ``settled`` or ``voided``.
        betting_closes_at: When betting closes (UTC ISO text), while open.
        cards: Dealt slots, in dealing order.
        awaiting_rescan: The slot waiting for a rescan, if any.
        result: Winner, hands and cards once the round has a result; the refunds if voided.
        last_seq: The ``seq`` of the last entry folded in.
        hidden_cards: Values of hidden cards dealt in this round (never published).
        hidden_slots: ``(slot, value)`` of hidden cards not revealed yet (never published).
        halted: Dealing is paused (``round_halted`` until ``round_resumed``).
        decision: The open decision window (``decision_open`` data) until it is applied.
    """

    round_id: str | None = None
    round_no: int | None = None
    game: str | None = None
    state: str = "idle"
    betting_closes_at: str | None = None
    cards: tuple[SnapshotCard, ...] = ()
    awaiting_rescan: str | None = None
    result: Mapping[str, Any] | None = None
    last_seq: int = 0
    hidden_cards: frozenset[str] = field(default_factory=frozenset)
    hidden_slots: tuple[tuple[str, str], ...] = ()
    halted: bool = False
    decision: Mapping[str, Any] | None = None

    @classmethod
    def replay(cls, entries: Iterable[JournalEntry]) -> RoundSnapshot:
        """Fold entries, in ``seq`` order, into a snapshot."""
        snapshot = cls()
        for entry in entries:
            snapshot = snapshot.apply(entry)
        return snapshot

    def apply(self, entry: JournalEntry) -> RoundSnapshot:
        """The snapshot after ``entry``. Entries without a round only advance ``last_seq``."""
        if entry.round_id is None:
            return _replace(self, last_seq=entry.seq)
        body = entry.body
        if entry.kind == "round_opened" or entry.round_id != self.round_id:
            # A new round starts (also when we first see a round midway, e.g. after a restart
            # whose replay starts late).
            base = RoundSnapshot(round_id=entry.round_id, last_seq=entry.seq)
            if entry.kind != "round_opened":
                return base.apply(entry)
            round_no = body.get("round_no")
            return _replace(
                base,
                round_no=round_no if isinstance(round_no, int) else None,
                game=_opt_str(body.get("game")),
                state="betting_open",
                betting_closes_at=_opt_str(body.get("betting_closes_at")),
            )
        state = _STATE_AFTER.get(entry.kind, self.state)
        if self.state in ("settled", "voided"):
            state = self.state
        changes: dict[str, Any] = {"last_seq": entry.seq, "state": state}
        if entry.kind == "betting_closed":
            changes["betting_closes_at"] = None
        elif entry.kind == "card_dealt":
            face = str(body.get("face", "up"))
            card = _opt_str(body.get("card"))
            public = card if face != "hidden" else None
            index = body.get("index")
            dealt = SnapshotCard(
                slot=str(body.get("slot", "")),
                hand=_opt_str(body.get("hand")),
                index=index if isinstance(index, int) else None,
                face=face,
                card=public,
            )
            changes["cards"] = (*self.cards, dealt)
            changes["awaiting_rescan"] = None
            if face == "hidden" and card is not None:
                changes["hidden_cards"] = self.hidden_cards | {card}
                changes["hidden_slots"] = (*self.hidden_slots, (dealt.slot, card))
        elif entry.kind == "cards_revealed":
            revealed = {str(card) for card in body.get("cards", ()) if card is not None}
            values = dict(self.hidden_slots)
            shown = {slot for slot, value in self.hidden_slots if value in revealed}
            changes["cards"] = tuple(
                SnapshotCard(c.slot, c.hand, c.index, "up", values[c.slot])
                if c.slot in shown
                else c
                for c in self.cards
            )
            changes["hidden_slots"] = tuple(
                (slot, value) for slot, value in self.hidden_slots if slot not in shown
            )
            changes["hidden_cards"] = self.hidden_cards - revealed
        elif entry.kind == "round_halted":
            changes["halted"] = True
        elif entry.kind == "round_resumed":
            changes["halted"] = False
        elif entry.kind == "decision_open":
            changes["decision"] = dict(body)
        elif entry.kind == "decision_applied":
            if self.decision is not None and self.decision.get("window") == body.get("window"):
                changes["decision"] = None
        elif entry.kind == "rescan_requested":
            changes["awaiting_rescan"] = _opt_str(body.get("slot"))
        elif entry.kind == "round_result":
            changes["awaiting_rescan"] = None
            changes["result"] = {
                "winner": body.get("winner"),
                "hands": body.get("hands", {}),
                "cards": body.get("cards", {}),
            }
            changes["game"] = _opt_str(body.get("game")) or self.game
            changes["hidden_cards"] = frozenset()  # revealed by the result
            changes["hidden_slots"] = ()
            changes["halted"] = False
            changes["decision"] = None
        elif entry.kind == "round_voided":
            changes["awaiting_rescan"] = None
            changes["halted"] = False
            changes["decision"] = None
            changes["result"] = {"voided": True, "reason": body.get("reason")}
        return _replace(self, **changes)

    def to_wire(self) -> dict[str, Any]:
        """The public JSON form (no hidden card value)."""
        return {
            "round_no": self.round_no,
            "game": self.game,
            "state": self.state,
            "betting_closes_at": self.betting_closes_at,
            "cards": [card.to_wire() for card in self.cards],
            "awaiting_rescan": self.awaiting_rescan,
            "result": dict(self.result) if self.result is not None else None,
            "last_seq": self.last_seq,
            "halted": self.halted,
            "decision": dict(self.decision) if self.decision is not None else None,
        }


def _replace(snapshot: RoundSnapshot, **changes: Any) -> RoundSnapshot:
    values = {name: getattr(snapshot, name) for name in RoundSnapshot.__dataclass_fields__}
    values.update(changes)
    return RoundSnapshot(**values)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


# -- entry -> messages ----------------------------------------------------------------------


_SAFE_REFUSAL_KEYS = ("slot", "hand", "index", "face")


SNAPSHOT_VIEW_KINDS = frozenset({"card_refused"})
"""Kinds whose public view depends on the round snapshot (a refusal may name a hidden card)."""


def public_view(entry: JournalEntry, snapshot: RoundSnapshot | None) -> tuple[dict[str, Any], bool]:
    """The body as the public may see it, and whether something was withheld.

    ``snapshot`` (the round after ``entry``) may be ``None`` for a kind not in
    :data:`SNAPSHOT_VIEW_KINDS`.

    Withheld: the value of a card dealt face down; a refused card (and the refusal reason)
    when the slot is hidden or the card is one of the round's hidden cards, since naming the
    duplicate would reveal it; the ``data`` of a secure ``table_info``; the fields of a
    received command (its full form goes to ``secure/events``). A command's answer shows
    only who, what and the verdict on ``events`` (its full form goes to the reply topic, not
    to ``secure/events``), so it is not counted as withheld.
    """
    body = dict(entry.body)
    if entry.kind == "card_dealt" and body.get("face") == "hidden":
        body["card"] = None
        return body, True
    if entry.kind == "table_info" and body.get("secure"):
        return {key: value for key, value in body.items() if key != "data"}, True
    if entry.kind == "command_received":
        return {key: body.get(key) for key in ("command_id", "role", "name")}, True
    if entry.kind == "command_answered":
        keys = ("command_id", "role", "name", "accepted", "reason")
        return {key: body.get(key) for key in keys}, False
    if entry.kind == "card_refused":
        if snapshot is None:
            raise TablectlError(
                "the public view of a refusal needs the round snapshot", seq=entry.seq
            )
        card = body.get("card")
        if body.get("face") == "hidden" or (card is not None and card in snapshot.hidden_cards):
            redacted = {key: body[key] for key in _SAFE_REFUSAL_KEYS if key in body}
            redacted["card"] = None
            redacted["reason"] = "refused (details withheld: hidden card)"
            return redacted, True
    return body, False


def envelope_for(
    entry: JournalEntry, table: str, *, delayed: bool, data: Mapping[str, Any] | None = None
) -> Envelope:
    """The envelope of ``entry`` (with ``data`` replacing its body if given)."""
    return Envelope(
        table=table,
        round=entry.round_id,
        seq=entry.seq,
        session=entry.session,
        kind=entry.kind,
        at=entry.happened_at,
        delayed=delayed,
        data=dict(entry.body if data is None else data),
    )


def messages_for(
    entry: JournalEntry,
    topics: Topics,
    *,
    delayed: bool,
    snapshot: RoundSnapshot | None,
    with_snapshot: bool = True,
    signer: Signer | None = None,
) -> list[Outbound]:
    """What is published for one journal entry, in publishing order.

    Args:
        entry: The journal entry.
        topics: The table's topics.
        delayed: Whether the entry is published late (sets ``delayed`` in every envelope).
        snapshot: The round snapshot *after* folding ``entry`` in (``snapshot.apply(entry)``);
            may be ``None`` when ``with_snapshot`` is ``False`` and the kind is not in
            :data:`SNAPSHOT_VIEW_KINDS`.
        with_snapshot: ``False`` leaves out the retained round snapshot (the outbox publishes
            it on its own, once for entries handed off together).
        signer: Signs ``round_result`` and ``round_voided`` (on ``events`` and ``results``).

    Returns:
        The public view on ``events``; the full entry on ``secure/events`` when something was
        withheld; the same envelope on ``results`` for results and voids; the full answer on
        its reply topic for ``command_answered``; the retained round snapshot when the entry
        belongs to a round.
    """
    public, withheld = public_view(entry, snapshot)
    public_envelope = envelope_for(entry, topics.table, delayed=delayed, data=public)
    signed = entry.kind in RESULT_KINDS and signer is not None
    public_bytes = public_envelope.signed_bytes(signer if signed else None)
    out = [Outbound(topics.events, public_bytes, qos=1, retain=False)]
    if withheld:
        full = envelope_for(entry, topics.table, delayed=delayed)
        out.append(Outbound(topics.secure_events, full.to_bytes(), qos=1, retain=False))
    if entry.kind in RESULT_KINDS:
        out.append(Outbound(topics.results, public_bytes, qos=1, retain=False))
    if entry.kind == "command_answered":
        out.append(answer_message(entry, topics, delayed=delayed))
    if with_snapshot and entry.round_id is not None:
        if snapshot is None:
            raise TablectlError("the round snapshot message needs the snapshot", seq=entry.seq)
        out.append(round_snapshot_message(snapshot, topics, entry=entry, delayed=delayed))
    return out


def answer_topic(body: Mapping[str, Any], topics: Topics) -> str:
    """Where a ``command_answered`` body is published.

    Its response topic if that is inside the role's reply tree, else ``{base}/reply/{role}``.

    Raises:
        TablectlError: The body names no known role.
    """
    role = str(body.get("role"))
    wanted = body.get("response_topic")
    if isinstance(wanted, str) and topics.response_topic_allowed(wanted, role):
        return wanted
    return topics.reply(role)


def answer_message(entry: JournalEntry, topics: Topics, *, delayed: bool) -> Outbound:
    """The full answer to a command, for its sender (with the v5 correlation data)."""
    body = entry.body
    correlation: bytes | None = None
    raw = body.get("correlation_data")
    if isinstance(raw, str):
        try:
            correlation = base64.b64decode(raw, validate=True)
        except (ValueError, binascii.Error):
            correlation = None
    envelope = envelope_for(entry, topics.table, delayed=delayed)
    return Outbound(
        answer_topic(body, topics),
        envelope.to_bytes(),
        qos=1,
        retain=False,
        correlation_data=correlation,
        essential=False,
    )


def replay_message(
    entry: JournalEntry,
    topics: Topics,
    *,
    snapshot: RoundSnapshot,
    signer: Signer | None = None,
) -> Outbound:
    """An entry re-sent by a replay.

    Its public envelope (original ``seq``, ``session`` and ``at``) with ``replayed: true``
    and ``delayed: true``, on ``results`` for results and voids (signed when ``signer`` is
    given), on ``events`` for other kinds.

    Args:
        entry: The journalled entry.
        topics: The table's topics.
        snapshot: The round snapshot after ``entry`` (to withhold hidden cards).
        signer: The table's signer, if results are signed.
    """
    public, _withheld = public_view(entry, snapshot)
    envelope = envelope_for(entry, topics.table, delayed=True, data=public).model_copy(
        update={"replayed": True}
    )
    result = entry.kind in RESULT_KINDS
    payload = envelope.signed_bytes(signer if result else None)
    return Outbound(topics.results if result else topics.events, payload, qos=1, retain=False)


def round_snapshot_message(
    snapshot: RoundSnapshot, topics: Topics, *, entry: JournalEntry, delayed: bool
) -> Outbound:
    """The retained ``round`` message: the envelope of the last entry with the snapshot."""
    envelope = Envelope(
        table=topics.table,
        round=snapshot.round_id,
        seq=entry.seq,
        session=entry.session,
        kind=ROUND_SNAPSHOT_KIND,
        at=entry.happened_at,
        delayed=delayed,
        data=snapshot.to_wire(),
    )
    return Outbound(topics.round, envelope.to_bytes(), qos=1, retain=True)
