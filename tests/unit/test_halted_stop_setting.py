"""``rounds.halted_stop_seconds`` (issue 12, item 2): its default, the example, its bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.settings import RoundSettings, load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "table-example.toml"
TABLE = 'table_id = "t1"\n[device]\nurl = "socket://127.0.0.1:7000"\n'


def test_default_and_the_example_agree() -> None:
    assert RoundSettings().halted_stop_seconds == 120.0
    assert load_settings(EXAMPLE).rounds.halted_stop_seconds == 120.0


@pytest.mark.parametrize("value", ["0", "-1", "3601"])
def test_out_of_range_is_refused_naming_the_file_and_field(tmp_path: Path, value: str) -> None:
    path = tmp_path / "table.toml"
    path.write_text(TABLE + f"[rounds]\nhalted_stop_seconds = {value}\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    text = str(info.value)
    assert "rounds.halted_stop_seconds" in text
    assert str(path) in text


def test_a_value_in_range_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "table.toml"
    path.write_text(TABLE + "[rounds]\nhalted_stop_seconds = 2.5\n")
    assert load_settings(path).rounds.halted_stop_seconds == 2.5
