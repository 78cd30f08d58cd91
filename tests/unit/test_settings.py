from __future__ import annotations

from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.settings import load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "table-example.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


def test_example_config_loads() -> None:
    settings = load_settings(EXAMPLE)
    assert settings.table_id == "tp-01"
    assert settings.game == "teen-patti-20-20"
    assert settings.device is not None and settings.device.url.startswith("serial://")
    assert settings.rounds.betting_seconds == 15


def test_environment_overrides_file_and_cli_overrides_environment(tmp_path, monkeypatch):
    path = write(
        tmp_path,
        'table_id = "t1"\n[device]\nurl = "socket://127.0.0.1:7000"\n'
        "[rounds]\nbetting_seconds = 10\n",
    )
    monkeypatch.setenv("TABLECTL_ROUNDS__BETTING_SECONDS", "20")
    assert load_settings(path).rounds.betting_seconds == 20
    assert load_settings(path, rounds={"betting_seconds": 5}).rounds.betting_seconds == 5


def test_missing_required_field_names_it(tmp_path):
    path = write(tmp_path, 'table_id = "t1"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "device" in str(info.value)
    assert str(path) in str(info.value)


def test_wrong_value_names_field_and_value(tmp_path):
    path = write(tmp_path, 'table_id = "t1"\ngame = "blackjack"\n[device]\nurl = "x"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert info.value.context["field"] == "game"
    assert "blackjack" in str(info.value)


def test_unknown_key_is_refused(tmp_path):
    path = write(tmp_path, 'table_id = "t1"\n[device]\nurl = "x"\n[rounds]\nbetting_secs = 3\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert "rounds.betting_secs" in str(info.value)


def test_table_id_must_be_topic_safe(tmp_path):
    path = write(tmp_path, 'table_id = "a/b"\n[device]\nurl = "x"\n')
    with pytest.raises(ConfigError, match="table_id"):
        load_settings(path)


def test_broken_toml_says_where(tmp_path):
    path = write(tmp_path, 'table_id = "t1\n')
    with pytest.raises(ConfigError, match=r"not valid TOML.*line 1"):
        load_settings(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_paytable_ratio_must_be_exact(tmp_path):
    path = write(tmp_path, 'table_id = "t1"\n[device]\nurl = "x"\n[paytables.tie]\ntie = "1:3"\n')
    with pytest.raises(ConfigError, match=r"paytables.*tie.tie"):
        load_settings(path)
    path = write(tmp_path, 'table_id = "t1"\n[device]\nurl = "x"\n[paytables.tie]\ntie = "45:1"\n')
    assert load_settings(path).paytables == {"tie": {"tie": "45:1"}}
