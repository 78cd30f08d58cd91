"""Texas Hold'em's live step machine: deal, actions, equity, showdown, stacks, replay, secrecy."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest

from controller.cards import Card, Deck, Tile, parse_cards
from controller.errors import IllegalAction, RulesError
from controller.games.base import Face
from controller.games.live.base import JSON, DealStep, DecisionStep, InfoStep, RevealStep
from controller.games.registry import make_live_game
from controller.games.texas_holdem.equity import win_probabilities
from controller.games.texas_holdem.live import HoldemLiveRound
from tests.unit.test_live_helpers import drive, pieces, replay, shuffled

# Seats 1-3, button seat 1, SB seat 2, BB seat 3. Deal from the SB, twice around.
HOLE = "2c Ah Kd 7s Ad Kc"  # S2-1 S3-1 S1-1 S2-2 S3-2 S1-2
BOARD = "As 9c 4d Kh 3s"
HOLE_CARDS = {"seat1": ["Kd", "Kc"], "seat2": ["2c", "7s"], "seat3": ["Ah", "Ad"]}
SCRIPT: list[JSON] = [
    {"action": "raise", "multiple": 3},  # seat1 raises to 300
    {"action": "fold"},  # seat2 (SB)
    {"action": "call"},  # seat3 (BB) calls 200 more
    {"action": "check"},  # flop: seat3
    {"action": "bet", "share": "50%"},  # seat1 bets 325 (pot 650)
    {"action": "all_in"},  # seat3: 700, a full raise
    {"action": "all_in"},  # seat1: calling 375 takes the whole stack
]

Factory = Callable[[JSON], HoldemLiveRound]


def table(**options: object) -> Factory:
    settings = {"seats": 3, "starting_stack": 1000, "top_up": False, "action_seconds": 9}
    live = make_live_game("texas-holdem", settings | options, {})

    def new(state: JSON) -> HoldemLiveRound:
        rnd = live.new_round(state)
        assert isinstance(rnd, HoldemLiveRound)
        return rnd

    return new


def scripted(script: list[JSON]) -> Callable[[DecisionStep], JSON]:
    queue = list(script)
    return lambda step: queue.pop(0)


def play_script() -> tuple[HoldemLiveRound, object]:
    rnd = table()({})
    trace = drive(rnd, pieces(f"{HOLE} {BOARD}"), scripted(SCRIPT))
    return rnd, trace


def test_scripted_hand_steps() -> None:
    _rnd, trace = play_script()
    names = []
    for step in trace.steps:  # type: ignore[attr-defined]
        if isinstance(step, DealStep):
            names.append(step.slot.name)
        elif isinstance(step, DecisionStep):
            names.append(f"{step.window}:{step.seat}")
        elif isinstance(step, InfoStep):
            names.append(f"equity:{step.data['street']}")
        elif isinstance(step, RevealStep):
            names.append(f"reveal:{step.hand}")
        else:
            names.append("finish")
    assert names == [
        *("S2-1", "S3-1", "S1-1", "S2-2", "S3-2", "S1-2"),
        "equity:preflop",
        *("action-1:seat1", "action-2:seat2", "action-3:seat3"),
        *("F1", "F2", "F3", "equity:flop"),
        *("action-4:seat3", "action-5:seat1", "action-6:seat3", "action-7:seat1"),
        *("T", "equity:turn", "R", "equity:river"),
        *("reveal:seat3", "reveal:seat1", "finish"),
    ]
    deals = trace.of(DealStep)  # type: ignore[attr-defined]
    assert all(d.slot.face is Face.HIDDEN for d in deals[:6])
    assert all(d.slot.face is Face.UP for d in deals[6:])
    assert [d.index for d in deals] == list(range(11))
    reveals = trace.of(RevealStep)  # type: ignore[attr-defined]
    assert reveals == [RevealStep("seat3", ("Ah", "Ad")), RevealStep("seat1", ("Kd", "Kc"))]


def test_decision_windows_offer_the_legal_actions() -> None:
    _, trace = play_script()
    windows = {s.window: s for s in trace.of(DecisionStep)}  # type: ignore[attr-defined]
    first = windows["action-1"]
    assert (first.kind, first.seat, first.seconds) == ("action", "seat1", 9.0)
    assert first.options == ("fold", "call", "raise", "all_in")
    assert first.default == {"action": "fold"}
    info = first.info
    assert (info["street"], info["to_call"], info["pot"], info["current_bet"]) == (
        "preflop",
        100,
        150,
        100,
    )
    assert info["raises"] == [
        {"multiple": 2, "to": 200, "amount": 200},
        {"multiple": 3, "to": 300, "amount": 300},
    ]
    assert info["min_raise_to"] == 200
    assert info["bets"] == []
    assert info["stacks"] == {"seat2": 950, "seat3": 900, "seat1": 1000}
    flop = windows["action-4"]
    assert flop.options == ("check", "bet", "all_in")
    assert flop.default == {"action": "check"}
    assert flop.info["board"] == ["As", "9c", "4d"]
    assert [b["amount"] for b in flop.info["bets"]] == [214, 325, 650]
    assert flop.info["min_bet"] == 214
    last = windows["action-7"]
    assert last.options == ("fold", "all_in")
    assert last.info["to_call"] == 375
    normalised = [item[2] for item in trace.applied if item[0] == "decision"]  # type: ignore[attr-defined]
    assert normalised == [
        {"action": "raise", "seat": "seat1", "amount": 300, "multiple": 3},
        {"action": "fold", "seat": "seat2", "amount": 0},
        {"action": "call", "seat": "seat3", "amount": 200},
        {"action": "check", "seat": "seat3", "amount": 0},
        {"action": "bet", "seat": "seat1", "amount": 325, "share": "50%"},
        {"action": "all_in", "seat": "seat3", "amount": 700},
        {"action": "all_in", "seat": "seat1", "amount": 375},
    ]


def test_equity_steps_are_secure_and_match_the_calculator() -> None:
    _, trace = play_script()
    infos = trace.of(InfoStep)  # type: ignore[attr-defined]
    assert [i.kind for i in infos] == ["equity"] * 4
    assert all(i.secure for i in infos)
    preflop, flop, turn, river = (i.data for i in infos)
    assert set(preflop["seats"]) == {"seat1", "seat2", "seat3"}
    assert preflop["method"] == "monte_carlo"
    cards = {seat: parse_cards(c) for seat, c in HOLE_CARDS.items()}
    live = {seat: cards[seat] for seat in ("seat3", "seat1")}
    expected = win_probabilities(live, parse_cards("As 9c 4d"), cards["seat2"])
    assert flop["method"] == "exact"
    assert flop["seats"] == {s: e.to_wire() for s, e in expected.seats.items()}
    assert flop["runouts"] == 903  # C(43, 2): the folded hand is dead
    assert turn["board"] == ["As", "9c", "4d", "Kh"]
    assert river["seats"] == {"seat3": {"win": 1.0, "tie": 0.0}, "seat1": {"win": 0.0, "tie": 0.0}}


def test_result_pots_and_stacks() -> None:
    rnd, _ = play_script()
    result = rnd.result()
    assert result["winner"] == "seat3"
    assert result["cards"] == {
        "seat3": ["Ah", "Ad"],
        "seat1": ["Kd", "Kc"],
        "board": BOARD.split(),
    }
    assert result["hands"]["seat3"]["category"] == "three_of_a_kind"
    assert result["hands"]["seat1"]["category"] == "three_of_a_kind"
    details = result["details"]
    assert details["ended"] == "showdown"
    assert details["pots"] == [
        {
            "amount": 2050,
            "level": 1000,
            "eligible": ["seat3", "seat1"],
            "winners": ["seat3"],
            "shares": {"seat3": 2050},
        }
    ]
    assert details["chips_won"] == {"seat2": -50, "seat3": 1050, "seat1": -1000}
    assert details["stacks_after"] == {"seat2": 950, "seat3": 2050, "seat1": 0}
    assert (details["button"], details["small_blind"], details["big_blind"]) == (
        "seat1",
        "seat2",
        "seat3",
    )
    assert result["bets"] == []
    assert len(details["actions"]) == 7
    json.dumps(result)
    assert rnd.table_state_after() == {"button": 1, "stacks": {"1": 0, "2": 950, "3": 2050}}


def test_busted_seat_sits_out_and_the_button_moves() -> None:
    rnd, _ = play_script()
    following = table()(rnd.table_state_after())
    # Heads-up between seats 2 and 3: the button (seat 2) is the small blind, dealt first.
    assert following.state.button == 2
    assert following.state.small_blind_seat == 2
    step = following.next_step()
    assert isinstance(step, DealStep)
    assert step.slot.name == "S2-1"
    assert [s.seat for s in following.state.seats] == [3, 2]


def test_top_up_restacks_every_seat() -> None:
    rnd, _ = play_script()
    following = table(top_up=True)(rnd.table_state_after())
    assert following.state.initial_stacks == {1: 1000, 2: 1000, 3: 2050}
    assert following.state.button == 2


def test_fewer_than_two_stacks_cannot_deal() -> None:
    with pytest.raises(IllegalAction, match="re-stack"):
        table()({"button": 1, "stacks": {"1": 0, "2": 0, "3": 3000}})
    with pytest.raises(RulesError, match="seat"):
        table()({"button": 1, "stacks": {"9": 100}})
    with pytest.raises(RulesError, match="button"):
        table()({"button": "x", "stacks": {"1": 100, "2": 100}})


def test_defaults_fold_to_the_big_blind() -> None:
    rnd = table()({})
    trace = drive(rnd, pieces(HOLE), lambda step: None)
    assert [n for n in trace.normalised.values()] == [
        {"action": "fold", "seat": "seat1", "amount": 0},
        {"action": "fold", "seat": "seat2", "amount": 0},
    ]
    result = rnd.result()
    assert result["winner"] == "seat3"
    assert result["cards"] == {"board": []}
    assert result["hands"] == {}
    assert result["details"]["ended"] == "folds"
    assert not trace.of(RevealStep)
    assert result["details"]["returned"] == {"seat3": 50}
    assert rnd.table_state_after()["stacks"] == {"1": 1000, "2": 950, "3": 1050}


def test_default_is_check_when_checking_is_legal() -> None:
    rnd = table()({})
    script = [{"action": "call"}, {"action": "call"}]
    trace = drive(rnd, pieces(f"{HOLE} {BOARD}"), lambda step: script.pop(0) if script else None)
    checks = [n for n in trace.normalised.values() if n["action"] == "check"]
    assert len(checks) == 1 + 3 * 3  # the BB's option, then everyone on three streets
    assert rnd.result()["details"]["ended"] == "showdown"


def test_illegal_actions_change_nothing() -> None:
    rnd = table()({})
    cards = pieces(f"{HOLE} {BOARD}")
    for index in range(6):
        with pytest.raises(IllegalAction, match="not open"):
            rnd.apply_decision("action-1", {"action": "call"})
        rnd.apply_card(index, next(cards))
    with pytest.raises(RulesError, match="not waiting"):
        rnd.apply_card(6, next(cards))
    rnd.mark_info_published()
    with pytest.raises(RulesError, match="no equity"):
        rnd.mark_info_published()
    before = rnd.next_step()
    assert isinstance(before, DecisionStep)
    for window, decision, reason in [
        ("action-2", {"action": "call"}, "not open"),
        ("action-1", {"action": "call", "seat": "seat2"}, "seat3|seat1 acts|not 'seat2'"),
        ("action-1", {"action": "check"}, "not possible now"),
        ("action-1", {"action": "bet", "share": "50%"}, "not possible now"),
        ("action-1", {"action": "raise", "multiple": 1}, "below the minimum"),
        ("action-1", {"action": "raise", "multiple": 4}, "one of the multiples"),
        ("action-1", {"action": "raise"}, "names a multiple"),
        ("action-1", {"action": "raise", "multiple": "lots"}, "whole number"),
        ("action-1", {"action": "call", "share": "50%"}, "takes no size"),
        ("action-1", {"action": "call", "amount": 50}, "does not match"),
        ("action-1", {"action": "shove"}, "not one of"),
        ("action-1", {"action": "call", "note": "x"}, "unknown field"),
        ("action-1", "call", "JSON object"),
    ]:
        with pytest.raises(IllegalAction, match=reason):
            rnd.apply_decision(window, decision)  # type: ignore[arg-type]
        assert rnd.next_step() == before
    assert rnd.apply_decision("action-1", {"action": "raise", "multiple": "3x"}) == {
        "action": "raise",
        "seat": "seat1",
        "amount": 300,
        "multiple": 3,
    }
    rnd.apply_decision("action-2", {"action": "fold"})
    rnd.apply_decision("action-3", {"action": "call"})
    with pytest.raises(RulesError, match="tile"):
        rnd.apply_card(6, Tile(3))
    with pytest.raises(RulesError, match="not finished"):
        rnd.result()
    with pytest.raises(RulesError, match="not finished"):
        rnd.table_state_after()


def test_a_duplicate_card_is_a_rules_error() -> None:
    rnd = table()({})
    rnd.apply_card(0, Card.parse("As"))
    with pytest.raises(RulesError, match="duplicate"):
        rnd.apply_card(1, Card.parse("As"))


def test_hole_cards_never_in_a_decision_window() -> None:
    _, trace = play_script()
    hole = {card for cards in HOLE_CARDS.values() for card in cards}
    assert len(hole) == 6
    decisions = trace.of(DecisionStep)  # type: ignore[attr-defined]
    assert len(decisions) == len(SCRIPT)  # the loop below runs over every window of the hand
    for step in decisions:
        text = json.dumps([step.info, step.default, step.options, step.seat])
        for card in hole:
            assert f'"{card}"' not in text


def random_decider(seed: int) -> Callable[[DecisionStep], JSON | None]:
    rng = random.Random(seed)

    def decide(step: DecisionStep) -> JSON | None:
        choice = rng.choice([*step.options, "default"])
        if choice == "default":
            return None
        if choice == "bet":
            return {"action": "bet", "share": rng.choice(step.info["bets"])["share"]}
        if choice == "raise":
            return {"action": "raise", "multiple": rng.choice(step.info["raises"])["multiple"]}
        return {"action": choice}

    return decide


def test_random_hands_conserve_chips_and_replay() -> None:
    new = table(seats=6, top_up=False, starting_stack=600, equity_samples=1000)
    state: JSON = {}
    for hand in range(25):
        rnd = new(state)
        trace = drive(rnd, shuffled(Deck.standard(), hand), random_decider(hand))
        again = new(state)
        replay(again, trace.applied)
        assert again.result() == rnd.result()
        assert again.table_state_after() == rnd.table_state_after()
        state = rnd.table_state_after()
        assert sum(state["stacks"].values()) == 6 * 600
        if sum(1 for chips in state["stacks"].values() if chips > 0) < 2:
            break
