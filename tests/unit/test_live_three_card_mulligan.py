"""Three Card Mulligan's live step machine: steps, both paths, refusals, replay, secrecy."""

from __future__ import annotations

import json

import pytest

from controller.cards import Card, parse_cards
from controller.errors import IllegalAction, RulesError
from controller.games.base import Face
from controller.games.live.base import DealStep, DecisionStep, FinishStep, RevealStep
from controller.games.registry import make_live_game
from controller.games.three_card_mulligan import rules
from controller.games.three_card_mulligan.live import MulliganLiveRound
from controller.games.three_card_mulligan.rules import Path
from tests.support.settlement import group
from tests.unit.test_live_helpers import drive, pieces, replay

STAY_P, STAND_D = "2c 7d 9h", "Ks Qd 4c"  # house way mulligans 9-high; dealer stands on K-high
MULL_D, PM, DM = "Qs 9s 3d", "Ah Ad 5c", "Kc Kd 2s"


def new_round(seconds: float = 7.0) -> MulliganLiveRound:
    game = make_live_game("three-card-mulligan", {"decision_seconds": seconds}, {})
    rnd = game.new_round({})
    assert isinstance(rnd, MulliganLiveRound)
    return rnd


def wire(bets: dict[str, object]) -> dict[str, object]:
    return {bet: result.to_wire() for bet, result in bets.items()}  # type: ignore[attr-defined]


def test_nobody_mulligans_dealer_stands() -> None:
    rnd = new_round()
    trace = drive(rnd, pieces(f"{STAY_P} {STAND_D}"), lambda step: {"choice": "stay"})
    deals = trace.of(DealStep)
    assert [(d.index, d.slot.name, d.slot.face) for d in deals] == [
        (0, "P1", Face.UP),
        (1, "P2", Face.UP),
        (2, "P3", Face.UP),
        (3, "D1", Face.HIDDEN),
        (4, "D2", Face.HIDDEN),
        (5, "D3", Face.HIDDEN),
    ]
    kinds = [type(step).__name__ for step in trace.steps]
    assert kinds == ["DealStep"] * 6 + ["DecisionStep", "RevealStep", "FinishStep"]
    (decision,) = trace.of(DecisionStep)
    assert decision.window == "mulligan"
    assert decision.kind == "mulligan"
    assert decision.seat is None
    assert decision.seconds == 7.0
    assert decision.options == ("stay", "mulligan")
    assert decision.default == {"choice": "stay"}
    assert decision.info == {"player": ["2c", "7d", "9h"], "house_way": "mulligan"}
    assert trace.of(RevealStep) == [RevealStep("D", ("Ks", "Qd", "4c"))]

    result = rnd.result()
    expected = rules.round_result(parse_cards(STAY_P), parse_cards(STAND_D))
    assert result["winner"] == expected.winner(Path.STAYED) == "dealer"
    assert result["cards"] == {"P": ["2c", "7d", "9h"], "D": ["Ks", "Qd", "4c"]}
    assert group(result["bets"], path="stayed") == wire(dict(expected.stayed))
    refund = {"outcome": "refund", "payout": "1", "reason": "not dealt"}
    assert group(result["bets"], path="mulliganed") == dict.fromkeys(rules.BET_IDS, refund)
    assert all(line["default"] for line in result["bets"] if line["path"] == "stayed")
    assert not any("default" in line for line in result["bets"] if line["path"] == "mulliganed")
    assert result["details"]["mulligan_path"] == "not_dealt"
    assert result["details"]["paths"]["mulliganed"] == "not_dealt"
    assert result["details"]["dealer_stands"] is True
    assert result["hands"]["D"]["category"] == "high_card"
    json.dumps(result)


def test_mulligan_and_dealer_mulligan_cover_both_paths() -> None:
    rnd = new_round()
    trace = drive(rnd, pieces(f"{STAY_P} {MULL_D} {PM} {DM}"), lambda step: {"choice": "mulligan"})
    names = [
        step.slot.name if isinstance(step, DealStep) else type(step).__name__
        for step in trace.steps
    ]
    assert names == [
        *("P1", "P2", "P3", "D1", "D2", "D3"),
        "DecisionStep",
        *("PM1", "PM2", "PM3"),
        "RevealStep",
        *("DM1", "DM2", "DM3"),
        "FinishStep",
    ]
    faces = {step.slot.name: step.slot.face for step in trace.of(DealStep)}
    assert faces["PM1"] is Face.UP
    assert faces["DM3"] is Face.UP
    assert trace.normalised["mulligan"] == {"choice": "mulligan"}

    result = rnd.result()
    expected = rules.round_result(
        parse_cards(STAY_P), parse_cards(MULL_D), parse_cards(PM), parse_cards(DM)
    )
    assert expected.mulliganed is not None
    assert group(result["bets"], path="stayed") == wire(dict(expected.stayed))
    assert group(result["bets"], path="mulliganed") == wire(dict(expected.mulliganed))
    assert result["details"]["dealer_final"] == "DM"
    assert result["details"]["paths"] == {
        "stayed": {"winner": "dealer"},
        "mulliganed": {"winner": "player"},
    }
    # Pair of aces beats the dealer's pair of kings: the ante pays 1:1 on the mulligan path.
    assert group(result["bets"], path="mulliganed")["ante"] == {
        "outcome": "win",
        "payout": "2",
        "reason": "pair",
    }
    assert set(result["cards"]) == {"P", "D", "PM", "DM"}


