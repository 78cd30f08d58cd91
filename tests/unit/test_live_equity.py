"""Hold'em equity: exact enumeration against brute force, Monte Carlo against exact."""

from __future__ import annotations

import itertools
import math

import pytest

from controller.cards import JOKER, Card, parse_cards
from controller.errors import RulesError
from controller.games.poker.evaluator import hand_strength
from controller.games.texas_holdem.equity import EXACT_LIMIT, win_probabilities


def brute_force(
    hole: dict[str, list[Card]], board: list[Card], dead: list[Card]
) -> dict[str, tuple[float, float]]:
    """Every run-out, one hand at a time with the single-hand evaluator."""
    used = {c for cards in hole.values() for c in cards} | set(board) | set(dead)
    rest = [Card(code) for code in range(52) if Card(code) not in used]
    wins = dict.fromkeys(hole, 0)
    ties = dict.fromkeys(hole, 0)
    total = 0
    for runout in itertools.combinations(rest, 5 - len(board)):
        full = [*board, *runout]
        strengths = {seat: hand_strength([*cards, *full]) for seat, cards in hole.items()}
        best = max(strengths.values())
        top = [seat for seat, value in strengths.items() if value == best]
        for seat in top:
            if len(top) == 1:
                wins[seat] += 1
            else:
                ties[seat] += 1
        total += 1
    return {seat: (wins[seat] / total, ties[seat] / total) for seat in hole}


@pytest.mark.parametrize(
    ("hole", "board", "dead"),
    [
        ({"a": "As Kd", "b": "Qh Qc", "c": "7s 6s"}, "Qs 8s 2d", "4c 4d"),
        ({"a": "Ah Kh", "b": "Ad Kd"}, "Qc Jc 2s 3h", ""),  # chops and flush draws
        ({"a": "9c 9d", "b": "8h 7h", "c": "Ac 2c", "d": "Ks Ts"}, "6h 5h Jc", ""),
        ({"a": "2c 3d", "b": "Ah Ac"}, "Kd Qd Js Ts 9c", ""),
    ],
)
def test_exact_matches_brute_force(hole: dict[str, str], board: str, dead: str) -> None:
    cards = {seat: parse_cards(text) for seat, text in hole.items()}
    report = win_probabilities(cards, parse_cards(board), parse_cards(dead))
    assert report.method == "exact"
    assert report.standard_error == 0
    expected = brute_force(cards, parse_cards(board), parse_cards(dead))
    for seat, (win, tie) in expected.items():
        assert report.seats[seat].win == pytest.approx(win, abs=1e-12)
        assert report.seats[seat].tie == pytest.approx(tie, abs=1e-12)
    assert report.runouts == math.comb(
        52 - 2 * len(hole) - len(parse_cards(board + " " + dead)), 5 - len(parse_cards(board))
    )


def test_monte_carlo_is_within_tolerance_of_exact() -> None:
    cards = {"a": parse_cards("As Kd"), "b": parse_cards("Qh Qc"), "c": parse_cards("7s 6s")}
    board = parse_cards("Qs 8s 2d")
    exact = win_probabilities(cards, board)
    sampled = win_probabilities(cards, board, samples=20_000, seed=7)
    assert sampled.method == "monte_carlo"
    assert sampled.runouts == 20_000
    assert 0 < sampled.standard_error < 0.004
    for seat, equity in exact.seats.items():
        # Four standard errors: a fixed seed, so this either always passes or never does.
        assert abs(sampled.seats[seat].win - equity.win) < 4 * sampled.standard_error
        assert abs(sampled.seats[seat].tie - equity.tie) < 0.01


def test_preflop_is_monte_carlo_seeded_from_the_cards() -> None:
    hole = {"s1": parse_cards("As Ah"), "s2": parse_cards("Kd Kc")}
    first = win_probabilities(hole, [])
    again = win_probabilities(dict(hole), [])
    assert first.method == "monte_carlo"
    assert math.comb(48, 5) > EXACT_LIMIT
    assert first == again
    # The textbook figure for AA vs KK is about 81-82% for the aces.
    assert 0.80 < first.seats["s1"].win < 0.84
    assert first.seats["s1"].tie == first.seats["s2"].tie
    other = win_probabilities(hole, [], seed=1)
    assert other != first


def test_wins_and_ties_add_up() -> None:
    hole = {str(i): parse_cards(t) for i, t in enumerate(["Ah Kh", "Ad Kd", "2c 2s", "Js Tc"])}
    report = win_probabilities(hole, parse_cards("Kc 7h 2d"))
    total_wins = sum(e.win for e in report.seats.values())
    tied_runouts = max(e.tie for e in report.seats.values())
    assert total_wins <= 1
    assert total_wins + tied_runouts >= 1 - 1e-12


@pytest.mark.parametrize(
    ("hole", "board", "dead", "match"),
    [
        ({}, "", "", "at least one seat"),
        ({"a": "As"}, "", "", "two"),
        ({"a": "As Ad"}, "2c 3c 4c 5c 6c 7c", "", "at most five"),
        ({"a": "As Ad", "b": "As Kd"}, "", "", "twice"),
        ({"a": "As Ad"}, "Ad 2c 3c", "", "twice"),
        ({"a": "As Ad"}, "", "As", "twice"),
    ],
)
def test_bad_input_is_refused(hole: dict[str, str], board: str, dead: str, match: str) -> None:
    cards = {seat: parse_cards(text) for seat, text in hole.items()}
    with pytest.raises(RulesError, match=match):
        win_probabilities(cards, parse_cards(board), parse_cards(dead))


def test_joker_and_bad_samples_are_refused() -> None:
    with pytest.raises(RulesError, match="standard card"):
        win_probabilities({"a": [JOKER, Card.parse("As")]}, [])
    with pytest.raises(RulesError, match="at least one sample"):
        win_probabilities({"a": parse_cards("As Ad")}, [], samples=0)
