"""A table's start stays light (issue 26, docs/performance.md).

* ``tablectl run --config`` of a Teen Patti table, a real process on a real Mosquitto with the
  scanner simulator on TCP, plays a round and exits; what it imported by then (its
  ``sys.modules`` written at exit) holds none of starlette, uvicorn, psycopg, playwright or
  numpy: the studio, the archive, the browser and numpy-backed analysis stay out of it.
* ``tablectl run --simulate`` (``make run``'s demo: the table, the studio and the archive on
  SQLite beside it) archives a round without importing psycopg: only a PostgreSQL archive
  needs it (9 MiB of the demo's memory; docs/performance.md).
* ``tablectl`` registers only the sub-command it was given; the map it uses agrees with what
  each command module registers.
* A restarted table reads only its journal's command entries (through the kind index) to
  remember its answers, not every entry.
"""

from __future__ import annotations

import argparse
import importlib
import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from controller.cli import COMMAND_MODULES, build_parser
from controller.journal import Journal
from tests.conftest import MosquittoBroker

ROOT = Path(__file__).resolve().parents[2]
_CLI = (sys.executable, "-m", "controller.cli")
_RUN = ("run", "--config")
HEAVY = ("starlette", "uvicorn", "psycopg", "playwright", "numpy")

_WRAPPER = """
import atexit, json, sys
def _dump():
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
atexit.register(_dump)
from controller.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert process.poll() is None, "the scanner simulator exited"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"the scanner simulator is not listening on {port}")


def test_a_teen_patti_table_start_imports_no_studio_archive_browser_or_numpy(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    port = _free_port()
    scanner = subprocess.Popen(
        [*_CLI, "simulate-scanner", "--tcp", str(port), "--deal-delay", "0"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(port, scanner)
        config = tmp_path / "table.toml"
        config.write_text(
            "\n".join(
                [
                    'table_id = "imports-1"',
                    'game = "teen-patti-20-20"',
                    "[device]",
                    f'url = "socket://127.0.0.1:{port}"',
                    "[mqtt]",
                    f'urls = ["{mosquitto.url}"]',
                    "[rounds]",
                    "betting_seconds = 0.2",
                    "pause_seconds = 0",
                    "[journal]",
                    f'path = "{tmp_path / "journal.sqlite"}"',
                    "",
                ]
            )
        )
        modules = tmp_path / "modules.json"
        done = subprocess.run(
            [sys.executable, "-c", _WRAPPER, str(modules), *_RUN, str(config), "--rounds", "1"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        scanner.kill()
        scanner.wait(10)
    assert done.returncode == 0, done.stderr[-3000:]
    imported = set(json.loads(modules.read_text()))
    assert "controller.orchestrator" in imported  # it ran a table
    heavy = sorted({name.split(".")[0] for name in imported} & set(HEAVY))
    assert heavy == [], f"a Teen Patti table's start imported {heavy}"
    assert not {"controller.studio", "controller.archive", "controller.cli.archive"} & imported


def test_the_demo_archives_on_sqlite_without_importing_psycopg(
    mosquitto: MosquittoBroker, tmp_path: Path
) -> None:
    modules = tmp_path / "modules.json"
    command = [
        *("run", "--simulate", "--broker", mosquitto.url, "--rounds", "1", "--seed", "3"),
        *("--betting-seconds", "0.2", "--pause-seconds", "0", "--deal-delay", "0"),
        *("--studio-port", "0"),
    ]
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(modules), *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imported = set(json.loads(modules.read_text()))
    # The studio and the archive ran beside the table, and the archive stored the round.
    assert {"controller.studio.server", "controller.archive.consumer"} <= imported
    with sqlite3.connect(tmp_path / "var" / "archive.sqlite") as archive:
        kinds = {row[0] for row in archive.execute("SELECT kind FROM events")}
    assert {"round_opened", "round_result"} <= kinds
    assert sorted(name for name in imported if name.split(".")[0] == "psycopg") == []


def test_the_command_map_names_what_each_module_registers() -> None:
    for module_name in dict.fromkeys(COMMAND_MODULES.values()):
        subparsers = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(f"controller.cli.{module_name}").register(subparsers)
        expected = [name for name, owner in COMMAND_MODULES.items() if owner == module_name]
        assert list(subparsers.choices) == expected, module_name
    full = build_parser()
    action = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert list(action.choices) == list(COMMAND_MODULES)


def test_a_given_command_registers_only_its_module() -> None:
    for command, module_name in COMMAND_MODULES.items():
        parser = build_parser(command)
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        assert command in action.choices
        assert {COMMAND_MODULES[name] for name in action.choices} == {module_name}
    unknown = build_parser("no-such-command")
    action = next(a for a in unknown._actions if isinstance(a, argparse._SubParsersAction))
    assert list(action.choices) == list(COMMAND_MODULES)


def test_entries_of_kinds_reads_those_kinds_in_seq_order_across_pages(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j.sqlite") as journal:
        for n in range(7):
            journal.append("table_status", {"state": "ready", "detail": f"s{n}"})
            journal.append("pit_alert", {"slot": None, "reason": f"a{n}"})
            if n % 2:
                journal.append("device_status", {"device": "d", "state": "lost", "detail": ""})
        wanted = ("pit_alert", "device_status")
        read = list(journal.entries_of_kinds(wanted, page=2))
        every = [entry for entry in journal.entries() if entry.kind in wanted]
    assert [entry.seq for entry in read] == [entry.seq for entry in every]
    assert len(read) == 7 + 3
    assert [entry.body for entry in read] == [entry.body for entry in every]
