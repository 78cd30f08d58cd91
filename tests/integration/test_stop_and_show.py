"""Stopping ``tablectl watch`` and ``tablectl run`` from the keyboard, and what ``--show`` shows.

Real processes on the real Mosquitto fixture, real signals (issue #12 items 1, 3, 4, 7):

- ``watch`` stopped with SIGINT (Ctrl-C) or SIGTERM ends quietly with status 0;
- ``run --simulate`` stopped twice mid-round ends with ``128 + signal`` (130 after SIGINT),
  one line saying the round stays in the journal, no traceback; the journal keeps the round;
- ``run --show`` shows every journal entry from ``seq`` 1 on, and the log lines (JSON when
  standard error is not a terminal) go to standard error only.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.support.rounds import round_id

pytestmark = pytest.mark.hil

TABLECTL = [sys.executable, "-m", "controller.cli"]


async def _read_until(stream: asyncio.StreamReader, pattern: str, seconds: float) -> list[str]:
    lines: list[str] = []
    async with asyncio.timeout(seconds):
        while True:
            raw = await stream.readline()
            assert raw, f"stream ended before {pattern!r}; got {lines}"
            lines.append(raw.decode())
            if re.search(pattern, lines[-1]):
                return lines


async def _finish(process: asyncio.subprocess.Process, seconds: float = 30.0) -> tuple[str, str]:
    async with asyncio.timeout(seconds):
        out, err = await process.communicate()
    return (out or b"").decode(), (err or b"").decode()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_watch_stops_quietly_with_status_0(mosquitto, tmp_path, signum):
    journal = tmp_path / "table.sqlite"
    table = await asyncio.create_subprocess_exec(
        *TABLECTL, "run", "--simulate", "--broker", mosquitto.url, "--table-id", "w-1",
        "--journal", str(journal), "--betting-seconds", "0.2", "--pause-seconds", "0",
        "--deal-delay", "0.05",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    watcher = await asyncio.create_subprocess_exec(
        *TABLECTL, "watch", "--broker", mosquitto.url, "--table-id", "w-1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert watcher.stdout is not None
        # Messages are flowing (a read is pending in the client) when the signal comes.
        await _read_until(watcher.stdout, r"  [AB]\d ", 30)
        watcher.send_signal(signum)
        out, err = await _finish(watcher)
    finally:
        table.send_signal(signal.SIGINT)
        await _finish(table)
    assert watcher.returncode == 0, err
    assert "Traceback" not in err + out
    assert "never retrieved" not in err + out
    assert err == ""


def _rows(path: Path) -> list[tuple[str, str | None]]:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT kind, round_id FROM entries ORDER BY seq").fetchall()


async def test_a_second_sigint_stops_at_once_with_status_130(mosquitto, tmp_path):
    journal = tmp_path / "table.sqlite"
    table = await asyncio.create_subprocess_exec(
        *TABLECTL, "run", "--simulate", "--broker", mosquitto.url, "--table-id", "s-1",
        "--journal", str(journal), "--betting-seconds", "0.2", "--deal-delay", "0.3",
        "--log-level", "INFO", "--log-format", "json",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert table.stderr is not None
    await _read_until(table.stderr, r'"betting closed"', 30)  # the round has started
    table.send_signal(signal.SIGINT)
    await _read_until(table.stderr, "again to stop at once", 10)
    table.send_signal(signal.SIGINT)
    _, err = await _finish(table)
    assert table.returncode == 130, err
    assert "Traceback" not in err
    assert "CancelledError" not in err
    first = round_id(journal, "s-1")
    assert (
        f"tablectl run: stopped at once by a second SIGINT: round {first} is left in the "
        "journal and resumes on the next start" in err
    )
    kinds = [kind for kind, rid in _rows(journal) if rid == first]
    assert kinds[0] == "round_opened"
    assert "betting_closed" in kinds
    assert "round_result" not in kinds
    assert "round_voided" not in kinds


async def test_show_shows_every_entry_from_seq_1_and_logs_stay_on_stderr(mosquitto, tmp_path):
    journal = tmp_path / "table.sqlite"
    table = await asyncio.create_subprocess_exec(
        *TABLECTL, "run", "--simulate", "--show", "--broker", mosquitto.url,
        "--table-id", "v-1", "--journal", str(journal), "--rounds", "2",
        "--betting-seconds", "0.1", "--pause-seconds", "0", "--deal-delay", "0.02",
        "--log-level", "INFO",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await _finish(table, 60)
    assert table.returncode == 0, err
    shown = {int(seq) for seq in re.findall(r"^\S+ #(\d+) ", out, flags=re.MULTILINE)}
    last = max(seq for (seq,) in sqlite3.connect(journal).execute("SELECT seq FROM entries"))
    assert shown == set(range(1, last + 1))
    assert re.search(r"#1 round 1 \(v-1-[0-9a-f]{8}-000001, teen-patti-20-20\): betting open", out)
    # Standard error is a pipe: the logs are JSON there, and none is on standard output.
    logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(entry.get("event") == "betting open" for entry in logs)
    assert not [line for line in out.splitlines() if line.lstrip().startswith("{")]


@pytest.mark.parametrize(
    ("extra", "env", "blamed"),
    [
        (["--betting-seconds", "-1"], {}, "[from the command line]"),
        ([], {"TABLECTL_ROUNDS__BETTING_SECONDS": "abc"}, "TABLECTL_ROUNDS__BETTING_SECONDS"),
    ],
)
async def test_simulated_run_refuses_bad_input_before_the_simulator_starts(
    mosquitto, tmp_path, extra, env, blamed
):
    import os

    table = await asyncio.create_subprocess_exec(
        *TABLECTL, "run", "--simulate", "--broker", mosquitto.url,
        "--journal", str(tmp_path / "j.sqlite"), "--log-level", "INFO", *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **env},
    )  # fmt: skip
    out, err = await _finish(table)
    assert table.returncode == 2
    assert out == ""
    # The error alone: no "simulator_serving" (or any) log line before it.
    assert err.startswith("tablectl run: invalid settings: rounds.betting_seconds:"), err
    assert blamed in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "j.sqlite").exists()


def _cards(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT body FROM entries WHERE kind='card_dealt' ORDER BY seq")
        return [json.loads(body)["card"] for (body,) in rows]


async def _one_round(url: str, journal: Path, *extra: str) -> tuple[int | None, str]:
    table = await asyncio.create_subprocess_exec(
        *TABLECTL, "run", "--simulate", "--broker", url, "--journal", str(journal),
        "--rounds", "1", "--betting-seconds", "0.05", "--pause-seconds", "0",
        "--deal-delay", "0.02", *extra,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await _finish(table, 60)
    return table.returncode, err


async def test_simulation_seeds_from_the_clock_and_says_how_to_repeat_it(mosquitto, tmp_path):
    code, err = await _one_round(mosquitto.url, tmp_path / "a.sqlite")
    assert code == 0, err
    found = re.search(
        r"^tablectl run: simulation seed (\d+) \(--seed \1 deals the same\)$", err, re.M
    )
    assert found, err
    code, again = await _one_round(mosquitto.url, tmp_path / "b.sqlite", "--seed", found[1])
    assert code == 0, again
    assert "simulation seed" not in again  # given: nothing to say
    assert _cards(tmp_path / "a.sqlite") == _cards(tmp_path / "b.sqlite")
    assert len(_cards(tmp_path / "a.sqlite")) == 6


async def test_rounds_already_in_the_journal_are_counted_and_said(mosquitto, tmp_path):
    journal = tmp_path / "j.sqlite"
    code, err = await _one_round(mosquitto.url, journal, "--seed", "3")
    assert code == 0, err
    assert "nothing to play" not in err
    code, err = await _one_round(mosquitto.url, journal, "--seed", "3")
    assert code == 0, err
    assert (
        f"tablectl run: nothing to play: the journal {journal} already holds 1 finished "
        "round(s) and --rounds 1 counts the journal's rounds, not this run's" in err
    )
    assert len(_cards(journal)) == 6


async def test_watch_stops_at_once_while_a_broker_does_not_answer():
    # A non-routable address: the connect attempt hangs (up to its 5 s timeout) where the
    # network drops it, or fails at once where it is refused; either way Ctrl-C ends it now.
    watcher = await asyncio.create_subprocess_exec(
        *TABLECTL, "watch", "--broker", "mqtt://10.255.255.1:1883", "--table-id", "x",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    # Started and connecting (its start took up to 2 s on four test workers: a Ctrl-C before
    # its handler is in is Python's KeyboardInterrupt, status 130, not what this checks).
    await asyncio.sleep(3.0)
    watcher.send_signal(signal.SIGINT)
    loop = asyncio.get_running_loop()
    started = loop.time()
    out, err = await _finish(watcher)
    assert loop.time() - started < 2.5
    assert watcher.returncode == 0, err
    assert "Traceback" not in out + err
