"""A stop signal while the round is halted (issue 12, item 2), on the real simulated table.

``tablectl run --simulate`` runs as a subprocess (real pty simulator, the Mosquitto fixture).
The simulated scanner's cable is pulled as the third card is dealt and stays out; with
``rounds.device_halt_seconds`` short the round halts. One SIGINT then must say what the table
waits for (a warning and a journalled ``table_status``), exit cleanly within
``rounds.halted_stop_seconds``, and leave the round halted in the journal. The next start
rebuilds it halted; the pit boss resumes it and it is completed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from controller.games.registry import make_live_game
from controller.journal import Journal
from controller.round import Round
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto
from tests.support.rounds import round_id

pytestmark = [
    pytest.mark.hil,
    pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING),
]

TABLE = "halt-stop-1"
LIMIT = 2.0
WAITS = "stop requested while halted: waiting for the pit boss (resume/void) or a second signal"


def _command(broker_url: str, journal: Path, *faults: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "controller.cli",
        "run",
        "--simulate",
        "--seed",
        "5",
        "--rounds",
        "1",
        "--broker",
        broker_url,
        "--table-id",
        TABLE,
        "--journal",
        str(journal),
        "--betting-seconds",
        "0.1",
        "--pause-seconds",
        "0",
        "--deal-delay",
        "0.05",
        "--log-format",
        "json",
        *faults,
    ]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "TABLECTL_ROUNDS__DEVICE_HALT_SECONDS": "0.5",
        "TABLECTL_ROUNDS__HALTED_STOP_SECONDS": str(LIMIT),
    }


def _kinds(journal: Path) -> list[tuple[str, str]]:
    if not journal.exists():
        return []
    try:
        with sqlite3.connect(journal) as db:
            rows = db.execute("SELECT kind, body FROM entries ORDER BY seq").fetchall()
    except sqlite3.OperationalError:  # the controller is still creating the file
        return []
    return [(str(kind), str(body)) for kind, body in rows]


async def _wait_for(
    journal: Path, kind: str, process: Any, *, text: str = "", after: int = 0, seconds: float = 30
) -> None:
    """Wait until the journal holds an entry of ``kind`` (containing ``text``) past ``after``."""
    async with asyncio.timeout(seconds):
        while not any(k == kind and text in body for k, body in _kinds(journal)[after:]):
            assert process.returncode is None, f"the table ended before {kind}"
            await asyncio.sleep(0.05)


def _rebuilt(journal: Path) -> Round:
    store = Journal.open_readonly(journal)
    first = round_id(journal, TABLE)
    entries = [(entry.kind, entry.body) for entry in store.entries(round_id=first)]
    restored = Round.replay(entries, make_live_game("teen-patti-20-20", {}, {}))
    assert restored is not None
    return restored


async def _pit_resume(broker_url: str, journal: Path) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "pit",
        "resume",
        "--round",
        round_id(journal, TABLE),
        "--broker",
        broker_url,
        "--table-id",
        TABLE,
        "--timeout",
        "10",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(20):
        out, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode()


async def _stop_while_halted(url: str, journal: Path) -> tuple[int | None, str, float]:
    """A table whose scanner is unplugged until it halts, then one SIGINT: its exit."""
    first = await asyncio.create_subprocess_exec(
        *_command(url, journal, "--unplug-every", "3", "--unplug-seconds", "60"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=_env(),
    )
    try:
        await _wait_for(journal, "round_halted", first)
        await asyncio.sleep(0.3)  # the reconnect attempts go on meanwhile
        stopped_at = time.monotonic()
        first.send_signal(signal.SIGINT)
        async with asyncio.timeout(LIMIT + 15):
            _, err = await first.communicate()
        took = time.monotonic() - stopped_at
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()
    return first.returncode, err.decode(), took


async def _restart_and_resume(url: str, journal: Path, entries_before: int) -> None:
    """The next start: the round comes back halted until the pit boss resumes it."""
    second = await asyncio.create_subprocess_exec(
        *_command(url, journal),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=_env(),
    )
    try:
        await _wait_for(journal, "card_refused", second, text="round halted", after=entries_before)
        assert _rebuilt(journal).halted, "the restarted round waits for the pit boss"
        assert "round_result" not in [kind for kind, _ in _kinds(journal)]
        code, output = await _pit_resume(url, journal)
        assert code == 0, output
        async with asyncio.timeout(30):
            _, err = await second.communicate()
    finally:
        if second.returncode is None:
            second.kill()
            await second.wait()
    assert second.returncode == 0, err.decode()


async def test_one_stop_while_halted_exits_after_the_limit_and_the_round_resumes(
    mosquitto: Any, tmp_path: Path
) -> None:
    journal = tmp_path / "table.sqlite"
    returncode, log, took = await _stop_while_halted(mosquitto.url, journal)
    assert returncode == 0, log
    assert WAITS in log
    # The terminal line of the first signal says the same, not "after the current round".
    assert "is halted: waiting for the pit boss (resume/void)" in log
    assert "stopping after the current round" not in log
    assert f"exiting in {LIMIT:g} s with the round left halted" in log
    assert LIMIT <= took < LIMIT + 10, took

    entries = _kinds(journal)
    kinds = [kind for kind, _ in entries]
    statuses = [body for kind, body in entries if kind == "table_status"]
    assert any(WAITS in body and '"stopping"' in body for body in statuses), statuses
    assert "round_result" not in kinds
    assert "round_voided" not in kinds
    halted = _rebuilt(journal)
    assert halted.halted, "the round is left halted in the journal"
    assert halted.started
    dealt_before = list(halted.dealt)
    assert 2 <= len(dealt_before) < 6
    assert Journal.open_readonly(journal).verify().ok

    # The next start: the round comes back halted (a card read now is held for the pit boss);
    # the pit boss resumes and the round is completed with the cards already dealt.
    await _restart_and_resume(mosquitto.url, journal, len(entries))
    done = _rebuilt(journal)
    assert done.result is not None
    assert not done.halted
    assert done.dealt[: len(dealt_before)] == dealt_before
    assert len(done.dealt) == 6
    report = Journal.open_readonly(journal).verify()
    assert report.ok, report
