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
``{p}/{t}/cmd/{name}``    no        inbound commands
========================  ========  =====================================================
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_serializer

from controller.errors import TablectlError
from controller.journal import JournalEntry

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
    }
)
"""The journal kinds of the version 1 contract (others are published as they are)."""

RESULT_KINDS = frozenset({"round_result", "round_voided"})
"""Kinds also published on the ``results`` topic."""


def utc_text(moment: datetime) -> str:
    """UTC ISO-8601 with microseconds and ``Z``: ``2026-11-22T02:10:59.123456Z``.

    Raises:
        TablectlError: ``moment`` is naive.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise TablectlError(f"time {moment.isoformat()} has no time zone", moment=str(moment))
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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

    def cmd(self, name: str) -> str:
        """The inbound command topic ``name`` (``decision``, ``void``...)."""
        if not name or any(ch in name for ch in "+#\0"):
            raise TablectlError("command name must not be empty or hold wildcards", name=name)
        return f"{self.base}/cmd/{name}"


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
    """

    model_config = ConfigDict(frozen=True)

    schema_version: Literal["1"] = SCHEMA_VERSION
    table: str
    round: str | None
    seq: int
    session: int
    kind: str
    at: datetime
    delayed: bool = False
    data: dict[str, Any]

    @field_serializer("at")
    def _serialize_at(self, value: datetime) -> str:
        return utc_text(value)

    def to_bytes(self) -> bytes:
        """Compact UTF-8 JSON."""
        return self.model_dump_json().encode("utf-8")


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


@dataclass(frozen=True, slots=True)
class Outbound:
    """One MQTT message to publish.

    Attributes:
        topic: Where.
        payload: UTF-8 JSON.
        qos: Always 1 for journalled messages.
        retain: Whether the broker keeps it for new subscribers.
    """

    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = False


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
        elif entry.kind == "round_voided":
            changes["awaiting_rescan"] = None
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
        }


def _replace(snapshot: RoundSnapshot, **changes: Any) -> RoundSnapshot:
    values = {name: getattr(snapshot, name) for name in RoundSnapshot.__dataclass_fields__}
    values.update(changes)
    return RoundSnapshot(**values)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


# -- entry -> messages ----------------------------------------------------------------------


_SAFE_REFUSAL_KEYS = ("slot", "hand", "index", "face")


def public_view(entry: JournalEntry, snapshot: RoundSnapshot) -> tuple[dict[str, Any], bool]:
    """The body as the public may see it, and whether something was withheld.

    Withheld: the value of a card dealt face down; a refused card (and the refusal reason)
    when the slot is hidden or the card is one of the round's hidden cards, since naming the
    duplicate would reveal it.
    """
    body = dict(entry.body)
    if entry.kind == "card_dealt" and body.get("face") == "hidden":
        body["card"] = None
        return body, True
    if entry.kind == "card_refused":
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
    snapshot: RoundSnapshot,
    with_snapshot: bool = True,
) -> list[Outbound]:
    """What is published for one journal entry, in publishing order.

    Args:
        entry: The journal entry.
        topics: The table's topics.
        delayed: Whether the entry is published late (sets ``delayed`` in every envelope).
        snapshot: The round snapshot *after* folding ``entry`` in (``snapshot.apply(entry)``).
        with_snapshot: ``False`` leaves out the retained round snapshot (the outbox does so
            for all but the last entry of a backlog batch, whose snapshot supersedes them).

    Returns:
        The public view on ``events``; the full entry on ``secure/events`` when something was
        withheld; the same envelope on ``results`` for results and voids; the retained round
        snapshot when the entry belongs to a round.
    """
    public, withheld = public_view(entry, snapshot)
    public_envelope = envelope_for(entry, topics.table, delayed=delayed, data=public)
    out = [Outbound(topics.events, public_envelope.to_bytes(), qos=1, retain=False)]
    if withheld:
        full = envelope_for(entry, topics.table, delayed=delayed)
        out.append(Outbound(topics.secure_events, full.to_bytes(), qos=1, retain=False))
    if entry.kind in RESULT_KINDS:
        out.append(Outbound(topics.results, public_envelope.to_bytes(), qos=1, retain=False))
    if with_snapshot and entry.round_id is not None:
        out.append(round_snapshot_message(snapshot, topics, entry=entry, delayed=delayed))
    return out


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
