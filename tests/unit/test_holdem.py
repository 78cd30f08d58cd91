"""Texas Hold'em hand state machine: blinds, order, legality, pots, odd chips, replay."""

from __future__ import annotations

import copy
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cards import Card, parse_cards
from controller.errors import ConfigError, IllegalAction, PieceRefused, RulesError
from controller.games.base import Face
from controller.games.texas_holdem.rules import (
    Action,
    ActionKind,
    Deal,
    HoldemConfig,
    HoldemState,
    Street,
    deal_plan,
    next_button,
    replay,
    split_pots,
    start_hand,
)

FOLD, CHECK, CALL, BET, RAISE, ALL_IN = (
    ActionKind.FOLD,
    ActionKind.CHECK,
    ActionKind.CALL,
    ActionKind.BET,
    ActionKind.RAISE,
    ActionKind.ALL_IN,
)


def act(state: HoldemState, seat: int, kind: ActionKind, size: int | None = None) -> HoldemState:
    return state.apply(Action(seat, kind, size))


def deal_holes(state: HoldemState, holes: dict[int, str]) -> HoldemState:
    """Deal the hole cards in plan order from a seat -> "As Kd" map."""
    cards = {seat: parse_cards(text) for seat, text in holes.items()}
    while state.next_slot is not None and state.next_slot.hand.startswith("seat"):
        slot = state.next_slot
        seat = int(slot.hand.removeprefix("seat"))
        state = state.apply(Deal(cards[seat][int(slot.name[-1]) - 1]))
    return state


def deal_board(state: HoldemState, text: str) -> HoldemState:
    for card in parse_cards(text):
        state = state.apply(Deal(card))
    return state


def unchanged_after_refusal(state: HoldemState, action: Action, reason: str) -> None:
    before = copy.deepcopy(state)
    with pytest.raises(IllegalAction, match=reason) as info:
        state.apply(action)
    assert state == before
    assert info.value.context["seat"] == action.seat


# ---------------------------------------------------------------------------------------------
# Blinds, positions, order.


def test_heads_up_button_is_small_blind_first_preflop_last_after() -> None:
    state = start_hand(HoldemConfig(), {2: 1000, 5: 1000}, button=5)
    assert (state.small_blind_seat, state.big_blind_seat) == (5, 2)
    assert state.seat(5).street_bet == 50
    assert state.seat(2).street_bet == 100
    assert [slot.name for slot in state.plan.slots[:4]] == ["S5-1", "S2-1", "S5-2", "S2-2"]
    state = deal_holes(state, {5: "As Ad", 2: "Kc Kd"})
    assert state.to_act == 5
    state = act(state, 5, CALL)
    assert state.to_act == 2  # the big blind's option
    state = act(state, 2, CHECK)
    assert state.street is Street.FLOP
    assert state.to_act is None
    assert state.next_slot is not None
    assert state.next_slot.name == "F1"
    state = deal_board(state, "2c 7d 9h")
    assert state.to_act == 2  # the big blind acts first after the flop
    state = act(state, 2, CHECK)
    assert state.to_act == 5
    state = act(state, 5, CHECK)
    assert state.street is Street.TURN


def test_order_preflop_from_utg_and_postflop_from_first_left_of_button() -> None:
    state = start_hand(HoldemConfig(), {1: 1000, 2: 1000, 4: 1000, 6: 1000}, button=1)
    assert (state.small_blind_seat, state.big_blind_seat) == (2, 4)
    assert [slot.name for slot in state.plan.slots[:8]] == [
        "S2-1",
        "S4-1",
        "S6-1",
        "S1-1",
        "S2-2",
        "S4-2",
        "S6-2",
        "S1-2",
    ]
    state = deal_holes(state, {1: "As Ad", 2: "Kc Kd", 4: "Qc Qd", 6: "Jc Jd"})
    order = []
    for kind in (CALL, CALL, FOLD):
        assert state.to_act is not None
        order.append(state.to_act)
        state = act(state, state.to_act, kind)
    assert order == [6, 1, 2]
    assert state.to_act == 4
    state = act(state, 4, CHECK)
    state = deal_board(state, "2c 7d 9h")
    # The small blind folded: the first player still in left of the button is the BB.
    order = []
    for kind in (CHECK, CHECK, CHECK):
        assert state.to_act is not None
        order.append(state.to_act)
        state = act(state, state.to_act, kind)
    assert order == [4, 6, 1]
    assert state.street is Street.TURN


