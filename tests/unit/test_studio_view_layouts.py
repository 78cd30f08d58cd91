"""What the overlay and the dealer screen need beyond the round: names, layouts, Hold'em seats.

The view states the game's display name (never only its id), the hands and slots a page
reserves before any card comes (the table's own seats and positions once seen), the result's
details, and Hold'em's seats (stack, bet, last action in words, folds, the pot and side pots),
all read from the parsed public messages by the one table fold. Hostile window info, decisions
and details never raise.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from controller.studio.view import TableView, layout
from controller.tablefold import HoldemSeats, action_words

T = "th-01"
NOW = 1_795_000_000.0
R1 = f"{T}-000001"


def env(kind: str, seq: int, data: dict[str, Any], rnd: str = R1) -> bytes:
    body = {"schema_version": "3", "journal": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
            "table": T, "round": rnd, "seq": seq, "session": 1,
            "kind": kind, "at": "2026-11-19T08:00:00.000000Z", "delayed": False,
            "data": data}  # fmt: skip
    return json.dumps(body).encode()


def status(game: str, head: int = 1) -> bytes:
    body = {"schema_version": "3", "journal": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
            "state": "online", "table": T, "session": 1, "game": game,
            "version": "1", "at": "2026-11-19T08:13:15.000000Z",
            "chain_head": {"seq": head, "hash": "0" * 64}}  # fmt: skip
    return json.dumps(body).encode()


def opened(game: str, no: int = 1) -> dict[str, Any]:
    return {"round_no": no, "game": game, "betting_seconds": 1,
            "betting_closes_at": "2026-11-19T08:00:15.000000Z"}  # fmt: skip


INFO = {"street": "preflop", "to_call": 100, "pot": 150, "current_bet": 100, "stack": 10000,
        "stacks": {"seat3": 10000, "seat1": 9950, "seat2": 9900},
        "street_bets": {"seat1": 50, "seat2": 100, "seat3": 0}, "folded": [], "all_in": [],
        "board": [], "button": "seat3"}  # fmt: skip


def window(n: int, seat: str, info: dict[str, Any]) -> dict[str, Any]:
    return {"window": f"action-{n}", "kind": "action", "seat": seat, "seconds": 4,
            "options": ["fold", "call", "raise"], "info": info,
            "closes_at": "2026-11-19T08:00:30.000000Z"}  # fmt: skip


def applied(n: int, decision: dict[str, Any]) -> dict[str, Any]:
    return {"window": f"action-{n}", "decision": decision, "default": False, "command_id": None}


def holdem_view() -> TableView:
    view = TableView(T, clock=lambda: NOW)
    assert view.apply("status", "s", status("texas-holdem"))
    assert view.apply("events", "e", env("round_opened", 2, opened("texas-holdem")))
    return view


def test_the_game_is_named_for_people_and_the_round_reserves_every_hand():
    view = holdem_view()
    wired = view.to_wire()
    assert wired["round"]["game_name"] == "Texas Hold'em"
    assert wired["status"]["game_name"] == "Texas Hold'em"
    hands = [h["hand"] for h in wired["round"]["layout"]]
    assert hands == ["seat1", "seat2", "seat3", "seat4", "seat5", "seat6", "board"]
    assert wired["round"]["layout"][-1]["slots"] == ["F1", "F2", "F3", "T", "R"]


def test_holdem_seats_stacks_actions_in_words_folds_and_the_pot():
    view = holdem_view()
    view.apply("events", "e", env("decision_open", 3, window(1, "seat3", INFO)))
    view.apply("events", "e", env("decision_applied", 4, applied(1, {"action": "raise",
               "seat": "seat3", "amount": 300, "multiple": 3})))  # fmt: skip
    after = {**INFO, "pot": 450, "stacks": {"seat3": 9700, "seat1": 9950, "seat2": 9900},
             "street_bets": {"seat1": 50, "seat2": 100, "seat3": 300}}  # fmt: skip
    view.apply("events", "e", env("decision_open", 5, window(2, "seat1", after)))
    view.apply("events", "e", env("decision_applied", 6, applied(2, {"action": "fold",
               "seat": "seat1", "amount": 0})))  # fmt: skip
    view.apply("events", "e", env("decision_open", 7, window(3, "seat2", after)))
    view.apply("events", "e", env("decision_applied", 8, applied(3, {"action": "call",
               "seat": "seat2", "amount": 200})))  # fmt: skip
    holdem = view.to_wire()["round"]["holdem"]
    seats = {s["seat"]: s for s in holdem["seats"]}
    assert [s["seat"] for s in holdem["seats"]] == ["seat1", "seat2", "seat3"]
    assert seats["seat3"]["action"] == "raise to 300" and seats["seat3"]["stack"] == 9700
    assert seats["seat1"]["action"] == "fold" and seats["seat1"]["folded"]
    assert seats["seat2"]["action"] == "call 200" and seats["seat2"]["stack_text"] == "9,700"
    assert holdem["pot"] == 650 and holdem["pot_text"] == "650"
    assert holdem["button"] == "seat3" and holdem["street"] == "preflop"
    # The next round reserves this table's three seats, not the default six.
    result = {"game": "texas-holdem", "round_no": 1, "cards": {"board": []},
              "winner": "seat3", "hands": {}, "bets": [],
              "details": {"pots": [{"amount": 600, "winners": ["seat3"]},
                                   {"amount": 50, "winners": ["seat2"]}],
                          "stacks_after": {"seat1": 9950, "seat2": 9750, "seat3": 10300},
                          "button": "seat3"}}  # fmt: skip
    view.apply("events", "e", env("round_result", 9, result))
    holdem = view.to_wire()["round"]["holdem"]
    assert [p["amount_text"] for p in holdem["pots"]] == ["600", "50"]
    assert {s["seat"]: s["stack"] for s in holdem["seats"]}["seat3"] == 10300
    assert view.to_wire()["round"]["details"]["button"] == "seat3"
    view.apply("events", "e", env("round_opened", 10, opened("texas-holdem", 2), f"{T}-000002"))
    wired = view.to_wire()["round"]
    assert [h["hand"] for h in wired["layout"]] == ["seat1", "seat2", "seat3", "board"]
    assert wired["holdem"] is None and wired["details"] is None


def test_street_change_clears_the_last_actions_but_a_fold_stays():
    seats = HoldemSeats()
    seats.window(INFO)
    seats.decided({"action": "call", "seat": "seat1", "amount": 50})
    seats.decided({"action": "fold", "seat": "seat3", "amount": 0})
    seats.window({**INFO, "street": "flop", "folded": ["seat3"]})
    wired = {s["seat"]: s for s in seats.to_wire()["seats"]}
    assert wired["seat1"]["action"] is None
    assert wired["seat3"]["action"] == "fold" and wired["seat3"]["folded"]


def test_actions_in_words():
    assert action_words("check", 0, 0) == "check"
    assert action_words("bet", 40, 40) == "bet 40"
    assert action_words("raise", 100, 120) == "raise to 120"
    assert action_words("all_in", 9700, 9700) == "all-in 9,700"
    assert action_words("fold", 0, 0) == "fold"


def test_mahjong_positions_come_from_the_bank_offers():
    view = TableView("mj-01", clock=lambda: NOW)
    mj = "mahjong-pai-gow"

    def e(kind: str, seq: int, data: dict[str, Any]) -> bytes:
        return env(kind, seq, data).replace(b'"th-01', b'"mj-01')

    view.apply("status", "s", status(mj).replace(b'"th-01"', b'"mj-01"'))
    view.apply("events", "e", e("round_opened", 2, opened(mj)))
    assert [h["hand"] for h in view.to_wire()["round"]["layout"]] == ["P1", "P2", "P3", "P4", "B"]
    offer = {"window": "bank-offer-P1", "kind": "bank", "seat": "P1", "seconds": 5,
             "options": ["accept", "decline"],
             "info": {"position": "P1", "order": ["P1", "P2", "P3", "P4", "P5", "P6"]},
             "closes_at": "2026-11-19T08:00:30.000000Z"}  # fmt: skip
    view.apply("events", "e", e("decision_open", 3, offer))
    wired = view.to_wire()["round"]
    assert [h["hand"] for h in wired["layout"]] == ["P1", "P2", "P3", "P4", "P5", "P6", "B"]
    assert wired["game_name"] == "Mahjong Pai Gow"


def test_before_any_round_the_tables_game_gives_the_layout():
    view = TableView(T, clock=lambda: NOW)
    assert view.to_wire()["round"]["layout"] == []
    view.apply("status", "s", status("teen-patti-20-20"))
    wired = view.to_wire()
    assert wired["round"]["id"] is None
    assert [h["hand"] for h in wired["round"]["layout"]] == ["A", "B"]
    assert wired["status"]["game_name"] == "Teen Patti 20-20"


def test_every_game_reserves_its_hands():
    assert [h["hand"] for h in layout("three-card-mulligan", ())] == ["P", "D", "PM", "DM"]
    assert [h["hand"] for h in layout("teen-patti-20-20", ())] == ["A", "B"]
    assert [h["hand"] for h in layout("break-poker", ())] == ["player", "dealer"]
    assert layout("no-such-game", ()) == [] and layout(None, ()) == []


JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)  # fmt: skip
KEYS = st.sampled_from(["street", "stacks", "street_bets", "folded", "all_in", "pot", "button",
                        "seat", "action", "amount", "pots", "stacks_after"])  # fmt: skip


@given(st.dictionaries(KEYS, JUNK, max_size=8), st.dictionaries(KEYS, JUNK, max_size=8))
def test_hostile_window_info_decisions_and_details_never_raise(info, other):
    seats = HoldemSeats()
    seats.window(info)
    seats.decided(other)
    seats.settled(info)
    seats.decided(info)
    json.dumps(seats.to_wire())
