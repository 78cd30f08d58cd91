"""The view of one table, folded from the messages a subscriber receives (pure: no I/O).

A :class:`TableView` is what the studio's pages show of a table: its status (online or
offline), the current round (the shared round fold :class:`controller.journal.RoundFold`, the
same one the retained snapshot is built with, fed here from the wire), and what the round
fold does not keep but a dealer or an overlay needs: the misread awaiting a rescan with its
attempt count, the last refused card with its reason, the halt's reason, the decisions taken,
the win probabilities per street, the device states, the pit alerts, the settlement. The last
message is also described as a line of text by :func:`controller.watch.describe` (the terminal
view's words), so the pages and ``tablectl watch`` say the same thing.

Which messages count (docs/studio.md, "State"): the retained ``round`` snapshot rebuilds the
round when it is at least as new as what the view holds (a page or the studio joining midway,
the studio reconnecting after a broker outage); ``events`` are applied in ``seq`` order, a
``seq`` at or below the last one applied is dropped (a repeat, or an entry the snapshot already
folded in); ``results`` add the settlement; ``secure/events`` are read only by a view made with
``secure=True`` (the secure-delay floor): the values of hidden cards and the secure equities.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.journal.fold import DealtCard, RoundFold
from controller.watch import describe

Channel = Literal["status", "round", "events", "results", "secure"]
"""What a topic carries, from its levels after the table id."""

CHANNELS: dict[str, Channel] = {
    "status": "status",
    "round": "round",
    "events": "events",
    "results": "results",
    "secure/events": "secure",
}
"""The topics the studio follows (after ``{prefix}/{table}/``) and what each carries."""

_KEEP_DECISIONS = 12
_KEEP_ALERTS = 5
_KEEP_RESULTS = 2000
"""Result seqs remembered per table to drop repeats (the newest are kept)."""


def parse_topic(topic: str, prefix: str) -> tuple[str, Channel] | None:
    """``(table, channel)`` of a topic the studio follows, or ``None``."""
    base = prefix.strip("/")
    if base:
        if not topic.startswith(base + "/"):
            return None
        topic = topic[len(base) + 1 :]
    table, _, rest = topic.partition("/")
    channel = CHANNELS.get(rest)
    if not table or channel is None:
        return None
    return table, channel


@functools.lru_cache(maxsize=32)
def _plan_slots(game: str) -> tuple[str, ...] | None:
    """The slots of a game's default deal plan, in dealing order (``None``: unknown game)."""
    from controller.games.registry import game_spec

    try:
        spec = game_spec(game)
    except Exception:
        return None
    return tuple(slot.name for slot in spec.deal_plan.slots)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _snapshot_fold(round_id: str | None, data: Mapping[str, Any]) -> RoundFold:
    """A round fold rebuilt from a retained ``round_snapshot``'s data."""
    cards: list[DealtCard] = []
    for item in data.get("cards") or ():
        if isinstance(item, Mapping):
            index = item.get("index")
            cards.append(
                DealtCard(
                    slot=str(item.get("slot", "")),
                    hand=_text(item.get("hand")),
                    index=index if isinstance(index, int) else None,
                    face=str(item.get("face", "up")),
                    card=_text(item.get("card")),
                )
            )
    state = str(data.get("state") or "idle")
    indices = [card.index for card in cards if card.index is not None]
    round_no = data.get("round_no")
    decision = data.get("decision")
    result = data.get("result")
    return RoundFold(
        round_id=round_id,
        round_no=round_no if isinstance(round_no, int) else None,
        game=_text(data.get("game")),
        state=state,
        betting_closes_at=_text(data.get("betting_closes_at")),
        betting_closed=state in ("dealing", "settled"),
        cards=tuple(cards),
        next_index=max(indices) + 1 if indices else 0,
        awaiting_rescan=_text(data.get("awaiting_rescan")),
        halted=bool(data.get("halted")),
        decision=dict(decision) if isinstance(decision, Mapping) else None,
        result=dict(result) if isinstance(result, Mapping) else None,
        outcome=("void" if result.get("voided") else "result")
        if isinstance(result, Mapping)
        else None,
    )


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
        hidden: Secure views only: each hidden slot's value (``secure/events``).
        secure_equity: Secure views only: the secure win probabilities by street.
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


