"""A table computer's install: ``tablectl`` without the studio or archive extras (issue 25).

Each test runs the real ``tablectl`` in a subprocess in which the extras' modules cannot be
imported (a meta-path finder placed first raises ``ModuleNotFoundError`` for them, as an
interpreter without them installed does), and checks that:

* the commands that need an extra end with status 2 and one line naming the extra and the
  ``pip install 'tablectl[...]'`` that adds it, never a traceback;
* ``tablectl run --simulate`` plays without them, saying what it left out;
* ``tablectl run --simulate --no-studio --no-archive`` (the extras installed) imports none of
  starlette, uvicorn, psycopg, orjson, nacl or playwright.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MosquittoBroker

ROOT = Path(__file__).resolve().parents[2]

_LEAN = """
import atexit, importlib.abc, json, sys
blocked = set(sys.argv[1].split(","))
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Absent())
def dump():
    with open(sys.argv[2], "w") as out:
        json.dump(sorted(sys.modules), out)
atexit.register(dump)
from controller.cli import main
sys.exit(main(sys.argv[3:]))
"""
STUDIO = ("starlette", "uvicorn", "websockets", "itsdangerous")
ARCHIVE = ("psycopg", "orjson", "nacl")
HEAVY = (*STUDIO, *ARCHIVE, "playwright")


def _tablectl(
    tmp_path: Path, *argv: str, blocked: tuple[str, ...] = (*STUDIO, *ARCHIVE)
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    modules = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _LEAN, ",".join(blocked) or "-", str(modules), *argv],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    imported = set(json.loads(modules.read_text())) if modules.exists() else set()
    return done, imported


@pytest.mark.parametrize(
    ("argv", "command", "extra"),
    [
        (("studio", "--config", "studio.toml"), "studio", "studio"),
        (
            (
                "archive", "report", "--database", "sqlite:///a.sqlite", "--table", "t-1",
                "--from", "2026-01-01", "--to", "2026-01-02",
            ),
            "archive report",
            "archive",
        ),
        (("archive", "migrate", "--database", "sqlite:///a.sqlite"), "archive migrate", "archive"),
        (("recall", "t-1-00000000-000001", "--archive", "sqlite:///a.sqlite"), "recall", "archive"),
    ],
)  # fmt: skip
def test_a_command_that_needs_a_missing_extra_names_it(tmp_path, argv, command, extra):
    (tmp_path / "studio.toml").write_text('[mqtt]\nurls = ["mqtt://127.0.0.1:1"]\n')
    done, _ = _tablectl(tmp_path, *argv)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"tablectl {command}: this needs tablectl's {extra} extra")
    assert f"pip install 'tablectl[{extra}]'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_simulated_table_plays_without_the_extras_and_says_so(mosquitto, tmp_path):
    done, imported = _tablectl(
        tmp_path,
        *("run", "--simulate", "--rounds", "1", "--broker", mosquitto.url, "--seed", "7"),
        *("--journal", str(tmp_path / "j.sqlite"), "--betting-seconds", "0.1"),
        *("--pause-seconds", "0", "--deal-delay", "0"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    for extra, option in (("studio", "--no-studio"), ("archive", "--no-archive")):
        assert f"the {extra} is not installed" in done.stderr, done.stderr
        assert f"as with {option}; pip install 'tablectl[{extra}]' adds it" in done.stderr
    assert "controller.orchestrator" in imported  # it ran a table
    assert not (tmp_path / "archive.sqlite").exists()


def test_an_archive_asked_for_without_the_extra_is_an_error(mosquitto, tmp_path):
    done, imported = _tablectl(
        tmp_path,
        *("run", "--simulate", "--rounds", "1", "--broker", mosquitto.url),
        *("--journal", str(tmp_path / "j.sqlite"), "--archive", "sqlite:///a.sqlite"),
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "tablectl run: this needs tablectl's archive extra" in done.stderr
    assert not (tmp_path / "j.sqlite").exists()  # stopped before the table started
    assert not {"psycopg", "orjson", "nacl"} & imported


def test_a_simulated_table_without_studio_and_archive_imports_none_of_them(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    done, imported = _tablectl(
        tmp_path,
        *("run", "--simulate", "--no-studio", "--no-archive", "--rounds", "1"),
        *("--broker", mosquitto.url, "--journal", str(tmp_path / "j.sqlite")),
        *("--betting-seconds", "0.1", "--pause-seconds", "0", "--deal-delay", "0"),
        blocked=(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "not installed" not in done.stderr
    assert "controller.orchestrator" in imported
    heavy = sorted({name.split(".")[0] for name in imported} & set(HEAVY))
    assert heavy == [], f"a simulated table without studio and archive imported {heavy}"


def test_the_archive_beside_an_unsigned_table_does_not_load_cryptography(tmp_path):
    # docs/performance.md, "The demo": OpenSSL's bindings are 9 MiB of the demo's RSS; the
    # archive loads them only for a table that has a key (the key check still works: the
    # signed simulation's tests, tests/archive/test_archive_signed_simulation.py).
    probe = (
        "import sys\n"
        "from controller.archive.embedded import archive_settings\n"
        "from controller.archive.ingest import TableKeys\n"
        "import controller.archive.consumer, controller.archive.sqlite_store\n"
        "from controller.mqtt.settings import MqttSettings\n"
        "config = archive_settings(MqttSettings(urls=['mqtt://127.0.0.1:1']), 'sqlite:///a', 't')\n"
        "keys = TableKeys(config.public_keys(), 'tables')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'cryptography', 'nacl'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['nacl']"], done.stdout
