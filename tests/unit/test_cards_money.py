from __future__ import annotations

import copy
import pickle
from collections import Counter
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cards import JOKER, Card, Deck, DeckKind, Tile, parse_cards, parse_piece
from controller.errors import NotationError, PayTableError, PieceRefused
from controller.money import (
    BetOutcome,
    BetResult,
    format_odds,
    merge_paytables,
    parse_odds,
    to_decimal_str,
)


@given(st.integers(min_value=0, max_value=52))
def test_card_notation_round_trips(code: int) -> None:
    card = Card(code)
    assert Card.parse(str(card)) == card


def test_card_fields() -> None:
    assert Card.parse("As").rank == 14
    assert Card.parse("Td").rank == 10
    assert Card.parse("2c").code == 0
    assert Card.parse("JK") is JOKER or Card.parse("JK") == JOKER
    assert JOKER.suit is None and JOKER.is_joker


@pytest.mark.parametrize(
    ("text", "reason"),
    [("10h", "two characters"), ("1h", "ten is T"), ("Ax", "suit"), ("Zs", "rank"), ("", "two")],
)
def test_bad_card_notation_says_why(text: str, reason: str) -> None:
    with pytest.raises(NotationError, match=reason):
        Card.parse(text)


def test_tiles() -> None:
    assert Tile.parse("wd").points == 0 and Tile.parse("wd").value == 10
    assert Tile.parse("7p").points == 7
    assert parse_piece("9p") == Tile(9)
    assert parse_piece("9s") == Card.parse("9s")
    with pytest.raises(NotationError):
        Tile.parse("0p")


def test_decks() -> None:
    assert len(Deck.standard()) == 52
    assert len(Deck.with_joker()) == 53
    assert len(Deck.mahjong_pai_gow()) == 20
    with pytest.raises(PieceRefused, match="without a joker"):
        Deck.standard().parse("JK")
    with pytest.raises(PieceRefused, match="tile cannot"):
        Deck.standard().parse("5p")
    assert Deck.with_joker().parse("JK") == JOKER


def test_duplicates_follow_the_set() -> None:
    deck = Deck.standard()
    seen = parse_cards("As Kd")
    with pytest.raises(PieceRefused, match="duplicate"):
        deck.check_can_add(seen, Card.parse("As"))
    deck.check_can_add(seen, Card.parse("Ah"))
    tiles = Deck.mahjong_pai_gow()
    tiles.check_can_add([Tile(5)], Tile(5))
    with pytest.raises(PieceRefused, match="all 2 copies"):
        tiles.check_can_add([Tile(5), Tile(5)], Tile(5))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.95:1", Fraction(19, 20)),
        ("3:2", Fraction(3, 2)),
        ("50:1", Fraction(50)),
        ("50", Fraction(50)),
        (" 6 : 1 ", Fraction(6)),
    ],
)
def test_parse_odds(text: str, value: Fraction) -> None:
    assert parse_odds(text) == value


@pytest.mark.parametrize("text", ["1:3", "x:1", "-1:1", "1:0", ""])
def test_bad_odds(text: str) -> None:
    with pytest.raises(PayTableError):
        parse_odds(text)


def test_format_odds_and_decimals() -> None:
    assert format_odds(Fraction(19, 20)) == "0.95:1"
    assert format_odds(Fraction(3, 2)) == "3:2"
    assert format_odds(Fraction(50)) == "50:1"
    assert to_decimal_str(Fraction(39, 20)) == "1.95"
    assert to_decimal_str(Fraction(1000)) == "1000"
    with pytest.raises(PayTableError):
        to_decimal_str(Fraction(1, 3))


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=10**4))
def test_bet_result_payout_is_exact(numerator: int, stake: int) -> None:
    odds = Fraction(numerator, 100)
    win = BetResult.win(odds)
    assert win.returns(stake) == stake + stake * odds
    assert win.net == odds
    assert BetResult.push().payout == 1 and BetResult.refund().payout == 1
    assert BetResult.lose().payout == 0
    assert BetResult.lose().outcome is BetOutcome.LOSE


