"""``tablectl archive report``: a table's rounds over a period, from the archived rounds."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.archive.backend import open_store
from controller.archive.errors import ArchiveError
from controller.archive.ingest import Entry, TableKeys, classify
from controller.archive.report import table_report
from controller.cli import main

KEYS = TableKeys({"t1": None, "t2": None})
DAY = datetime(2026, 11, 25, tzinfo=UTC)


def _text(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class Table:
    """Builds one table's entries, seq by seq."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.seq = 0
        self.entries: list[Entry] = []

    def add(
        self, kind: str, at: datetime, data: dict[str, Any], rid: str, *, delayed: bool = False
    ) -> None:
        self.seq += 1
        body = {
            "schema_version": "2",
            "table": self.table,
            "round": rid,
            "seq": self.seq,
            "session": 1,
            "kind": kind,
            "at": _text(at),
            "delayed": delayed,
            "data": data,
        }
        found = classify(f"tables/{self.table}/events", json.dumps(body).encode(), KEYS)
        assert isinstance(found, Entry), found
        self.entries.append(found)

    def round(
        self, n: int, at: datetime, end: str | None, lines: list[dict[str, Any]], **flags: bool
    ) -> None:
        rid = f"{self.table}-{n:06d}"
        self.add("round_opened", at, {"round_no": n, "game": "g"}, rid)
        self.add("betting_closed", at + timedelta(seconds=15), {}, rid)
        done = at + timedelta(seconds=30)
        if end == "result":
            self.add(
                "round_result", done, {"game": "g", "winner": "A", "bets": lines}, rid, **flags
            )
        elif end == "void":
            refunds = {"player_a": {"outcome": "refund", "payout": "1"}}
            self.add("round_voided", done, {"reason": "shoe dropped", "bets": refunds}, rid)


def _lines(rng: random.Random) -> list[dict[str, Any]]:
    lines = [
        {"bet": bet, "outcome": rng.choice(["win", "lose", "push"]), "payout": "1"}
        for bet in ("player_a", "player_b")
    ]
    lines += [
        {"bet": "ante", "position": str(p), "outcome": rng.choice(["win", "lose"]), "payout": "1"}
        for p in (1, 2)
    ]
    return lines


async def _fill(db: str) -> Counter[tuple[str, str]]:
    """Archive t1's and t2's rounds; the expected per-bet counts of t1's period."""
    rng = random.Random(7)
    t1, t2 = Table("t1"), Table("t2")
    expected: Counter[tuple[str, str]] = Counter()
    t1.round(1, DAY - timedelta(minutes=5), "result", _lines(rng))  # before the period
    for n in range(2, 12):
        at = DAY + timedelta(hours=n)
        end = "void" if n in {4, 9} else "result"
        lines = _lines(rng)
        t1.round(n, at, end if n != 11 else None, lines, delayed=n == 7)
        if end == "result" and n != 11:
            for line in lines:
                name = line["bet"] + (f" position={line['position']}" if "position" in line else "")
                expected[(name, line["outcome"])] += 1
    t1.round(12, DAY + timedelta(days=1), "result", _lines(rng))  # at --to: excluded
    t2.round(1, DAY + timedelta(hours=3), "result", _lines(rng))  # another table
    store = await open_store(db)
    try:
        await store.store_entries(t1.entries + t2.entries)
    finally:
        await store.close()
    return expected


def test_the_report_counts_a_tables_rounds_voids_delays_and_bets(archive_url, capsys):
    """On both stores (PostgreSQL and SQLite), the same report."""
    archive_db = archive_url
    expected = asyncio.run(_fill(archive_db))
    report = asyncio.run(table_report(archive_db, "t1", DAY, DAY + timedelta(days=1)))
    assert (report.rounds, report.results, report.voids, report.unfinished) == (10, 7, 2, 1)
    assert report.delayed == 1
    assert [r.round_id for r in report.void_rounds] == ["t1-000004", "t1-000009"]
    assert [r.round_id for r in report.delayed_rounds] == ["t1-000007"]
    got = Counter(
        {(bet, outcome): n for bet, row in report.bets.items() for outcome, n in row.items() if n}
    )
    assert got == expected
    assert set(report.bets) == {"ante position=1", "ante position=2", "player_a", "player_b"}

    capsys.readouterr()
    args = ["archive", "report", "--database", archive_db, "--table", "t1"]
    assert main([*args, "--from", "2026-11-25", "--to", "2026-11-26T00:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "rounds           10" in out
    assert "  voids          2" in out
    assert "delayed results  1" in out
    row = next(line for line in out.splitlines() if line.startswith("player_a "))
    assert row.split()[1:] == [
        str(report.bets["player_a"][o]) for o in ("win", "lose", "push", "refund")
    ]
    assert "t1-000004  2026-11-25T04:00:30.000000Z  void: shoe dropped" in out
    assert "t1-000007  2026-11-25T07:00:30.000000Z  winner A" in out


def test_bad_report_periods_are_refused_naming_the_option(archive_db, capsys):
    args = ["archive", "report", "--database", archive_db, "--table", "t1"]
    assert main([*args, "--from", "yesterday", "--to", "2026-11-26"]) == 2
    assert "--from 'yesterday' is not a time" in capsys.readouterr().err
    assert main([*args, "--from", "2026-11-25", "--to", "2026-11-26T10:00"]) == 2
    assert "--to '2026-11-26T10:00' has no time zone" in capsys.readouterr().err
    with pytest.raises(ArchiveError, match="must be before --to"):
        asyncio.run(table_report(archive_db, "t1", DAY, DAY))
