"""``Journal.verify`` with :class:`controller.rules_check.RulesCheck`: the pure parts.

Journals of whole games played on a real broker, and rewritten with a recomputed chain, are in
tests/integration/test_journal_verify_rules.py. Here: what each kind of difference reads
like, a result recorded before its round was finished, a game the registry does not know,
and hostile journals (hypothesis) that must give problems, never an exception.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.cards import parse_piece
from controller.cli.recall import register
from controller.errors import ConfigError
from controller.games.registry import GAME_IDS, make_live_game
from controller.journal import EntryKind, Journal
from controller.journal.verify import Problem, VerifyReport
from controller.rules_check import RulesCheck, result_differences, settlement_differences
from tests.support.rewrite import rechain

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
GAME = "teen-patti-20-20"
CARDS = ["As", "Kd", "2c", "9h", "Td", "3s"]
SLOTS = ["A1", "B1", "A2", "B2", "A3", "B3"]


def _result(cards: list[str], round_no: int = 1) -> dict[str, Any]:
    """The body the orchestrator journals for a Teen Patti round dealt ``cards``."""
    live = make_live_game(GAME, {}, {}).new_round({})
    for index, card in enumerate(cards):
        live.apply_card(index, parse_piece(card))
    result: dict[str, Any] = json.loads(
        json.dumps({"game": GAME, "round_no": round_no, **live.result()})
    )
    return result


def _write(path: Path, rounds: list[tuple[list[str], dict[str, Any] | None]]) -> None:
    """One Teen Patti round per item: its cards, and its result (``None``: the rules')."""
    at = iter(T0 + timedelta(milliseconds=100 * n) for n in range(1000))
    with Journal.open(path) as journal:
        for number, (cards, result) in enumerate(rounds, start=1):
            rid = f"t-{number:06d}"

            def add(kind: str, body: dict[str, Any], rid: str = rid) -> None:
                journal.append(kind, body, round_id=rid, happened_at=next(at))

            add(
                "round_opened",
                {"round_id": rid, "round_no": number, "game": GAME, "table_state": {}},
            )
            add("betting_closed", {})
            for index, card in enumerate(cards):
                slot = SLOTS[index]
                add(
                    "card_dealt",
                    {"slot": slot, "hand": slot[0], "index": index, "card": card, "face": "up"},
                )
            add("round_result", result if result is not None else _result(cards, number))


def _verify(path: Path) -> VerifyReport:
    with Journal.open_readonly(path) as journal:
        return journal.verify(round_check=RulesCheck())


def test_a_journal_of_the_rules_results_is_clean_and_counted(tmp_path):
    path = tmp_path / "j.sqlite"
    _write(path, [(CARDS, None), (["Kc", "Ad", "Kh", "Ah", "Ks", "Ac"], None)])
    report = _verify(path)
    assert report.ok, [str(p) for p in report.problems]
    assert report.rounds_checked == 2
    assert report.to_dict()["rounds_checked"] == 2
    with Journal.open_readonly(path) as journal:
        assert journal.verify().rounds_checked is None  # no round check: the file's own


def test_a_winner_and_payouts_that_do_not_follow_from_the_cards(tmp_path):
    path = tmp_path / "j.sqlite"
    forged = _result(CARDS)
    forged["winner"] = "B"
    forged["bets"][0]["payout"] = "0"  # player_a won: 1.95
    forged["bets"][1]["outcome"] = "win"  # player_b lost
    forged["bets"][1]["payout"] = "1000"
    _write(path, [(CARDS, forged)])
    report = _verify(path)
    assert [str(p) for p in report.problems] == [
        'seq 9, round t-000001: winner: the journal says "B", the rules give "A"',
        'seq 9, round t-000001: settlement (bet "player_a"): payout: the journal says "0", '
        'the rules give "1.95"',
        'seq 9, round t-000001: settlement (bet "player_b"): outcome: the journal says "win", '
        'the rules give "lose"',
        'seq 9, round t-000001: settlement (bet "player_b"): payout: the journal says "1000", '
        'the rules give "0"',
    ]


def test_a_result_before_the_round_was_finished(tmp_path):
    path = tmp_path / "j.sqlite"
    _write(path, [(CARDS[:5], _result(CARDS))])
    report = _verify(path)
    assert [p.what for p in report.problems if "rules" in p.what] == [
        "round_result before the rules finished the round: they still wait for card 5 (slot B3)"
    ]


def test_a_card_the_rules_refuse_is_named_at_its_entry(tmp_path):
    path = tmp_path / "j.sqlite"
    _write(path, [(CARDS, None)])
    with sqlite3.connect(path) as db:  # the third card at index 7, chain recomputed
        db.execute("UPDATE entries SET body = replace(body, '\"index\":2', '\"index\":7')")
        rechain(db)
    problems = [(p.seq, p.what) for p in _verify(path).problems]
    assert (5, "card_dealt does not replay through the rules of teen-patti-20-20: "
            "JournalError: card_dealt out of order in the journal") in problems  # fmt: skip


def test_a_game_the_registry_does_not_know_is_a_problem_not_a_pass(tmp_path):
    path = tmp_path / "j.sqlite"
    _write(path, [(CARDS, None)])
    with sqlite3.connect(path) as db:
        db.execute("UPDATE entries SET body = replace(body, ?, '\"nope\"')", (f'"{GAME}"',))
        rechain(db)
    problems = [(p.seq, p.round_id, p.what) for p in _verify(path).problems]
    assert problems[0][:2] == (1, "t-000001")
    assert problems[0][2].startswith(
        "the result cannot be re-evaluated: round_opened names game 'nope' (game 'nope' is "
        "not a live game"
    )


def test_the_first_round_opens_with_an_empty_table_state(tmp_path):
    path = tmp_path / "j.sqlite"
    _write(path, [(CARDS, None)])
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE entries SET body = replace(body, '\"table_state\":{}', "
            '\'"table_state":{"button":4}\') WHERE seq = 1'
        )
        rechain(db)
    assert [str(p) for p in _verify(path).problems] == [
        'seq 1, round t-000001: round_opened carries table state {"button":4}, but the '
        "journal's first round opens with {}"
    ]


# --- differences ------------------------------------------------------------------------------


def test_payouts_compare_as_exact_amounts_and_lines_by_bet_and_qualifiers():
    mine = [
        {"bet": "ante", "path": "stayed", "outcome": "win", "payout": "2.50", "default": True},
        {"bet": "ante", "path": "mulliganed", "outcome": "win", "payout": "2"},
        {"bet": "odd", "outcome": "lose", "payout": "0"},
    ]
    theirs = [
        {"bet": "ante", "path": "mulliganed", "outcome": "lose", "payout": "0"},
        {"bet": "ante", "path": "stayed", "outcome": "win", "payout": "2.5", "default": True},
        {"bet": "main", "setting": "AsKs-QhJhTd", "outcome": "push", "payout": "1"},
    ]
    assert settlement_differences(mine, theirs) == [
        'settlement (bet "ante", path "mulliganed"): outcome: the journal says "win", the '
        'rules give "lose"',
        'settlement (bet "ante", path "mulliganed"): payout: the journal says "2", the rules '
        'give "0"',
        'settlement (bet "odd"): the journal has the line {"bet":"odd","outcome":"lose",'
        '"payout":"0"}, the rules give no such line',
        'settlement (bet "main", setting "AsKs-QhJhTd"): the journal has no such line, the '
        'rules give {"bet":"main","outcome":"push","payout":"1","setting":"AsKs-QhJhTd"}',
    ]


def test_nested_differences_name_their_path():
    mine = {"winner": "seat4", "details": {"pots": [{"shares": {"seat4": 1924}}], "x": 1}}
    theirs = {"winner": "seat4", "details": {"pots": [{"shares": {"seat6": 1924}}]}}
    assert result_differences(mine, theirs) == [
        "details.pots[0].shares.seat4: the journal says 1924, the rules give nothing",
        "details.pots[0].shares.seat6: the journal says nothing, the rules give 1924",
        "details.x: the journal says 1, the rules give nothing",
    ]
    assert result_differences({"bets": {"a": {}}}, {"bets": []}) == [
        'bets: the journal says {"a":{}}, the rules give []'
    ]


def test_more_than_twenty_differences_are_counted(tmp_path):
    path = tmp_path / "j.sqlite"
    forged = _result(CARDS)
    forged["details"] = {f"k{n}": n for n in range(30)}
    _write(path, [(CARDS, forged)])
    whats = [p.what for p in _verify(path).problems]
    assert len(whats) == 21
    assert whats[-1] == "... and 12 more differences from the rules' result"


# --- hostile journals -------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
KINDS = st.sampled_from([kind.value for kind in EntryKind])


@st.composite
def hostile_rounds(draw: st.DrawFn) -> list[tuple[int, str, dict[str, Any]]]:
    opened = {
        "round_id": draw(st.text(max_size=5) | st.just("r")),
        "round_no": draw(JSON),
        "game": draw(st.sampled_from(GAME_IDS) | JSON),
        "table_state": draw(JSON),
    }
    entries: list[tuple[int, str, dict[str, Any]]] = [(1, "round_opened", opened)]
    plausible = st.fixed_dictionaries(
        {
            "index": st.integers(-1, 60) | JSON,
            "card": st.sampled_from(["As", "Kd", "JK", "1s", "W1", ""]) | JSON,
            "window": st.sampled_from(["mulligan", "setting", "action-1", "bank-offer-P1"]),
            "decision": JSON,
            "hand": JSON,
        }
    )
    for seq in range(2, draw(st.integers(2, 12))):
        body = draw(plausible | st.dictionaries(st.text(max_size=6), JSON))
        entries.append((seq, draw(KINDS), body))
    result = draw(st.dictionaries(st.sampled_from(["winner", "hands", "bets", "cards"]), JSON))
    entries.append((len(entries) + 1, "round_result", result))
    return entries


@given(hostile_rounds(), st.booleans())
def test_hostile_rounds_give_problems_never_an_exception(entries, finished):
    check = RulesCheck()
    for _ in range(2):  # twice: what the first left is what the second is judged against
        problems = list(check.check_round("r", entries, finished=finished))
        assert all(isinstance(p, Problem) and p.what for p in problems)


@given(JSON, JSON)
def test_any_recorded_result_compares_without_an_exception(mine, theirs):
    recorded = mine if isinstance(mine, dict) else {"winner": mine, "bets": [mine]}
    computed = theirs if isinstance(theirs, dict) else {"winner": theirs, "bets": [theirs]}
    assert all(isinstance(what, str) for what in result_differences(recorded, computed))


def test_a_body_nested_too_deeply_is_a_problem(tmp_path):
    """The probe's 3,000-deep value as a journal body: json.loads raises RecursionError,
    which verify let out before (a reader must not raise on any bytes)."""
    path = tmp_path / "j.sqlite"
    _write(path, [(CARDS, None)])
    with sqlite3.connect(path) as db:
        deep = '{"a":' + "[" * 3000 + "]" * 3000 + "}"
        db.execute("UPDATE entries SET body = ? WHERE seq = 3", (deep,))
        rechain(db)
    problems = [(p.seq, p.what) for p in _verify(path).problems]
    assert (3, "body is nested too deeply to read") in problems


def test_a_config_that_cannot_be_read_is_an_error_naming_it(tmp_path):
    path = tmp_path / "j.sqlite"
    _write(path, [(CARDS, None)])
    parser = argparse.ArgumentParser(prog="tablectl")
    register(parser.add_subparsers(dest="command", required=True))
    config = tmp_path / "table.toml"
    args = parser.parse_args(["journal", "verify", "--journal", str(path), "--config", str(config)])
    with pytest.raises(ConfigError, match=r"table config .*table\.toml does not exist"):
        args.func(args)
    config.write_text('table_id = "t"\ngame = "baccarat"\n[device]\nurl = "serial:///dev/x"\n')
    with pytest.raises(ConfigError, match="baccarat"):
        args.func(args)


def test_the_text_report_says_how_many_rounds_were_checked(tmp_path, capsys):
    path = tmp_path / "j.sqlite"
    _write(path, [(CARDS, None), (CARDS[::-1], None)])
    parser = argparse.ArgumentParser(prog="tablectl")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["journal", "verify", "--journal", str(path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "checked with the games' rules: 2 round(s) (each result re-evaluated)" in out
    args = parser.parse_args(["journal", "verify", "--journal", str(path), "--no-rules"])
    assert args.func(args) == 0
    assert "games' rules" not in capsys.readouterr().out
