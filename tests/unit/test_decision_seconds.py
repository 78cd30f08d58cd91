"""``run --decision-seconds`` and the simulated players' think time (issue 25, item 2)."""

from __future__ import annotations

import pytest

from controller.cli.run import decision_overrides
from controller.errors import ConfigError
from controller.games.registry import GAME_IDS, game_spec
from controller.settings import load_settings
from simulators.betting import BettingPolicy


@pytest.mark.parametrize(
    ("game", "option"),
    [
        ("texas-holdem", "action_seconds"),
        ("break-poker", "setting_seconds"),
        ("three-card-mulligan", "decision_seconds"),
        ("mahjong-pai-gow", "bank_seconds"),
    ],
)
def test_the_option_of_each_games_decision_windows(game, option):
    assert decision_overrides(game, 4.0) == {"game_options": {option: 4.0}}
    settings = load_settings(
        None,
        table_id="t-1",
        game=game,
        device={"url": "serial:///dev/null"},
        **decision_overrides(game, 4.0),
    )
    options = game_spec(game).options.model_validate(settings.game_options)
    assert getattr(options, option) == 4.0


def test_every_game_with_decisions_declares_its_option():
    for game in GAME_IDS:
        option = game_spec(game).decision_seconds_option
        if option is not None:
            assert option in game_spec(game).options.model_fields


def test_a_game_without_decisions_says_so():
    with pytest.raises(ConfigError, match="teen-patti-20-20 has no decision windows"):
        decision_overrides("teen-patti-20-20", 5.0)


def test_a_window_of_no_time_is_refused():
    with pytest.raises(ConfigError, match="--decision-seconds must be more than 0"):
        decision_overrides("texas-holdem", 0.0)


def test_the_simulated_players_think_a_random_seeded_time():
    policy = BettingPolicy(seed=7)
    windows = [{"round": "t-1-000001", "window": f"action-{n}"} for n in range(40)]
    times = [policy.think_time(1.0, window) for window in windows]
    assert all(0.25 <= t <= 1.0 for t in times)
    assert len({round(t, 6) for t in times}) > 30  # not one fixed delay
    assert times == [BettingPolicy(seed=7).think_time(1.0, w) for w in windows]  # seeded
    assert policy.think_time(0.0, windows[0]) == 0.0
