"""``tablectl run --simulate --linger``: the studio outlives the table until Ctrl-C.

Real runs (a subprocess, a real Mosquitto, the studio on a free port): with ``--linger`` the
studio still answers after the last round, and its secure-delay socket shows that round's
result once the delay has passed; Ctrl-C then exits 0. Without it, ``--rounds N`` exits by
itself after the last round, as scripts expect, and takes the studio with it.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import websockets

pytestmark = pytest.mark.hil

LINGERING = "--linger keeps the studio serving"


def _command(url: str, journal: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "controller.cli", "run", "--simulate", "--broker", url,
        "--journal", str(journal), "--betting-seconds", "0.3", "--pause-seconds", "0.3",
        "--deal-delay", "0.05", "--studio-port", "0", "--studio-secure-delay", "1",
        "--no-archive", "--log-level", "WARNING", "--seed", "7", *extra,
    ]  # fmt: skip


async def _start(command: list[str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )


async def _line_starting(process: asyncio.subprocess.Process, text: str, seconds: float) -> str:
    """The first line of standard error that holds ``text`` (fails if the process ends first)."""
    assert process.stderr is not None
    seen: list[str] = []
    async with asyncio.timeout(seconds):
        while True:
            line = (await process.stderr.readline()).decode()
            assert line, f"tablectl run ended before {text!r}: {''.join(seen[-10:])}"
            if text in line:
                return line
            seen.append(line)


def _http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


async def _first_view(url: str) -> dict[str, Any]:
    async with websockets.connect(url) as ws, asyncio.timeout(10):
        message: dict[str, Any] = json.loads(await ws.recv())
        return message


async def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.kill()
        await process.wait()


async def test_linger_keeps_the_studio_after_the_last_round_until_ctrl_c(mosquitto, tmp_path):
    command = _command(mosquitto.url, tmp_path / "j.sqlite", "--rounds", "1", "--linger")
    process = await _start(command)
    assert process.stderr is not None
    try:
        dealer = (await _line_starting(process, "studio: ", 30)).split()[1]
        lingering = await _line_starting(process, LINGERING, 60)
        assert "until Ctrl-C" in lingering
        assert "/tables/sim-1/overlay?mode=secure-delay shows the last result" in lingering
        # Longer than the secure delay (1 s): the delayed floor has caught up with the table.
        await asyncio.sleep(2.5)
        assert process.returncode is None, "the process stayed up after its last round"
        assert await asyncio.to_thread(_http_status, dealer) == 200
        base = dealer.replace("http://", "ws://").replace("/tables/sim-1/dealer", "")
        public = await _first_view(f"{base}/ws/tables/sim-1/public")
        secure = await _first_view(f"{base}/ws/tables/sim-1/secure-delay")
        for view in (public["view"], secure["view"]):
            assert view["round"]["no"] == 1
            assert view["round"]["state"] == "settled"
            assert view["round"]["result"], "the last round's result is shown"
        # Ctrl-C: a clean exit, status 0, nothing raised.
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(20):
            rest = (await process.stderr.read()).decode()
            assert await process.wait() == 0, rest
        assert "Traceback" not in rest, rest
        with pytest.raises(ConnectionRefusedError):
            await _first_view(f"{base}/ws/tables/sim-1/public")
    finally:
        await _kill(process)


async def test_without_linger_the_last_round_ends_the_run_and_its_studio(mosquitto, tmp_path):
    process = await _start(_command(mosquitto.url, tmp_path / "j.sqlite", "--rounds", "1"))
    assert process.stderr is not None
    try:
        dealer = (await _line_starting(process, "studio: ", 30)).split()[1]
        async with asyncio.timeout(60):
            rest = (await process.stderr.read()).decode()
            assert await process.wait() == 0, rest
        assert LINGERING not in rest
        with pytest.raises(urllib.error.URLError, match="refused"):
            await asyncio.to_thread(_http_status, dealer)
    finally:
        await _kill(process)


async def test_ctrl_c_stops_the_table_then_the_lingering_studio(mosquitto, tmp_path):
    """``make run`` (no ``--rounds``): Ctrl-C ends play, the studio stays, Ctrl-C again exits 0."""
    process = await _start(_command(mosquitto.url, tmp_path / "j.sqlite", "--linger"))
    assert process.stderr is not None
    try:
        dealer = (await _line_starting(process, "studio: ", 30)).split()[1]
        process.send_signal(signal.SIGINT)
        await _line_starting(process, LINGERING, 60)
        assert await asyncio.to_thread(_http_status, dealer) == 200
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(20):
            rest = (await process.stderr.read()).decode()
            assert await process.wait() == 0, rest
        assert "Traceback" not in rest, rest
    finally:
        await _kill(process)
