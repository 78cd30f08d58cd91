"""``studio.toml``: checked at start, errors naming the file, the field and the reason."""

from __future__ import annotations

import subprocess
import sys

import pytest

from controller.errors import ConfigError
from controller.studio.config import load_studio_settings


def write(tmp_path, text: str):
    path = tmp_path / "studio.toml"
    path.write_text(text)
    return path


def test_the_example_config_loads():
    from pathlib import Path

    example = Path(__file__).parents[2] / "config" / "studio-example.toml"
    settings = load_studio_settings(example, environ={})
    assert settings.secure is not None and settings.secure.delay_seconds > 0
    secure = settings.secure_mqtt
    assert secure is not None and secure.username == "stream"
    assert settings.mqtt.username == "viewer"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[http]\nport = 70000\n", "http.port"),
        ('tables = ["a/b"]\n', "tables"),
        ("[secure]\ndelay_seconds = 0\n", "secure.delay_seconds"),
        ('[mqtt]\nurls = ["http://x"]\n', None),
        ("nonsense = 1\n", "nonsense"),
        ('[pit]\nsession_secret = "short"\n', "pit.users"),
    ],
)
def test_a_broken_config_names_file_and_field(tmp_path, text, field):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_studio_settings(path, environ={})
    assert caught.value.context["path"] == str(path)
    if field is not None:
        assert caught.value.context["field"] == field
        assert field in str(caught.value)


def test_not_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not TOML"):
        load_studio_settings(write(tmp_path, "[http\n"), environ={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_studio_settings(tmp_path / "none.toml", environ={})


def test_the_environment_overrides_a_field(tmp_path):
    path = write(tmp_path, '[secure]\ndelay_seconds = 5\nusername = "stream"\n')
    settings = load_studio_settings(path, environ={"TABLECTL_STUDIO_SECURE__PASSWORD": "pw"})
    assert settings.secure is not None and settings.secure.password is not None
    assert settings.secure.password.get_secret_value() == "pw"


def test_tablectl_studio_stops_at_start_on_a_broken_config(tmp_path):
    path = write(tmp_path, '[http]\nport = "eighty"\n')
    done = subprocess.run(
        [sys.executable, "-m", "controller.cli", "studio", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "http.port" in done.stderr and str(path) in done.stderr
