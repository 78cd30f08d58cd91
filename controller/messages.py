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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from controller.errors import TablectlError
from controller.journal import (
    QUALIFIERS,
    BettingClosedData,
    BettingOpenedData,
    CardDealtData,
    CardRefusedData,
    CardsRevealedData,
    CommandAnsweredData,
    CommandReceivedData,
    DecisionAppliedData,
    DecisionOpenData,
    DeviceStatusData,
    EntryKind,
    JournalEntry,
    OpenModel,
    PitAlertData,
    RescanRequestedData,
    RoundFold,
    RoundHaltedData,
    RoundOpenedData,
    RoundResultData,
    RoundResumedData,
    RoundVoidedData,
    SettlementLine,
    TableInfoData,
    TableStatusData,
)
from controller.journal import Role as Role  # noqa: PLC0414 (a contract type, re-exported)

if TYPE_CHECKING:
    from controller.signing import Signer

SCHEMA_VERSION: Literal["3"] = "3"
"""The ``schema_version`` every envelope carries (docs/mqtt.md, "Changelog")."""

JOURNAL_ID_PATTERN = r"^[0-9a-f]{32}$"
"""A journal id on the wire: 32 lowercase hex digits (:func:`controller.journal.new_journal_id`)."""

JOURNAL_FIELD = Field(
    pattern=JOURNAL_ID_PATTERN,
    description="the identity of the journal the message comes from (32 hex digits, made "
    "when the journal was created): a table that starts a new journal (a new computer, a "
    "dead disk) sends a new one, and its seq starts over. De-duplicate on (table, journal, "
    "seq); see docs/mqtt.md, 'Journal identity'",
)

DATE_TIME: dict[str, Any] = {"format": "date-time"}
"""The JSON Schema of a UTC time on the wire (RFC 3339, as :func:`utc_text` writes it)."""


def _required(*names: str) -> Callable[[dict[str, Any]], None]:
    """A ``json_schema_extra`` that lists ``names`` as required.

    For fields with a default that are nevertheless always sent (``schema_version``):
    pydantic leaves a field with a default out of ``required``, but a consumer must be able to
    rely on them.
    """

    def extra(schema: dict[str, Any]) -> None:
        required = schema.setdefault("required", [])
        required.extend(name for name in names if name not in required)

    return extra


ROUND_SNAPSHOT_KIND = "round_snapshot"
"""The ``kind`` of the envelope on the retained ``round`` topic."""

PUBLIC_KINDS = frozenset(EntryKind)
"""The journal kinds of the version 1 contract (others are published as they are)."""

ROLES = ("betting", "pit")
"""Who may send commands: the betting system and the pit boss."""

RESULT_KINDS = frozenset({"round_result", "round_voided"})
"""Kinds also published on the ``results`` topic."""


def settlement_for(
    bets: Iterable[Mapping[str, Any]], bet: str, **choices: str | None
) -> Mapping[str, Any]:
    """The settlement line of a result's ``bets`` that settles one wager (no game-specific code).

    A line settles the wager when its ``bet`` is the wager's and, for every qualifier the line
    names (``position``, ``path``, ``setting``), the wager's choice is the same, or the wager
    made no choice (``None``) and the line is the ``default`` one. Qualifiers a line does not
    name match any choice (docs/mqtt.md, "Settling bets").

    Args:
        bets: The ``bets`` list of a ``round_result``.
        bet: The wager's bet id.
        **choices: The wager's ``position``, ``path`` and ``setting`` (``None``: no choice).

    Returns:
        The line (``outcome``, ``payout`` per unit staked, ``reason``...).

    Raises:
        TablectlError: An unknown qualifier, or not exactly one line settles the wager.
    """
    unknown = sorted(set(choices) - set(QUALIFIERS))
    if unknown:
        raise TablectlError(
            f"unknown settlement qualifier {unknown[0]!r} (known: {', '.join(QUALIFIERS)})",
            qualifier=unknown[0],
        )

    def matches(line: Mapping[str, Any]) -> bool:
        if line.get("bet") != bet:
            return False
        for name in QUALIFIERS:
            wanted = line.get(name)
            if wanted is None:
                continue
            chosen = choices.get(name)
            if chosen is None:
                if not line.get("default"):
                    return False
            elif chosen != wanted:
                return False
        return True

    found = [line for line in bets if matches(line)]
    if len(found) != 1:
        raise TablectlError(
            f"{len(found)} settlement lines match bet {bet!r} with {choices or 'no choices'} "
            "(exactly one must: name the wager's position, path or setting)",
            bet=bet,
            matches=len(found),
        )
    return found[0]


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


