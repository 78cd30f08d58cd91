"""Live play: how a game's round tells the orchestrator what happens next.

A :class:`LiveRound` is a pure state machine for one round of one game at the table. The
orchestrator asks it for the next :data:`Step`, does the I/O the step needs (wait for a card,
open a decision window, publish a reveal), and feeds what happened back with
``apply_card`` / ``apply_decision``. Everything it is fed is journalled first, so a restarted
controller rebuilds the same round by feeding the same things again in the same order.

Rules of the contract:
- Pure: no I/O, no clock, no randomness. Deterministic given the cards and decisions.
- ``apply_*`` either succeeds or raises :class:`controller.errors.IllegalAction` (decisions) /
  :class:`controller.errors.RulesError` (cards) and changes nothing.
- ``next_step`` is idempotent: asking twice without applying anything returns the same step.
- A round may open with steps flagged ``before_betting`` (decisions, information): the
  orchestrator plays them after ``round_opened`` and before the betting window
  (``betting_opened``); every other step comes after betting closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from controller.cards import Deck, Piece
from controller.games.base import Slot

JSON = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class DealStep:
    """The table waits for a card (or tile) in ``slot``.

    Attributes:
        index: 0-based count of pieces dealt in this round before this one.
        slot: Where it goes; ``slot.face`` says whether it is public or secure-only.
    """

    index: int
    slot: Slot


@dataclass(frozen=True, slots=True)
class DecisionStep:
    """A decision window: the round waits for one decision, or for the deadline.

    Attributes:
        window: Unique id of this window within the round (``"mulligan"``,
            ``"action-7"``, ``"bank-offer-P2"``); commands must name it.
        kind: What is decided (``"mulligan"``, ``"setting"``, ``"action"``, ``"bank"``).
        seconds: How long the window stays open (from the game's options).
        seat: The seat that must act (Hold'em, the offered banker), or ``None`` for a
            decision that concerns the shared hand.
        options: The choices accepted now (``("stay", "mulligan")``, ``("fold", "call",
            "raise")``).
        info: Public facts a decider needs (amount to call, minimum raise, pot...), JSON.
        default: The decision applied when the deadline passes (JSON, as ``apply_decision``
            takes it).
        before_betting: Part of the round's opening, played before the betting window opens
            (Mahjong Pai Gow's bank offers: players bet against a banker already chosen).
        removal_cards: Cards (notation) whose removal from their reader during the window is
            a decision (a Hold'em seat's hole cards: lifted off the seat's antenna, or put on
            a muck antenna, they fold). Only latched readers report removals
            (``drivers/presence.py``); empty: no removal decides.
        removal_decision: The decision applied (as ``apply_decision`` takes it) once every
            one of ``removal_cards`` is off its reader during the window.
    """

    window: str
    kind: str
    seconds: float
    seat: str | None
    options: tuple[str, ...]
    info: JSON
    default: JSON
    before_betting: bool = False
    removal_cards: tuple[str, ...] = ()
    removal_decision: JSON | None = None


@dataclass(frozen=True, slots=True)
class RevealStep:
    """Hidden pieces become public now (the dealer turns the cards over, a showdown).

    Attributes:
        hand: The hand whose pieces are revealed.
        cards: The notation of the revealed pieces, in dealing order.
    """

    hand: str
    cards: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class InfoStep:
    """Something for the streaming overlays (e.g. each seat's win probability).

    Attributes:
        kind: Machine name (``"equity"``).
        data: JSON payload.
        secure: Whether it may only go to the secure (stream production) feed, because it
            says something about hidden cards.
        before_betting: Part of the round's opening (what the opening settled, e.g. who
            banks), published before the betting window opens.
    """

    kind: str
    data: JSON
    secure: bool = True
    before_betting: bool = False


@dataclass(frozen=True, slots=True)
class FinishStep:
    """The round is complete: ``result()`` may be called."""


Step = DealStep | DecisionStep | RevealStep | InfoStep | FinishStep


class LiveRound(Protocol):
    """One round of a game at the table (pure state machine)."""

    def next_step(self) -> Step:
        """What the round waits for now. Idempotent until something is applied."""
        ...

    def apply_card(self, index: int, piece: Piece) -> None:
        """A piece was accepted for the slot of ``DealStep.index``.

        The orchestrator has already checked the piece is in the deck and not a duplicate.

        Raises:
            RulesError: ``index`` is not the slot waiting; nothing changed.
        """
        ...

    def apply_decision(self, window: str, decision: JSON) -> JSON:
        """Apply a decision in the open window; return it normalised (what is journalled).

        Raises:
            IllegalAction: Wrong window, wrong seat, option not allowed, amount out of range,
                malformed; the reason says which. Nothing changed.
        """
        ...

    def mark_info_published(self) -> None:
        """The :class:`InfoStep` just returned by ``next_step`` was published."""
        ...

    def mark_revealed(self, hand: str) -> None:
        """The :class:`RevealStep` for ``hand`` was published."""
        ...

    def result(self) -> JSON:
        """The ``round_result`` body.

        At least ``cards`` ({hand: [notation...]}), ``winner``, ``hands`` ({hand:
        {category, description}}), ``bets`` ({bet_id: BetResult wire form, or a structure
        documented per game when a bet has several paths}) and ``details``.

        Raises:
            RulesError: The round is not finished.
        """
        ...

    def table_state_after(self) -> JSON:
        """What carries over to the next round (button, stacks, banker rotation), JSON."""
        ...


class LiveGame(Protocol):
    """A game the orchestrator can run at a table."""

    @property
    def id(self) -> str:
        """The game id (``"teen-patti-20-20"``)."""
        ...

    @property
    def deck(self) -> Deck:
        """The set one round is dealt from."""
        ...

    @property
    def bet_ids(self) -> tuple[str, ...]:
        """Every bet type (a void refunds each of them)."""
        ...

    def new_round(self, table_state: JSON) -> LiveRound:
        """A fresh round, given what the previous round left (``{}`` for the first).

        Raises:
            IllegalAction: The round cannot open (e.g. nobody will bank), with the reason.
        """
        ...