def test_three_handed_button_is_under_the_gun() -> None:
    state = start_hand(HoldemConfig(), {3: 500, 7: 500, 8: 500}, button=8)
    assert (state.small_blind_seat, state.big_blind_seat) == (3, 7)
    state = deal_holes(state, {3: "2c 3c", 7: "4d 5d", 8: "6h 7h"})
    assert state.to_act == 8


def test_short_blinds_post_all_in() -> None:
    state = start_hand(HoldemConfig(), {1: 1000, 2: 30, 3: 60}, button=1)
    assert state.seat(2).street_bet == 30
    assert state.seat(2).all_in
    assert state.seat(3).street_bet == 60
    assert state.seat(3).all_in
    state = deal_holes(state, {1: "As Ad", 2: "Kc Kd", 3: "Qc Qd"})
    assert state.to_act == 1
    assert {a.kind for a in state.legal_actions()} == {FOLD, CALL, ALL_IN}
    state = act(state, 1, CALL)  # calls 60; nobody can bet any more
    assert state.to_act is None
    state = deal_board(state, "2c 7d 9h Th 3s")
    assert state.settlement is not None
    # Seat 1 wins everything: 30x3 + 30x2 (the 60 level) = 150; nothing uncalled.
    assert state.settlement.stacks == {1: 1090, 2: 0, 3: 0}


# ---------------------------------------------------------------------------------------------
# Legality.


@pytest.fixture
def flop_bet() -> HoldemState:
    """Three seats on the flop; seat 2 (SB) has bet 50% of a 300 pot, seat 3 to act."""
    state = start_hand(HoldemConfig(), {1: 1000, 2: 1000, 3: 240}, button=1)
    state = deal_holes(state, {1: "As Ad", 2: "Kc Kd", 3: "Qc Qd"})
    state = act(state, 1, CALL)
    state = act(state, 2, CALL)
    state = act(state, 3, CHECK)
    state = deal_board(state, "2c 7d 9h")
    assert state.pot == 300
    state = act(state, 2, BET, 50)
    assert state.seat(2).street_bet == 150
    assert state.to_act == 3
    return state


def test_check_facing_a_bet_is_refused(flop_bet: HoldemState) -> None:
    unchanged_after_refusal(flop_bet, Action(3, CHECK), "cannot check facing a bet")


def test_acting_out_of_turn_is_refused(flop_bet: HoldemState) -> None:
    unchanged_after_refusal(flop_bet, Action(1, CALL), "not seat 1's turn: seat 3 acts")


def test_raise_below_the_minimum_is_refused(flop_bet: HoldemState) -> None:
    unchanged_after_refusal(flop_bet, Action(3, RAISE, 1), "below the minimum of 2x")
    unchanged_after_refusal(flop_bet, Action(3, RAISE, 4), "one of the multiples")


def test_betting_more_than_the_stack_is_refused(flop_bet: HoldemState) -> None:
    # Seat 3 has 140 behind: a 2x raise to 300 needs 300.
    unchanged_after_refusal(flop_bet, Action(3, RAISE, 2), "stack is 140")
    # Calling 150 with 140 behind takes the whole stack: only all-in does that.
    unchanged_after_refusal(flop_bet, Action(3, CALL), "go all-in")
    after = act(flop_bet, 3, ALL_IN)  # an all-in for less than the bet is fine
    assert after.seat(3).all_in
    assert after.seat(3).street_bet == 140
    assert after.to_act == 1


def test_bet_sizes_and_refusals() -> None:
    state = start_hand(HoldemConfig(), {1: 1000, 2: 1000}, button=1)
    state = deal_holes(state, {1: "As Ad", 2: "Kc Kd"})
    state = act(state, 1, CALL)
    state = act(state, 2, CHECK)
    state = deal_board(state, "2c 7d 9h")
    unchanged_after_refusal(state, Action(2, RAISE, 2), "nothing to raise: bet instead")
    unchanged_after_refusal(state, Action(2, BET, 10), "below the minimum of 33%")
    unchanged_after_refusal(state, Action(2, BET, 40), "one of the pot shares")
    unchanged_after_refusal(state, Action(2, BET), "needs a size")
    unchanged_after_refusal(state, Action(2, CALL), "nothing to call")
    unchanged_after_refusal(state, Action(2, FOLD), "check instead of folding")
    after = act(state, 2, BET, 33)
    assert after.seat(2).street_bet == 100  # 33% of 200 = 66, but a bet is at least the BB
    after = act(state, 2, BET, 100)
    assert after.seat(2).street_bet == 200
    after = act(after, 1, RAISE, 3)
    assert after.seat(1).street_bet == 600
    assert after.level == 600


