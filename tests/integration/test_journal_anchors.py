"""The journal anchored outside its file: a cut tail is found against the recorded feed.

A real table (``tablectl run --simulate``: the scanner simulator on a pty, a real Mosquitto)
plays rounds while ``mosquitto_sub`` records its ``results`` and ``status`` topics to a file,
as an auditor would. The journal is then cut by SQL (``DELETE`` of its tail): its own checks
still pass, and ``tablectl journal verify --against-feed`` reports it truncated.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

MOSQUITTO_SUB = shutil.which("mosquitto_sub")
pytestmark = pytest.mark.skipif(MOSQUITTO_SUB is None, reason="mosquitto_sub not installed")


def _tablectl(*args: str) -> list[str]:
    return [sys.executable, "-m", "controller.cli", *args]


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def _wait_for(predicate: Any, seconds: float = 30.0) -> None:
    async with asyncio.timeout(seconds):
        while not predicate():
            await asyncio.sleep(0.05)


async def _record_and_play(
    broker: Any, table: str, journal: Path, feed: Path, *, rounds: int, new: int
) -> None:
    """Run the table up to ``rounds`` rounds in its journal (``new`` of them played now) while
    mosquitto_sub records its results and status to ``feed``."""
    assert MOSQUITTO_SUB is not None
    with feed.open("ab") as out:
        recorder = await asyncio.create_subprocess_exec(
            MOSQUITTO_SUB,
            "-h", broker.host, "-p", str(broker.port), "-q", "1",
            "-t", f"tables/{table}/results", "-t", f"tables/{table}/status",
            stdout=out,
        )  # fmt: skip
    try:
        # The recorder is subscribed once it records a probe (a line without chain_head,
        # which the verifier skips, as it skips every message that anchors nothing).
        before = len(_lines(feed))
        async with aiomqtt.Client(broker.host, broker.port) as client:
            while len(_lines(feed)) == before:
                await client.publish(f"tables/{table}/status", b'{"probe": true}', qos=1)
                await asyncio.sleep(0.2)
        results_before = sum(1 for m in _lines(feed) if m.get("kind") == "round_result")
        process = await asyncio.create_subprocess_exec(
            *_tablectl(
                "run", "--simulate", "--game", "teen-patti-20-20", "--rounds", str(rounds),
                "--seed", "7", "--broker", broker.url, "--table-id", table,
                "--journal", str(journal), "--betting-seconds", "0.1",
                "--pause-seconds", "0", "--deal-delay", "0",
            ),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        await _wait_for(
            lambda: (
                sum(1 for m in _lines(feed) if m.get("kind") == "round_result")
                >= results_before + new
                and _lines(feed)[-1].get("state") == "offline"
            )
        )
    finally:
        recorder.terminate()
        await recorder.wait()


def _verify(journal: Path, feed: Path | None) -> tuple[int, dict[str, Any]]:
    args = ["journal", "verify", "--journal", str(journal), "--json"]
    if feed is not None:
        args += ["--against-feed", str(feed)]
    done = subprocess.run(_tablectl(*args), check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


async def test_a_cut_journal_is_found_truncated_against_the_recorded_feed(mosquitto, tmp_path):
    table = f"anchor-{uuid.uuid4().hex[:6]}"
    journal = tmp_path / "table.sqlite"
    feed = tmp_path / "feed.jsonl"
    async with asyncio.timeout(120):
        await _record_and_play(mosquitto, table, journal, feed, rounds=3, new=3)

    messages = _lines(feed)
    results = [m for m in messages if m.get("kind") == "round_result"]
    births = [m for m in messages if m.get("state") == "online"]
    assert len(results) == 3 and len(births) == 1
    # Each result anchors its own entry; the birth the (empty) journal at connect time.
    assert all(r["chain_head"]["seq"] == r["seq"] for r in results)
    assert births[0]["chain_head"] == {"seq": 0, "hash": "0" * 64}

    # Intact: every anchored head is in the journal with the same hash.
    code, report = _verify(journal, feed)
    assert code == 0, report["problems"]
    assert report["anchors_checked"] == 4
    assert report["anchored_seq"] == results[-1]["seq"]
    assert report["truncated"] is False

    # Cut the last round off the tail, as someone with the file could.
    second = results[1]["seq"]
    with sqlite3.connect(journal) as db:
        db.execute("DELETE FROM entries WHERE seq > ?", (second,))
    # The file alone still looks sound: the chain is intact up to its new end...
    code, alone = _verify(journal, None)
    assert code == 0, alone["problems"]
    assert alone["last_seq"] == second
    # ...but the feed holds a head the journal does not contain.
    code, report = _verify(journal, feed)
    assert code == 1
    assert report["truncated"] is True
    assert f"anchors seq {results[-1]['seq']}" in report["problems"][0]["what"]
    assert f"journal ends at seq {second}" in report["problems"][0]["what"]


async def test_a_restart_anchors_the_previous_session_in_its_birth(mosquitto, tmp_path):
    """The birth after a restart anchors everything the last session journalled, so cutting
    entries after the last result (which no result anchors) is found too."""
    table = f"anchor-{uuid.uuid4().hex[:6]}"
    journal = tmp_path / "table.sqlite"
    feed = tmp_path / "feed.jsonl"
    async with asyncio.timeout(180):
        await _record_and_play(mosquitto, table, journal, feed, rounds=1, new=1)
        # A restart: --rounds counts the rounds already in the journal.
        await _record_and_play(mosquitto, table, journal, feed, rounds=3, new=2)
    births = [m for m in _lines(feed) if m.get("state") == "online"]
    assert len(births) == 2
    first_session_end = births[1]["chain_head"]["seq"]
    first_result = next(m for m in _lines(feed) if m.get("kind") == "round_result")
    assert first_session_end >= first_result["seq"]
    code, report = _verify(journal, feed)
    assert code == 0, report["problems"]
    # Rewrite history after the first session's end: new rows with the same seqs but not the
    # same hashes (a cut, then a forged continuation) are found as rewritten.
    with sqlite3.connect(journal) as db:
        db.execute("UPDATE entries SET hash = ? WHERE seq = ?", ("f" * 64, first_session_end))
    code, report = _verify(journal, feed)
    assert code == 1
    assert any(
        "hash differs from the feed's anchor" in p["what"] and p["seq"] == first_session_end
        for p in report["problems"]
    )