class ChainHead(BaseModel):
    """``chain_head``: a journal entry's link in the hash chain, anchoring the journal.

    It anchors the journal outside its file (docs/journal.md, "Anchors"). On a result
    (``round_result``, ``round_voided``): the result's own entry (``seq`` is the envelope's),
    whose hash covers every entry before it; in the online status: the journal's latest
    committed entry when the controller connected (``seq`` 0 and 64 zeros for an empty
    journal).

    Attributes:
        seq: The entry's ``seq``.
        hash: Its hash in the chain (hex sha256).
    """

    model_config = ConfigDict(frozen=True)

    seq: int = Field(ge=0)
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class ChainLink(BaseModel):
    """``link``: where an entry sits in the journal's hash chain (docs/journal.md).

    With it a consumer checks a run of entries against a signed chain head: walking down from
    a signed result (its ``chain_head.hash`` is its ``link.hash``, its ``link.prev`` signed
    too), each entry below is on the chain when its ``hash`` is the ``prev`` of the entry
    above it. The hash covers the journal's stored body, which the public view may withhold
    parts of: it places an entry in the chain; the table's journal checks its content.

    Attributes:
        prev: The previous entry's hash (64 zeros for ``seq`` 1).
        hash: This entry's hash.
    """

    model_config = ConfigDict(frozen=True)

    prev: str = Field(pattern=r"^[0-9a-f]{64}$")
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class Envelope(BaseModel):
    """The envelope of every journalled message (DESIGN.md §6).

    Attributes:
        schema_version: ``"3"`` (required in the schemas: consumers refuse other versions).
        table: The table id.
        journal: The identity of the table's journal (issue 22): a new journal, a new id.
        round: The round id, or ``None`` for table-level events.
        seq: The per-journal sequence number (gap-free on ``events``; consumers de-duplicate
            on ``(table, journal, seq)`` per topic).
        session: The controller's session counter when the entry was journalled.
        kind: What happened.
        at: When it happened (UTC; serialized ISO-8601 with ``Z``).
        delayed: ``True`` when published late (after an outage or a restart).
        data: The event's fields.
        replayed: ``True`` on a result re-sent by a replay command (same ``seq`` as the
            original); absent otherwise.
        signature: The Ed25519 signature of a result (:mod:`controller.signing`); absent on
            other messages and when the table has no signing key.
        chain_head: On ``round_result`` and ``round_voided`` (always sent there; optional in
            the schema): the result entry's ``seq`` and chain hash, inside the signed form.
            Absent on other messages.
        link: On every journalled message of a table whose journal is chained (optional in
            the schema): the entry's hash and the previous entry's (:class:`ChainLink`).
    """

    model_config = ConfigDict(frozen=True, json_schema_extra=_required("schema_version", "delayed"))

    schema_version: Literal["3"] = SCHEMA_VERSION
    table: str
    journal: str = JOURNAL_FIELD
    round: str | None
    seq: int = Field(ge=1)
    session: int
    kind: str
    at: datetime = Field(json_schema_extra=DATE_TIME)
    delayed: bool = False
    data: dict[str, Any]
    replayed: bool | None = None
    signature: Signature | None = None
    chain_head: ChainHead | None = None
    link: ChainLink | None = None

    @field_serializer("at")
    def _serialize_at(self, value: datetime) -> str:
        return utc_text(value)

    def to_wire(self) -> dict[str, Any]:
        """The JSON object (the optional members left out when not set)."""
        data = self.model_dump(mode="json")
        for optional in _ENVELOPE_OPTIONAL:
            if data[optional] is None:
                del data[optional]
        return data

    def to_bytes(self) -> bytes:
        """Compact UTF-8 JSON (serialized by pydantic-core: on every card's path)."""
        unset = {name for name in _ENVELOPE_OPTIONAL if getattr(self, name) is None}
        return self.model_dump_json(exclude=unset or None).encode()

    def signed_bytes(self, signer: Signer | None) -> bytes:
        """Compact UTF-8 JSON, with a signature member when ``signer`` is given."""
        if signer is None:
            return self.to_bytes()
        return _compact(signer.sign(self.to_wire()))


