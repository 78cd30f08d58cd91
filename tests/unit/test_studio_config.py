"""``studio.toml``: checked at start, errors naming the file, the field and the reason."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.errors import ConfigError
from controller.studio.config import load_studio_settings


def write(tmp_path, text: str):
    path = tmp_path / "studio.toml"
    path.write_text(text)
    return path


EXAMPLE = Path(__file__).parents[2] / "config" / "studio-example.toml"
TOKEN = "kq4Yc1n0lDk2Hh8v0V5dRr3xw7tLmZ9a"


def test_the_example_config_loads():
    settings = load_studio_settings(EXAMPLE, environ={"TABLECTL_STUDIO_SECURE__TOKEN": TOKEN})
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


def _without_the_suites_port() -> dict[str, str]:
    """The environment without the suite's studio port (tests/conftest.py), which as the
    studio's own override (TABLECTL_STUDIO_HTTP__PORT) would replace the file's."""
    return {k: v for k, v in os.environ.items() if k != "TABLECTL_STUDIO_HTTP__PORT"}


@pytest.mark.infra
def test_tablectl_studio_stops_at_start_on_a_broken_config(tmp_path):
    path = write(tmp_path, '[http]\nport = "eighty"\n')
    done = subprocess.run(
        [sys.executable, "-m", "controller.cli", "studio", "--config", str(path)],
        env=_without_the_suites_port(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "http.port" in done.stderr and str(path) in done.stderr


def test_the_example_config_wants_its_token_replaced():
    with pytest.raises(ConfigError, match="placeholder") as caught:
        load_studio_settings(EXAMPLE, environ={})
    assert caught.value.context["field"] == "secure.token"
    assert "secrets.token_urlsafe" in str(caught.value)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "studio.example"])
def test_a_secure_feed_off_loopback_without_a_token_does_not_start(tmp_path, host):
    path = write(tmp_path, f'[http]\nhost = "{host}"\n[secure]\ndelay_seconds = 5\n')
    with pytest.raises(ConfigError, match="not loopback only") as caught:
        load_studio_settings(path, environ={})
    assert caught.value.context == {"path": str(path), "field": "secure.token"}
    settings = load_studio_settings(path, environ={"TABLECTL_STUDIO_SECURE__TOKEN": TOKEN})
    assert settings.secure is not None and settings.secure.token is not None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "::1", "localhost"])
def test_a_loopback_studio_needs_no_token(tmp_path, host):
    path = write(tmp_path, f'[http]\nhost = "{host}"\n[secure]\ndelay_seconds = 5\n')
    assert load_studio_settings(path, environ={}).secure is not None


def test_no_secure_feed_needs_no_token(tmp_path):
    path = write(tmp_path, '[http]\nhost = "0.0.0.0"\n')
    assert load_studio_settings(path, environ={}).secure is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('token = "short"', "at least 16"),
        ('allowed_origins = ["https://mixer.studio/path"]', "scheme://host"),
        ('allowed_origins = ["mixer.studio"]', "scheme://host"),
    ],
)
def test_a_weak_token_or_a_wrong_origin_is_refused(tmp_path, text, says):
    path = write(tmp_path, f"[secure]\ndelay_seconds = 5\n{text}\n")
    with pytest.raises(ConfigError, match=says):
        load_studio_settings(path, environ={})


@pytest.mark.infra
def test_tablectl_studio_refuses_a_secure_feed_on_0_0_0_0_without_a_token(tmp_path):
    path = write(tmp_path, '[http]\nhost = "0.0.0.0"\nport = 0\n[secure]\ndelay_seconds = 5\n')
    done = subprocess.run(
        [sys.executable, "-m", "controller.cli", "studio", "--config", str(path)],
        env=_without_the_suites_port(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "secure.token" in done.stderr and "not loopback only" in done.stderr
