"""Mahjong Pai Gow's live step machine: bank offers, dealing order, settlement, void, replay."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from controller.cards import Card, Tile
from controller.errors import IllegalAction, RulesError
from controller.games.live.base import JSON, DealStep, DecisionStep, FinishStep
from controller.games.mahjong_pai_gow import rules
from controller.games.mahjong_pai_gow.live import MahjongLiveRound
from controller.games.registry import make_live_game
from tests.support.settlement import group
from tests.unit.test_live_helpers import drive, pieces, replay

# Hands in dealing order P2 P3 P4 B (P1 banks): 9+6 vs B 8+7 -> player on the highest tile,
# 4-4 pair wins, 1+9 (0 points) loses to 8+7 (5 points) on points.
TILES = "9p 6p 4p 4p 1p 9p 8p 7p"


def game(**options: object) -> Callable[[JSON], MahjongLiveRound]:
    live = make_live_game("mahjong-pai-gow", options, {})

    def new(state: JSON) -> MahjongLiveRound:
        rnd = live.new_round(state)
        assert isinstance(rnd, MahjongLiveRound)
        return rnd

    return new


def choices(*answers: str) -> Callable[[DecisionStep], JSON]:
    queue = list(answers)
    return lambda step: {"choice": queue.pop(0)}


def test_first_position_banks_and_the_others_play() -> None:
    rnd = game(bank_seconds=4)({})
    trace = drive(rnd, pieces(TILES), choices("accept"))
    (offer,) = trace.of(DecisionStep)
    assert offer.window == "bank-offer-P1"
    assert (offer.kind, offer.seat, offer.seconds) == ("bank", "P1", 4.0)
    assert offer.options == ("accept", "decline")
    assert offer.default == {"choice": "accept"}
    assert trace.normalised["bank-offer-P1"] == {"choice": "accept", "position": "P1"}
    assert [d.slot.name for d in trace.of(DealStep)] == [
        *("P2a", "P2b", "P3a", "P3b", "P4a", "P4b", "Ba", "Bb")
    ]
    result = rnd.result()
    hands = {
        "P2": [Tile(9), Tile(6)],
        "P3": [Tile(4), Tile(4)],
        "P4": [Tile(1), Tile(9)],
        "B": [Tile(8), Tile(7)],
    }
    expected = rules.resolve_positions(hands, ("P2", "P3", "P4"))
    for position, outcome in expected.items():
        settled = rules.settle_position(outcome, rules.DEFAULT_PAYTABLES)
        assert group(result["bets"], position=position) == {
            b: r.to_wire() for b, r in settled.items()
        }
    assert result["details"]["positions"]["P2"] == {"winner": "player", "reason": "highest_tile"}
    assert result["details"]["positions"]["P4"] == {"winner": "banker", "reason": "points"}
    assert result["winner"] == "P2+P3"
    refund = {"outcome": "refund", "payout": "1", "reason": "position holds the bank"}
    assert group(result["bets"], position="P1") == {"player": refund, "banker": refund}
    assert group(result["bets"], position="P2")["player"] == {
        "outcome": "win",
        "payout": "1.95",
        "reason": "highest_tile",
    }
    assert result["details"]["banker"] == "P1"
    assert result["cards"]["B"] == ["8p", "7p"]
    assert rnd.table_state_after() == {"banker": "P1"}
    json.dumps(result)


def test_declines_pass_the_bank_and_the_rotation_carries_over() -> None:
    new = game()
    rnd = new({})
    trace = drive(rnd, pieces(TILES), choices("decline", "decline", "accept"))
    assert [s.window for s in trace.of(DecisionStep)] == [
        "bank-offer-P1",
        "bank-offer-P2",
        "bank-offer-P3",
    ]
    assert trace.of(DecisionStep)[2].info["declined"] == ["P1", "P2"]
    assert [d.slot.hand for d in trace.of(DealStep)][::2] == ["P1", "P2", "P4", "B"]
    assert rnd.result()["details"]["offers"] == [
        {"position": "P1", "choice": "decline"},
        {"position": "P2", "choice": "decline"},
        {"position": "P3", "choice": "accept"},
    ]
    state = rnd.table_state_after()
    assert state == {"banker": "P3"}
    following = new(state)
    step = following.next_step()
    assert isinstance(step, DecisionStep)
    assert step.window == "bank-offer-P4"
    assert step.info["order"] == ["P4", "P1", "P2", "P3"]


def test_everyone_declines_voids_the_round() -> None:
    rnd = game()({"banker": "P2"})
    trace = drive(rnd, pieces(""), lambda step: {"choice": "decline"})
    assert [s.seat for s in trace.of(DecisionStep)] == ["P3", "P4", "P1", "P2"]
    assert not trace.of(DealStep)
    result = rnd.result()
    assert result["winner"] == "void"
    assert result["details"]["voided"] is True
    assert result["details"]["reason"] == "no banker"
    refund = {"outcome": "refund", "payout": "1", "reason": "no banker"}
    assert result["bets"] == [
        {"bet": bet, "position": p, **refund}
        for p in rules.position_labels(4)
        for bet in ("player", "banker")
    ]
    assert rnd.table_state_after() == {"banker": "P2"}


def test_dealing_order_and_commission_on_net() -> None:
    rnd = game(dealing_order=["P3", "P1", "P4", "P2"], commission="on_net", positions=4)({})
    trace = drive(rnd, pieces("2p 3p 5p 5p 1p 1p wd 9p"), choices("decline", "accept"))
    assert [d.slot.name for d in trace.of(DealStep)] == [
        *("P3a", "P3b", "P1a", "P1b", "P4a", "P4b", "Ba", "Bb")
    ]
    result = rnd.result()
    # B wd+9 = 9 points: beats P3 (5 points) -> banker's side paid 1:1 before commission.
    assert group(result["bets"], position="P3")["banker"] == {
        "outcome": "win",
        "payout": "2",
        "reason": "points; win before commission",
    }
    assert result["details"]["commission"] == "on_net"
    # Pairs beat nine points.
    assert result["details"]["positions"]["P1"]["winner"] == "player"


def test_illegal_decisions_and_cards_change_nothing() -> None:
    rnd = game()({})
    before = rnd.next_step()
    cases: list[tuple[str, JSON, str]] = [
        ("bank-offer-P2", {"choice": "accept"}, "not open"),
        ("bank-offer-P1", {"choice": "maybe"}, "not offered"),
        ("bank-offer-P1", {"choice": "accept", "position": "P3"}, "offered to P1"),
        ("bank-offer-P1", {"choice": "accept", "stake": 10}, "unknown field"),
    ]
    for window, decision, reason in cases:
        with pytest.raises(IllegalAction, match=reason):
            rnd.apply_decision(window, decision)
        assert rnd.next_step() == before
    with pytest.raises(RulesError, match="not waiting"):
        rnd.apply_card(0, Tile(1))
    with pytest.raises(RulesError, match="not finished"):
        rnd.result()
    with pytest.raises(RulesError, match="not finished"):
        rnd.table_state_after()
    rnd.apply_decision("bank-offer-P1", {"choice": "accept", "position": "P1"})
    rnd.mark_info_published()  # who banks is announced before betting
    with pytest.raises(RulesError, match="card"):
        rnd.apply_card(0, Card.parse("As"))
    with pytest.raises(RulesError, match="nothing is hidden"):
        rnd.mark_revealed("B")
    assert rnd.next_step() == DealStep(0, rnd.plan().slots[0])


def test_a_bad_table_state_is_refused() -> None:
    with pytest.raises(RulesError, match="P7"):
        game()({"banker": "P7"})


def test_replay_gives_the_same_result_and_rotation() -> None:
    new = game()
    first = new({"banker": "P1"})
    trace = drive(first, pieces(TILES), choices("decline", "accept"))
    second = new({"banker": "P1"})
    replay(second, trace.applied)
    assert isinstance(second.next_step(), FinishStep)
    assert second.result() == first.result()
    assert second.table_state_after() == first.table_state_after() == {"banker": "P3"}