_ENVELOPE_OPTIONAL = ("replayed", "signature", "chain_head", "link")
"""Envelope members left out of the message when not set."""


class StatusMessage(BaseModel):
    """The retained ``status`` payload: birth, clean stop, or Last Will.

    Attributes:
        state: ``online`` or ``offline``.
        table: The table id.
        journal: The identity of the table's journal (as in every envelope): the birth of a
            new journal is how consumers learn it (as Sparkplug B's birth does).
        session: The controller's session counter.
        game: The game id the table runs.
        version: The controller's version.
        at: When it was published; ``None`` in the Last Will (registered at connect time,
            published by the broker whenever the link dies).
        reason: Why the table is offline (``stopped``, ``connection lost``); absent online.
        chain_head: In the online status (always sent there; optional in the schema): the
            journal's latest committed entry (``seq`` and chain hash) when the controller
            connected. Absent offline.
    """

    model_config = ConfigDict(frozen=True, json_schema_extra=_required("schema_version"))

    schema_version: Literal["3"] = SCHEMA_VERSION
    state: Literal["online", "offline"]
    table: str
    journal: str = JOURNAL_FIELD
    session: int
    game: str
    version: str
    at: datetime | None = Field(json_schema_extra=DATE_TIME)
    reason: str | None = None
    chain_head: ChainHead | None = None

    @field_serializer("at")
    def _serialize_at(self, value: datetime | None) -> str | None:
        return None if value is None else utc_text(value)

    def to_bytes(self) -> bytes:
        """Compact UTF-8 JSON (``reason`` and ``chain_head`` omitted when ``None``)."""
        data = self.model_dump(mode="json")
        for optional in ("reason", "chain_head"):
            if data[optional] is None:
                del data[optional]
        return _compact(data)


# -- the data of each entry kind -------------------------------------------------------------
# The full data of an entry is its journal body: those models live with the journal
# (controller.journal.entries). Here: what differs on the wire.


class CommandReceivedPublicData(OpenModel):
    """``command_received`` on ``events``: who sent what, without its fields."""

    command_id: str
    role: Role
    name: str


class CommandAnsweredPublicData(OpenModel):
    """``command_answered`` on ``events``."""

    command_id: str
    role: Role
    name: str
    accepted: bool
    reason: str = ""


class RoundResultPublicData(RoundResultData):
    """``round_result`` as published: ``bets`` is always the list of settlement lines."""

    bets: list[SettlementLine] = Field(
        description="one settlement line per bet id and qualifiers: see docs/mqtt.md, "
        "'Settling bets'"
    )


def legacy_bets(bets: Mapping[str, Any]) -> list[dict[str, Any]] | Mapping[str, Any]:
    """A version 1 ``bets`` map of a journalled result as settlement lines, when it is flat.

    A flat ``{bet_id: {outcome, payout, reason?}}`` (every game but the three with paths,
    positions or settings) becomes one unqualified line per bet; a nested one is returned as
    it is (it never matched the version 1 schema either: docs/mqtt.md, "Changelog").
    """
    if all(isinstance(value, Mapping) and "outcome" in value for value in bets.values()):
        return [{"bet": bet, **value} for bet, value in bets.items()]
    return bets


class SnapshotCardData(OpenModel):
    """A dealt slot in the round snapshot."""

    slot: str
    hand: str | None
    index: int | None
    face: str
    card: str | None
    source: Literal["manual"] | None = Field(
        default=None,
        description="`manual`: entered by the pit boss by hand (as `card_dealt.source`); "
        "absent for a card a reader read",
    )


