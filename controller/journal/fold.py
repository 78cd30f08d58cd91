"""One fold of a round's journal entries: what the journal says a round is, entry by entry.

:class:`RoundFold` is immutable and pure (no I/O, no clock): :meth:`RoundFold.apply` returns
the fold after one entry; :meth:`RoundFold.check` says what is wrong with an entry given the
round so far. Three readers share it:

* the retained round snapshot (:class:`controller.messages.RoundSnapshot`): its public view;
* the recall view (:class:`controller.recall.RoundRecord`): the round's status;
* the journal verifier (:mod:`controller.journal.verify`): :meth:`check`, then :meth:`apply`.

The orchestrator's :class:`controller.round.Round` is a different fold: it feeds the game's
live state machine and refuses a journal that does not replay.

Bodies are read tolerantly (a missing or odd field reads as absent): the verifier must report
a bad entry, not fail on it, and the snapshot must keep publishing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.journal.entries import EntryKind

K = EntryKind

STATE_AFTER: dict[str, str] = {
    K.ROUND_OPENED: "betting_open",  # "opening" when it says before_betting
    K.BETTING_OPENED: "betting_open",
    K.BETTING_CLOSED: "dealing",
    K.CARD_DEALT: "dealing",
    K.RESCAN_REQUESTED: "dealing",
    K.CARD_REFUSED: "dealing",
    K.ROUND_RESULT: "settled",
    K.ROUND_VOIDED: "voided",
}
"""The state a round is in after an entry of these kinds (other kinds leave it)."""

FINISHED_STATES = frozenset({"settled", "voided"})

ROUND_KINDS = frozenset(
    {
        K.ROUND_OPENED,
        K.BETTING_OPENED,
        K.BETTING_CLOSED,
        K.CARD_DEALT,
        K.ROUND_RESULT,
        K.ROUND_VOIDED,
    }
)
"""Kinds that must name a round."""


@dataclass(frozen=True, slots=True)
class DealtCard:
    """One dealt slot as journalled.

    Attributes:
        slot: The slot (``"A1"``).
        hand: The hand (``"A"``).
        index: Position in the deal plan (``None`` if the entry has none).
        face: ``"up"`` or ``"hidden"`` (``"up"`` once revealed).
        card: The journalled value (a hidden card's too), or ``None``.
        manual: Entered by the pit boss by hand (``source: manual``), not read by a reader.
    """

    slot: str
    hand: str | None
    index: int | None
    face: str
    card: str | None
    manual: bool = False

    @property
    def public(self) -> str | None:
        """The value the public may see: ``None`` while face down."""
        return self.card if self.face != "hidden" else None


@dataclass(frozen=True, slots=True)
class RoundFold:
    """A round folded from its entries.

    Attributes:
        round_id: The round (``None``: no round yet).
        round_no: Its number, if known.
        game: The game id, if known.
        state: ``idle`` (seen midway, before any entry that sets it), ``opening`` (the
            round's steps before betting: Mahjong's bank offers), ``betting_open``,
            ``dealing``, ``settled`` or ``voided``; once settled or voided it stays.
        betting_closes_at: When betting closes (UTC ISO text), while open.
        slots: The deal plan's slots, when ``round_opened`` lists them.
        betting_closed: Whether ``betting_closed`` was journalled.
        cards: The dealt slots, in dealing order.
        pieces: Every value dealt or revealed, as a multiset (what a result may show).
        next_index: The lowest deal-plan index the next card may have.
        awaiting_rescan: The slot waiting for a rescan, if any.
        hidden_cards: Values of hidden cards not revealed yet.
        hidden_slots: ``(slot, value)`` of hidden cards not revealed yet.
        halted: Dealing is paused (``round_halted`` until ``round_resumed``).
        decision: The open decision window (``decision_open`` body) until it is applied.
        result: Winner, hands and cards once settled; ``{"voided": True, "reason": ...}``.
        bets: The settlement (``bets`` of the result or the void's refunds).
        outcome: ``"result"`` or ``"void"`` once the round has one (the first one counts).
    """

    round_id: str | None = None
    round_no: int | None = None
    game: str | None = None
    state: str = "idle"
    betting_closes_at: str | None = None
    slots: tuple[str, ...] | None = None
    betting_closed: bool = False
    cards: tuple[DealtCard, ...] = ()
    pieces: tuple[str, ...] = ()
    next_index: int = 0
    awaiting_rescan: str | None = None
    hidden_cards: frozenset[str] = field(default_factory=frozenset)
    hidden_slots: tuple[tuple[str, str], ...] = ()
    halted: bool = False
    decision: Mapping[str, Any] | None = None
    result: Mapping[str, Any] | None = None
    bets: Any = None
    outcome: Literal["result", "void"] | None = None

    @property
    def finished(self) -> bool:
        """Whether the round has a result or a void."""
        return self.outcome is not None

    @classmethod
    def replay(cls, round_id: str, entries: Iterable[tuple[str, Mapping[str, Any]]]) -> RoundFold:
        """Fold a round's ``(kind, body)`` pairs, in journal order."""
        fold = cls(round_id=round_id)
        for kind, body in entries:
            fold = fold.apply(kind, body)
        return fold

    def follow(self, round_id: str, kind: str, body: Mapping[str, Any]) -> RoundFold:
        """The fold after an entry of round ``round_id``, which may be a new round.

        A ``round_opened``, or an entry of another round than this fold's (a round first seen
        midway: a restart whose replay starts late, a subscriber joining), starts a new fold.
        The retained round snapshot (:class:`controller.messages.RoundSnapshot`) and the
        studio's round view (:mod:`controller.studio.view`) follow a table with it.
        """
        fold = self
        if kind == K.ROUND_OPENED or round_id != self.round_id:
            fold = RoundFold(round_id=round_id)
        return fold.apply(kind, body)

    def apply(self, kind: str, body: Mapping[str, Any]) -> RoundFold:
        """The fold after one entry of this round (``round_opened`` starts it afresh)."""
        if kind == K.ROUND_OPENED:
            return self._opened(body)
        state = self.state if self.state in FINISHED_STATES else STATE_AFTER.get(kind, self.state)
        changes: dict[str, Any] = {"state": state}
        change = _CHANGES.get(kind)
        if change is not None:
            change(self, body, changes)
        return _replaced(self, changes)

    def _betting_opened(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        closes_at = body.get("betting_closes_at")
        changes["betting_closes_at"] = None if closes_at is None else str(closes_at)

    def _betting_closed(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        changes["betting_closes_at"] = None
        changes["betting_closed"] = True

    def _halted(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        changes["halted"] = True

    def _resumed(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        changes["halted"] = False

    def _decision_open(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        changes["decision"] = dict(body)

    def _decision_applied(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        if self.decision is not None and self.decision.get("window") == body.get("window"):
            changes["decision"] = None

    def _rescan(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        slot = body.get("slot")
        changes["awaiting_rescan"] = None if slot is None else str(slot)

    def _result(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        game = body.get("game")
        changes.update(
            awaiting_rescan=None,
            result={
                "winner": body.get("winner"),
                "hands": body.get("hands", {}),
                "cards": body.get("cards", {}),
            },
            game=(None if game is None else str(game)) or self.game,
            hidden_cards=frozenset(),  # revealed by the result
            hidden_slots=(),
            halted=False,
            decision=None,
            pieces=(),
        )
        self._finish("result", body, changes)

    def _voided(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        changes.update(
            awaiting_rescan=None,
            halted=False,
            decision=None,
            result={"voided": True, "reason": body.get("reason")},
            pieces=(),
        )
        self._finish("void", body, changes)

    def _opened(self, body: Mapping[str, Any]) -> RoundFold:
        round_no = body.get("round_no")
        game = body.get("game")
        closes_at = body.get("betting_closes_at")
        slots = body.get("slots")
        return RoundFold(
            round_id=self.round_id,
            round_no=round_no if isinstance(round_no, int) else None,
            game=None if game is None else str(game),
            state="opening" if body.get("before_betting") else "betting_open",
            betting_closes_at=None if closes_at is None else str(closes_at),
            slots=tuple(str(s) for s in slots) if isinstance(slots, list) else None,
        )

    def _card(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        face = str(body.get("face", "up"))
        value = body.get("card")
        card = None if value is None else str(value)
        index = body.get("index")
        hand = body.get("hand")
        dealt = DealtCard(
            slot=str(body.get("slot", "")),
            hand=None if hand is None else str(hand),
            index=index if isinstance(index, int) else None,
            face=face,
            card=card,
            manual=body.get("source") == "manual",
        )
        changes["cards"] = (*self.cards, dealt)
        changes["pieces"] = (*self.pieces, str(value))
        if isinstance(index, int) and index >= self.next_index:
            changes["next_index"] = index + 1
        changes["awaiting_rescan"] = None
        if face == "hidden" and card is not None:
            changes["hidden_cards"] = self.hidden_cards | {card}
            changes["hidden_slots"] = (*self.hidden_slots, (dealt.slot, card))

    def _revealed(self, body: Mapping[str, Any], changes: dict[str, Any]) -> None:
        listed = body.get("cards")
        if isinstance(listed, list):
            changes["pieces"] = (*self.pieces, *(str(piece) for piece in listed))
        revealed = {str(card) for card in body.get("cards", ()) if card is not None}
        values = dict(self.hidden_slots)
        shown = {slot for slot, value in self.hidden_slots if value in revealed}
        changes["cards"] = tuple(
            DealtCard(c.slot, c.hand, c.index, "up", values[c.slot], c.manual)
            if c.slot in shown
            else c
            for c in self.cards
        )
        changes["hidden_slots"] = tuple(
            (slot, value) for slot, value in self.hidden_slots if slot not in shown
        )
        changes["hidden_cards"] = self.hidden_cards - revealed

    def _finish(
        self, outcome: Literal["result", "void"], body: Mapping[str, Any], changes: dict[str, Any]
    ) -> None:
        if self.outcome is None:
            changes["outcome"] = outcome
            changes["bets"] = body.get("bets")

    # -- what is wrong with an entry ------------------------------------------------------

    def check(self, kind: str, body: Mapping[str, Any]) -> list[str]:
        """What is wrong with an entry of this (opened, unfinished) round, before it is applied.

        Checks the order of a round: cards only after betting closed and in deal-plan order,
        no more cards than slots, a result after betting closed with exactly the cards dealt
        (or revealed), a void that refunds every bet, betting closed once, betting opened
        (``betting_opened``) only once, in a round's opening.
        """
        if kind == K.BETTING_OPENED:
            return [] if self.state == "opening" else ["betting opened outside the round's opening"]
        if kind == K.BETTING_CLOSED:
            return ["betting closed twice"] if self.betting_closed else []
        if kind == K.CARD_DEALT:
            return self._check_card(body)
        if kind == K.ROUND_RESULT:
            return self._check_result(body)
        if kind == K.ROUND_VOIDED:
            bets = body.get("bets")
            if not isinstance(bets, dict) or any(
                not isinstance(bet, dict) or bet.get("outcome") != "refund" for bet in bets.values()
            ):
                return ["void without a refund of every bet"]
        return []

    def _check_card(self, body: Mapping[str, Any]) -> list[str]:
        problems = []
        if not self.betting_closed:
            problems.append("card dealt before betting closed")
        index = body.get("index")
        if not isinstance(index, int) or index < self.next_index:
            problems.append(f"card_dealt index {index!r} out of order (next is {self.next_index})")
        if self.slots is not None and len(self.pieces) >= len(self.slots):
            problems.append("more cards than the round has slots")
        return problems

    def _check_result(self, body: Mapping[str, Any]) -> list[str]:
        problems = []
        if not self.betting_closed:
            problems.append("result before betting closed")
        if self.slots is not None and len(self.pieces) != len(self.slots):
            problems.append(f"result after {len(self.pieces)} of {len(self.slots)} cards")
        cards = body.get("cards")
        if not isinstance(cards, dict):
            problems.append("result without its cards")
            return problems
        left = list(self.pieces)  # a multiset: some decks hold copies (tiles)
        for hand, pieces in cards.items():
            for piece in pieces if isinstance(pieces, list) else [pieces]:
                if str(piece) in left:
                    left.remove(str(piece))
                else:
                    problems.append(
                        f"result card {piece} of hand {hand} was not dealt in the round"
                    )
        return problems


_CHANGES: dict[str, Callable[[RoundFold, Mapping[str, Any], dict[str, Any]], None]] = {
    K.BETTING_OPENED: RoundFold._betting_opened,
    K.BETTING_CLOSED: RoundFold._betting_closed,
    K.CARD_DEALT: RoundFold._card,
    K.CARDS_REVEALED: RoundFold._revealed,
    K.ROUND_HALTED: RoundFold._halted,
    K.ROUND_RESUMED: RoundFold._resumed,
    K.DECISION_OPEN: RoundFold._decision_open,
    K.DECISION_APPLIED: RoundFold._decision_applied,
    K.RESCAN_REQUESTED: RoundFold._rescan,
    K.ROUND_RESULT: RoundFold._result,
    K.ROUND_VOIDED: RoundFold._voided,
}
"""What an entry of each kind changes in a :class:`RoundFold` besides its state."""

_FIELDS = tuple(f.name for f in dataclasses.fields(RoundFold))


def _replaced(fold: RoundFold, changes: Mapping[str, Any]) -> RoundFold:
    """``dataclasses.replace(fold, **changes)`` in half its time.

    The archive refolds every entry it stores (docs/archive.md, "Speed"). ``changes`` names
    fields only.
    """
    new = object.__new__(RoundFold)
    for name in _FIELDS:
        object.__setattr__(new, name, changes[name] if name in changes else getattr(fold, name))
    return new
