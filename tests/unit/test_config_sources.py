"""Where a wrong setting came from, and the journal directory check (issue #12 item 6).

A wrong value is blamed on its source: the TOML file, the environment variable that set it,
or the command line. ``check-config`` agrees with ``run`` on a journal directory that does
not exist yet (``run`` creates it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.checkconfig import check_config, check_journal
from controller.errors import ConfigError
from controller.journal import Journal
from controller.settings import load_settings

CONFIG = (
    'table_id = "t1"\n[device]\nurl = "socket://127.0.0.1:7000"\n[rounds]\nbetting_seconds = 10\n'
)


def write(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


def test_a_wrong_environment_value_names_the_variable_not_the_file(tmp_path, monkeypatch):
    path = write(tmp_path)
    monkeypatch.setenv("TABLECTL_ROUNDS__BETTING_SECONDS", "abc")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    text = str(info.value)
    assert text.startswith(
        "invalid settings: rounds.betting_seconds: Input should be a valid number"
    )
    assert "(got 'abc') [from environment variable TABLECTL_ROUNDS__BETTING_SECONDS]" in text
    assert "invalid table config" not in text
    assert info.value.context["source"] == "environment variable TABLECTL_ROUNDS__BETTING_SECONDS"


def test_check_config_names_the_environment_variable(tmp_path, monkeypatch):
    path = write(tmp_path)
    monkeypatch.setenv("tablectl_rounds__betting_seconds", "abc")  # matched case-insensitively
    check, settings = check_config(path)
    assert settings is None
    assert check.failed
    assert "[from environment variable tablectl_rounds__betting_seconds]" in check.detail


def test_a_wrong_file_value_still_names_the_file(tmp_path):
    path = write(tmp_path, CONFIG.replace("betting_seconds = 10", 'betting_seconds = "abc"'))
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert str(info.value).startswith(f"invalid table config {path}: rounds.betting_seconds:")
    assert "[from" not in str(info.value).split(" (file=")[0]
    assert info.value.context["source"] == str(path)


def test_a_wrong_command_line_value_says_so(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path), rounds={"betting_seconds": -1})
    assert "(got -1) [from the command line]" in str(info.value)


def test_a_missing_journal_directory_is_created_by_run_and_so_passes(tmp_path):
    path = tmp_path / "var" / "lib" / "journal.sqlite"
    check = check_journal(path)
    assert not check.failed, check.line()
    assert check.detail == f"{path}: directory {path.parent} will be created (in {tmp_path})"
    # ... as `run` does: opening the journal creates the directories.
    Journal.open(path).close()
    assert check_journal(path).line() == f"OK    journal: {path}: exists, directory writable"


def test_a_journal_under_a_file_fails(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    check = check_journal(blocker / "var" / "journal.sqlite")
    assert check.failed
    assert check.detail.endswith(f"{blocker} is not a directory")
