"""Cards off their reader: latched readers' removals, and what they decide.

A source built on the presence latch (``drivers/presence.py``) reports a card that left its
antenna for longer than the latch's removal time as :class:`~drivers.source.CardRemoved`
(a shorter drop, a card that comes back within the time, is never reported), and a card put
on a muck antenna as a :class:`~drivers.source.CardRead` at :data:`drivers.presence.MUCK`.
:class:`Removals` keeps, for the round in progress, which of its dealt cards are off their
reader; a card read again (put back) is on again.

What a removal decides is the game's: a :class:`~controller.games.live.base.DecisionStep`
names the cards whose removal during the window is a decision (a Hold'em seat's hole cards:
a fold) and the decision. The decision windows apply it once every one of those cards is off,
the last of them during the window (cards lifted before the seat's action fold nothing by
themselves: the default applies at the deadline, as without a latched reader).
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.cards import Deck
from controller.errors import NotationError, PieceRefused
from controller.round import Round
from drivers.presence import MUCK
from drivers.source import CardRead, CardRemoved, Read

__all__ = ["Removals", "is_removal"]


def is_removal(read: Read) -> bool:
    """Whether a read says a card left its place: a removal, or a card on the muck antenna."""
    return isinstance(read, CardRemoved) or (isinstance(read, CardRead) and read.position == MUCK)


class Removals:
    """The dealt cards of the round in progress that are off their reader.

    Args:
        deck: The game's deck (reads name cards in raw notation).
    """

    def __init__(self, deck: Deck) -> None:
        self._deck = deck
        self._round: str | None = None
        self._off: set[str] = set()

    def _notation(self, value: str) -> str | None:
        try:
            return str(self._deck.parse(value))
        except (NotationError, PieceRefused):
            return None

    def _of(self, current: Round) -> set[str]:
        if current.round_id != self._round:
            self._round = current.round_id
            self._off = set()
        return self._off

    def dealt(self, current: Round, value: str) -> str | None:
        """The card ``value`` names in notation, if it was dealt in ``current``."""
        card = self._notation(value)
        if card is None or card not in {str(piece) for piece in current.dealt}:
            return None
        return card

    def note(self, current: Round, read: Read) -> str | None:
        """A removal (see :func:`is_removal`): the card is off its reader.

        Returns:
            The card in notation, or ``None`` when it is not a card dealt in this round
            (nothing is noted: a card of another deck, or one never dealt, decides nothing).
        """
        if not isinstance(read, CardRead | CardRemoved):
            return None
        card = self.dealt(current, read.value)
        if card is not None:
            self._of(current).add(card)
        return card

    def back(self, current: Round, read: CardRead) -> bool:
        """A card read again: whether it was off its reader (now it is on again)."""
        if read.position == MUCK:
            return False
        card = self._notation(read.value)
        off = self._of(current)
        if card is None or card not in off:
            return False
        off.discard(card)
        return True

    def all_off(self, current: Round, cards: Iterable[str]) -> bool:
        """Whether every one of ``cards`` (notation) is off its reader."""
        off = self._of(current)
        wanted = list(cards)
        return bool(wanted) and all(card in off for card in wanted)
