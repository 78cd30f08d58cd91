"""Hardware in the loop, live play of every game (issue 6), through the production ACL.

Per game: a real Mosquitto with the committed ACL file and a password per role; the controller
(``run_table`` in-process, with the ``table-tp-01`` credential) on the scanner simulator on a
real pty with a scripted deck; the test acts as the betting system over MQTT with the
``betting`` credential (subscribed to ``tables/tp-01/#``: the ACL decides what it gets) and
answers each ``decision_open`` on ``cmd/decision``; a ``stream`` client records the secure feed.

The expected results are computed here from the scripted cards and decisions with the pure
rules modules (``controller/games/*.py``: ``round_result``, ``house_way``, Hold'em's
``HoldemState``, Mahjong Pai Gow's ``resolve_positions``/``settle_position``), never by running
the live adapters (``controller/games/<game>/live.py``) again.

Each test also sends illegal and late commands (each must be refused with a reason and change
nothing) and checks that no hidden card reaches the betting credential before its reveal
(and that stream production, reading ``secure/``, does see it: the positive control).

Decisions where the brief is silent:

* A "late" decision must reach the controller while the round is still in progress (after
  the round a command is refused with "no round is in progress", and one arriving while the
  table stops is journalled but its answer only goes out at the next start). Where cards
  follow the window, the simulated dealer is made slow with one card (a scripted ``delay``
  fault on its frame), so the round is still dealing when the late decision comes. Break
  Poker deals nothing after its window, so its late case is the deadline default only.
* Teen Patti 20-20 hides nothing: its secrecy check is that every card is public as dealt
  and that nothing about cards goes to ``secure/``; it also carries the check that the
  betting credential cannot publish a void or any pit command (v5 PUBACK 0x87).
* Hidden values are looked for as whole JSON strings (keys too) made only of card notations
  (one card, or a Break Poker setting id), in every message with a ``seq`` below the reveal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.cards import Tile, parse_cards
from controller.games.break_poker import rules as bp
from controller.games.mahjong_pai_gow import rules as mj
from controller.games.poker.hands import category_of, describe
from controller.games.teen_patti.rules import TEEN_PATTI_20_20
from controller.games.texas_holdem.rules import (
    Action,
    ActionKind,
    Deal,
    HoldemConfig,
    HoldemState,
    start_hand,
)
from controller.games.three_card_mulligan import rules as tcm
from controller.mqtt.ack import PublishRefused
from simulators.scanner import CardFault, FaultPlan
from simulators.table import Simulation
from tests.integration._live_helpers import (
    Live,
    Peer,
    Received,
    acl_broker,
    cards_named,
    leaks,
    live_table,
)
from tests.integration._secure_broker import SecureBroker
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto
from tests.support.settlement import group

pytestmark = [
    pytest.mark.hil,
    pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING),
]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[SecureBroker]:
    with acl_broker(tmp_path / "broker") as running:
        yield running


def _wire(bets: Any) -> dict[str, Any]:
    return {bet: result.to_wire() for bet, result in bets.items()}


class Bettor:
    """The betting system's side of one round: numbered command ids, answers checked."""

    def __init__(self, peer: Peer, round_id: str) -> None:
        self.peer = peer
        self.round_id = round_id
        self.count = 0

    def body(self, window: str, decision: Any, **extra: Any) -> dict[str, Any]:
        self.count += 1
        return {
            "command_id": f"bet-{self.count}",
            "round": self.round_id,
            "window": window,
            "decision": decision,
            **extra,
        }

    async def refused(self, body: dict[str, Any] | bytes, reason: str) -> dict[str, Any]:
        """Send; the answer must be a refusal whose reason contains ``reason``."""
        answer = await self.peer.command("decision", body)
        assert answer["accepted"] is False, answer
        assert reason in answer["reason"], answer
        return answer

    async def accepted(self, window: str, decision: Any) -> dict[str, Any]:
        """Send a decision that must be accepted; returns the answer."""
        body = self.body(window, decision)
        answer = await self.peer.command("decision", body)
        assert answer["accepted"] is True, answer
        assert answer["command_id"] == body["command_id"]
        return answer