def test_merge_paytables() -> None:
    defaults = {"tie": {"tie": Fraction(50)}}
    assert merge_paytables(defaults, {"tie": {"tie": "45:1"}})["tie"]["tie"] == 45
    with pytest.raises(PayTableError, match="unknown bet"):
        merge_paytables(defaults, {"ties": {"tie": "1:1"}})
    with pytest.raises(PayTableError, match="no outcome"):
        merge_paytables(defaults, {"tie": {"draw": "1:1"}})


DECK_MAKERS = [Deck.standard, Deck.with_joker, Deck.mahjong_pai_gow]


@pytest.mark.parametrize("make", DECK_MAKERS, ids=lambda make: make.__name__)
def test_each_deck_is_one_shared_read_only_instance(make: Callable[[], Deck]) -> None:
    deck = make()
    assert make() is deck
    before = dict(deck.copies)
    some_piece = next(iter(deck.copies))
    with pytest.raises(TypeError):
        deck.copies[some_piece] = 5  # type: ignore[index]
    with pytest.raises(TypeError):
        del deck.copies[some_piece]  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        deck.copies[Tile(1) if isinstance(some_piece, Card) else JOKER] = 1  # type: ignore[index]
    assert dict(make().copies) == before


@pytest.mark.parametrize(
    "make",
    [Deck.standard, Deck.with_joker, Deck.mahjong_pai_gow],
    ids=["standard", "with_joker", "mahjong_pai_gow"],
)
def test_a_shared_deck_copies_and_pickles_as_an_equal_read_only_deck(
    make: Callable[[], Deck],
) -> None:
    """A game state holding a deck can be deep-copied or pickled (a mapping proxy cannot)."""
    deck = make()
    for again in (copy.deepcopy(deck), pickle.loads(pickle.dumps(deck))):
        assert again == deck and again.kind is deck.kind
        assert dict(again.copies) == dict(deck.copies)
        with pytest.raises(TypeError):
            again.copies[next(iter(deck.copies))] = 9  # type: ignore[index]


def test_a_deck_built_from_a_dict_is_read_only_and_keeps_no_link_to_it() -> None:
    pieces: dict[Card | Tile, int] = {Card(0): 1, Card(1): 2}
    deck = Deck(DeckKind.STANDARD_52, pieces)
    pieces[Card(2)] = 1
    assert dict(deck.copies) == {Card(0): 1, Card(1): 2}
    with pytest.raises(TypeError):
        deck.copies[Card(0)] = 3  # type: ignore[index]


def test_shared_decks_hold_what_the_rules_say() -> None:
    standard = Deck.standard()
    assert standard.kind is DeckKind.STANDARD_52
    assert dict(standard.copies) == {Card(code): 1 for code in range(52)}
    assert len(standard) == 52 and sorted(standard) == [Card(code) for code in range(52)]
    assert JOKER not in standard

    joker = Deck.with_joker()
    assert joker.kind is DeckKind.WITH_JOKER_53
    assert dict(joker.copies) == {**{Card(code): 1 for code in range(52)}, JOKER: 1}
    assert len(joker) == 53 and JOKER in joker

    tiles = Deck.mahjong_pai_gow()
    assert tiles.kind is DeckKind.MAHJONG_20
    assert dict(tiles.copies) == {Tile(value): 2 for value in range(1, 11)}
    assert len(tiles) == 20
    assert Counter(tile.value for tile in tiles if isinstance(tile, Tile)) == dict.fromkeys(
        range(1, 11), 2
    )
    # Three different objects: one deck's contents never leak into another's.
    assert len({id(standard), id(joker), id(tiles)}) == 3
    assert len({id(standard.copies), id(joker.copies), id(tiles.copies)}) == 3
