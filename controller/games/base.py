"""What every game's rules give the rest of the controller.

Rules are pure: given the cards (or tiles) and the decisions they return results and
settlements. No I/O, no clock, no randomness. The orchestrator, the simulators, the analyser
and replay all call the same functions.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.cards import Card, Deck, Piece
from controller.errors import RulesError
from controller.money import BetResult, Odds, PayTables


class Face(enum.StrEnum):
    """Whether a dealt piece is shown to everyone or only to stream production."""

    UP = "up"
    HIDDEN = "hidden"


@dataclass(frozen=True, slots=True)
class Slot:
    """One place a piece is dealt to.

    Attributes:
        name: The slot's label on the felt and on the wire (``"A1"``, ``"B3"``).
        hand: The hand (position) it belongs to (``"A"``).
        face: Face up, or hidden until a reveal.
    """

    name: str
    hand: str
    face: Face = Face.UP


@dataclass(frozen=True, slots=True)
class DealPlan:
    """The slots of a round in dealing order.

    Attributes:
        slots: Every slot, in the order the dealer fills them.
    """

    slots: tuple[Slot, ...]

    @property
    def hands(self) -> tuple[str, ...]:
        """The hands, in order of first appearance."""
        return tuple(dict.fromkeys(slot.hand for slot in self.slots))

    def __len__(self) -> int:
        return len(self.slots)

    def group(self, pieces: Sequence[Piece]) -> dict[str, list[Piece]]:
        """Split pieces dealt in plan order into hands (each in dealing order)."""
        hands: dict[str, list[Piece]] = {hand: [] for hand in self.hands}
        for slot, piece in zip(self.slots, pieces, strict=False):
            hands[slot.hand].append(piece)
        return hands


@dataclass(frozen=True, slots=True)
class HandSummary:
    """How one hand was judged.

    Attributes:
        category: Machine name of the hand's category (``"trail"``, ``"pair"``).
        description: A sentence for people (``"pair of kings, queen kicker"``).
    """

    category: str
    description: str


@dataclass(frozen=True, slots=True)
class GameResult:
    """The outcome of a round's cards, before any bet is settled.

    Attributes:
        winner: The winning hand's label, or ``"tie"``.
        hands: Each hand's summary, by hand label.
        details: Game-specific facts the settlement or the consumers need (JSON-able).
    """

    winner: str
    hands: Mapping[str, HandSummary]
    details: Mapping[str, Any] = field(default_factory=dict)


def pay_odds(game: str, paytables: PayTables, bet: str, outcome: str) -> Odds:
    """The ratio a pay table gives one outcome of one bet.

    Raises:
        RulesError: The pay table has no entry for it (``game``, ``bet`` and ``outcome`` named).
    """
    try:
        return paytables[bet][outcome]
    except KeyError:
        raise RulesError(
            f"pay table has no entry for bet {bet!r}, outcome {outcome!r}",
            game=game,
            bet=bet,
            outcome=outcome,
        ) from None


@dataclass(frozen=True, slots=True)
class GameFacts:
    """What a game is, declared once in its rules module and read by everything else.

    Attributes:
        id: The game id used in configs, topics and results (``"teen-patti-20-20"``).
        name: The game's name for people.
        new_deck: Builds the set of pieces one round is dealt from.
        bet_ids: Every bet type, in the order results list them (a void refunds each).
        new_paytables: Builds the rule sheet's pay tables (a fresh copy each call).
    """

    id: str
    name: str
    new_deck: Callable[[], Deck]
    bet_ids: tuple[str, ...]
    new_paytables: Callable[[], PayTables]


class Declared:
    """The protocol properties a game's rules and live objects share, read from ``facts``.

    A subclass sets ``facts`` (its game's :class:`GameFacts`, a class attribute or a field)
    and gets ``id``, ``name``, ``deck``, ``bet_ids`` and ``default_paytables``.
    """

    __slots__ = ()
    facts: GameFacts

    @property
    def id(self) -> str:
        """The game id used in configs, topics and results."""
        return self.facts.id

    @property
    def name(self) -> str:
        """The game's name for people."""
        return self.facts.name

    @property
    def deck(self) -> Deck:
        """The set of pieces one round is dealt from."""
        return self.facts.new_deck()

    @property
    def bet_ids(self) -> tuple[str, ...]:
        """Every bet type, in the order results list them."""
        return self.facts.bet_ids

    @property
    def default_paytables(self) -> PayTables:
        """The rule sheet's pay tables (a fresh copy each time)."""
        return self.facts.new_paytables()


class TableGame(Protocol):
    """A game whose deal plan is fixed (no decisions between cards): Teen Patti 20-20.

    Games with decisions extend this in their own modules; the orchestrator learns them as
    live play of every game is added.
    """

    @property
    def id(self) -> str:
        """The game id used in configs, topics and results (``"teen-patti-20-20"``)."""
        ...

    @property
    def name(self) -> str:
        """The game's name for people."""
        ...

    @property
    def deck(self) -> Deck:
        """The set of pieces one round is dealt from."""
        ...

    @property
    def bet_ids(self) -> tuple[str, ...]:
        """Every bet type, in the order results list them."""
        ...

    @property
    def default_paytables(self) -> PayTables:
        """The rule sheet's pay tables."""
        ...

    @property
    def deal_plan(self) -> DealPlan:
        """The slots of a round, in dealing order."""
        ...

    def resolve(self, hands: Mapping[str, Sequence[Piece]]) -> GameResult:
        """Judge the dealt hands.

        Raises:
            RulesError: A hand has the wrong number or kind of pieces.
        """
        ...

    def settle(self, result: GameResult, paytables: PayTables) -> dict[str, BetResult]:
        """Settle every bet type of the round, in ``bet_ids`` order."""
        ...


def checked_cards(
    cards: Sequence[Piece],
    count: int,
    where: str,
    *,
    without_joker: str | None = None,
    **context: Any,
) -> tuple[Card, ...]:
    """``cards`` as playing cards, if they are ``count`` distinct ones.

    Args:
        cards: The pieces of a hand.
        count: How many it must have.
        where: The messages' start, with its trailing space (``"hand A "``).
        without_joker: When the joker is refused, the message's reason (``"Teen Patti is
            played without one"``).
        **context: The errors' context, in order (e.g. ``game``, ``hand``).

    Raises:
        RulesError: Wrong count, a tile, a refused joker or a repeated card.
    """
    if len(cards) != count:
        raise RulesError(
            f"{where}needs exactly {count} cards, got {len(cards)}",
            **context,
            cards=[str(card) for card in cards],
        )
    checked: list[Card] = []
    for card in cards:
        if not isinstance(card, Card):
            raise RulesError(
                f"{where}holds {card}, which is not a playing card", **context, piece=str(card)
            )
        if without_joker is not None and card.is_joker:
            raise RulesError(f"{where}holds the joker; {without_joker}", **context, piece=str(card))
        if card in checked:
            raise RulesError(f"{where}holds {card} twice", **context, piece=str(card))
        checked.append(card)
    return tuple(checked)