def _applied(peer: Peer) -> list[dict[str, Any]]:
    return [m.data for m in peer.events("decision_applied")]


def assert_secrecy(live: Live, hidden: dict[str, list[str]]) -> None:
    """No hidden card on the betting credential's feed before its hand's reveal.

    ``hidden``: hand -> the hidden cards dealt to it. A hand never revealed (a folded Hold'em
    seat) must never appear at all. The stream credential (secure/) gets every hidden card
    before the reveal: the positive control that the scan below could see them.
    """
    betting, stream = live["betting"], live["stream"]
    assert betting.messages and not [m.topic for m in betting.messages if "/secure/" in m.topic]
    reveals = {m.data["hand"]: m for m in betting.events("cards_revealed")}
    for m in betting.events("card_dealt"):
        if m.data["face"] == "hidden":
            assert m.data["card"] is None, m.body
    secure = {
        m.data["card"]: m.seq
        for m in stream.on("secure/events")
        if m.kind == "card_dealt" and m.data["face"] == "hidden"
    }
    for hand, cards in hidden.items():
        reveal = reveals.get(hand)
        before = reveal.seq if reveal is not None else None
        assert leaks(betting.messages, set(cards), before) == [], hand
        if reveal is not None:
            assert reveal.data["cards"] == cards
        # Positive control: the same scan over stream production's feed finds them early.
        assert cards == [] or leaks(stream.messages, set(cards), before) != [], hand
        for card in cards:
            assert card in secure, f"stream production never got hidden {card}"
            if before is not None:
                assert (secure[card] or 0) < before


async def _open_window(peer: Peer, after: int, window: str | None = None) -> tuple[int, Received]:
    return await peer.wait_event(
        "decision_open",
        after=after,
        where=(lambda d: d["window"] == window) if window is not None else None,
    )


# ---------------------------------------------------------------------- Three Card Mulligan