class RoundSnapshotData(OpenModel):
    """``round_snapshot`` (retained ``round`` topic): the current round, public facts only."""

    round_no: int | None
    game: str | None
    state: Literal["idle", "opening", "betting_open", "dealing", "settled", "voided"] = Field(
        description="`opening`: the round's steps before betting (Mahjong's bank offers)"
    )
    halted: bool = Field(default=False, description="dealing paused (round_halted)")
    betting_closes_at: str | None = Field(json_schema_extra=DATE_TIME)
    cards: list[SnapshotCardData]
    awaiting_rescan: str | None
    result: dict[str, Any] | None
    last_seq: int
    decision: dict[str, Any] | None = Field(
        default=None, description="the open decision window (decision_open data), if any"
    )


DATA_MODELS: dict[str, type[BaseModel]] = {
    "round_opened": RoundOpenedData,
    "betting_opened": BettingOpenedData,
    "betting_closed": BettingClosedData,
    "card_dealt": CardDealtData,
    "rescan_requested": RescanRequestedData,
    "card_refused": CardRefusedData,
    "round_result": RoundResultPublicData,
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
    topics: Topics,
    *,
    journal: str,
    session: int,
    game: str,
    version: str,
    at: datetime,
    chain_head: tuple[int, str],
) -> Outbound:
    """The retained ``online`` status published after each connect.

    Args:
        topics: The table's topics.
        journal: The journal's identity.
        session: The controller's session counter.
        game: The game id.
        version: The controller's version.
        at: Now.
        chain_head: ``(seq, hash)`` of the journal's latest committed entry
            (:attr:`controller.journal.Journal.chain_head`).
    """
    seq, chain = chain_head
    status = StatusMessage(
        state="online",
        table=topics.table,
        journal=journal,
        session=session,
        game=game,
        version=version,
        at=at,
        chain_head=ChainHead(seq=seq, hash=chain),
    )
    return Outbound(topics.status, status.to_bytes(), qos=1, retain=True)


