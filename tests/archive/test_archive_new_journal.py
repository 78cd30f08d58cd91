"""Issue 22's scenario: a table id run again with a new journal is never taken for the old one.

A simulated Teen Patti table ``sim-1`` runs with its journal; then a Hold'em table with the
same id and a new journal file. Before issue 22 the second run reused the round ids and every
de-duplication key (``sim-1-000001`` again, ``session`` 1, ``seq`` from 1): the archive
rejected its entries as conflicting copies, ``recall`` showed a Teen Patti round with
Hold'em board cards and ``archive verify`` reported the conflicts. Now each journal has its
own identity: round ids differ, the archive keeps both journals (each its own chain), raises
one alert, and ``recall``, ``report`` and ``verify`` tell them apart. Real processes' code
(``tablectl run --simulate`` with its archive, on a Mosquitto of the test's own), a real
SQLite archive.
"""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3

import pytest

from controller.cli import main
from controller.journal import Journal, short_journal_id

pytestmark = [pytest.mark.hil, pytest.mark.slow]


def _run(broker: str, journal: str, archive: str, *game: str) -> None:
    args = [
        "run", "--simulate", *game, "--rounds", "1", "--seed", "22", "--betting-seconds", "0.2",
        "--pause-seconds", "0.1", "--deal-delay", "0", "--broker", broker, "--journal", journal,
        "--archive", archive,
    ]  # fmt: skip
    assert main(args) == 0


def _out(*args: str) -> tuple[int, str]:
    """A command's exit status and standard output.

    Not through ``capsys``: ``run`` configures the log to the standard error of its moment,
    which must outlive the test (later tests log through it).
    """
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(list(args))
    return status, out.getvalue()


def _first_round(path: str) -> tuple[str, str, int]:
    """The journal's identity, its first round's id, its last seq."""
    with Journal.open_readonly(path) as journal:
        entries = list(journal.entries())
        first = next(e.round_id for e in entries if e.kind == "round_result")
        assert first is not None
        return journal.identity, first, entries[-1].seq


def test_a_new_journal_under_the_same_table_id_is_kept_apart(mosquitto, tmp_path):
    archive = tmp_path / "archive.sqlite"
    url = f"sqlite:///{archive}"
    teen_patti, holdem = str(tmp_path / "tp.sqlite"), str(tmp_path / "th.sqlite")
    _run(mosquitto.url, teen_patti, url)
    _run(mosquitto.url, holdem, url, "--game", "texas-holdem")
    old_id, old_round, old_last = _first_round(teen_patti)
    new_id, new_round, new_last = _first_round(holdem)

    # Two journals, two identities, two round ids (each carries its journal's short id).
    assert old_id != new_id
    assert old_round == f"sim-1-{short_journal_id(old_id)}-000001"
    assert new_round == f"sim-1-{short_journal_id(new_id)}-000001"

    # The archive kept both, each its own chain; nothing rejected; one alert.
    with sqlite3.connect(archive) as conn:
        assert conn.execute("SELECT count(*) FROM rejected").fetchone() == (0,)
        chains = conn.execute(
            "SELECT table_id, count(*), max(seq) FROM entry_keys GROUP BY table_id ORDER BY 1"
        ).fetchall()
        alerts = conn.execute("SELECT table_id, kind, detail FROM alerts").fetchall()
        games = dict(conn.execute("SELECT round_id, game FROM rounds").fetchall())
    assert chains == [("sim-1", old_last, old_last), (f"sim-1/{new_id}", new_last, new_last)]
    assert len(alerts) == 1
    table, kind, detail = alerts[0]
    assert (table, kind) == ("sim-1", "new_journal")
    assert detail.startswith("sim-1 started a new journal at 20")
    assert detail.endswith(f"; the previous one ended at seq {old_last}")
    assert games == {old_round: "teen-patti-20-20", new_round: "texas-holdem"}

    # recall: each round with its own game and cards.
    status, out = _out("recall", old_round, "--archive", url, "--json")
    recalled = json.loads(out)
    assert status == 0
    assert recalled["game"] == "teen-patti-20-20"
    assert set(recalled["result"]["cards"]) == {"A", "B"}
    status, out = _out("recall", new_round, "--archive", url, "--json")
    recalled = json.loads(out)
    assert status == 0
    assert recalled["game"] == "texas-holdem"
    assert "board" in json.dumps(recalled["result"]["cards"])

    # report: both journals' rounds, told apart.
    report = ["archive", "report", "--database", url, "--table", "sim-1"]
    status, out = _out(*report, "--from", "2000-01-01", "--to", "2100-01-01")
    assert status == 0
    assert "rounds           2" in out
    assert f"  sim-1{' ' * (len(new_id) + 1)}  1 round  teen-patti-20-20" in out
    assert f"  sim-1/{new_id}  1 round  texas-holdem" in out

    # verify: each journal on its own, no conflicting copies, no gap; each journal file
    # agrees with its own chain (the only problem: the simulated table does not sign).
    verify = ["archive", "verify", "--database", url, "--table", "sim-1"]
    for path, chain, last in (
        (teen_patti, "sim-1", old_last),
        (holdem, f"sim-1/{new_id}", new_last),
    ):
        status, out = _out(*verify, "--journal", path)
        assert status == 1
        assert "archive, table sim-1: 2 journals" in out
        problems = [line for line in out.splitlines() if "problem" in line]
        assert problems and all("unsigned: not verifiable" in line for line in problems), out
        assert "conflicting" not in out and "truncated" not in out
        assert f"chain {chain} (" in out
        assert (
            f"(seq 1..{last}); " in out
            and f"(chain {chain}): the journal and the archive agree" in out
        )