async def test_three_card_mulligan_live(broker: SecureBroker, tmp_path: Path) -> None:
    player, dealer = ["2c", "7d", "9h"], ["3s", "5h", "8d"]  # 9-high: house way mulligans
    player_m, dealer_m = ["Ah", "Ad", "Ac"], ["Kc", "Qd", "2s"]  # 8-high dealer mulligans
    # The dealer is slow with the first mulligan card (its frame leaves 1.5 s late), so the
    # round is still dealing when the repeated and the late decisions arrive.
    sim = Simulation(
        cards=tuple(player + dealer + player_m + dealer_m),
        deal_delay=0.0,
        faults=FaultPlan(script=(CardFault(at=6, kind="delay", seconds=1.5),)),
    )
    async with live_table(
        broker,
        "three-card-mulligan",
        sim,
        tmp_path / "j.sqlite",
        game_options={"decision_seconds": 10},
    ) as live:
        betting = live["betting"]
        at, opened = await _open_window(betting, 0, "mulligan")
        assert opened.data["options"] == ["stay", "mulligan"]
        assert opened.data["seat"] is None
        stays = tcm.house_way_stays(parse_cards(player))
        assert opened.data["info"] == {
            "player": player,
            "house_way": "stay" if stays else "mulligan",
        }
        bettor = Bettor(betting, opened.body["round"])

        await bettor.refused(bettor.body("setting", {"choice": "mulligan"}), "is not open")
        await bettor.refused(bettor.body("mulligan", {"choice": "fold"}), "not offered")
        await bettor.refused(
            bettor.body("mulligan", {"choice": "mulligan", "seat": "x"}), "unknown field"
        )
        await bettor.refused(b'{"command_id": "bad-json", "window": ', "not JSON")
        await bettor.refused(
            {"command_id": "no-window", "round": bettor.round_id, "decision": {}},
            "field 'window'",
        )
        await bettor.refused(
            bettor.body("mulligan", {"choice": "mulligan"}) | {"round": "tp-01-999999"},
            "not the current round",
        )
        await bettor.refused(bettor.body("mulligan", "mulligan"), "field 'decision'")
        assert _applied(betting) == [], "a refused command changed the round"

        body = bettor.body("mulligan", {"choice": "mulligan"})
        answer = await betting.command("decision", body)
        assert answer["accepted"] is True and answer["data"] == {"decision": {"choice": "mulligan"}}
        again = await betting.command("decision", body)  # same id: the first answer again
        assert again["accepted"] is True and again["duplicate"] is True
        await bettor.refused(bettor.body("mulligan", {"choice": "stay"}), "no decision window")
        dealt = [m.data["slot"] for m in betting.events("card_dealt")]
        assert "PM1" not in dealt, "the late decision came after the round went on"

        _, result = await betting.wait_event("round_result", after=at)
        await live.finished()

    assert _applied(betting) == [
        {
            "window": "mulligan",
            "decision": {"choice": "mulligan"},
            "default": False,
            "command_id": body["command_id"],
        }
    ]
    expected = tcm.round_result(
        parse_cards(player), parse_cards(dealer), parse_cards(player_m), parse_cards(dealer_m)
    )
    data = result.data
    assert data["cards"] == {"P": player, "D": dealer, "PM": player_m, "DM": dealer_m}
    assert data["winner"] == expected.winner(tcm.Path.STAYED)
    assert {path: group(data["bets"], path=path) for path in ("stayed", "mulliganed")} == {
        "stayed": _wire(expected.bets(tcm.Path.STAYED)),
        "mulliganed": _wire(expected.bets(tcm.Path.MULLIGANED)),
    }
    assert data["hands"] == {
        label: {"category": s.category, "description": s.description}
        for label, s in expected.hands.items()
    }
    assert data["details"]["dealer_final"] == expected.dealer_final == "DM"
    assert data["details"]["mulligan_chosen"] is True
    assert data["details"]["paths"]["mulliganed"] == {
        "winner": expected.winner(tcm.Path.MULLIGANED)
    }
    assert [m.body for m in betting.on("results")] == [result.body]
    assert_secrecy(live, {"D": dealer})


# ---------------------------------------------------------------------- Break Poker


async def test_break_poker_live(broker: SecureBroker, tmp_path: Path) -> None:
    player = ["As", "Ad", "Kh", "Kc", "7s", "5d", "2h"]
    dealer = ["JK", "Qs", "Qh", "9c", "8c", "4d", "3s"]
    sim = Simulation(cards=tuple(player + dealer), deal_delay=0.0)
    async with live_table(
        broker,
        "break-poker",
        sim,
        tmp_path / "j.sqlite",
        game_options={"setting_seconds": 3.0},
    ) as live:
        betting = live["betting"]
        at, opened = await _open_window(betting, 0, "setting")
        house = bp.house_way(parse_cards(player))
        assert opened.data["options"] == ["close"]
        assert opened.data["info"] == {
            "player": player,
            "house_way": house.to_wire(),
            "settings": len(bp.legal_settings(parse_cards(player))),
        }
        bettor = Bettor(betting, opened.body["round"])
        await bettor.refused(
            bettor.body("setting", {"choice": "set", "setting": house.id}), "only takes"
        )
        await bettor.refused(bettor.body("mulligan", {"choice": "close"}), "is not open")
        # Nobody closes the window: the deadline applies {}. (The result follows at once:
        # no card comes after this window, so a late close is tested in the other games.)
        _, applied = await betting.wait_event("decision_applied", after=at, seconds=10)
        assert applied.data == {
            "window": "setting",
            "decision": {},
            "default": True,
            "command_id": None,
        }
        _, result = await betting.wait_event("round_result", after=at)
        await live.finished()

    assert len(_applied(betting)) == 1
    expected = bp.round_result(parse_cards(player), parse_cards(dealer))
    data = result.data
    assert data["cards"] == {"player": player, "dealer": dealer}
    main = [line for line in data["bets"] if line["bet"] == "main"]
    defaults = [line for line in main if line.get("default")]
    assert [line["setting"] for line in defaults] == [expected.house_way.id] == [house.id]
    assert group(defaults)["main"] == expected.default_main.to_wire()
    assert {line["setting"]: group([line])["main"] for line in main} == _wire(expected.main)
    assert group(data["bets"], setting=None) == {
        "break_bonus": expected.break_bonus.to_wire(),
        "dealer_break_bonus": expected.dealer_break_bonus.to_wire(),
    }
    outcome = expected.default_main.outcome.value
    assert data["winner"] == {"win": "player", "lose": "dealer"}.get(outcome, "tie")
    details = data["details"]
    assert details["dealer_setting"] == expected.dealer_setting.to_wire()
    assert details["dealer_qualified"] == expected.dealer_qualified
    assert details["house_way"] == expected.house_way.to_wire()
    assert "main_by_setting" not in details
    assert_secrecy(live, {"dealer": dealer})


