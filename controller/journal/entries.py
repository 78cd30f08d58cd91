"""Typed journal entries: the kinds, a pydantic body model per kind, and :class:`JournalEntry`.

Every entry has a kind (:class:`EntryKind`, a ``StrEnum``: the stored text and the wire are the
kind's value) and a body, a JSON object. The body of each kind is described by one pydantic
model below (``RoundOpenedData`` ... ``CommandAnsweredData``, listed in :data:`BODY_MODELS`).
The same models document the ``data`` of every message (:mod:`controller.messages`,
:mod:`controller.schema`): what is journalled is what is published in full.

Writing: the code that journals builds the body model and hands it to
:meth:`~controller.journal.Journal.record`; :func:`body_text` gives the stored JSON text.
Reading: :attr:`JournalEntry.body` is the stored JSON object as it is, and
:attr:`JournalEntry.typed_body` the body model, parsed (and validated) once, on first use.

The stored text never changes with this code: a body is dumped in the order main always wrote
its keys (the models' field order, or ``JOURNAL_ORDER`` where that differs), only the fields
the writer set, extras included; its numbers as Python's ``json`` writes them (``1e-05``,
which pydantic-core would write ``1e-5``). Bodies built by the writer are not validated again
(``model_construct``: an ``int`` stays an ``int``); the card's body, five plain fields on the hot
path, is validated at construction (cheap) and dumped by pydantic-core.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.errors import JournalError


class EntryKind(enum.StrEnum):
    """Every kind of journal entry (docs/journal.md); the value is the stored and wire text."""

    ROUND_OPENED = "round_opened"
    BETTING_OPENED = "betting_opened"
    BETTING_CLOSED = "betting_closed"
    CARD_DEALT = "card_dealt"
    RESCAN_REQUESTED = "rescan_requested"
    CARD_REFUSED = "card_refused"
    PIT_ALERT = "pit_alert"
    DECISION_OPEN = "decision_open"
    DECISION_APPLIED = "decision_applied"
    CARDS_REVEALED = "cards_revealed"
    TABLE_INFO = "table_info"
    ROUND_HALTED = "round_halted"
    ROUND_RESUMED = "round_resumed"
    ROUND_RESULT = "round_result"
    ROUND_VOIDED = "round_voided"
    DEVICE_STATUS = "device_status"
    TABLE_STATUS = "table_status"
    COMMAND_RECEIVED = "command_received"
    COMMAND_ANSWERED = "command_answered"


Role = Literal["betting", "pit"]
"""Who may send commands: the betting system and the pit boss."""


class OpenModel(BaseModel):
    """Base of the ``data`` models: consumers must ignore fields they do not know."""

    model_config = ConfigDict(extra="allow")


class EntryBody(OpenModel):
    """Base of the body models (the body of an unknown kind reads as this: extras only).

    Class attributes:
        KIND: The entry kind this model is the body of.
        CORE_JSON: Dump with pydantic-core (only for a model whose fields are strings, ints,
            booleans or ``None``, where its text is Python's ``json`` text).
        CORE_OPTIONAL: A ``CORE_JSON`` model's optional fields: a body with all of them unset
            and every other field set is dumped by pydantic-core too, without them.
        JOURNAL_ORDER: The order of the keys in the stored text when it differs from the
            fields' order (extras not named follow).
    """

    KIND: ClassVar[EntryKind | None] = None
    CORE_JSON: ClassVar[bool] = False
    CORE_OPTIONAL: ClassVar[tuple[str, ...]] = ()
    JOURNAL_ORDER: ClassVar[tuple[str, ...] | None] = None


class RoundOpenedData(EntryBody):
    """``round_opened``: the round opens; betting is open (unless ``before_betting``)."""

    KIND: ClassVar[EntryKind] = EntryKind.ROUND_OPENED

    round_id: str | None = Field(default=None, description="the round id (also in `round`)")
    round_no: int = Field(description="the table's round counter, from 1")
    game: str = Field(description="game id")
    betting_seconds: float = Field(description="length of the betting window")
    betting_closes_at: str | None = Field(
        description="UTC ISO-8601 time betting closes; null when the round opens with steps "
        "before betting (`before_betting`): `betting_opened` gives it",
        json_schema_extra={"format": "date-time"},
    )
    before_betting: bool | None = Field(
        default=None,
        description="true: the round opens with steps before betting (Mahjong Pai Gow's bank "
        "offers); betting opens later, with `betting_opened`. Absent otherwise",
    )
    slots: list[str] | None = Field(default=None, description="the deal plan's slots, in order")


class BettingOpenedData(EntryBody):
    """``betting_opened``: betting opens after the round's opening (Mahjong's bank offers).

    Only in a round whose ``round_opened`` says ``before_betting``; in any other round
    betting opens with ``round_opened`` itself.
    """

    KIND: ClassVar[EntryKind] = EntryKind.BETTING_OPENED

    betting_seconds: float = Field(description="length of the betting window")
    betting_closes_at: str = Field(
        description="UTC ISO-8601 time betting closes", json_schema_extra={"format": "date-time"}
    )


class BettingClosedData(EntryBody):
    """``betting_closed``: the round has started (it will be completed, not voided)."""

    KIND: ClassVar[EntryKind] = EntryKind.BETTING_CLOSED


class CardDealtData(EntryBody):
    """``card_dealt``: a card or tile accepted into a slot."""

    KIND: ClassVar[EntryKind] = EntryKind.CARD_DEALT
    CORE_JSON: ClassVar[bool] = True
    CORE_OPTIONAL: ClassVar[tuple[str, ...]] = ("source", "operator", "reason")

    slot: str
    hand: str | None
    index: int = Field(ge=0, description="0-based position in the deal plan")
    card: str | None = Field(description="notation; null on public topics while face down")
    face: Literal["up", "hidden"]
    source: Literal["manual"] | None = Field(
        default=None,
        description="`manual`: entered by the pit boss for a dead reader (`cmd/pit/enter-card`); "
        "absent for a card a reader read",
    )
    operator: str | None = Field(
        default=None,
        description="who entered a manual card (the pit boss's name); on `secure/events` only",
    )
    reason: str | None = Field(
        default=None, description="why a card was entered by hand; on `secure/events` only"
    )


class RescanRequestedData(EntryBody):
    """``rescan_requested``: a misread; the dealer scans the same card again."""

    KIND: ClassVar[EntryKind] = EntryKind.RESCAN_REQUESTED

    slot: str
    cause: str = Field(
        description="device, crc, malformed or gap (framed devices); line, checksum, "
        "unknown_code, position (a device profile; on a multi-reader table also a card from "
        "another slot's reader) or away (a line or HID device came back: a read made while "
        "it was away is lost)"
    )
    detail: str | None = None
    attempt: int = Field(ge=1)


class CardRefusedData(EntryBody):
    """``card_refused``: an impossible card (not in the deck, a duplicate); the slot waits."""

    KIND: ClassVar[EntryKind] = EntryKind.CARD_REFUSED

    slot: str | None
    card: str | None = Field(description="null when withheld (hidden slot or hidden duplicate)")
    reason: str
    hand: str | None = None
    index: int | None = None
    face: Literal["up", "hidden"] | None = None


class SettledBet(OpenModel):
    """One bet type's settlement, per unit staked."""

    outcome: Literal["win", "lose", "push", "refund"]
    payout: str = Field(
        pattern=r"^[0-9]+(\.[0-9]+)?$",
        description="exact decimal returned per unit staked, stake included ('1.95', '0', '1')",
    )
    reason: str | None = None


