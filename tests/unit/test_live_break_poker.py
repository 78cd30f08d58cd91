"""Break Poker's live step machine: steps, every setting's outcome, refusals, replay, secrecy."""

from __future__ import annotations

import json

import pytest

from controller.cards import Card, Tile, parse_cards
from controller.errors import IllegalAction, RulesError
from controller.games.base import Face
from controller.games.break_poker import rules
from controller.games.break_poker.live import BreakPokerLiveRound
from controller.games.live.base import DealStep, DecisionStep, FinishStep, RevealStep
from controller.games.registry import make_live_game
from controller.messages import settlement_for
from tests.support.settlement import group
from tests.unit.test_live_helpers import drive, pieces, replay

PLAYER = "JK Ah Kd Kc 7s 4d 2c"
DEALER = "Qs Qd 9h 6c 5s 3d 2h"


def new_round() -> BreakPokerLiveRound:
    rnd = make_live_game("break-poker", {"setting_seconds": 12}, {}).new_round({})
    assert isinstance(rnd, BreakPokerLiveRound)
    return rnd


def test_steps_and_result_match_the_rules() -> None:
    rnd = new_round()
    trace = drive(rnd, pieces(f"{PLAYER} {DEALER}"), lambda step: {"choice": "close"})
    deals = trace.of(DealStep)
    assert [d.slot.name for d in deals] == [f"P{i}" for i in range(1, 8)] + [
        f"D{i}" for i in range(1, 8)
    ]
    assert all(d.slot.face is Face.UP for d in deals[:7])
    assert all(d.slot.face is Face.HIDDEN for d in deals[7:])
    assert [type(s).__name__ for s in trace.steps[14:]] == [
        "DecisionStep",
        "RevealStep",
        "FinishStep",
    ]
    (window,) = trace.of(DecisionStep)
    assert (window.window, window.kind, window.seat, window.seconds) == (
        "setting",
        "setting",
        None,
        12.0,
    )
    assert window.options == ("close",)
    assert window.default == {}
    assert window.info["player"] == PLAYER.split()
    player, dealer = parse_cards(PLAYER), parse_cards(DEALER)
    assert window.info["house_way"]["id"] == rules.house_way(player).id
    assert window.info["settings"] == len(rules.legal_settings(player))
    assert trace.of(RevealStep) == [RevealStep("dealer", tuple(DEALER.split()))]
    assert trace.normalised["setting"] == {"choice": "close"}

    result = rnd.result()
    expected = rules.round_result(player, dealer)
    bets = result["bets"]
    main = [line for line in bets if line["bet"] == "main"]
    assert [line["setting"] for line in main if line.get("default")] == [
        expected.default_setting_id
    ]
    assert settlement_for(bets, "main") == {
        "bet": "main",
        "setting": expected.default_setting_id,
        **expected.default_main.to_wire(),
        "default": True,
    }
    by_setting = {line["setting"]: group([line])["main"] for line in main}
    assert by_setting == {k: v.to_wire() for k, v in expected.main.items()}
    assert len(main) == len(rules.legal_settings(player))
    for setting, settled in expected.main.items():
        assert group([settlement_for(bets, "main", setting=setting)])["main"] == settled.to_wire()
    assert group(bets, setting=None) == {
        "break_bonus": expected.break_bonus.to_wire(),
        "dealer_break_bonus": expected.dealer_break_bonus.to_wire(),
    }
    assert result["details"]["dealer_setting"] == expected.dealer_setting.to_wire()
    assert result["details"]["dealer_qualified"] == expected.dealer_qualified
    assert result["details"]["house_way"] == expected.house_way.to_wire()
    assert result["cards"] == {"player": PLAYER.split(), "dealer": DEALER.split()}
    outcome = expected.default_main.outcome.value
    assert result["winner"] == {"win": "player", "lose": "dealer"}.get(outcome, "tie")
    # The joker makes kings full here: a pair low and trips high is a Lucky Break.
    assert result["details"]["player_best_lucky_break"] != "none"
    json.dumps(result)


def test_deadline_closes_with_empty_decision() -> None:
    rnd = new_round()
    trace = drive(rnd, pieces(f"{PLAYER} {DEALER}"), lambda step: None)
    assert trace.normalised["setting"] == {}
    assert rnd.result()["cards"]["dealer"] == DEALER.split()


def test_illegal_decisions_change_nothing() -> None:
    rnd = new_round()
    cards = pieces(f"{PLAYER} {DEALER}")
    for index in range(14):
        with pytest.raises(IllegalAction, match="not open"):
            rnd.apply_decision("setting", {"choice": "close"})
        rnd.apply_card(index, next(cards))
    before = rnd.next_step()
    for window, decision in [
        ("mulligan", {"choice": "close"}),
        ("setting", {"choice": "open"}),
        ("setting", {"setting": rules.house_way(parse_cards(PLAYER)).id}),
        ("setting", "close"),
    ]:
        with pytest.raises(IllegalAction):
            rnd.apply_decision(window, decision)  # type: ignore[arg-type]
        assert rnd.next_step() == before
    with pytest.raises(RulesError, match="not waiting"):
        rnd.apply_card(14, Card.parse("Ts"))
    with pytest.raises(RulesError, match="not finished"):
        rnd.result()
    rnd.apply_decision("setting", {"choice": "close"})
    with pytest.raises(RulesError, match="no reveal"):
        rnd.mark_revealed("player")


def test_a_tile_is_refused() -> None:
    rnd = new_round()
    with pytest.raises(RulesError, match="tile"):
        rnd.apply_card(0, Tile(3))
    assert rnd.next_step() == DealStep(0, rules.DEAL_PLAN.slots[0])


def test_replay_and_secrecy() -> None:
    first = new_round()
    trace = drive(first, pieces(f"{PLAYER} {DEALER}"), lambda step: {"choice": "close"})
    second = new_round()
    replay(second, trace.applied)
    assert isinstance(second.next_step(), FinishStep)
    assert second.result() == first.result()
    for step in trace.of(DecisionStep):
        text = json.dumps([step.info, step.default])
        for card in DEALER.split():
            assert f'"{card}"' not in text