# ---------------------------------------------------------------------- Texas Hold'em

HOLDEM_NAMES = {ActionKind.ALL_IN: "all_in"}


def _options(state: HoldemState) -> list[str]:
    names = [HOLDEM_NAMES.get(a.kind, a.kind.value) for a in state.legal_actions()]
    return list(dict.fromkeys(names))


def _check_action_window(
    opened: Any, state: HoldemState, seat: int, holes: dict[int, list[str]]
) -> None:
    """The window opened for ``seat``: its legal options and the public state, no hole card."""
    assert state.to_act == seat
    assert opened.data["seat"] == f"seat{seat}"
    assert opened.data["options"] == _options(state)
    info = opened.data["info"]
    assert info["pot"] == state.pot and info["current_bet"] == state.level
    assert info["stacks"] == {f"seat{s.seat}": s.stack for s in state.seats}
    assert not cards_named(info) & {c for h in holes.values() for c in h}


async def _refused_actions(bettor: Bettor, number: int) -> None:
    """Illegal actions tried before the legal one in windows 1 (pre-flop) and 4 (flop)."""
    if number == 1:
        await bettor.refused(bettor.body("action-1", {"action": "call", "seat": "seat2"}), "seat2")
        await bettor.refused(bettor.body("action-1", {"action": "raise", "multiple": 1}), "minimum")
        await bettor.refused(
            bettor.body("action-1", {"action": "bet", "share": "50%"}), "not possible"
        )
        await bettor.refused(
            bettor.body("action-1", {"action": "call", "amount": 5}), "does not match"
        )
        await bettor.refused(bettor.body("action-2", {"action": "call"}), "is not open")
        await bettor.refused(bettor.body("action-1", {"action": "shove"}), "not one of")
    if number == 4:  # first to act on the flop, checking is free
        await bettor.refused(bettor.body("action-4", {"action": "fold"}), "not possible")
        await bettor.refused(bettor.body("action-4", {"action": "bet", "share": "20%"}), "minimum")


