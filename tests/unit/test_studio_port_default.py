"""``tablectl run``'s studio port when ``--studio-port`` is not given (issue 25, item 7)."""

from __future__ import annotations

import pytest

from controller.cli.run import _default_studio_port
from controller.errors import ConfigError


@pytest.mark.parametrize(("value", "port"), [(None, 8080), ("", 8080), ("0", 0), ("9090", 9090)])
def test_the_default_is_8080_or_the_environment(monkeypatch, value, port):
    if value is None:
        monkeypatch.delenv("TABLECTL_STUDIO_HTTP__PORT", raising=False)
    else:
        monkeypatch.setenv("TABLECTL_STUDIO_HTTP__PORT", value)
    assert _default_studio_port() == port


@pytest.mark.parametrize("value", ["http", "-1", "80.5"])
def test_a_bad_environment_value_is_named(monkeypatch, value):
    monkeypatch.setenv("TABLECTL_STUDIO_HTTP__PORT", value)
    with pytest.raises(ConfigError, match="TABLECTL_STUDIO_HTTP__PORT must be a port number"):
        _default_studio_port()