def test_deal_is_checked() -> None:
    state = start_hand(HoldemConfig(), {1: 1000, 2: 1000}, button=1)
    state = state.apply(Deal(Card.parse("As")))
    before = copy.deepcopy(state)
    with pytest.raises(PieceRefused, match="duplicate"):
        state.apply(Deal(Card.parse("As")))
    with pytest.raises(PieceRefused, match="JK refused"):
        state.apply(Deal(Card(52)))
    assert state == before
    state = deal_holes(
        start_hand(HoldemConfig(), {1: 1000, 2: 1000}, button=1), {1: "As Ad", 2: "Kc Kd"}
    )
    with pytest.raises(IllegalAction, match="waiting for seat 1 to act"):
        state.apply(Deal(Card.parse("2c")))
    fresh = start_hand(HoldemConfig(), {1: 1000, 2: 1000}, button=1)
    with pytest.raises(IllegalAction, match="waiting for a card"):
        fresh.apply(Action(1, CALL))


def test_incomplete_all_in_raise_does_not_reopen_betting() -> None:
    state = start_hand(HoldemConfig(), {1: 250, 2: 2000, 3: 2000, 4: 2000}, button=1)
    state = deal_holes(state, {1: "As Ad", 2: "Kc Kd", 3: "Qc Qd", 4: "Jc Jd"})
    state = act(state, 4, RAISE, 2)  # UTG raises to 200
    state = act(state, 1, ALL_IN)  # 250: less than a full raise (to 400)
    assert state.level == 250
    # The SB has not acted since the raise: it may re-raise.
    assert any(a.kind is RAISE for a in state.legal_actions())
    state = act(state, 2, CALL)
    state = act(state, 3, CALL)
    assert state.to_act == 4
    assert {a.kind for a in state.legal_actions()} == {FOLD, CALL}
    unchanged_after_refusal(state, Action(4, RAISE, 2), "not reopened")
    unchanged_after_refusal(state, Action(4, ALL_IN), "not reopened")
    state = act(state, 4, CALL)
    assert state.street is Street.FLOP


def test_full_all_in_raise_reopens_betting() -> None:
    state = start_hand(HoldemConfig(), {1: 450, 2: 2000, 3: 2000, 4: 2000}, button=1)
    state = deal_holes(state, {1: "As Ad", 2: "Kc Kd", 3: "Qc Qd", 4: "Jc Jd"})
    state = act(state, 4, RAISE, 2)
    state = act(state, 1, ALL_IN)  # 450 >= 2 x 200: a full raise
    state = act(state, 2, FOLD)
    state = act(state, 3, FOLD)
    assert state.to_act == 4
    assert any(a.kind is RAISE for a in state.legal_actions()) is False  # nobody left to raise
    assert {a.kind for a in state.legal_actions()} == {FOLD, CALL, ALL_IN}


# ---------------------------------------------------------------------------------------------
# Pots.


def test_side_pots_of_the_rule_page_example() -> None:
    pots, returned = split_pots(
        [(1, 50, False), (2, 100, False), (3, 200, False), (4, 200, False)],
        {1: 4000, 2: 3000, 3: 2000, 4: 1000},
    )
    assert returned == {}
    assert [(p.amount, p.eligible) for p in pots] == [
        (200, (1, 2, 3, 4)),
        (150, (2, 3, 4)),
        (200, (3, 4)),
    ]
    assert [p.winners for p in pots] == [(1,), (2,), (3,)]