QUALIFIERS = ("position", "path", "setting")
"""The qualifiers a settlement line may carry (what a wager must match besides its bet id)."""


class SettlementLine(OpenModel):
    """One line of a result's ``bets``: a bet id, its qualifiers, and its settlement per unit.

    A wager (a bet id, and the position, path and setting it was placed on or chose) is
    settled by the one line with its ``bet`` whose every qualifier present equals the
    wager's; a wager that made no choice for a qualifier the lines name (no mulligan asked, no
    setting sent) takes the line with ``default: true``. Absent qualifiers match any wager
    (docs/mqtt.md, "Settling bets").
    """

    bet: str = Field(description="the bet id (the game's pay-table bet)")
    outcome: Literal["win", "lose", "push", "refund"]
    payout: str = Field(
        pattern=r"^[0-9]+(\.[0-9]+)?$",
        description="exact decimal returned per unit staked, stake included ('1.95', '0', '1')",
    )
    reason: str | None = None
    position: str | None = Field(
        default=None, description="the player position the wager is on (Mahjong Pai Gow)"
    )
    path: str | None = Field(
        default=None, description="the path the player chose (Three Card Mulligan)"
    )
    setting: str | None = Field(
        default=None, description="the player's setting id (Break Poker's main bet)"
    )
    default: bool | None = Field(
        default=None,
        description="true: the line for a wager that made no choice (stayed, house way)",
    )