def offline_message(
    topics: Topics,
    *,
    journal: str,
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
        journal=journal,
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
        manual: Entered by the pit boss by hand (``source: manual`` on the wire).
    """

    slot: str
    hand: str | None
    index: int | None
    face: str
    card: str | None
    manual: bool = False

    def to_wire(self) -> dict[str, Any]:
        """The JSON form (``source`` only for a card entered by hand)."""
        wire: dict[str, Any] = {
            "slot": self.slot,
            "hand": self.hand,
            "index": self.index,
            "face": self.face,
            "card": self.card,
        }
        if self.manual:
            wire["source"] = "manual"
        return wire


@dataclass(frozen=True, slots=True)
class RoundSnapshot:
    """The current round folded from journal entries (immutable; :meth:`apply` returns new).

    A view of the shared round fold (:class:`~controller.journal.RoundFold`): only public facts
    are serialized (:meth:`to_wire`). ``hidden_cards`` keeps the values of hidden cards dealt
    so far, never serialized, so a refusal that names one of them can be kept off the public
    topics.

    Attributes:
        fold: The current round's fold (a fold of no round before the first one).
        last_seq: The ``seq`` of the last entry folded in.
    """

    fold: RoundFold = field(default_factory=RoundFold)
    last_seq: int = 0

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
            return RoundSnapshot(self.fold, entry.seq)
        # A new round starts at its round_opened, and also when we first see a round midway
        # (e.g. after a restart whose replay starts late): RoundFold.follow.
        return RoundSnapshot(self.fold.follow(entry.round_id, entry.kind, entry.body), entry.seq)

    @property
    def round_id(self) -> str | None:
        """The current round, ``None`` before the first one."""
        return self.fold.round_id

    @property
    def round_no(self) -> int | None:
        """Its number, if known."""
        return self.fold.round_no

    @property
    def game(self) -> str | None:
        """The game id."""
        return self.fold.game

    @property
    def state(self) -> str:
        """``idle``, ``betting_open``, ``dealing``, ``settled`` or ``voided``."""
        return self.fold.state

    @property
    def betting_closes_at(self) -> str | None:
        """When betting closes (UTC ISO text), while open."""
        return self.fold.betting_closes_at

    @property
    def cards(self) -> tuple[SnapshotCard, ...]:
        """Dealt slots, in dealing order, as the public sees them."""
        return tuple(
            SnapshotCard(card.slot, card.hand, card.index, card.face, card.public, card.manual)
            for card in self.fold.cards
        )

    @property
    def awaiting_rescan(self) -> str | None:
        """The slot waiting for a rescan, if any."""
        return self.fold.awaiting_rescan

    @property
    def result(self) -> Mapping[str, Any] | None:
        """Winner, hands and cards once the round has a result; the refunds if voided."""
        return self.fold.result

    @property
    def hidden_cards(self) -> frozenset[str]:
        """Values of hidden cards dealt in this round (never published)."""
        return self.fold.hidden_cards

    @property
    def hidden_slots(self) -> tuple[tuple[str, str], ...]:
        """``(slot, value)`` of hidden cards not revealed yet (never published)."""
        return self.fold.hidden_slots

    @property
    def halted(self) -> bool:
        """Dealing is paused (``round_halted`` until ``round_resumed``)."""
        return self.fold.halted

    @property
    def decision(self) -> Mapping[str, Any] | None:
        """The open decision window (``decision_open`` data) until it is applied."""
        return self.fold.decision

    def to_wire(self) -> dict[str, Any]:
        """The public JSON form (no hidden card value)."""
        fold = self.fold
        return {
            "round_no": fold.round_no,
            "game": fold.game,
            "state": fold.state,
            "betting_closes_at": fold.betting_closes_at,
            "cards": [card.to_wire() for card in self.cards],
            "awaiting_rescan": fold.awaiting_rescan,
            "result": public_result(fold.result),
            "last_seq": self.last_seq,
            "halted": fold.halted,
            "decision": dict(fold.decision) if fold.decision is not None else None,
        }


# -- entry -> messages ----------------------------------------------------------------------


_SAFE_REFUSAL_KEYS = ("slot", "hand", "index", "face")


SNAPSHOT_VIEW_KINDS = frozenset({"card_refused"})
"""Kinds whose public view depends on the round snapshot (a refusal may name a hidden card)."""

# -- what the public is told of a void, a halt, an alert (docs/mqtt.md, "Public reasons") ---
# A void's or a halt's reason can hold what a pit boss typed and the operator's name; the
# public topics (and so the stream overlay and the dealer screen) carry a fixed phrase per
# cause instead, the full entry going to secure/events (and staying in the journal).

PUBLIC_VOID_REASONS: tuple[tuple[str, str], ...] = (
    ("voided by the pit boss", "voided by the pit"),
    ("controller stopped before betting closed", "table stopped before betting closed"),
    ("controller restarted before betting closed", "table restarted before betting closed"),
)
"""``(how the journalled reason starts, the public reason)`` of each cause of a void."""

PUBLIC_HALT_REASONS: tuple[tuple[str, str], ...] = (("device lost", "card reader lost"),)
"""``(how the journalled reason starts, the public reason)`` of each cause of a halt."""

PUBLIC_ALERT_REASONS: tuple[tuple[str, str], ...] = (
    ("round halted", "round halted: pit boss needed"),
)
"""``(how a pit alert's reason starts, the public reason)``; see :func:`public_alert_reason`."""

PUBLIC_FAULT = "table fault"
"""The public reason of a void or halt of any other cause."""

PUBLIC_ALERT = "pit boss needed"
"""The public reason of a pit alert of any other cause."""

PUBLIC_MISREADS_ALERT = "repeated misreads: pit boss needed"
"""The public reason of the alert after repeated misreads at a slot."""

PUBLIC_RESUMED_BY = "pit"
"""Who resumed a round, publicly (the journal keeps the operator's name)."""


def _phrase(reason: object, phrases: tuple[tuple[str, str], ...], default: str) -> str:
    text = reason if isinstance(reason, str) else ""
    if text == default or any(text == public for _, public in phrases):
        return text  # a public phrase already
    return next((public for start, public in phrases if text.startswith(start)), default)


def public_void_reason(reason: object) -> str:
    """The viewer-safe reason of a void: a fixed phrase per cause, never the pit's words."""
    return _phrase(reason, PUBLIC_VOID_REASONS, PUBLIC_FAULT)


def public_halt_reason(reason: object) -> str:
    """The viewer-safe reason of a halt (a fixed phrase per cause)."""
    return _phrase(reason, PUBLIC_HALT_REASONS, PUBLIC_FAULT)


def public_alert_reason(reason: object) -> str:
    """The viewer-safe reason of a pit alert (a fixed phrase per cause).

    ``N misreads in a row at SLOT`` becomes ``repeated misreads: pit boss needed`` (the slot
    stays in the alert's ``slot``).
    """
    text = reason if isinstance(reason, str) else ""
    if " misreads in a row" in text or text == PUBLIC_MISREADS_ALERT:
        return PUBLIC_MISREADS_ALERT
    return _phrase(text, PUBLIC_ALERT_REASONS, PUBLIC_ALERT)


def public_result(result: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A round's result as the public snapshot carries it (a void's public reason)."""
    if result is None:
        return None
    public = dict(result)
    if public.get("voided"):
        public["reason"] = public_void_reason(public.get("reason"))
    return public


PUBLIC_REASON_KINDS: dict[str, tuple[str, Callable[[object], str]]] = {
    "round_voided": ("reason", public_void_reason),
    "round_halted": ("reason", public_halt_reason),
    "pit_alert": ("reason", public_alert_reason),
    "round_resumed": ("by", lambda _by: PUBLIC_RESUMED_BY),
}
"""The kinds whose public view carries a fixed phrase: ``kind -> (member, its phrase)``."""


MANUAL_PRIVATE_KEYS = ("operator", "reason")
"""The fields of a manually entered ``card_dealt`` kept off the public topics."""


def _public_card(body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A ``card_dealt`` body's public view (``body`` is changed: a copy).

    A hidden card's value is withheld; a card entered by the pit boss is public as ``source:
    manual``, who entered it and why on ``secure/events`` only (as a void's words).
    """
    withheld = False
    for key in MANUAL_PRIVATE_KEYS:
        if key in body:
            del body[key]
            withheld = True
    if body.get("face") == "hidden":
        body["card"] = None
        withheld = True
    return body, withheld


def _public_reason(body: dict[str, Any], key: str, public: str) -> tuple[dict[str, Any], bool]:
    """``body`` with ``key`` set to ``public``; withheld when that changed it."""
    if body.get(key) == public:
        return body, False
    return {**body, key: public}, True


def public_view(entry: JournalEntry, snapshot: RoundSnapshot | None) -> tuple[dict[str, Any], bool]:
    """The body as the public may see it, and whether something was withheld.

    ``snapshot`` (the round after ``entry``) may be ``None`` for a kind not in
    :data:`SNAPSHOT_VIEW_KINDS`.

    Withheld: the value of a card dealt face down; who entered a manual card and why; a refused
    card (and the refusal reason) when the slot is hidden or the card is one of the round's
    hidden cards, since naming the duplicate would reveal it; the ``data`` of a secure
    ``table_info``; the fields of a received command (its full form goes to ``secure/events``);
    the reason of a void, a halt or a pit alert, and who resumed a round, where they are more
    than the cause's fixed public phrase (:func:`public_void_reason`...: the pit boss's words
    and name stay off the public topics; the full entry goes to ``secure/events``). A command's
    answer shows only who, what and the verdict on ``events`` (its full form goes to the reply
    topic, not to ``secure/events``), so it is not counted as withheld.
    """
    body = dict(entry.body)
    if entry.kind == "round_result" and isinstance(body.get("bets"), Mapping):
        body["bets"] = legacy_bets(body["bets"])
    if entry.kind == "card_dealt":
        return _public_card(body)
    if entry.kind == "table_info" and body.get("secure"):
        return {key: value for key, value in body.items() if key != "data"}, True
    if entry.kind == "command_received":
        return {key: body.get(key) for key in ("command_id", "role", "name")}, True
    if entry.kind in PUBLIC_REASON_KINDS:
        key, phrase = PUBLIC_REASON_KINDS[entry.kind]
        return _public_reason(body, key, phrase(body.get(key)))
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
    entry: JournalEntry,
    table: str,
    *,
    journal: str,
    delayed: bool,
    data: Mapping[str, Any] | None = None,
) -> Envelope:
    """The envelope of ``entry`` of journal ``journal`` (with ``data`` replacing its body).

    A result or void carries ``chain_head``: its own ``seq`` and chain hash; every entry read
    with its chain (``hash`` and ``prev_hash``) carries its ``link``.
    """
    anchored = entry.kind in RESULT_KINDS and entry.hash is not None
    linked = entry.hash is not None and entry.prev_hash is not None
    return Envelope(
        table=table,
        journal=journal,
        round=entry.round_id,
        seq=entry.seq,
        session=entry.session,
        kind=entry.kind,
        at=entry.happened_at,
        delayed=delayed,
        data=dict(entry.body if data is None else data),
        chain_head=ChainHead(seq=entry.seq, hash=entry.hash) if anchored else None,
        link=ChainLink(prev=entry.prev_hash, hash=entry.hash) if linked else None,
    )


def messages_for(
    entry: JournalEntry,
    topics: Topics,
    *,
    journal: str,
    delayed: bool,
    snapshot: RoundSnapshot | None,
    with_snapshot: bool = True,
    signer: Signer | None = None,
) -> list[Outbound]:
    """What is published for one journal entry, in publishing order.

    Args:
        entry: The journal entry.
        topics: The table's topics.
        journal: The journal's identity (:attr:`controller.journal.Journal.identity`).
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
    public_envelope = envelope_for(
        entry, topics.table, journal=journal, delayed=delayed, data=public
    )
    signed = entry.kind in RESULT_KINDS and signer is not None
    public_bytes = public_envelope.signed_bytes(signer if signed else None)
    out = [Outbound(topics.events, public_bytes, qos=1, retain=False)]
    if withheld:
        full = envelope_for(entry, topics.table, journal=journal, delayed=delayed)
        out.append(Outbound(topics.secure_events, full.to_bytes(), qos=1, retain=False))
    if entry.kind in RESULT_KINDS:
        out.append(Outbound(topics.results, public_bytes, qos=1, retain=False))
    if entry.kind == "command_answered":
        out.append(answer_message(entry, topics, journal=journal, delayed=delayed))
    if with_snapshot and entry.round_id is not None:
        if snapshot is None:
            raise TablectlError("the round snapshot message needs the snapshot", seq=entry.seq)
        out.append(
            round_snapshot_message(snapshot, topics, journal=journal, entry=entry, delayed=delayed)
        )
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


def answer_message(entry: JournalEntry, topics: Topics, *, journal: str, delayed: bool) -> Outbound:
    """The full answer to a command, for its sender (with the v5 correlation data)."""
    body = entry.body
    correlation: bytes | None = None
    raw = body.get("correlation_data")
    if isinstance(raw, str):
        try:
            correlation = base64.b64decode(raw, validate=True)
        except (ValueError, binascii.Error):
            correlation = None
    envelope = envelope_for(entry, topics.table, journal=journal, delayed=delayed)
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
    journal: str,
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
        journal: The journal's identity.
        snapshot: The round snapshot after ``entry`` (to withhold hidden cards).
        signer: The table's signer, if results are signed.
    """
    public, _withheld = public_view(entry, snapshot)
    envelope = envelope_for(
        entry, topics.table, journal=journal, delayed=True, data=public
    ).model_copy(update={"replayed": True})
    result = entry.kind in RESULT_KINDS
    payload = envelope.signed_bytes(signer if result else None)
    return Outbound(topics.results if result else topics.events, payload, qos=1, retain=False)


def round_snapshot_message(
    snapshot: RoundSnapshot,
    topics: Topics,
    *,
    journal: str,
    entry: JournalEntry,
    delayed: bool,
) -> Outbound:
    """The retained ``round`` message: the envelope of the last entry with the snapshot."""
    envelope = Envelope(
        table=topics.table,
        journal=journal,
        round=snapshot.round_id,
        seq=entry.seq,
        session=entry.session,
        kind=ROUND_SNAPSHOT_KIND,
        at=entry.happened_at,
        delayed=delayed,
        data=snapshot.to_wire(),
    )
    return Outbound(topics.round, envelope.to_bytes(), qos=1, retain=True)