def test_side_pots_played_out() -> None:
    config = HoldemConfig(small_blind=5, big_blind=10)
    state = start_hand(config, {1: 50, 2: 100, 3: 1000, 4: 1000}, button=4)
    assert (state.small_blind_seat, state.big_blind_seat) == (1, 2)
    # Seat 1 the best hand, then 2, then 3, then 4.
    state = deal_holes(state, {1: "As Ah", 2: "Ks Kh", 3: "Qs Qh", 4: "Js Jh"})
    assert state.to_act == 3
    state = act(state, 3, RAISE, 2)  # to 20
    state = act(state, 4, CALL)
    state = act(state, 1, ALL_IN)  # 50: a full raise over 20
    state = act(state, 2, ALL_IN)  # 100
    state = act(state, 3, RAISE, 2)  # to 200
    state = act(state, 4, CALL)
    assert [s.committed for s in state.seats] == [50, 100, 200, 200]
    state = deal_board(state, "2c 7d 9c")
    state = act(state, 3, CHECK)
    state = act(state, 4, CHECK)
    state = deal_board(state, "3d")
    state = act(state, 3, CHECK)
    state = act(state, 4, CHECK)
    state = deal_board(state, "4h")
    state = act(state, 3, CHECK)
    state = act(state, 4, CHECK)
    settlement = state.settlement
    assert settlement is not None
    assert [(p.amount, p.eligible, p.winners) for p in settlement.pots] == [
        (200, (1, 2, 3, 4), (1,)),
        (150, (2, 3, 4), (2,)),
        (200, (3, 4), (3,)),
    ]
    assert settlement.stacks == {1: 200, 2: 150, 3: 1000, 4: 800}
    assert settlement.descriptions[1] == "one pair, aces, kickers nine, seven, four"


def test_odd_chip_goes_to_first_winner_left_of_button() -> None:
    config = HoldemConfig(small_blind=5, big_blind=10)
    state = start_hand(config, {1: 100, 2: 100, 3: 100}, button=3)
    # Seats 2 and 3 hold different cards but the board plays (a royal flush on the board).
    state = deal_holes(state, {1: "2c 3c", 2: "4d 5d", 3: "6h 7h"})
    state = act(state, 3, CALL)
    state = act(state, 1, FOLD)  # 5 dead chips: the pot is 25
    state = act(state, 2, CHECK)
    state = deal_board(state, "Ts Js Qs")
    for _ in range(2):
        state = act(state, 2, CHECK)
        state = act(state, 3, CHECK)
        state = deal_board(state, "Ks" if len(state.board) == 3 else "As")
    state = act(state, 2, CHECK)
    state = act(state, 3, CHECK)
    settlement = state.settlement
    assert settlement is not None
    (pot,) = settlement.pots
    assert pot.amount == 25
    assert pot.winners == (2, 3)
    assert pot.shares == {2: 13, 3: 12}  # seat 2 is the first winner left of the button (3)
    assert settlement.stacks == {1: 95, 2: 103, 3: 102}


def test_odd_chips_three_ways_in_button_order() -> None:
    contributions = [(5, 34, False), (7, 34, False), (1, 34, False), (3, 34, False)]
    pots, _ = split_pots(contributions, {5: 10, 7: 9, 1: 10, 3: 10})
    (pot,) = pots
    assert pot.winners == (5, 1, 3)
    assert pot.shares == {5: 46, 1: 45, 3: 45}


def test_uncalled_bet_is_returned() -> None:
    state = start_hand(HoldemConfig(), {1: 1000, 2: 300}, button=1)
    state = deal_holes(state, {1: "As Ad", 2: "Kc Kd"})
    state = act(state, 1, ALL_IN)  # 1000 against a 300 stack
    state = act(state, 2, ALL_IN)  # calls for 300
    state = deal_board(state, "2c 7d 9h Th 3s")
    settlement = state.settlement
    assert settlement is not None
    assert settlement.returned == {1: 700}
    assert settlement.stacks == {1: 1300, 2: 0}


def test_fold_ends_the_hand_at_once() -> None:
    state = start_hand(HoldemConfig(), {1: 1000, 2: 1000}, button=1)
    state = deal_holes(state, {1: "As Ad", 2: "Kc Kd"})
    state = act(state, 1, RAISE, 3)  # to 300
    state = act(state, 2, FOLD)
    assert state.is_complete
    assert state.settlement is not None
    assert state.settlement.returned == {1: 200}
    assert state.settlement.stacks == {1: 1100, 2: 900}
    assert state.settlement.strengths == {}
    with pytest.raises(IllegalAction, match="the hand is over"):
        state.apply(Deal(Card.parse("2c")))


# ---------------------------------------------------------------------------------------------
# Button, plan, config, replay.


def test_next_button_skips_empty_seats_and_wraps() -> None:
    assert next_button(2, [1, 2, 5, 7]) == 5
    assert next_button(7, [1, 2, 5, 7]) == 1
    assert next_button(3, [1, 2, 5, 7]) == 5  # the old button's seat emptied
    with pytest.raises(RulesError):
        next_button(1, [])


