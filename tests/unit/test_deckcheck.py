"""The deck check's comparison (pure): missing, extra, duplicated and unknown cards."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from controller.cards import Deck
from controller.deckcheck import DeckReport, compare, public_url, with_codes

STANDARD = [str(piece) for piece in Deck.standard()]


def test_a_whole_deck_once_may_go_into_play() -> None:
    report = compare(Deck.standard(), list(reversed(STANDARD)))
    assert report.ok and report.read == 52 and report.expected == 52
    assert "may go into play" in report.lines()[0]


def test_missing_extra_duplicated_and_unknown_are_each_named() -> None:
    reads = [card for card in STANDARD if card != "7h"] + ["As", "JK", "zz"]
    report = compare(Deck.standard(), reads, unknown=["04A2FF"])
    assert report.missing == ("7h",)
    assert report.extra == ("JK",)
    assert report.duplicated == {"As": 2}
    assert report.unknown == ("04A2FF", "zz")
    assert not report.ok and report.read == 54
    text = "\n".join(report.lines())
    assert "must NOT go into play" in text
    assert "missing (1): 7h" in text and "extra, not in this deck (1): JK" in text
    assert "As read 2 times" in text and "unknown tags or codes (2): 04A2FF zz" in text


def test_tiles_count_their_copies() -> None:
    tiles = [str(piece) for piece in Deck.mahjong_pai_gow()]
    assert compare(Deck.mahjong_pai_gow(), tiles).ok
    short = compare(Deck.mahjong_pai_gow(), tiles[1:])
    assert short.missing == (tiles[0],) and not short.duplicated
    three = compare(Deck.mahjong_pai_gow(), [*tiles, tiles[0]])
    assert three.duplicated == {tiles[0]: 3} and not three.missing


def test_the_report_as_a_document() -> None:
    document = compare(Deck.standard(), STANDARD[:-1]).to_dict()
    assert document["ok"] is False and document["missing"] == [STANDARD[-1]]
    assert set(document) == {
        "deck", "expected", "read", "ok", "missing", "extra", "duplicated", "unknown", "misreads"
    }  # fmt: skip


def test_urls_keep_no_credentials_and_take_a_code_table() -> None:
    assert public_url("mqtt-reader://user:secret@broker:1883/t?codes=a") == (
        "mqtt-reader://broker:1883/t?codes=a"
    )
    assert public_url("profile+serial:///dev/ttyUSB0?profile=x") == (
        "profile+serial:///dev/ttyUSB0?profile=x"
    )
    assert with_codes("profile+serial:///dev/x?profile=p", "d.toml").endswith("&codes=d.toml")
    assert with_codes("pcsc://", "d.toml") == "pcsc://?codes=d.toml"
    assert with_codes("serial:///dev/x", None) == "serial:///dev/x"


@given(st.lists(st.text(max_size=6), max_size=80), st.lists(st.text(max_size=6), max_size=5))
def test_any_reads_give_a_consistent_report(reads: list[str], unknown: list[str]) -> None:
    report = compare(Deck.with_joker(), reads, unknown)
    assert isinstance(report, DeckReport)
    assert report.read == len(reads)
    # Every read is exactly one of: a piece of the deck, an extra piece, no piece at all.
    pieces = len(reads) - len(report.extra) - (len(report.unknown) - len(unknown))
    assert report.unknown[: len(unknown)] == tuple(unknown)
    # Each of the 53 pieces (one copy each) is short by what is missing, over by its repeats.
    over = sum(times - 1 for times in report.duplicated.values())
    assert 53 - len(report.missing) + over == pieces
    assert report.ok == (
        not report.missing and not report.extra and not report.duplicated and not report.unknown
    )
