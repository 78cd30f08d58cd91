"""An unreachable or unresolvable broker (issue #12 item 5), with the real ``tablectl run``.

Before: one log line per retry and connection every second (110 lines in 12 s) and a 30 s
silent wait after SIGINT. Now: the first failure of each connection, then a summary per
doubling of the attempts ("still unreachable after N attempts, next in S s"); a host name
that does not resolve is reported as such; a stop while no broker was ever reachable does
not wait for the outbox to be flushed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RUN_SECONDS = 6.0
"""How long the table runs after its first try at the broker."""

START_SECONDS = 30.0
"""How long its start may take at most (imports, the simulator) before that first try."""


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: nothing listens there


def _run_until_sigint(url: str, tmp_path: Path) -> tuple[list[dict[str, object]], float]:
    """Run a simulated table on ``url`` for a while, SIGINT it; its JSON log and stop time."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller.cli",
            "run",
            "--simulate",
            "--broker",
            url,
            "--journal",
            str(tmp_path / "t.sqlite"),
            "--log-format",
            "json",
            # The table's own connections are counted here; the studio and the archive beside
            # a simulated table have their own (each logged the same way:
            # controller/mqtt/connection.py).
            "--no-studio",
            "--no-archive",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    raws: list[bytes] = []
    tried = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            raws.append(raw)
            if _broker_lines(_parsed([raw])):
                tried.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # From its first try at the broker (a loaded machine can take seconds to start it).
        tried.wait(START_SECONDS)
        time.sleep(RUN_SECONDS)
        process.send_signal(signal.SIGINT)
        asked = time.monotonic()
        process.wait(timeout=40)
        stopped = time.monotonic() - asked
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(10)
    return _parsed(raws), stopped


def _parsed(raws: list[bytes]) -> list[dict[str, object]]:
    lines = []
    for raw in raws:
        try:
            lines.append(json.loads(raw.decode(errors="replace")))
        except ValueError:
            continue
    return lines


def _broker_lines(lines: list[dict[str, object]]) -> list[str]:
    """The lines about the broker: their event or error says so.

    (Not the whole line: the journal's path is in ``tmp_path``, which holds this test's name,
    "unreachable": every journal line matched too, and a run with one more summary line than
    usual went over the bound.)
    """
    words = ("unreachable", "lost or refused", "back-off", "does not resolve")
    return [
        str(line.get("event"))
        for line in lines
        if any(w in f"{line.get('event')} {line.get('error', '')}" for w in words)
    ]


def test_unreachable_broker_logs_a_summary_and_stops_at_once(tmp_path: Path) -> None:
    lines, stopped = _run_until_sigint(f"mqtt://127.0.0.1:{_unused_port()}", tmp_path)
    broker = _broker_lines(lines)
    # First failure of the publisher, the command router and the simulated betting system,
    # then summaries at 2, 4, 8... attempts: a dozen lines, not one per retry.
    assert 3 <= len(broker) <= 14, "\n".join(broker)
    assert any("still unreachable after" in event and "next in" in event for event in broker)
    assert stopped < 6.0, f"stop took {stopped:.1f} s"
    assert any("no broker was reachable" in str(line.get("event")) for line in lines)


def test_unresolvable_broker_host_is_named(tmp_path: Path) -> None:
    lines, stopped = _run_until_sigint("mqtt://nonexistent.invalid:1883", tmp_path)
    named = [line for line in lines if "'nonexistent.invalid' does not resolve" in str(line)]
    assert named, "\n".join(_broker_lines(lines))
    assert len(_broker_lines(lines)) <= 14
    assert stopped < 6.0, f"stop took {stopped:.1f} s"