def test_deal_plan_with_burns() -> None:
    plan = deal_plan([4, 6, 1], burns=True)
    names = [slot.name for slot in plan.slots]
    assert names == [
        "S4-1",
        "S6-1",
        "S1-1",
        "S4-2",
        "S6-2",
        "S1-2",
        "B1",
        "F1",
        "F2",
        "F3",
        "B2",
        "T",
        "B3",
        "R",
    ]
    assert {slot.face for slot in plan.slots if slot.hand != "board"} == {Face.HIDDEN}
    assert {slot.face for slot in plan.slots if slot.hand == "board"} == {Face.UP}
    state = start_hand(HoldemConfig(burns=True), {1: 1000, 2: 1000}, button=1)
    state = deal_holes(state, {1: "As Ad", 2: "Kc Kd"})
    state = act(state, 1, CALL)
    state = act(state, 2, CHECK)
    state = deal_board(state, "3h 2c 7d")
    assert state.to_act is None  # burn + two flop cards: still waiting
    state = deal_board(state, "9h")
    assert state.burned == (Card.parse("3h"),)
    assert [str(c) for c in state.board] == ["2c", "7d", "9h"]
    assert state.to_act == 2


def test_config_is_checked() -> None:
    with pytest.raises(ConfigError):
        HoldemConfig(small_blind=200, big_blind=100)
    with pytest.raises(ConfigError):
        HoldemConfig(raise_multiples=(1,))
    with pytest.raises(ConfigError):
        HoldemConfig(bet_shares=())
    with pytest.raises(RulesError, match="button"):
        start_hand(HoldemConfig(), {1: 100, 2: 100}, button=3)
    with pytest.raises(RulesError, match="not on this table"):
        start_hand(HoldemConfig(seats=6), {1: 100, 7: 100}, button=1)


def test_replay_gives_the_same_final_state() -> None:
    state = start_hand(HoldemConfig(), {1: 800, 3: 1200, 6: 1500}, button=3)
    state = deal_holes(state, {1: "As Kd", 3: "7c 7d", 6: "Qh Jh"})
    state = act(state, 3, RAISE, 3)
    state = act(state, 6, CALL)
    state = act(state, 1, CALL)
    state = deal_board(state, "Th 9h 2c")
    state = act(state, 6, BET, 50)
    state = act(state, 1, FOLD)
    state = act(state, 3, ALL_IN)
    state = act(state, 6, ALL_IN)
    state = deal_board(state, "3d 4s")
    assert state.is_complete
    again = replay(state.history)
    assert again == state
    assert again.settlement == state.settlement


# ---------------------------------------------------------------------------------------------
# Property: chips are conserved for random legal play.


@settings(deadline=None, max_examples=150)
@given(
    stacks=st.lists(st.integers(1, 400), min_size=2, max_size=6),
    button_index=st.integers(0, 5),
    deck_seed=st.integers(0, 2**32),
    data=st.data(),
)
def test_random_legal_hands_conserve_chips(
    stacks: list[int], button_index: int, deck_seed: int, data: st.DataObject
) -> None:
    config = HoldemConfig(small_blind=5, big_blind=10, seats=9)
    seats = {seat + 1: chips for seat, chips in enumerate(stacks)}
    button = sorted(seats)[button_index % len(seats)]
    deck = [Card(code) for code in range(52)]
    random.Random(deck_seed).shuffle(deck)
    state = start_hand(config, seats, button)
    steps = 0
    while not state.is_complete:
        steps += 1
        assert steps < 500
        if state.next_slot is not None:
            state = state.apply(Deal(deck.pop()))
            continue
        legal = state.legal_actions()
        assert legal, "someone is to act but has no legal action"
        state = state.apply(data.draw(st.sampled_from(legal)))
        assert all(seat.stack >= 0 for seat in state.seats)
        assert sum(s.stack for s in state.seats) + state.pot == sum(stacks)
    settlement = state.settlement
    assert settlement is not None
    assert sum(settlement.stacks.values()) == sum(stacks)
    pots_total = sum(p.amount for p in settlement.pots) + sum(settlement.returned.values())
    assert pots_total == state.pot
    for pot in settlement.pots:
        assert sum(pot.shares.values()) == pot.amount
    assert replay(state.history) == state
