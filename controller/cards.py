"""Cards, tiles and decks, in the notation of the design (DESIGN.md section 4).

Cards: rank ``23456789TJQKA`` followed by suit ``cdhs`` (``As``, ``Td``, ``2c``); the joker is
``JK``. Tiles (Mahjong Pai Gow): dots ``1p`` to ``9p`` and the window (white dragon) ``wd``.

A :class:`Card` is a small immutable value with an integer ``code`` (0-51 for the standard
cards, ``rank_index * 4 + suit``; 52 for the joker) so that evaluators can work on integers.
A :class:`Deck` describes which pieces a game uses and how many copies of each a set holds;
it is what tells a duplicate or a wrong-game read from a good one.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from controller.errors import NotationError, PieceRefused

RANK_CHARS: Final = "23456789TJQKA"
SUIT_CHARS: Final = "cdhs"
JOKER_TEXT: Final = "JK"
JOKER_CODE: Final = 52
WINDOW_TEXT: Final = "wd"
WINDOW_VALUE: Final = 10

RANK_NAMES: Final = {
    2: "two",
    3: "three",
    4: "four",
    5: "five",
    6: "six",
    7: "seven",
    8: "eight",
    9: "nine",
    10: "ten",
    11: "jack",
    12: "queen",
    13: "king",
    14: "ace",
}


class Suit(enum.IntEnum):
    """The four suits, in notation order. Suits never rank in any of our games."""

    CLUBS = 0
    DIAMONDS = 1
    HEARTS = 2
    SPADES = 3

    @property
    def char(self) -> str:
        """The suit's notation letter."""
        return SUIT_CHARS[self.value]