@dataclass
class TableView:
    """One table as the studio's pages show it (see the module notes).

    Args:
        table: The table id.
        secure: Whether ``secure/events`` are read (the secure-delay floor only).

    Attributes:
        status: The last ``status`` message (``None``: none seen yet).
        fold: The current round.
        extras: The round's other facts.
        last_seq: The highest ``seq`` applied from ``events`` (or a snapshot's ``last_seq``).
        devices: Each device's last ``device_status``.
        table_state: The last ``table_status`` data.
        alerts: The last pit alerts (the latest last).
        line: The last message, as ``tablectl watch`` words it.
        kind: The last message's kind.
        delayed: Whether the last event came ``delayed`` (published late: not live).
    """

    table: str
    secure: bool = False
    status: dict[str, Any] | None = None
    fold: RoundFold = field(default_factory=RoundFold)
    extras: RoundExtras = field(default_factory=RoundExtras)
    last_seq: int = 0
    devices: dict[str, Any] = field(default_factory=dict)
    table_state: dict[str, Any] | None = None
    alerts: list[dict[str, Any]] = field(default_factory=list)
    line: str | None = None
    kind: str | None = None
    delayed: bool = False
    _results_seen: set[int] = field(default_factory=set)

    # -- in -----------------------------------------------------------------------------------

    def apply(self, channel: Channel, topic: str, payload: bytes) -> bool:
        """Fold one message in; whether the view changed (garbage changes nothing)."""
        try:
            envelope = json.loads(payload or b"null")
        except (ValueError, UnicodeDecodeError):
            return False
        if not isinstance(envelope, dict):
            return False
        if channel == "status":
            return self._status(envelope)
        raw = envelope.get("data")
        data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        if channel == "round":
            return self._snapshot(envelope, data)
        if channel == "events":
            return self._event(topic, envelope, data)
        if channel == "results":
            return self._result(envelope, data)
        return self.secure and self._secure(envelope, data)

    def _status(self, envelope: dict[str, Any]) -> bool:
        session = envelope.get("session")
        known = self.status.get("session") if self.status else None
        if isinstance(session, int) and isinstance(known, int) and session < known:
            # A lower session: a new journal for this table id; its seq starts over.
            self.last_seq = 0
            self._results_seen.clear()
        self.status = envelope
        self.line = describe("status", envelope)
        self.kind = "status"
        return True

    def _snapshot(self, envelope: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
        last = data.get("last_seq")
        if not isinstance(last, int) or last < self.last_seq:
            return False  # older than what the events told us
        round_id = _text(envelope.get("round"))
        fold = _snapshot_fold(round_id, data)
        if fold == self.fold and last == self.last_seq:
            return False  # the snapshot of what the events already told
        if round_id != self.fold.round_id:
            self.extras = RoundExtras()
        self.fold = fold
        if fold.awaiting_rescan is None:
            self.extras.rescan = None
        if not fold.halted:
            self.extras.halt_reason = None
        self.last_seq = last
        return True

    def _event(self, topic: str, envelope: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
        seq = envelope.get("seq")
        if not isinstance(seq, int) or seq <= self.last_seq:
            return False
        self.last_seq = seq
        kind = str(envelope.get("kind", ""))
        round_id = _text(envelope.get("round"))
        if round_id is not None:
            if round_id != self.fold.round_id:
                self.extras = RoundExtras()
            self.fold = self.fold.follow(round_id, kind, data)
        handler = _EVENT_EXTRAS.get(kind)
        if handler is not None:
            handler(self, data)
        self.kind = kind
        self.delayed = bool(envelope.get("delayed"))
        self.line = describe(topic, envelope)
        return True

    def _result(self, envelope: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
        seq = envelope.get("seq")
        if not isinstance(seq, int) or seq in self._results_seen:
            return False
        self._results_seen.add(seq)
        if len(self._results_seen) > _KEEP_RESULTS:  # a long-running studio stays bounded
            self._results_seen = set(sorted(self._results_seen)[-_KEEP_RESULTS // 2 :])
        if _text(envelope.get("round")) != self.fold.round_id:
            return False  # a replayed result of an earlier round
        self.extras.settlement = data.get("bets")
        return True

    def _secure(self, envelope: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
        round_id = _text(envelope.get("round"))
        if round_id is None or round_id != self.fold.round_id:
            return False
        kind = envelope.get("kind")
        if kind == "card_dealt" and data.get("card") is not None:
            self.extras.hidden[str(data.get("slot"))] = str(data["card"])
            return True
        if kind == "table_info" and data.get("kind") == "equity":
            inner = data.get("data")
            if isinstance(inner, Mapping):
                self.extras.secure_equity[str(inner.get("street", "?"))] = dict(inner)
                return True
        return False

    # -- per kind -----------------------------------------------------------------------------

    def _card_dealt(self, data: Mapping[str, Any]) -> None:
        self.extras.rescan = None
        self.extras.refused = None

    def _rescan(self, data: Mapping[str, Any]) -> None:
        self.extras.rescan = {key: data.get(key) for key in ("slot", "attempt", "cause", "detail")}

    def _refused(self, data: Mapping[str, Any]) -> None:
        self.extras.refused = {key: data.get(key) for key in ("slot", "card", "reason")}

    def _halted(self, data: Mapping[str, Any]) -> None:
        self.extras.halt_reason = _text(data.get("reason")) or "halted"

    def _resumed(self, data: Mapping[str, Any]) -> None:
        self.extras.halt_reason = None
        self.extras.rescan = None

    def _decision_applied(self, data: Mapping[str, Any]) -> None:
        self.extras.decisions = [*self.extras.decisions, dict(data)][-_KEEP_DECISIONS:]

    def _table_info(self, data: Mapping[str, Any]) -> None:
        inner = data.get("data")
        if data.get("secure") or not isinstance(inner, Mapping):
            return  # the public view of a secure entry: kind and secure only
        if data.get("kind") == "equity":
            self.extras.equity[str(inner.get("street", "?"))] = dict(inner)
        else:
            self.extras.info[str(data.get("kind"))] = dict(inner)

    def _device(self, data: Mapping[str, Any]) -> None:
        self.devices[str(data.get("device", "?"))] = {
            "state": data.get("state"),
            "detail": data.get("detail"),
        }

    def _table_status(self, data: Mapping[str, Any]) -> None:
        self.table_state = dict(data)

    def _alert(self, data: Mapping[str, Any]) -> None:
        self.alerts = [*self.alerts, dict(data)][-_KEEP_ALERTS:]

    # -- out ----------------------------------------------------------------------------------

    @property
    def online(self) -> bool | None:
        """Whether the table's controller is online (``None``: no status seen)."""
        if self.status is None:
            return None
        return self.status.get("state") == "online"

    def next_slot(self) -> str | None:
        """The slot the dealer deals next: the one to rescan, else the deal plan's next.

        The plan is the game's default (the registry's); when the slots dealt so far do not
        follow it (a table with other options), the next slot is not guessed.
        """
        fold = self.fold
        if fold.finished or fold.state != "dealing":
            return None
        if fold.awaiting_rescan is not None:
            return fold.awaiting_rescan
        plan = _plan_slots(fold.game) if fold.game else None
        if plan is None or fold.next_index >= len(plan):
            return None
        for card in fold.cards:
            if card.index is None or card.index >= len(plan) or plan[card.index] != card.slot:
                return None
        return plan[fold.next_index]

    def _cards(self) -> list[dict[str, Any]]:
        cards = []
        for card in self.fold.cards:
            item: dict[str, Any] = {
                "slot": card.slot,
                "hand": card.hand,
                "index": card.index,
                "face": card.face,
                "card": card.public,
            }
            if self.secure and card.public is None and card.slot in self.extras.hidden:
                item["card"] = self.extras.hidden[card.slot]
                item["secure"] = True
            cards.append(item)
        return cards

    def to_wire(self) -> dict[str, Any]:
        """The view as the pages get it (JSON-able). A public view has no secure member."""
        fold, extras = self.fold, self.extras
        round_view: dict[str, Any] = {
            "id": fold.round_id,
            "no": fold.round_no,
            "game": fold.game,
            "state": fold.state,
            "halted": fold.halted,
            "halt_reason": extras.halt_reason if fold.halted else None,
            "betting_closes_at": fold.betting_closes_at,
            "cards": self._cards(),
            "next_slot": self.next_slot(),
            "awaiting_rescan": fold.awaiting_rescan,
            "rescan": extras.rescan if fold.awaiting_rescan is not None else None,
            "refused": extras.refused,
            "decision": fold.decision,
            "decisions": extras.decisions,
            "equity": extras.equity,
            "info": extras.info,
            "result": fold.result,
            "settlement": extras.settlement,
        }
        if self.secure:
            round_view["secure_equity"] = extras.secure_equity
        status = self.status or {}
        return {
            "table": self.table,
            "online": self.online,
            "status": {
                key: status.get(key) for key in ("state", "game", "session", "reason", "at")
            },
            "round": round_view,
            "devices": self.devices,
            "table_state": self.table_state,
            "alerts": self.alerts,
            "last_seq": self.last_seq,
            "line": self.line,
            "kind": self.kind,
            "delayed": self.delayed,
        }


_EVENT_EXTRAS: dict[str, Any] = {
    "card_dealt": TableView._card_dealt,
    "rescan_requested": TableView._rescan,
    "card_refused": TableView._refused,
    "round_halted": TableView._halted,
    "round_resumed": TableView._resumed,
    "decision_applied": TableView._decision_applied,
    "table_info": TableView._table_info,
    "device_status": TableView._device,
    "table_status": TableView._table_status,
    "pit_alert": TableView._alert,
}
"""What an event kind adds to the view besides the round fold."""
