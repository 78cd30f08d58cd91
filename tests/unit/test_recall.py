"""``tablectl recall`` and ``tablectl journal verify`` on real journal files."""

from __future__ import annotations

import argparse
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.cli.recall import register
from controller.errors import TablectlError
from controller.journal import Journal, RoundFold
from controller.recall import RoundNotFound, recall_round

T0 = datetime(2026, 1, 22, 10, 0, 0, tzinfo=UTC)
SLOTS = ["A1", "B1", "A2", "B2", "A3", "B3"]
CARDS = ["As", "Kd", "2c", "9h", "Td", "3s"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tablectl")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register(subparsers)
    return parser


def _run(argv: list[str]) -> int:
    """As ``controller.cli.main`` runs a sub-command (a TablectlError is exit 2)."""
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except TablectlError as exc:
        print(f"tablectl {args.command}: {exc}")
        return 2


def _write_table(path: Path) -> None:
    """Round 1 settled with a misread, a refusal and a restart mid-deal; round 2 voided."""
    at = iter(T0 + timedelta(milliseconds=250 * n) for n in range(100))
    journal = Journal.open(path)
    rid = "tp-01-000001"

    def add(kind: str, body: dict[str, Any], round_id: str | None = rid) -> None:
        journal.append(kind, body, round_id=round_id, happened_at=next(at))

    add(
        "round_opened",
        {
            "round_id": rid,
            "round_no": 1,
            "game": "teen-patti-20-20",
            "betting_seconds": 0.5,
            "slots": SLOTS,
        },
    )
    add("card_refused", {"slot": None, "card": "Qs", "reason": "betting is still open"})
    add("betting_closed", {})

    def deal(index: int, card: str) -> None:
        slot = SLOTS[index]
        add(
            "card_dealt",
            {"slot": slot, "hand": slot[0], "index": index, "card": card, "face": "up"},
        )

    for index, card in enumerate(CARDS[:3]):
        deal(index, card)
    journal.close()
    journal = Journal.open(path)  # a restart mid-deal: session 2 finishes the round
    add("rescan_requested", {"slot": "B2", "cause": "device", "detail": "card #3", "attempt": 1})
    add("card_refused", {"slot": "B2", "card": "As", "reason": "duplicate of As"})
    add("pit_alert", {"slot": "B2", "reason": "3 misreads in a row at B2: pit boss needed"})
    for index, card in enumerate(CARDS[3:], start=3):
        deal(index, card)
    add(
        "round_result",
        {
            "game": "teen-patti-20-20",
            "round_no": 1,
            "cards": {"A": ["As", "2c", "Td"], "B": ["Kd", "9h", "3s"]},
            "winner": "A",
            "hands": {
                "A": {"category": "high_card", "description": "A-T-2 high"},
                "B": {"category": "high_card", "description": "K-9-3 high"},
            },
            "bets": [
                {"bet": "player_a", "outcome": "win", "payout": "1.98"},
                {"bet": "player_b", "outcome": "lose", "payout": "0"},
            ],
            "details": {},
        },
    )
    rid2 = "tp-01-000002"
    add(
        "round_opened",
        {
            "round_id": rid2,
            "round_no": 2,
            "game": "teen-patti-20-20",
            "betting_seconds": 0.5,
            "slots": SLOTS,
        },
        rid2,
    )
    add(
        "round_voided",
        {
            "reason": "controller stopped before betting closed",
            "bets": {
                "player_a": {"outcome": "refund", "payout": "1"},
                "player_b": {"outcome": "refund", "payout": "1"},
            },
        },
        rid2,
    )
    journal.mark_delivered_many(range(1, 4))
    journal.close()


def test_recall_reads_a_round_as_recorded(tmp_path):
    path = tmp_path / "j.sqlite"
    _write_table(path)
    with Journal.open_readonly(path) as journal:
        record = recall_round(journal, "tp-01-000001")
    doc = record.to_dict()
    assert doc["status"] == "settled"
    assert doc["sessions"] == [1, 2]
    assert [e["seq"] for e in doc["entries"]] == list(range(1, 14))
    assert [(c["slot"], c["card"]) for c in doc["cards"]] == list(zip(SLOTS, CARDS, strict=True))
    assert [c["seq"] for c in doc["cards"]] == [4, 5, 6, 10, 11, 12]
    assert [r["data"]["slot"] for r in doc["refusals"]] == [None, "B2"]
    assert doc["rescans"][0]["data"]["cause"] == "device"
    assert doc["alerts"][0]["seq"] == 9
    assert doc["result"]["winner"] == "A"
    assert doc["settlement"][0] == {"bet": "player_a", "outcome": "win", "payout": "1.98"}
    assert doc["void"] is None
    # Times are the journal's: each entry 0.25 s after the previous one.
    assert doc["timing"] == {
        "betting_window": 0.5,
        "betting_seconds": 0.5,
        "deal": 2.25,
        "time_to_result": 2.5,
        "total": 3.0,
    }
    assert doc["entries"][0]["delivered_at"] is not None
    assert doc["entries"][5]["delivered_at"] is None


def test_recall_command_text_and_json(tmp_path, capsys):
    path = tmp_path / "j.sqlite"
    _write_table(path)
    assert _run(["recall", "tp-01-000001", "--journal", str(path)]) == 0
    text = capsys.readouterr().out
    for expected in (
        "round tp-01-000001",
        "status: settled",
        "sessions 1, 2 (resumed after a restart)",
        "B2   hand B   9h",
        "refusals",
        "B2 As: duplicate of As",
        "misreads and rescans",
        "result (seq 13): winner A",
        "player_a             win     returns 1.98 per 1 staked",
        "betting window  0.500 s (announced 0.5 s)",
        "time to result  2.500 s",
        "[not delivered yet]",
    ):
        assert expected in text, expected
    assert _run(["recall", "tp-01-000002", "--journal", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "voided"
    assert doc["void"] == {"seq": 15, "reason": "controller stopped before betting closed"}
    assert doc["settlement"]["player_b"] == {"outcome": "refund", "payout": "1"}
    assert doc["timing"]["time_to_result"] is None


def test_recall_of_an_unknown_round_or_file_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "j.sqlite"
    _write_table(path)
    with Journal.open_readonly(path) as journal, pytest.raises(RoundNotFound) as info:
        recall_round(journal, "tp-01-000099")
    assert info.value.context == {"path": str(path), "round_id": "tp-01-000099"}
    assert _run(["recall", "tp-01-000099", "--journal", str(path)]) == 2
    assert "no such round in the journal" in capsys.readouterr().out
    assert _run(["recall", "x", "--journal", str(tmp_path / "nope.sqlite")]) == 2
    assert "no journal file at this path" in capsys.readouterr().out


def test_recall_runs_beside_a_live_controller(tmp_path):
    path = tmp_path / "j.sqlite"
    _write_table(path)
    with Journal.open(path) as live:  # holds the lock, as a running controller does
        live.append(
            "round_opened",
            {"round_id": "tp-01-000003", "round_no": 3, "slots": SLOTS},
            round_id="tp-01-000003",
        )
        assert _run(["recall", "tp-01-000003", "--journal", str(path)]) == 0
        with Journal.open_readonly(path) as journal:
            assert recall_round(journal, "tp-01-000003").status == "betting_open"


def test_journal_verify_command(tmp_path, capsys):
    path = tmp_path / "j.sqlite"
    _write_table(path)
    # The hand-written result is not the rules' (an abridged settlement): the file's own
    # checks only here; re-evaluation is tests/integration/test_journal_verify_rules.py.
    assert _run(["journal", "verify", "--journal", str(path)]) == 1
    assert "the rules give" in capsys.readouterr().out
    assert _run(["journal", "verify", "--journal", str(path), "--no-rules"]) == 0
    out = capsys.readouterr().out
    assert "15 entries (last seq 15), 2 rounds: 1 settled, 1 voided, 0 unfinished" in out
    assert "OK: no problem found" in out
    with sqlite3.connect(path) as db:
        db.execute("UPDATE entries SET body = replace(body, '9h', '9d') WHERE seq = 10")
    assert _run(["journal", "verify", "--journal", str(path), "--no-rules"]) == 1
    out = capsys.readouterr().out
    assert "seq 10, round tp-01-000001: hash chain broken" in out
    assert "seq 13, round tp-01-000001: result card 9h of hand B was not dealt" in out
    assert _run(["journal", "verify", "--journal", str(path), "--json", "--no-rules"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    assert {"seq": 10, "round": "tp-01-000001"}.items() <= doc["problems"][0].items()


def test_snapshot_recall_and_verify_share_one_fold_of_a_round(tmp_path):
    from controller.messages import RoundSnapshot

    path = tmp_path / "j.sqlite"
    _write_table(path)
    with Journal.open_readonly(path) as journal:
        record = recall_round(journal, "tp-01-000001")
        snapshot = RoundSnapshot.replay(journal.entries(round_id="tp-01-000001"))
        report = journal.verify()
    fold = RoundFold.replay("tp-01-000001", ((e.kind, e.body) for e in record.entries))
    assert record.fold == fold == snapshot.fold
    assert (fold.state, fold.outcome, record.status, snapshot.state) == (
        "settled",
        "result",
        "settled",
        "settled",
    )
    assert [card.card for card in fold.cards] == CARDS
    assert (
        record.settlement
        == fold.bets
        == [
            {"bet": "player_a", "outcome": "win", "payout": "1.98"},
            {"bet": "player_b", "outcome": "lose", "payout": "0"},
        ]
    )
    assert report.ok and report.settled == 1


def test_the_fold_checks_an_entry_against_the_round_so_far():
    opened = RoundFold(round_id="r").apply("round_opened", {"round_no": 1, "slots": ["A1"]})
    card = {"slot": "A1", "hand": "A", "index": 0, "card": "As", "face": "hidden"}
    assert opened.check("card_dealt", card) == ["card dealt before betting closed"]
    dealing = opened.apply("betting_closed", {}).apply("card_dealt", card)
    assert dealing.check("betting_closed", {}) == ["betting closed twice"]
    assert dealing.check("card_dealt", card) == [
        "card_dealt index 0 out of order (next is 1)",
        "more cards than the round has slots",
    ]
    assert dealing.hidden_cards == {"As"} and dealing.cards[0].public is None
    assert dealing.check("round_result", {"cards": {"A": ["As", "Kd"]}}) == [
        "result card Kd of hand A was not dealt in the round"
    ]
    assert dealing.check("round_voided", {"bets": {"a": {"outcome": "win"}}}) == [
        "void without a refund of every bet"
    ]
    voided = dealing.apply("round_voided", {"reason": "x", "bets": {}})
    assert (voided.state, voided.outcome, voided.finished) == ("voided", "void", True)
    assert voided.apply("round_result", {"cards": {}}).outcome == "void"  # the first one counts