def _check_holdem_result(
    data: dict[str, Any],
    state: HoldemState,
    *,
    holes: dict[int, list[str]],
    board: list[str],
    plan: list[tuple[int, dict[str, Any], Action]],
    normalised: list[dict[str, Any]],
) -> None:
    """The result: the showdown's cards, winner, hands, pots, payouts and actions, as the
    rules give them."""
    settlement = state.settlement
    assert settlement is not None
    shown = [s for s in (3, 1) if s in settlement.strengths]
    assert shown == [3, 1]
    assert data["cards"] == {"seat3": holes[3], "seat1": holes[1], "board": board}
    assert data["winner"] == "+".join(f"seat{s}" for s in settlement.pots[0].winners) == "seat1"
    assert data["hands"] == {
        f"seat{s}": {
            "category": category_of(settlement.strengths[s]).id,
            "description": describe(settlement.strengths[s]),
        }
        for s in shown
    }
    details = data["details"]
    assert details["ended"] == "showdown"
    assert details["pots"] == [
        {
            "amount": pot.amount,
            "level": pot.level,
            "eligible": [f"seat{s}" for s in pot.eligible],
            "winners": [f"seat{s}" for s in pot.winners],
            "shares": {f"seat{s}": c for s, c in pot.shares.items()},
        }
        for pot in settlement.pots
    ]
    assert details["payouts"] == {f"seat{s}": c for s, c in settlement.payouts.items()}
    assert details["stacks_after"] == {f"seat{s}": c for s, c in settlement.stacks.items()}
    # By hand: seat 1 put in 300 + 325 and wins the pot of 300 + 50 + 300 + 325 + 325.
    assert details["stacks_after"] == {"seat1": 10_675, "seat2": 9_950, "seat3": 9_375}
    assert [a["action"] for a in details["actions"]] == [d["action"] for _, d, _ in plan]
    assert [{k: v for k, v in a.items() if k != "window"} for a in details["actions"]] == normalised
    assert data["bets"] == []


async def test_texas_holdem_live(broker: SecureBroker, tmp_path: Path) -> None:
    # 3 seats, button seat 1 (the lowest at a new table): SB seat 2, BB seat 3. Hole cards
    # one at a time from the small blind, twice around; then flop, turn, river.
    holes = {1: ["Ah", "Kh"], 2: ["7c", "2d"], 3: ["Qs", "Qd"]}
    board = ["Kd", "9h", "4c", "2s", "Jh"]
    script = [holes[s][i] for i in (0, 1) for s in (2, 3, 1)] + board
    # (seat, wire decision, rules action)
    plan: list[tuple[int, dict[str, Any], Action]] = [
        (1, {"action": "raise", "multiple": 3}, Action(1, ActionKind.RAISE, 3)),
        (2, {"action": "fold"}, Action(2, ActionKind.FOLD)),
        (3, {"action": "call"}, Action(3, ActionKind.CALL)),
        (3, {"action": "check"}, Action(3, ActionKind.CHECK)),
        (1, {"action": "bet", "share": "50%"}, Action(1, ActionKind.BET, 50)),
        (3, {"action": "call"}, Action(3, ActionKind.CALL)),
        (3, {"action": "check"}, Action(3, ActionKind.CHECK)),
        (1, {"action": "check"}, Action(1, ActionKind.CHECK)),
        (3, {"action": "check"}, Action(3, ActionKind.CHECK)),
        (1, {"action": "check"}, Action(1, ActionKind.CHECK)),
    ]
    config = HoldemConfig(seats=3)
    state = start_hand(config, {1: 10_000, 2: 10_000, 3: 10_000}, button=1)
    cards = iter(parse_cards(script))
    sim = Simulation(cards=tuple(script), deal_delay=0.0)
    normalised: list[dict[str, Any]] = []
    async with live_table(
        broker,
        "texas-holdem",
        sim,
        tmp_path / "j.sqlite",
        game_options={"seats": 3, "action_seconds": 15, "equity_samples": 2000},
    ) as live:
        betting = live["betting"]
        at = 0
        round_id = ""
        for number, (seat, decision, action) in enumerate(plan, start=1):
            while state.to_act is None:
                state = state.apply(Deal(next(cards)))
            at, opened = await _open_window(betting, at, f"action-{number}")
            round_id = opened.body["round"]
            _check_action_window(opened, state, seat, holes)
            bettor = Bettor(betting, round_id)
            bettor.count = number * 100  # command ids are unique across the hand
            await _refused_actions(bettor, number)
            assert len(_applied(betting)) == number - 1, "a refused action changed the hand"
            answer = await bettor.accepted(f"action-{number}", decision)
            normalised.append(answer["data"]["decision"])
            state = state.apply(action)
            if number == 1:  # the window is closed: a late action is refused
                await bettor.refused(bettor.body("action-1", {"action": "fold"}), "is not open")
        while not state.is_complete:
            state = state.apply(Deal(next(cards)))
        _, result = await betting.wait_event("round_result", after=at)
        await live.finished()

    _check_holdem_result(
        result.data, state, holes=holes, board=board, plan=plan, normalised=normalised
    )
    # Equity: never on the betting feed, on the secure feed with every live seat.
    public_info = betting.events("table_info")
    assert public_info and all(m.data == {"kind": "equity", "secure": True} for m in public_info)
    secure_equity = [m.data for m in live["stream"].on("secure/events") if m.kind == "table_info"]
    assert [d["data"]["street"] for d in secure_equity] == ["preflop", "flop", "turn", "river"]
    assert set(secure_equity[0]["data"]["seats"]) == {"seat1", "seat2", "seat3"}
    assert set(secure_equity[-1]["data"]["seats"]) == {"seat1", "seat3"}
    # Seat 2 folded: its hole cards are never published outside secure/.
    assert_secrecy(live, {"seat1": holes[1], "seat2": holes[2], "seat3": holes[3]})
    assert "seat2" not in {m.data["hand"] for m in betting.events("cards_revealed")}


