"""``make run``'s archive: ``tablectl run --simulate`` archives its table into SQLite.

The simulated table and its archive in one process, on a Mosquitto of the test's own: the
archive (a named task beside the table, ``archive.sqlite`` beside the journal) holds every
journal entry exactly once, ``tablectl recall --archive sqlite:///...`` prints what
``--journal`` prints, ``tablectl archive report`` counts the rounds, and ``--no-archive``
runs no archive.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path

import aiomqtt
import pytest

from controller.cli import main
from controller.journal import Journal

pytestmark = pytest.mark.hil

RUN = [
    "run",
    "--simulate",
    "--rounds",
    "2",
    "--seed",
    "11",
    "--betting-seconds",
    "0.2",
    "--pause-seconds",
    "0.1",
    "--deal-delay",
    "0",
]


async def _another_tables_status(mosquitto) -> None:
    status = {"schema_version": "2", "table": "other-9", "state": "online", "session": 1}
    async with aiomqtt.Client(mosquitto.host, mosquitto.port) as client:
        await client.publish("tables/other-9/status", json.dumps(status), qos=1, retain=True)


def test_a_simulated_table_is_archived_beside_its_journal(mosquitto, tmp_path, capsys):
    # Another table on the same broker: the archive beside sim-1 subscribes to sim-1 only.
    asyncio.run(_another_tables_status(mosquitto))
    journal_path = tmp_path / "sim.sqlite"
    assert main([*RUN, "--broker", mosquitto.url, "--journal", str(journal_path)]) == 0
    archive = tmp_path / "archive.sqlite"
    url = f"sqlite:///{archive}"
    with Journal.open_readonly(journal_path) as journal:
        entries = list(journal.entries())
    with sqlite3.connect(archive) as conn:
        archived = conn.execute(
            "SELECT seq, session, kind, round_id FROM events ORDER BY seq"
        ).fetchall()
        assert conn.execute("SELECT count(*) FROM gaps").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM rejected").fetchone() == (0,)
        settled = conn.execute("SELECT count(*) FROM rounds WHERE state = 'settled'").fetchone()
    # Every journal entry, exactly once (the results' second copies were absorbed).
    assert archived == [(e.seq, e.session, e.kind, e.round_id) for e in entries]
    assert settled == (2,)

    round_id = next(e.round_id for e in entries if e.kind == "round_result")
    assert round_id is not None
    _recall_agrees(round_id, journal_path, url, capsys)

    opened = entries[0].happened_at.date().isoformat()
    report = ["archive", "report", "--database", url, "--table", "sim-1", "--from", opened]
    assert main([*report, "--to", "2100-01-01"]) == 0
    out = capsys.readouterr().out
    assert "rounds           2" in out
    assert "  results        2" in out
    # --to defaults to the end of --from's day (issue 25: the README's example works as written).
    assert main(report) == 0
    assert "rounds           2" in capsys.readouterr().out

    # `archive verify` reads the SQLite archive too: it agrees with the journal, and says the
    # table does not sign (exit 1: nothing from it can be verified)...
    verify = ["archive", "verify", "--database", url, "--table", "sim-1"]
    assert main([*verify, "--journal", str(journal_path)]) == 1
    out = capsys.readouterr().out
    assert f"{len(entries)} entries (seq 1..{entries[-1].seq}), 2 rounds (2 settled" in out
    assert "the journal and the archive agree" in out
    assert "None" not in out  # issue 25: a problem without a seq printed "(seq None)"
    assert [line for line in out.splitlines() if "problem" in line] == [
        f"  problem: unsigned: not verifiable ({len(entries)} entries of a table that does not "
        "sign, archived because the config allows it)"
    ]
    assert ", 2 chain heads," in out and "2 of the archive's 2 chain heads checked" in out
    # ... and says what is wrong once an entry is missing and a round lost its row.
    with sqlite3.connect(archive) as conn:
        conn.execute("DELETE FROM entry_keys WHERE seq = 3")
        conn.execute("DELETE FROM events WHERE seq = 3")
        conn.execute("DELETE FROM rounds WHERE round_id = ?", (round_id,))
    assert main(verify) == 1
    out = capsys.readouterr().out
    assert "problem: 1 seq missing below" in out and ": 3\n" in out
    assert "problem: 1 round(s) archived without their rounds row" in out


def test_no_archive_runs_none(mosquitto, tmp_path):
    journal_path = tmp_path / "sim.sqlite"
    args = [*RUN, "--broker", mosquitto.url, "--journal", str(journal_path), "--no-archive"]
    assert main(args) == 0
    assert journal_path.exists()
    assert not (tmp_path / "archive.sqlite").exists()


def _recall_agrees(round_id: str, journal_path: Path, url: str, capsys) -> None:
    """``recall --archive`` shows what ``recall --journal`` does, and says it is unverifiable."""
    capsys.readouterr()
    assert main(["recall", round_id, "--journal", str(journal_path), "--json"]) == 0
    from_journal = json.loads(capsys.readouterr().out)
    assert main(["recall", round_id, "--archive", url, "--json"]) == 0
    from_archive = json.loads(capsys.readouterr().out)
    # The simulated table does not sign: everything from it is unverifiable, and says so.
    assert from_archive.pop("verification").startswith("unsigned: not verifiable")
    for document in (from_journal, from_archive):
        for item in document["entries"]:
            item.pop("delivered_at")
    assert from_archive == from_journal
    delivered = re.compile(r"  \[delivered [^\]]*\]")
    assert main(["recall", round_id, "--journal", str(journal_path)]) == 0
    text_journal = delivered.sub("", capsys.readouterr().out)
    assert main(["recall", round_id, "--archive", url]) == 0
    text_archive = delivered.sub("", capsys.readouterr().out).splitlines(keepends=True)
    assert text_archive.pop(1).startswith("unsigned: not verifiable")
    assert "".join(text_archive) == text_journal
