"""``tablectl analyze GAME --json``: the documented document, for every game, from the CLI.

Exact where it is quick (Teen Patti 20-20, Mahjong Pai Gow); Monte Carlo with a small sample
elsewhere (the games' own tests check the exact figures against brute force).
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from typing import Any

import pytest

BET_IDS = {
    "teen-patti-20-20": {
        "player_a",
        "player_b",
        "tie",
        "pair_plus_a",
        "pair_plus_b",
        "six_card_bonus",
    },
    "three-card-mulligan": {"ante", "pair_plus"},
    "break-poker": {"main", "break_bonus", "dealer_break_bonus"},
    "texas-holdem": {"categories_5", "categories_7"},
    "mahjong-pai-gow": {"banker", "player"},
}


def analyze(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "controller.cli", "analyze", *args, "--json", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.parametrize("game", ["teen-patti-20-20", "mahjong-pai-gow"])
def test_exact_documents(game: str) -> None:
    document = analyze(game, "--exact")
    assert document["game"] == game
    assert document["method"] == "exact"
    assert set(document["bets"]) == BET_IDS[game]
    for bet in document["bets"].values():
        outcomes = bet["outcomes"]
        assert sum(Fraction(o["probability_exact"]) for o in outcomes) == 1
        assert all(isinstance(o["count"], int) and o["count"] > 0 for o in outcomes)
        # The return to player is what the outcomes say it is, exactly.
        rtp = sum(Fraction(o["probability_exact"]) * (1 + Fraction(o["pays"])) for o in outcomes)
        assert Fraction(bet["rtp_exact"]) == rtp
        assert abs(bet["rtp"] - float(rtp)) < 1e-12


@pytest.mark.parametrize("game", ["three-card-mulligan", "break-poker", "texas-holdem"])
def test_monte_carlo_documents(game: str) -> None:
    document = analyze(game, "--samples", "4000", "--seed", "3")
    assert document["game"] == game
    assert set(document["bets"]) == BET_IDS[game]
    for bet in document["bets"].values():
        assert 0 < bet["rtp"] < 2
        total = sum(o["probability"] for o in bet["outcomes"])
        assert abs(total - 1) < 1e-9
        for outcome in bet["outcomes"]:
            Fraction(outcome["pays"])  # an exact decimal string
    # Same seed, same figures: the analysis is reproducible.
    assert analyze(game, "--samples", "4000", "--seed", "3")["bets"] == document["bets"]


def test_unknown_game_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "controller.cli", "analyze", "baccarat"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "baccarat" in done.stderr


def test_break_poker_option_selects_the_dealer_qualifier() -> None:
    for value in ("k32", "needs_king"):
        document = analyze(
            "break-poker", "--samples", "2000", "--option", f"dealer_qualifier={value}"
        )
        assert any(f"dealer_qualifier={value}" in note for note in document["notes"])
    for bad, says in (
        ("dealer_qualifier=aces", "game_options.dealer_qualifier"),
        ("setting_seconds=3", "does not read option 'setting_seconds'"),
        ("dealer_qualifier", "KEY=VALUE"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "controller.cli", "analyze", "break-poker", "--option", bad],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode != 0
        assert says in done.stderr, done.stderr