def settlement_rows(bets: object) -> dict[str, Mapping[str, Any]]:
    """A result's ``bets`` (or a void's refunds) for people: ``{label: settlement}``.

    A line's label is its qualifiers then its bet id (``"P2 player"``, ``"mulliganed ante"``,
    ``"KsKd-JK7c7h main"``), with ``" (default)"`` on a default line; default lines come
    first. A void's ``{bet_id: refund}`` map is returned as it is; anything else gives ``{}``.
    """
    if isinstance(bets, Mapping):
        return {str(bet): value for bet, value in bets.items() if isinstance(value, Mapping)}
    if not isinstance(bets, list):
        return {}
    lines = [line for line in bets if isinstance(line, Mapping)]
    lines.sort(key=lambda line: not line.get("default"))
    rows: dict[str, Mapping[str, Any]] = {}
    for line in lines:
        words = [str(line[name]) for name in QUALIFIERS if line.get(name) is not None]
        label = " ".join([*words, str(line.get("bet", "?"))])
        rows[label + (" (default)" if line.get("default") else "")] = line
    return rows


class HandSummary(OpenModel):
    """A hand's evaluation in a result."""

    category: str | None = None
    description: str | None = None


class RoundResultData(EntryBody):
    """``round_result``: every card, the winner, each hand, and every bet settled."""

    KIND: ClassVar[EntryKind] = EntryKind.ROUND_RESULT

    game: str
    round_no: int | None = None
    cards: dict[str, list[str]]
    winner: str | None
    hands: dict[str, HandSummary]
    bets: list[SettlementLine] | dict[str, Any] = Field(
        description="one settlement line per bet id and qualifiers (see SettlementLine); a "
        "map {bet_id: settlement} in results journalled before contract version 2"
    )
    details: dict[str, Any] = Field(default_factory=dict)


class RoundVoidedData(EntryBody):
    """``round_voided``: the round is void; every bet is refunded."""

    KIND: ClassVar[EntryKind] = EntryKind.ROUND_VOIDED
    JOURNAL_ORDER: ClassVar[tuple[str, ...] | None] = ("reason", "started", "bets")

    reason: str
    bets: dict[str, SettledBet]


class DeviceStatusData(EntryBody):
    """``device_status``: the card source changed state."""

    KIND: ClassVar[EntryKind] = EntryKind.DEVICE_STATUS

    device: str
    state: str
    detail: str | None = None


class TableStatusData(EntryBody):
    """``table_status``: table-level state (e.g. ``publish_refused``, ``held``)."""

    KIND: ClassVar[EntryKind] = EntryKind.TABLE_STATUS

    state: str
    detail: str | None = None


class PitAlertData(EntryBody):
    """``pit_alert``: the pit boss is needed (repeated misreads...)."""

    KIND: ClassVar[EntryKind] = EntryKind.PIT_ALERT

    slot: str | None = None
    reason: str