@dataclass(frozen=True, slots=True, order=True)
class Card:
    """A playing card or the joker.

    Attributes:
        code: 0-51 for ``(rank - 2) * 4 + suit``; 52 for the joker.
    """

    code: int

    def __post_init__(self) -> None:
        if not 0 <= self.code <= JOKER_CODE:
            raise NotationError(str(self.code), "card code must be 0-52")

    @classmethod
    def of(cls, rank: int, suit: Suit | int) -> Card:
        """Build a card from a rank (2-14, ace 14) and a suit."""
        if not 2 <= rank <= 14:
            raise NotationError(f"{rank}/{suit}", "rank must be 2-14")
        return cls((rank - 2) * 4 + int(suit))

    @classmethod
    def parse(cls, text: str) -> Card:
        """Read one card in our notation (``As``, ``Td``, ``JK``).

        Raises:
            NotationError: The text is not a card; the reason says which part is wrong.
        """
        value = text.strip()
        if value == JOKER_TEXT:
            return JOKER
        if len(value) != 2:
            raise NotationError(text, "a card is two characters: rank then suit, or JK")
        rank_char, suit_char = value[0], value[1]
        rank_index = RANK_CHARS.find(rank_char)
        if rank_index < 0:
            hint = " (ten is T)" if rank_char == "1" else ""
            raise NotationError(text, f"rank {rank_char!r} is not one of {RANK_CHARS}{hint}")
        suit_index = SUIT_CHARS.find(suit_char)
        if suit_index < 0:
            raise NotationError(text, f"suit {suit_char!r} is not one of {SUIT_CHARS}")
        return cls(rank_index * 4 + suit_index)

    @property
    def is_joker(self) -> bool:
        """Whether this is the joker."""
        return self.code == JOKER_CODE

    @property
    def rank(self) -> int:
        """Rank 2-14 (ace 14); 0 for the joker."""
        return 0 if self.is_joker else self.code // 4 + 2

    @property
    def suit(self) -> Suit | None:
        """The suit, or ``None`` for the joker."""
        return None if self.is_joker else Suit(self.code % 4)

    def __str__(self) -> str:
        if self.is_joker:
            return JOKER_TEXT
        return RANK_CHARS[self.code // 4] + SUIT_CHARS[self.code % 4]

    def __repr__(self) -> str:
        return f"Card({self})"


JOKER: Final = Card(JOKER_CODE)


@dataclass(frozen=True, slots=True, order=True)
class Tile:
    """A Mahjong Pai Gow tile: dots 1-9, or the window (white dragon) as value 10.

    Attributes:
        value: 1-9 for the dots, 10 for the window.
    """

    value: int

    def __post_init__(self) -> None:
        if not 1 <= self.value <= WINDOW_VALUE:
            raise NotationError(str(self.value), "tile value must be 1-10 (10 is the window)")

    @classmethod
    def parse(cls, text: str) -> Tile:
        """Read one tile in our notation (``1p`` ... ``9p``, ``wd``).

        Raises:
            NotationError: The text is not a tile.
        """
        value = text.strip()
        if value == WINDOW_TEXT:
            return cls(WINDOW_VALUE)
        if len(value) == 2 and value[1] == "p" and value[0] in "123456789":
            return cls(int(value[0]))
        raise NotationError(text, "a tile is 1p-9p (dots) or wd (window)")

    @property
    def is_window(self) -> bool:
        """Whether this is the window (white dragon) tile."""
        return self.value == WINDOW_VALUE

    @property
    def points(self) -> int:
        """Points for scoring: the dot value; the window counts nothing."""
        return 0 if self.is_window else self.value

    def __str__(self) -> str:
        return WINDOW_TEXT if self.is_window else f"{self.value}p"

    def __repr__(self) -> str:
        return f"Tile({self})"


Piece = Card | Tile
"""Whatever a scanner reads: a card or a tile."""


def parse_piece(text: str) -> Piece:
    """Read a card or a tile, whichever the notation says.

    Raises:
        NotationError: The text is neither.
    """
    value = text.strip()
    if value == WINDOW_TEXT or (len(value) == 2 and value[1] == "p" and value[0].isdigit()):
        return Tile.parse(value)
    return Card.parse(value)


def parse_cards(text: str | Iterable[str]) -> list[Card]:
    """Read cards separated by spaces or commas (``"As Kd 2c"``), or an iterable of texts.

    Raises:
        NotationError: One of them is not a card; the error names which.
    """
    items = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    return [Card.parse(item) for item in items]


def standard_cards() -> tuple[Card, ...]:
    """The 52 standard cards, in code order (2c 2d 2h 2s 3c ... As)."""
    return tuple(Card(code) for code in range(52))


class DeckKind(enum.StrEnum):
    """The decks our games use."""

    STANDARD_52 = "standard-52"
    WITH_JOKER_53 = "standard-52+joker"
    MAHJONG_20 = "mahjong-pai-gow-20"


@dataclass(frozen=True, slots=True)
class Deck:
    """What one set of a game's pieces holds: which pieces, and how many copies of each.

    Attributes:
        kind: Which deck this is.
        copies: For every piece the set contains, how many copies it has.
    """

    kind: DeckKind
    copies: Mapping[Piece, int]

    def __post_init__(self) -> None:
        if not isinstance(self.copies, MappingProxyType):  # read-only: decks are shared
            object.__setattr__(self, "copies", MappingProxyType(dict(self.copies)))

    def __reduce__(self) -> tuple[type[Deck], tuple[DeckKind, dict[Piece, int]]]:
        """Copy and pickle as a new deck with the same pieces (a mapping proxy cannot)."""
        return (Deck, (self.kind, dict(self.copies)))

    @classmethod
    def standard(cls) -> Deck:
        """One standard 52-card deck, no joker (one shared, read-only instance)."""
        return _deck(DeckKind.STANDARD_52)

    @classmethod
    def with_joker(cls) -> Deck:
        """A 52-card deck plus one joker (Break Poker; one shared, read-only instance)."""
        return _deck(DeckKind.WITH_JOKER_53)

    @classmethod
    def mahjong_pai_gow(cls) -> Deck:
        """The 20 tiles of Mahjong Pai Gow: two each of 1-9 dots and two windows (shared)."""
        return _deck(DeckKind.MAHJONG_20)

    def __len__(self) -> int:
        return sum(self.copies.values())

    def __iter__(self) -> Iterator[Piece]:
        for piece, count in self.copies.items():
            for _ in range(count):
                yield piece

    def __contains__(self, piece: object) -> bool:
        return piece in self.copies

    def parse(self, text: str) -> Piece:
        """Read a piece and check it belongs to this deck.

        Raises:
            NotationError: The text is not a card or tile at all.
            PieceRefused: It is a real card or tile, but not one this game uses.
        """
        piece = parse_piece(text)
        if piece not in self.copies:
            if isinstance(piece, Card) and piece.is_joker:
                reason = "this game is played without a joker"
            elif isinstance(piece, Tile):
                reason = "a tile cannot be in a card game"
            elif isinstance(piece, Card) and self.kind is DeckKind.MAHJONG_20:
                reason = "a card cannot be in a tile game"
            else:
                reason = f"not in the {self.kind.value} deck"
            raise PieceRefused(str(piece), reason, deck=self.kind.value)
        return piece

    def check_can_add(self, seen: Iterable[Piece], piece: Piece) -> None:
        """Check that one more ``piece`` can follow the ``seen`` ones from a single set.

        Raises:
            PieceRefused: The piece is not in this deck, or every copy of it is already out.
        """
        allowed = self.copies.get(piece, 0)
        if allowed == 0:
            raise PieceRefused(str(piece), f"not in the {self.kind.value} deck")
        already = sum(1 for other in seen if other == piece)
        if already >= allowed:
            if allowed == 1:
                reason = "duplicate: already dealt in this round"
            else:
                reason = f"all {allowed} copies already dealt in this round"
            raise PieceRefused(str(piece), reason, deck=self.kind.value)


@functools.cache
def _deck(kind: DeckKind) -> Deck:
    """The one shared instance of each deck (read-only: decks are looked up per card)."""
    copies: dict[Piece, int]
    if kind is DeckKind.MAHJONG_20:
        copies = {Tile(value): 2 for value in range(1, WINDOW_VALUE + 1)}
    else:
        copies = dict.fromkeys(standard_cards(), 1)
        if kind is DeckKind.WITH_JOKER_53:
            copies[JOKER] = 1
    return Deck(kind, copies)
