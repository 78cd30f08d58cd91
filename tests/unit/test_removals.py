"""Cards off their reader (controller/orchestration/removals.py): per round, put back, muck."""

from __future__ import annotations

from typing import Any

from controller.cards import Deck, parse_cards
from controller.orchestration.removals import Removals, is_removal
from controller.round import Round
from drivers.presence import MUCK
from drivers.source import CardRead, CardRemoved, DeviceStatus, Misread


def a_round(round_id: str, dealt: str) -> Round:
    live: Any = None  # the removals never ask the game
    current = Round(round_id, 1, "texas-holdem", live)
    current.dealt.extend(parse_cards(dealt))
    return current


def test_what_is_a_removal() -> None:
    assert is_removal(CardRemoved("As", "seat1", 1.0))
    assert is_removal(CardRead("As", MUCK, 1, 1.0))
    assert not is_removal(CardRead("As", "seat1", 1, 1.0))
    assert not is_removal(Misread("crc", "x", None, 1.0))
    assert not is_removal(DeviceStatus("two_tags", "x", 1.0))


def test_a_hand_is_off_when_each_of_its_dealt_cards_left_and_on_again_when_one_is_back() -> None:
    removals = Removals(Deck.standard())
    current = a_round("r-1", "As Kd 7h")
    assert not removals.all_off(current, ["As", "Kd"])
    assert removals.note(current, CardRemoved("As", "seat1", 1.0)) == "As"
    assert not removals.all_off(current, ["As", "Kd"])
    assert removals.note(current, CardRead("Kd", MUCK, 2, 2.0)) == "Kd"  # mucked
    assert removals.all_off(current, ["As", "Kd"])
    assert removals.back(current, CardRead("As", "seat1", 3, 3.0))  # put back
    assert not removals.all_off(current, ["As", "Kd"])
    assert not removals.back(current, CardRead("As", "seat1", 4, 4.0))  # already on
    assert not removals.all_off(current, [])


def test_a_card_not_dealt_in_the_round_decides_nothing_and_rounds_are_apart() -> None:
    removals = Removals(Deck.standard())
    first = a_round("r-1", "As Kd")
    assert removals.note(first, CardRemoved("Qc", None, 1.0)) is None  # never dealt
    assert removals.note(first, CardRemoved("??", None, 1.0)) is None  # no card at all
    assert removals.note(first, CardRemoved("As", None, 1.0)) == "As"
    second = a_round("r-2", "As Kd")
    assert not removals.all_off(second, ["As"])  # the last round's removal is forgotten
    assert not removals.back(second, CardRead("As", None, 1, 2.0))