# ---------------------------------------------------------------------- Mahjong Pai Gow


async def test_mahjong_pai_gow_live(broker: SecureBroker, tmp_path: Path) -> None:
    # P1 declines the bank, P2 accepts: P1, P3, P4 play against P2's banker box B.
    hands = {"P1": ["9p", "6p"], "P3": ["wd", "9p"], "P4": ["3p", "3p"], "B": ["5p", "4p"]}
    script = [tile for label in ("P1", "P3", "P4", "B") for tile in hands[label]]
    # The first tile's frame leaves 1.5 s late: the round is still dealing when the late
    # decision for the closed offer arrives.
    sim = Simulation(
        cards=tuple(script),
        deal_delay=0.0,
        faults=FaultPlan(script=(CardFault(at=0, kind="delay", seconds=1.5),)),
    )
    async with live_table(
        broker,
        "mahjong-pai-gow",
        sim,
        tmp_path / "j.sqlite",
        game_options={"positions": 4, "bank_seconds": 3},
    ) as live:
        betting = live["betting"]
        at, opened = await _open_window(betting, 0, "bank-offer-P1")
        assert opened.data["seat"] == "P1" and opened.data["options"] == ["accept", "decline"]
        assert opened.data["info"]["order"] == ["P1", "P2", "P3", "P4"]
        bettor = Bettor(betting, opened.body["round"])
        await bettor.refused(bettor.body("bank-offer-P2", {"choice": "accept"}), "is not open")
        await bettor.refused(
            bettor.body("bank-offer-P1", {"choice": "accept", "position": "P3"}), "offered to P1"
        )
        await bettor.refused(bettor.body("bank-offer-P1", {"choice": "maybe"}), "not offered")
        assert _applied(betting) == []
        await bettor.accepted("bank-offer-P1", {"choice": "decline"})
        at, opened = await _open_window(betting, at, "bank-offer-P2")
        assert opened.data["info"]["declined"] == ["P1"]
        # Nobody answers P2's offer: the deadline accepts for it; a late answer is refused.
        at, applied = await betting.wait_event("decision_applied", after=at, seconds=10)
        assert applied.data == {
            "window": "bank-offer-P2",
            "decision": {"choice": "accept", "position": "P2"},
            "default": True,
            "command_id": None,
        }
        await bettor.refused(bettor.body("bank-offer-P2", {"choice": "decline"}), "no decision")
        assert betting.events("card_dealt") == [], "the late answer came after the deal began"
        _, result = await betting.wait_event("round_result", after=at)
        await live.finished()

    assert [d["decision"] for d in _applied(betting)] == [  # nothing changed by the refusals
        {"choice": "decline", "position": "P1"},
        {"choice": "accept", "position": "P2"},
    ]
    tiles = {label: [Tile.parse(t) for t in hand] for label, hand in hands.items()}
    judged = mj.resolve_positions(tiles, ["P1", "P3", "P4"])
    data = result.data
    assert data["cards"] == hands
    beaten = [p for p in ("P1", "P3", "P4") if judged[p].winner is mj.Winner.PLAYER]
    assert data["winner"] == ("+".join(beaten) or "B") == "P3+P4"
    expected_bets: dict[str, Any] = {
        p: _wire(mj.settle_position(judged[p], mj.DEFAULT_PAYTABLES)) for p in judged
    }
    refund = {"outcome": "refund", "payout": "1", "reason": "position holds the bank"}
    expected_bets["P2"] = {"player": refund, "banker": refund}
    assert {p: group(data["bets"], position=p) for p in expected_bets} == expected_bets
    assert data["details"]["banker"] == "P2"
    assert data["details"]["positions"] == {
        p: {"winner": r.winner.value, "reason": r.reason.value} for p, r in judged.items()
    }
    assert data["hands"] == {
        label: {"category": s.category, "description": s.description}
        for label, s in ((label, mj.evaluate_hand(t, label)) for label, t in tiles.items())
    }
    # Both 3p were dealt back to back (two copies exist): the second is not a bounce.
    dealt = [(m.data["slot"], m.data["card"]) for m in betting.events("card_dealt")]
    assert ("P4a", "3p") in dealt and ("P4b", "3p") in dealt
    assert not betting.events("card_refused")


