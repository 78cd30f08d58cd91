"""The live registry: every game builds with defaults; bad options name their field."""

from __future__ import annotations

from typing import Any

import pytest

from controller.errors import ConfigError
from controller.games.live.base import DealStep, DecisionStep
from controller.games.live.fixed_plan import FixedPlanGame
from controller.games.mahjong_pai_gow.live import MahjongLiveGame
from controller.games.registry import GAME_IDS, make_live_game, validate_options
from controller.games.teen_patti.rules import TEEN_PATTI_20_20
from controller.games.texas_holdem.live import HoldemLiveGame
from controller.money import parse_odds


@pytest.mark.parametrize("game_id", GAME_IDS)
def test_every_game_builds_with_defaults(game_id: str) -> None:
    game = make_live_game(game_id, {}, {})
    assert game.id == game_id
    step = game.new_round({}).next_step()
    assert isinstance(step, DealStep | DecisionStep)
    assert len(game.deck) in (20, 52, 53)


def test_teen_patti_is_the_fixed_plan_adapter_with_merged_paytables() -> None:
    game = make_live_game("teen-patti-20-20", {}, {})
    assert isinstance(game, FixedPlanGame)
    assert game.game is TEEN_PATTI_20_20
    bet, table = next(iter(TEEN_PATTI_20_20.default_paytables.items()))
    outcome = next(iter(table))
    changed = make_live_game("teen-patti-20-20", {}, {bet: {outcome: "7:1"}})
    assert isinstance(changed, FixedPlanGame)
    assert changed.paytables[bet][outcome] == parse_odds("7:1")


def test_options_reach_the_games() -> None:
    holdem = make_live_game(
        "texas-holdem",
        {"seats": 9, "small_blind": 25, "big_blind": 50, "top_up": False, "burns": True},
        {},
    )
    assert isinstance(holdem, HoldemLiveGame)
    assert holdem.table.config.seats == 9
    assert holdem.table.config.burns
    assert not holdem.table.top_up
    mahjong = make_live_game(
        "mahjong-pai-gow", {"positions": 3, "dealing_order": ["P3", "P2", "P1"]}, {}
    )
    assert isinstance(mahjong, MahjongLiveGame)
    assert mahjong.positions == ("P1", "P2", "P3")
    assert mahjong.dealing_order == ("P3", "P2", "P1")


@pytest.mark.parametrize(
    ("game_id", "options", "field"),
    [
        ("three-card-mulligan", {"decision_seconds": 0}, "game_options.decision_seconds"),
        ("three-card-mulligan", {"decison_seconds": 5}, "game_options.decison_seconds"),
        ("break-poker", {"setting_seconds": "soon"}, "game_options.setting_seconds"),
        ("texas-holdem", {"seats": 1}, "game_options.seats"),
        ("texas-holdem", {"small_blind": 200}, "game_options"),
        ("texas-holdem", {"raise_multiples": [1, 2]}, "game_options"),
        ("texas-holdem", {"starting_stack": 50}, "game_options"),
        ("mahjong-pai-gow", {"commission": "sometimes"}, "game_options.commission"),
        ("mahjong-pai-gow", {"positions": 12}, "game_options.positions"),
        ("mahjong-pai-gow", {"dealing_order": ["P1", "P1", "P2", "P3"]}, "game_options"),
        ("teen-patti-20-20", {"seats": 3}, "game_options.seats"),
    ],
)
def test_bad_options_name_the_field(game_id: str, options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_live_game(game_id, options, {})
    assert caught.value.context["field"] == field
    assert caught.value.context["game"] == game_id
    assert field.rsplit(".", maxsplit=1)[-1] in str(caught.value)


def test_unknown_game_and_bad_paytables() -> None:
    with pytest.raises(ConfigError, match="not a live game") as caught:
        make_live_game("baccarat", {}, {})
    assert caught.value.context["field"] == "game"
    with pytest.raises(ConfigError) as caught:
        make_live_game("three-card-mulligan", {}, {"ante": {"royal": "9:1"}})
    assert caught.value.context["field"] == "paytables.ante.royal"
    with pytest.raises(ConfigError) as caught:
        make_live_game("break-poker", {}, {"side": {"win": "1:1"}})
    assert caught.value.context["field"] == "paytables.side"
    with pytest.raises(ConfigError, match="no house bets"):
        make_live_game("texas-holdem", {}, {"pot": {"win": "1:1"}})


def test_validate_options_fills_defaults() -> None:
    options = validate_options("texas-holdem", {})
    assert options.model_dump()["starting_stack"] == 10_000
    with pytest.raises(ConfigError, match="table of options"):
        validate_options("texas-holdem", ["seats"])  # type: ignore[arg-type]