class DecisionOpenData(EntryBody):
    """``decision_open``: a decision window opens (a player action, a dealer choice)."""

    KIND: ClassVar[EntryKind] = EntryKind.DECISION_OPEN

    window: str = Field(description="the window id; decisions name it")
    kind: str = Field(description="what is decided (game-specific)")
    seat: str | None
    seconds: float
    options: list[str]
    info: dict[str, Any] = Field(default_factory=dict)
    closes_at: str = Field(
        description="UTC ISO-8601; the default applies then",
        json_schema_extra={"format": "date-time"},
    )


class DecisionAppliedData(EntryBody):
    """``decision_applied``: a decision took effect."""

    KIND: ClassVar[EntryKind] = EntryKind.DECISION_APPLIED

    window: str
    decision: dict[str, Any]
    default: bool = Field(description="true when applied at the deadline, without a command")
    command_id: str | None
    source: Literal["removal"] | None = Field(
        default=None,
        description="`removal`: decided by the cards leaving their reader during the window "
        "(a Hold'em fold: the seat's cards lifted off its antenna); absent for a command's "
        "decision or the default",
    )
    reason: str | None = Field(
        default=None,
        description="why a decision was taken without a command (a removal: which seat's "
        "cards left which reader; no card is named)",
    )


class CardsRevealedData(EntryBody):
    """``cards_revealed``: hidden cards of a hand shown (the reveal)."""

    KIND: ClassVar[EntryKind] = EntryKind.CARDS_REVEALED

    hand: str
    cards: list[str]


class TableInfoData(EntryBody):
    """``table_info``: information for the stream (e.g. equities).

    A secure one carries ``data`` only on ``secure/events``.
    """

    KIND: ClassVar[EntryKind] = EntryKind.TABLE_INFO
    JOURNAL_ORDER: ClassVar[tuple[str, ...] | None] = ("kind", "data", "secure")

    kind: str
    secure: bool
    data: dict[str, Any] | None = Field(
        default=None, description="absent on public topics when secure"
    )


class RoundHaltedData(EntryBody):
    """``round_halted``: dealing paused (pit boss needed)."""

    KIND: ClassVar[EntryKind] = EntryKind.ROUND_HALTED

    reason: str


class RoundResumedData(EntryBody):
    """``round_resumed``: dealing continues."""

    KIND: ClassVar[EntryKind] = EntryKind.ROUND_RESUMED

    by: str


class CommandReceivedData(EntryBody):
    """``command_received`` (full, on ``secure/events``): a command as it arrived."""

    KIND: ClassVar[EntryKind] = EntryKind.COMMAND_RECEIVED

    command_id: str
    role: Role
    name: str
    round: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class CommandAnsweredData(EntryBody):
    """``command_answered`` (full, on the reply or response topic): the answer to a command."""

    KIND: ClassVar[EntryKind] = EntryKind.COMMAND_ANSWERED

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


BODY_MODELS: dict[EntryKind, type[EntryBody]] = {
    model.KIND: model
    for model in (
        RoundOpenedData,
        BettingOpenedData,
        BettingClosedData,
        CardDealtData,
        RescanRequestedData,
        CardRefusedData,
        RoundResultData,
        RoundVoidedData,
        DeviceStatusData,
        TableStatusData,
        PitAlertData,
        DecisionOpenData,
        DecisionAppliedData,
        CardsRevealedData,
        TableInfoData,
        RoundHaltedData,
        RoundResumedData,
        CommandReceivedData,
        CommandAnsweredData,
    )
    if model.KIND is not None
}
"""The body model of each entry kind."""


def body_values(body: OpenModel) -> dict[str, Any]:
    """The body as the JSON object it is stored as: the fields set, then extras, in order."""
    fields_set = body.model_fields_set
    values = {name: value for name, value in body.__dict__.items() if name in fields_set}
    if body.__pydantic_extra__:
        values.update(body.__pydantic_extra__)
    order = body.JOURNAL_ORDER if isinstance(body, EntryBody) else None
    if order is not None:
        ordered = {name: values.pop(name) for name in order if name in values}
        ordered.update(values)
        values = ordered
    return values


