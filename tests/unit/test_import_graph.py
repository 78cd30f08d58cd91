"""The import rule (docs/architecture.md, "Packages and layers"), checked on every test run.

``lint-imports`` (import-linter, contracts in pyproject.toml) checks the layers
controller.cli > simulators > controller (library) > drivers and that no modules or
subpackages of a package import each other in a circle. ``make check`` runs it too.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from drivers.source import BACKENDS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.infra
def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


@pytest.mark.infra
def test_every_driver_backend_names_a_class() -> None:
    assert set(BACKENDS) == {
        "serial", "socket", "usb", "profile+serial", "hidpos", "hidkbd", "memory",
        "pepper", "pepper+serial", "pcsc", "mqtt-reader", "jsonl+serial",
    }  # fmt: skip
    for module_name, class_name in BACKENDS.values():
        assert isinstance(getattr(importlib.import_module(module_name), class_name), type)


@pytest.mark.infra
def test_the_controller_library_does_not_load_simulators_or_the_cli() -> None:
    code = (
        "import sys, controller.app, controller.checkconfig, controller.pitcli, "
        "controller.recall, controller.signing, controller.watch, drivers.discovery; "
        "print(sorted(m for m in sys.modules "
        "if m.startswith(('simulators', 'controller.cli'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = result.stdout.strip()
    assert "simulators" not in loaded and "controller.cli" not in loaded, loaded
