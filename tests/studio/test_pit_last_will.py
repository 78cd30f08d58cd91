"""A table whose controller dies shows offline on the floor: the broker's Last Will.

The real ``tablectl run --simulate`` runs as a process on a real Mosquitto (anonymous); the pit
console follows every table seen. When the process is killed (SIGKILL: no clean stop), its
sockets close and the broker publishes the table's Last Will on the retained ``status``; the
floor then shows the table offline with the will's reason. A console that starts after that
reads the same from the retained status.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from controller.studio.pit import build_pit_app
from controller.studio.pit.console import PitConsole
from controller.studio.pit.passwords import hash_password
from controller.studio.pit.runner import serving
from controller.studio.pit.settings import pit_settings

pytestmark = pytest.mark.hil

TABLE = "lw-1"


def console_app(broker_url: str):
    return build_pit_app(
        pit_settings(
            {
                "users": [
                    {"name": "a", "role": "pitboss", "password_hash": hash_password("x", n=1024)}
                ],
                "session_secret": "s" * 40,
                "mqtt": {"urls": [broker_url], "reconnect_min_seconds": 0.05},
            }
        )
    )


async def until(console: PitConsole, online: bool | None, seconds: float = 20.0) -> None:
    async with asyncio.timeout(seconds):
        while True:
            state = console.floor.tables.get(TABLE)
            if state is not None and state.online is online:
                return
            await asyncio.sleep(0.05)


async def test_a_killed_controller_shows_offline_by_its_last_will(mosquitto, tmp_path: Path):
    app = console_app(mosquitto.url)
    console: PitConsole = app.state.pit_console
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "run",
        "--simulate",
        "--broker",
        mosquitto.url,
        "--table-id",
        TABLE,
        "--journal",
        str(tmp_path / "lw.sqlite"),
        "--betting-seconds",
        "0.5",
        "--pause-seconds",
        "0.5",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with serving(app):
            await until(console, True)
            process.send_signal(signal.SIGKILL)
            await process.wait()
            await until(console, False)
            state = console.floor.tables[TABLE]
            assert state.status_reason == "connection lost"
            assert state.status_at is None, "a Last Will carries no time of the controller's"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    # A console that starts now reads it from the retained status.
    late = console_app(mosquitto.url)
    async with serving(late):
        await until(late.state.pit_console, False)