# ---------------------------------------------------------------------- Teen Patti 20-20


async def test_teen_patti_nothing_hidden_and_betting_cannot_void(
    broker: SecureBroker, tmp_path: Path
) -> None:
    script = ["Kh", "2c", "Kd", "5s", "9c", "8h"]
    sim = Simulation(cards=tuple(script), deal_delay=0.05)
    async with live_table(
        broker,
        "teen-patti-20-20",
        sim,
        tmp_path / "j.sqlite",
        round_settings={"betting_seconds": 1.0},
    ) as live:
        betting = live["betting"]
        at, opened = await betting.wait_event("round_opened")
        round_id = opened.body["round"]
        # The betting credential may not publish any pit command nor a void on its own tree:
        # the broker refuses each publish (v5 PUBACK 0x87), so the controller never sees it.
        for suffix in ("pit/void", "void", "pit/resume"):
            body = {"command_id": f"v-{suffix}", "round": round_id, "reason": "forged"}
            with pytest.raises(PublishRefused) as refused:
                await betting.publish(f"cmd/{suffix}", json.dumps(body).encode())
            assert refused.value.reason_code == 0x87
        _, result = await betting.wait_event("round_result", after=at)
        await live.finished()

    assert not betting.events("round_voided") and not betting.events("command_received")
    hands = {"A": script[0::2], "B": script[1::2]}
    assert result.data["cards"] == hands
    expected = TEEN_PATTI_20_20.settle(
        TEEN_PATTI_20_20.resolve({h: parse_cards(c) for h, c in hands.items()}),
        TEEN_PATTI_20_20.default_paytables,
    )
    assert group(result.data["bets"]) == _wire(expected)
    # Nothing is hidden in Teen Patti: every card is public as it is dealt, and nothing about
    # cards goes to the secure feed.
    dealt = [m.data for m in betting.events("card_dealt")]
    assert [(d["card"], d["face"]) for d in dealt] == [(c, "up") for c in script]
    stream = live["stream"]
    assert not [m for m in stream.on("secure/events") if m.kind in ("card_dealt", "table_info")]
    assert_secrecy(live, {})
