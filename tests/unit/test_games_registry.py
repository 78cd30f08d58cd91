"""The registry is the one list of games: every other module reads it, and agrees with it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.games.base import Declared
from controller.games.registry import (
    ANALYZERS,
    DEFAULT_GAME,
    GAME_IDS,
    GAMES,
    analyzer_for,
    game_spec,
    make_live_game,
)
from controller.settings import TableSettings, load_settings
from simulators.decks import GAME_DECKS, deck_for_game

ROOT = Path(__file__).resolve().parents[2]
GAMES_DIR = ROOT / "controller" / "games"


def test_ids_are_unique_and_the_default_is_listed():
    assert len(set(GAME_IDS)) == len(GAMES) == 5
    assert DEFAULT_GAME == "teen-patti-20-20" == GAME_IDS[0]


@pytest.mark.parametrize("spec", GAMES, ids=GAME_IDS)
def test_spec_agrees_with_its_rules(spec):
    rules = spec.rules
    if rules is not None:
        assert isinstance(rules, Declared)
        assert rules.facts is spec.facts
        assert rules.id == spec.id
        assert rules.name == spec.name
        assert rules.deck == spec.deck
        assert rules.bet_ids == spec.bet_ids
        assert rules.default_paytables == spec.default_paytables
        assert rules.deal_plan == spec.deal_plan  # type: ignore[attr-defined]
    assert list(spec.default_paytables) == list(spec.bet_ids)
    assert len(spec.deal_plan) > 0
    assert all(slot.name for slot in spec.deal_plan.slots)


@pytest.mark.parametrize("spec", GAMES, ids=GAME_IDS)
def test_live_game_agrees_with_its_spec(spec):
    game = make_live_game(spec.id, {}, {})
    assert game.id == spec.id
    assert game.deck == spec.deck
    assert game.bet_ids == spec.bet_ids
    assert spec.options.model_validate({}) is not None


@pytest.mark.parametrize("spec", GAMES, ids=GAME_IDS)
def test_game_package_layout(spec):
    package = GAMES_DIR / spec.par_sheet.split(".")[-2]
    for module in ("__init__", "rules", "live", "par_sheet"):
        assert (package / f"{module}.py").is_file(), f"{package.name}/{module}.py"
    assert importlib.util.find_spec(spec.par_sheet) is not None


def test_unknown_game_is_a_config_error():
    with pytest.raises(ConfigError) as info:
        game_spec("blackjack")
    assert info.value.context["field"] == "game"
    assert "blackjack" in str(info.value)


def test_settings_accept_exactly_the_registry_ids(tmp_path):
    assert typing.get_args(TableSettings.model_fields["game"].annotation) == GAME_IDS
    assert TableSettings.model_fields["game"].default == DEFAULT_GAME
    for game_id in GAME_IDS:
        path = tmp_path / f"{game_id}.toml"
        path.write_text(f'table_id = "t1"\ngame = "{game_id}"\n[device]\nurl = "x"\n')
        assert load_settings(path).game == game_id
    path = tmp_path / "other.toml"
    path.write_text('table_id = "t1"\ngame = "blackjack"\n[device]\nurl = "x"\n')
    with pytest.raises(ConfigError):
        load_settings(path)


def test_analysis_covers_exactly_the_registry_ids():
    assert tuple(ANALYZERS) == GAME_IDS
    for spec in GAMES:
        assert ANALYZERS[spec.id] == spec.par_sheet
    assert analyzer_for(GAME_IDS[0]) is GAMES[0].analyzer()


def test_simulators_deal_exactly_the_registry_decks():
    assert tuple(GAME_DECKS) == GAME_IDS
    for spec in GAMES:
        assert deck_for_game(spec.id) == spec.deck


@pytest.mark.parametrize("spec", GAMES, ids=GAME_IDS)
def test_a_game_id_is_spelled_in_its_own_package_only(spec):
    """Outside its package a game id is named only as a default or in documentation."""
    allowed = {"controller/cli/run.py", "controller/analysis.py", "controller/games/base.py"}
    allowed |= {"controller/games/live/base.py", "simulators/cli.py", "simulators/scenario.py"}
    package = spec.par_sheet.split(".")[-2]
    found = set()
    for top in ("controller", "drivers", "simulators"):
        for path in (ROOT / top).rglob("*.py"):
            if f'"{spec.id}"' in path.read_text() or f"``{spec.id}``" in path.read_text():
                found.add(path.relative_to(ROOT).as_posix())
    outside = {p for p in found if not p.startswith(f"controller/games/{package}/")}
    assert outside <= allowed, sorted(outside - allowed)
    if spec.id != DEFAULT_GAME:
        assert not outside, sorted(outside)


@pytest.mark.infra
def test_no_numpy_for_live_play():
    """Building and dealing every game's live round loads no numpy (only par sheets do).

    Hold'em is the exception by design: its live play computes equity with numpy, which its
    live factory loads when the table starts (never on the first hand's way).
    """
    script = textwrap.dedent(
        """
        import sys

        def numpy_loaded():
            return any(name.split(".")[0] == "numpy" for name in sys.modules)

        from controller.games.registry import GAMES, make_live_game
        import simulators.decks
        live = [name for name in sys.modules if name.endswith((".live", ".par_sheet"))]
        print("registry", numpy_loaded() or bool(live))
        import controller.settings
        from controller.games.texas_holdem import rules
        print("import", numpy_loaded())
        for spec in GAMES:
            if spec.id != "texas-holdem":
                make_live_game(spec.id, {}, {}).new_round({}).next_step()
        print("others", numpy_loaded())
        make_live_game("texas-holdem", {}, {}).new_round({}).next_step()
        print("holdem", numpy_loaded())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.split() == [
        "registry",
        "False",
        "import",
        "False",
        "others",
        "False",
        "holdem",
        "True",
    ]