def test_deadline_default_is_stay_and_dealer_mulligans_after_the_reveal() -> None:
    rnd = new_round()
    trace = drive(rnd, pieces(f"{STAY_P} {MULL_D} {DM}"), lambda step: None)
    assert trace.normalised["mulligan"] == {"choice": "stay"}
    kinds = [type(step).__name__ for step in trace.steps]
    assert kinds.index("RevealStep") == 7
    assert [s.slot.name for s in trace.of(DealStep)][-3:] == ["DM1", "DM2", "DM3"]
    result = rnd.result()
    assert result["details"]["mulligan_path"] == "not_dealt"
    assert result["cards"]["DM"] == ["Kc", "Kd", "2s"]


def test_illegal_decisions_change_nothing() -> None:
    rnd = new_round()
    cards = pieces(f"{STAY_P} {STAND_D}")
    for index in range(6):
        with pytest.raises(IllegalAction, match="not open"):
            rnd.apply_decision("mulligan", {"choice": "mulligan"})
        rnd.apply_card(index, next(cards))
    before = rnd.next_step()
    for window, decision, reason in [
        ("setting", {"choice": "stay"}, "not open"),
        ("mulligan", {"choice": "fold"}, "not offered"),
        ("mulligan", {"choice": "stay", "extra": 1}, "unknown field"),
        ("mulligan", {}, "not offered"),
        ("mulligan", ["stay"], "JSON object"),
    ]:
        with pytest.raises(IllegalAction, match=reason):
            rnd.apply_decision(window, decision)  # type: ignore[arg-type]
        assert rnd.next_step() == before
    with pytest.raises(RulesError, match="not waiting"):
        rnd.apply_card(6, Card.parse("As"))
    with pytest.raises(RulesError, match="not finished"):
        rnd.result()
    rnd.apply_decision("mulligan", {"choice": "stay"})
    with pytest.raises(IllegalAction, match="not open"):
        rnd.apply_decision("mulligan", {"choice": "mulligan"})
    with pytest.raises(RulesError, match="no reveal"):
        rnd.mark_revealed("P")
    rnd.mark_revealed("D")
    assert isinstance(rnd.next_step(), FinishStep)


def test_a_duplicate_card_is_a_rules_error() -> None:
    rnd = new_round()
    rnd.apply_card(0, Card.parse("As"))
    with pytest.raises(RulesError, match="duplicate"):
        rnd.apply_card(1, Card.parse("As"))
    assert rnd.next_step() == DealStep(1, rules.PLAYER_SLOTS[1])


@pytest.mark.parametrize(
    ("cards", "choice"),
    [(f"{STAY_P} {MULL_D} {PM} {DM}", "mulligan"), (f"{STAY_P} {STAND_D}", "stay")],
)
def test_replay_gives_the_same_result(cards: str, choice: str) -> None:
    first = new_round()
    trace = drive(first, pieces(cards), lambda step: {"choice": choice})
    second = new_round()
    replay(second, trace.applied)
    assert isinstance(second.next_step(), FinishStep)
    assert second.result() == first.result()
    assert second.table_state_after() == first.table_state_after() == {}


def test_hidden_dealer_cards_never_in_a_decision() -> None:
    rnd = new_round()
    trace = drive(rnd, pieces(f"{STAY_P} {MULL_D} {PM} {DM}"), lambda step: {"choice": "mulligan"})
    decisions = trace.of(DecisionStep)
    assert [step.window for step in decisions] == ["mulligan"]  # the loop below runs
    for step in decisions:
        text = json.dumps([step.info, step.default, step.options])
        for card in MULL_D.split():
            assert card not in text


def test_paytable_overrides_apply() -> None:
    game = make_live_game("three-card-mulligan", {}, {"ante": {"pair": "2:1"}})
    rnd = game.new_round({})
    drive(rnd, pieces(f"{STAY_P} {MULL_D} {PM} {DM}"), lambda step: {"choice": "mulligan"})
    assert group(rnd.result()["bets"], path="mulliganed")["ante"]["payout"] == "3"
