"""A simulated table killed with SIGKILL mid-round and started again on the same journal.

The round resumes with the cards already read, the simulated shoe continues that round's
deck (the shuffle of ``seed:round_no``, independently recomputed here), and the command
exits 0 once the journal holds N finished rounds.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from controller.cards import Deck
from controller.journal import Journal
from tests.support.rounds import round_id

pytestmark = pytest.mark.hil


def dealt(path: Path) -> list[tuple[str, str, str]]:
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        try:
            rows = db.execute(
                "SELECT round_id, body FROM entries WHERE kind='card_dealt' ORDER BY seq"
            ).fetchall()
        except sqlite3.OperationalError:  # the controller is still creating the file
            return []
    return [(r, json.loads(b)["slot"], json.loads(b)["card"]) for r, b in rows]


def command(broker_url: str, journal: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "controller.cli",
        "run",
        "--simulate",
        "--seed",
        "9",
        "--rounds",
        "2",
        "--broker",
        broker_url,
        "--table-id",
        "restart-1",
        "--journal",
        str(journal),
        "--betting-seconds",
        "0.1",
        "--pause-seconds",
        "0",
        "--deal-delay",
        "0.15",
    ]


async def test_sigkill_and_restart_resumes_the_round_and_the_shoe(mosquitto, tmp_path):
    journal = tmp_path / "table.sqlite"
    first = await asyncio.create_subprocess_exec(
        *command(mosquitto.url, journal),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(30):
            while len(dealt(journal)) < 3:
                assert first.returncode is None, "the table ended before it was killed"
                await asyncio.sleep(0.02)
    finally:
        first.send_signal(signal.SIGKILL)
        await first.wait()
    before = dealt(journal)
    assert 3 <= len(before) < 6

    second = await asyncio.create_subprocess_exec(
        *command(mosquitto.url, journal),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(second.communicate(), 60)
    assert second.returncode == 0, err.decode()

    after = dealt(journal)
    assert after[: len(before)] == before, "cards read before the crash are kept"
    first_round = round_id(journal, "restart-1")
    round_one = [card for rid, _, card in after if rid == first_round]
    shoe = [str(piece) for piece in Deck.standard()]
    random.Random("9:1").shuffle(shoe)
    assert round_one == shoe[:6], "the shoe continues the interrupted round's deck"

    with sqlite3.connect(journal) as db:
        kinds = [k for (k,) in db.execute("SELECT kind FROM entries ORDER BY seq")]
    assert kinds.count("round_opened") == 2
    assert kinds.count("round_result") == 2
    assert kinds.count("betting_closed") == 2
    report = Journal.open_readonly(journal).verify()
    assert report.ok, report
