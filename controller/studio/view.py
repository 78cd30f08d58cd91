"""The view of one table as the studio's pages show it (pure but for the clock: no I/O).

A :class:`TableView` is what the studio's pages show of a table. What it knows is the one
table fold (:class:`controller.tablefold.TableFold`, shared with the pit console's floor and
``tablectl watch``): the table's status, the current round (the shared round fold
:class:`controller.journal.RoundFold`, the same one the retained snapshot is built with, fed
here from the wire), and what the round fold does not keep but a dealer or an overlay needs
(the misread awaiting a rescan with its attempt count, the last refused card with its reason,
the halt's reason, the decisions taken, the win probabilities per street, the device states,
the pit alerts, the settlement). Every payload is read by the one hardened parse
(:mod:`controller.inbound`): a message that cannot be read, or whose ``seq`` is beyond what
the table could have sent, is a rejection, logged once and counted (reader ``studio``), and
changes nothing; no payload can raise. The last message is also described as a line of text
by :func:`controller.watch.describe` (the terminal view's words), so the pages and ``tablectl
watch`` say the same thing.

Which messages count (docs/studio.md, "State"): the retained ``round`` snapshot rebuilds the
round when it is at least as new as what the view holds (a page or the studio joining midway,
the studio reconnecting after a broker outage); ``events`` are applied in ``seq`` order, a
``seq`` at or below the last one applied is dropped (a repeat, or an entry the snapshot already
folded in); ``results`` add the settlement; ``secure/events`` are read only by a view made with
``secure=True`` (the secure-delay floor): the values of hidden cards and the secure equities.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controller.inbound import Rejection, RejectionLog
from controller.journal.fold import RoundFold
from controller.messages import Envelope, StatusMessage
from controller.tablefold import Channel, RoundExtras, TableFold, at_text, wire
from controller.watch import describe

__all__ = ["CHANNELS", "Channel", "RoundExtras", "TableView", "parse_topic"]

CHANNELS: dict[str, Channel] = {
    "status": "status",
    "round": "round",
    "events": "events",
    "results": "results",
    "secure/events": "secure",
}
"""The topics the studio follows (after ``{prefix}/{table}/``) and what each carries."""


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
def game_name(game: str) -> str | None:
    """A game's name for people (the registry's ``GameFacts.name``; ``None``: unknown game)."""
    from controller.games.registry import game_spec

    try:
        return game_spec(game).name
    except Exception:
        return None


@functools.lru_cache(maxsize=32)
def _plan_hands(game: str) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """Every hand a table of ``game`` with default options can deal, with its slots, in order.

    The plan of every slot such a table can deal (a Mulligan's ``PM`` and ``DM`` too), so a
    page reserves room for each hand before its cards come. ``None``: an unknown game.
    """
    from controller.games.registry import game_spec

    try:
        spec = game_spec(game)
        plan = spec.plan_for(spec.options.model_validate({}))
    except Exception:
        return None
    hands: dict[str, list[str]] = {}
    for slot in plan.slots:
        hands.setdefault(slot.hand or "", []).append(slot.name)
    return tuple((hand, tuple(slots)) for hand, slots in hands.items())


def _page_hands(
    game: str, hands: list[tuple[str, list[str]]], seats: tuple[str, ...]
) -> list[tuple[str, list[str]]]:
    """The game's own say on the hands a page shows (:meth:`GameSpec.page_hands`)."""
    from controller.games.registry import game_spec

    try:
        return game_spec(game).page_hands(hands, seats)
    except Exception:  # an unknown game, or a game module that fails: the plan as it is
        return hands


def layout(game: str | None, seats: tuple[str, ...]) -> list[dict[str, Any]]:
    """The hands a page reserves room for, each with its slots, before any card is dealt.

    The game's plan with default options; Hold'em's seats and Mahjong's positions are the
    table's own once seen (:attr:`controller.tablefold.TableFold.seats`), since a table may
    have other counts than the default. Burn cards are not a hand people see: left out.
    """
    if not game:
        return []
    plan = _plan_hands(game)
    if plan is None:
        return []
    hands = [(hand, list(slots)) for hand, slots in plan if hand and hand != "burn"]
    hands = _page_hands(game, hands, seats)
    return [{"hand": hand, "slots": slots} for hand, slots in hands]


@functools.lru_cache(maxsize=32)
def _plan_slots(game: str) -> tuple[str, ...] | None:
    """The slots of a game's default deal plan, in dealing order (``None``: unknown game)."""
    from controller.games.registry import game_spec

    try:
        spec = game_spec(game)
    except Exception:
        return None
    return tuple(slot.name for slot in spec.deal_plan.slots)


def next_slot(fold: RoundFold) -> str | None:
    """The slot a round deals next: the one to rescan, else the deal plan's next.

    The plan is the game's default (the registry's); when the slots dealt so far do not
    follow it (a table with other options), the next slot is not guessed. The dealer screen
    shows it; the pit console names it when the pit boss enters a card by hand.
    """
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


@dataclass
class TableView:
    """One table as the studio's pages show it (see the module notes).

    Args:
        table: The table id.
        secure: Whether ``secure/events`` are read (the secure-delay floor only).
        rejections: Where rejections are logged and counted (one of its own if not given).
        clock: Epoch seconds (what the table could have sent by now).

    Attributes:
        state: The table fold.
        line: The last message, as ``tablectl watch`` words it.
        kind: The last message's kind.
        delayed: Whether the last event came ``delayed`` (published late: not live).
    """

    table: str
    secure: bool = False
    rejections: RejectionLog = field(
        default_factory=lambda: RejectionLog(reader="studio"), repr=False
    )
    clock: Callable[[], float] = field(default=time.time, repr=False)
    state: TableFold = field(init=False, repr=False)
    _line: str | None = field(default=None, init=False, repr=False)
    _said: tuple[str, Envelope | StatusMessage] | None = field(default=None, init=False, repr=False)
    kind: str | None = None
    delayed: bool = False

    def __post_init__(self) -> None:
        self.state = TableFold(self.table, secure=self.secure)

    # -- in -----------------------------------------------------------------------------------

    def apply(self, channel: Channel, topic: str, payload: bytes) -> bool:
        """Fold one message in; whether the view changed (a rejection changes nothing).

        Never raises: a payload the parse rejects is recorded in :attr:`rejections`.
        """
        change = self.state.journal_change
        read = self.state.read(channel, payload, float(self.clock()))
        if isinstance(read, Rejection):
            self.rejections.record(read.at(topic, self.table))
            return False
        step, message = read
        if not step.changed:
            return False
        if self.state.journal_change is not change and self.state.journal_change is not None:
            self._line, self._said = f"! {self.state.journal_change.text}", None  # issue 22
            self.kind = "journal"
        elif channel == "status" and message is not None:
            self._said = ("status", message)
            self.kind = "status"
        elif channel == "events" and isinstance(message, Envelope):
            self.kind = message.kind
            self.delayed = message.delayed
            self._said = (topic, message)
        return True

    @property
    def line(self) -> str | None:
        """The last message, as ``tablectl watch`` words it.

        Worded when a page first reads it, not for every message: a floor with no page open
        (or a burst of messages between two updates) words nothing it does not send.
        """
        said = self._said
        if said is not None:
            self._line, self._said = describe(said[0], wire(said[1])), None
        return self._line

    # -- the fold, as the pages read it ----------------------------------------------------------

    @property
    def fold(self) -> RoundFold:
        """The current round."""
        return self.state.round

    @property
    def extras(self) -> RoundExtras:
        """The round's other facts."""
        return self.state.extras

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` applied from ``events`` (or a snapshot's ``last_seq``)."""
        return self.state.last_seq

    @property
    def online(self) -> bool | None:
        """Whether the table's controller is online (``None``: no status seen)."""
        return self.state.online

    def next_slot(self) -> str | None:
        """The slot the dealer deals next (:func:`next_slot`)."""
        return next_slot(self.fold)

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
            if card.manual:
                item["manual"] = True
            cards.append(item)
        return cards

    def _status_game(self) -> str | None:
        status = self.state.status
        return status.game if status is not None else None

    def to_wire(self) -> dict[str, Any]:
        """The view as the pages get it (JSON-able). A public view has no secure member."""
        fold, extras = self.fold, self.extras
        round_view: dict[str, Any] = {
            "id": fold.round_id,
            "no": fold.round_no,
            "game": fold.game,
            "game_name": game_name(fold.game) if fold.game else None,
            # Before a round, the table's game (its status) gives the layout a page reserves.
            "layout": layout(fold.game or self._status_game(), self.state.seats),
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
            "details": extras.details,
            "holdem": extras.holdem.to_wire() if extras.holdem is not None else None,
        }
        if self.secure:
            round_view["secure_equity"] = extras.secure_equity
        status = self.state.status
        gate = self.state.gate
        return {
            "table": self.table,
            "online": self.online,
            "status": {
                "state": status.state if status else None,
                "game": status.game if status else None,
                "game_name": game_name(status.game) if status and status.game else None,
                "session": status.session if status else None,
                "reason": status.reason if status else None,
                "at": at_text(status.at) if status else None,
            },
            "round": round_view,
            "devices": {
                name: {"state": device.state, "detail": device.detail}
                for name, device in self.state.devices.items()
            },
            "table_state": dict(gate.data) if gate is not None else None,
            "alerts": list(self.state.pit_alerts),
            "last_seq": self.last_seq,
            "line": self.line,
            "kind": self.kind,
            "delayed": self.delayed,
            "journal": self.state.journal,
            "journal_change": None
            if self.state.journal_change is None
            else self.state.journal_change.to_wire(),
        }
