"""The simulated betting policy: deterministic, always legal, exercises every action."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from controller.games.live.base import JSON, DecisionStep
from controller.games.registry import GAME_IDS, make_live_game
from controller.journal.entries import DecisionOpenData
from simulators.betting import BettingPolicy
from tests.unit.test_live_helpers import drive, shuffled


def step_info(step: DecisionStep, round_id: str) -> dict[str, Any]:
    """What a decision_open event carries (plus the envelope's round id)."""
    data = {
        "window": step.window,
        "kind": step.kind,
        "seat": step.seat,
        "seconds": step.seconds,
        "options": list(step.options),
        "info": json.loads(json.dumps(step.info)),
        "closes_at": "2026-11-22T02:10:59.123456Z",
    }
    DecisionOpenData.model_validate(data)  # what the orchestrator will publish
    return {
        "round": round_id,
        "window": step.window,
        "kind": step.kind,
        "seat": step.seat,
        "seconds": step.seconds,
        "options": list(step.options),
        "info": dict(step.info),
    }


def play(game_id: str, rounds: int, seed: int) -> tuple[Counter[str], list[JSON]]:
    game = make_live_game(
        game_id, {"equity_samples": 1000} if game_id == "texas-holdem" else {}, {}
    )
    policy = BettingPolicy(seed)
    seen: Counter[str] = Counter()
    results = []
    state: JSON = {}
    for number in range(rounds):
        rnd = game.new_round(state)
        round_id = f"t-{number:06d}"

        def decide(step: DecisionStep, round_id: str = round_id) -> JSON | None:
            decision = policy.decide(step_info(step, round_id))
            name = None if decision is None else decision.get("action", decision.get("choice"))
            seen[f"{step.kind}:{name}"] += 1
            return decision

        drive(rnd, shuffled(game.deck, seed * 1000 + number), decide)
        results.append(rnd.result())
        state = rnd.table_state_after()
    return seen, results


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_policy_decisions_are_always_legal_and_reproducible(game_id: str) -> None:
    first_seen, first = play(game_id, 30, seed=5)
    again_seen, again = play(game_id, 30, seed=5)
    assert first == again
    assert first_seen == again_seen


def test_policy_exercises_every_holdem_action() -> None:
    seen, _ = play("texas-holdem", 60, seed=1)
    for action in ("fold", "check", "call", "bet", "raise", "all_in"):
        assert seen[f"action:{action}"] > 0, (action, seen)
    assert seen["action:None"] > 0  # some windows left to the default


def test_policy_mulligans_declines_and_closes() -> None:
    seen, _ = play("three-card-mulligan", 40, seed=2)
    assert seen["mulligan:mulligan"] > 0
    assert seen["mulligan:stay"] > 0
    seen, _results = play("mahjong-pai-gow", 40, seed=2)
    assert seen["bank:decline"] > 0
    assert seen["bank:accept"] > 0
    seen, _ = play("break-poker", 10, seed=2)
    assert seen["setting:close"] > 0


def test_policy_is_a_function_of_seed_round_and_window() -> None:
    policy = BettingPolicy(9)
    info = {
        "round": "r1",
        "window": "action-3",
        "kind": "action",
        "options": ["check", "bet"],
        "info": {"bets": [{"share": "50%"}]},
    }
    assert all(policy.decide(info) == policy.decide(dict(info)) for _ in range(3))
    answers = {str(BettingPolicy(seed).decide(info)) for seed in range(40)}
    assert len(answers) > 1
    assert BettingPolicy(1).decide({"kind": "unknown", "options": ["x"]}) in (None,)
    assert BettingPolicy(1, abstain=0).decide(
        {
            "kind": "mulligan",
            "options": ["stay", "mulligan"],
            "info": {"player": ["Kh", "Td", "2c"]},
            "window": "w",
        }
    ) in ({"choice": "stay"}, {"choice": "mulligan"})
    assert BettingPolicy(1).decide({"kind": "action", "options": []}) is None


def test_the_mulligan_answer_follows_the_published_house_way() -> None:
    """The simulated betting system reads the window's ``house_way``, not the game's rules."""
    policy = BettingPolicy(3, abstain=0, contrarian_mulligan=0)

    def window(info: dict[str, object]) -> dict[str, object]:
        return {"kind": "mulligan", "options": ["stay", "mulligan"], "info": info, "window": "w"}

    assert policy.decide(window({"house_way": "mulligan"})) == {"choice": "mulligan"}
    assert policy.decide(window({"house_way": "stay"})) == {"choice": "stay"}
    # Nothing published: stay (the safe default), whatever the cards.
    assert policy.decide(window({"player": ["2c", "5d", "9h"]})) == {"choice": "stay"}


def test_a_seed_decides_alike_whatever_journal_the_round_ids_carry():
    """Round ids carry the journal's random short id (issue 22): the simulated betting
    system's decisions follow the seed and the round number, as before, not that id."""
    policy = BettingPolicy(seed=7, abstain=0.0)
    step = {"window": "w-1", "kind": "action", "seat": "S1",
            "options": ["fold", "check", "call", "raise"],
            "info": {"to_call": 10, "min_raise": 20, "stack": 1000}}  # fmt: skip
    rounds = ("sim-1-000003", "sim-1-3f9a1c2e-000003", "sim-1-653e0a0a-000003")
    decisions = [
        [policy.decide({**step, "round": r, "window": f"w-{n}"}) for n in range(20)] for r in rounds
    ]
    assert decisions[0] == decisions[1] == decisions[2]
    assert decisions[0] != [
        policy.decide({**step, "round": "sim-1-3f9a1c2e-000004", "window": f"w-{n}"})
        for n in range(20)
    ]