def _nested(value: object) -> dict[str, Any]:
    """A model inside a body (``SettledBet`` ...), for ``json.dumps``: as its own body."""
    if isinstance(value, OpenModel):
        return body_values(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def body_text(body: EntryBody) -> str:
    """The stored JSON text of a body (compact, UTF-8 unescaped, the keys in journal order).

    Raises:
        JournalError: The body is not JSON-able.
    """
    return stored_body(body)[0]


def stored_body(body: EntryBody) -> tuple[str, dict[str, Any]]:
    """The stored JSON text of a body and the JSON object it reads back as.

    A ``CORE_JSON`` body with no extra and every field set (the card), or every field but
    its ``CORE_OPTIONAL`` ones (a card a reader read), is dumped by pydantic-core and its
    object is its fields (plain values: what ``json.loads`` would give; the optional fields
    left unset are not written); any other body is dumped with ``json`` and read back.

    Raises:
        JournalError: The body is not JSON-able.
    """
    model = type(body)
    try:
        if model.CORE_JSON and not body.__pydantic_extra__:
            fields_set = body.model_fields_set
            serializer = model.__pydantic_serializer__
            if len(fields_set) == len(model.model_fields):
                return serializer.to_json(body).decode(), dict(body.__dict__)
            optional = model.CORE_OPTIONAL
            if len(fields_set) + len(optional) == len(model.model_fields) and (
                fields_set.isdisjoint(optional)
            ):
                # Every field but the optional ones (a card a reader read has no `source`):
                # those are not written, as ``json`` would not write them.
                values = dict(body.__dict__)
                for key in optional:
                    del values[key]
                return serializer.to_json(body, exclude_unset=True).decode(), values
        text = json.dumps(
            body_values(body), separators=(",", ":"), ensure_ascii=False, default=_nested
        )
    except (TypeError, ValueError) as exc:
        raise JournalError(f"entry body is not JSON-able: {exc}", kind=str(body.KIND)) from exc
    return text, json.loads(text)


def parse_body(kind: str, body: dict[str, Any]) -> EntryBody:
    """The body model of a stored body (validated); an unknown kind reads as :class:`EntryBody`.

    Raises:
        JournalError: The body does not match its kind's model.
    """
    try:
        model = BODY_MODELS[EntryKind(kind)]
    except ValueError:
        model = EntryBody
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise JournalError(
            f"{kind} body does not match its model: {exc.errors()[0]['msg']}", kind=kind
        ) from exc


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journalled state change.

    Attributes:
        seq: The table's sequence number: gap-free, never repeated, survives restarts.
        session: The session counter of the controller run that appended it.
        round_id: The round it belongs to, or ``None`` (device and table status).
        kind: What happened: an :class:`EntryKind` value (any text in an old or test journal).
        happened_at: When it happened (aware, UTC).
        body: The event's fields, the stored JSON object as it is (:attr:`typed_body`: typed).
        delivered_at: When the broker acknowledged it, or ``None`` while undelivered.
        hash: The entry's link in the hash chain (hex sha256), ``None`` in a v1 file read
            without migrating it.
        prev_hash: The previous entry's hash (``GENESIS_HASH`` for ``seq`` 1), as the append
            and the journal's reads give it (the envelope's ``link``); ``None`` when not read.
    """

    seq: int
    session: int
    round_id: str | None
    kind: str
    happened_at: datetime
    body: dict[str, Any]
    delivered_at: datetime | None = None
    hash: str | None = None
    prev_hash: str | None = field(default=None, compare=False)
    _typed: EntryBody | None = field(default=None, compare=False, repr=False)

    @property
    def typed_body(self) -> EntryBody:
        """The body as its kind's model, parsed and validated once (on first use).

        Raises:
            JournalError: The stored body does not match its kind's model.
        """
        typed = self._typed
        if typed is None:
            typed = parse_body(self.kind, self.body)
            object.__setattr__(self, "_typed", typed)
        return typed
