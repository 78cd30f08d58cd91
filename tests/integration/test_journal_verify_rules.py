"""``tablectl journal verify`` re-evaluates every result from its cards (issue 21).

A journal of each of the five games is made by playing rounds: ``run_table`` on the scanner
simulator's pty (the real driver), the simulated betting system deciding every window (Hold'em
actions, the mulligan, Break Poker's setting, Mahjong Pai Gow's bank offers), a real
Mosquitto. Each verifies clean with every result re-evaluated. Then a copy is rewritten as
someone holding the file could: a result's winner flipped and a payout changed (or a
decision, or the table state a round opened with), and the whole hash chain recomputed so
the file's own checks pass (``--no-rules`` shows that they do, as ``journal verify`` did
before it re-evaluated). ``journal verify`` names the round, the entry and what differs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.cli.recall import register
from controller.errors import TablectlError
from controller.journal import Journal
from controller.journal.verify import Problem
from controller.rules_check import RulesCheck
from simulators.table import Simulation
from tests.studio._harness import running_table
from tests.support.rewrite import rewrite

pytestmark = pytest.mark.hil

GAMES = (
    "teen-patti-20-20",
    "three-card-mulligan",
    "break-poker",
    "texas-holdem",
    "mahjong-pai-gow",
)
ROUNDS = 3
"""Rounds played per game: enough for Hold'em's button and stacks and Mahjong Pai Gow's
banker to carry over twice."""
WINDOWS = {
    "three-card-mulligan": {"decision_seconds": 2.0},
    "break-poker": {"setting_seconds": 2.0},
    "texas-holdem": {"action_seconds": 2.0},
    "mahjong-pai-gow": {"bank_seconds": 2.0},
}
"""Short decision windows (the betting system abstains now and then: the default applies at
the deadline). Their length is no part of a result, so the defaults re-evaluate them."""

Body = dict[str, Any]


async def _play(url: str, directory: Path) -> dict[str, Path]:
    async def one(number: int, game: str) -> tuple[str, Path]:
        journal = directory / f"{game}.sqlite"
        async with (
            asyncio.timeout(240),
            running_table(
                url,
                journal,
                table_id=f"jv-{number}",
                game=game,
                game_options=WINDOWS.get(game, {}),
                sim=Simulation(seed=11 + number, deal_delay=0.0),
                rounds=ROUNDS,
                betting={"think_seconds": 0.01, "seed": number},
                round_settings={"betting_seconds": 0.1, "pause_seconds": 0},
            ) as table,
        ):
            summaries = await table
        assert len(summaries) == ROUNDS, (game, summaries)
        return game, journal

    # The five tables play at once (one after the other took 19 s).
    return dict(await asyncio.gather(*(one(n, game) for n, game in enumerate(GAMES))))


@pytest.fixture(scope="module")
def played(mosquitto_session: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A journal of :data:`ROUNDS` rounds per game, played once for the module."""
    directory = tmp_path_factory.mktemp("played")
    return asyncio.run(_play(mosquitto_session.url, directory))


def _verify(journal: Path, *argv: str, capsys: Any) -> tuple[int, Body]:
    """``tablectl journal verify --json`` in-process (a TablectlError is exit 2)."""
    parser = argparse.ArgumentParser(prog="tablectl")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["journal", "verify", "--journal", str(journal), "--json", *argv])
    capsys.readouterr()
    try:
        code = int(args.func(args))
    except TablectlError as exc:
        pytest.fail(f"journal verify failed: {exc}")
    return code, json.loads(capsys.readouterr().out)


def _rows(path: Path, kind: str) -> list[tuple[int, str, Body]]:
    with sqlite3.connect(path) as db:
        return [
            (seq, round_id, json.loads(body))
            for seq, round_id, body in db.execute(
                "SELECT seq, round_id, body FROM entries WHERE kind = ? ORDER BY seq", (kind,)
            )
        ]


@pytest.fixture
def copy_of(played: dict[str, Path], tmp_path: Path) -> Callable[[str], Path]:
    def copy(game: str) -> Path:
        target = tmp_path / f"{game}.sqlite"
        shutil.copyfile(played[game], target)
        return target

    return copy


def _problems(report: Body) -> list[tuple[int | None, str | None, str]]:
    return [(p["seq"], p["round"], p["what"]) for p in report["problems"]]


@pytest.mark.parametrize("game", GAMES)
def test_a_played_journal_verifies_clean_with_every_result_re_evaluated(played, game, capsys):
    code, report = _verify(played[game], capsys=capsys)
    assert code == 0, report["problems"]
    assert (report["rounds"], report["settled"], report["rounds_checked"]) == (3, 3, 3)
    # What this covers: decisions in every game that has them, and a carried table state.
    with sqlite3.connect(played[game]) as db:
        decisions = db.execute("SELECT COUNT(*) FROM entries WHERE kind = 'decision_applied'")
        states = [json.loads(b)["table_state"] for (b,) in db.execute(
            "SELECT body FROM entries WHERE kind = 'round_opened' ORDER BY seq")]  # fmt: skip
    if game != "teen-patti-20-20":
        assert decisions.fetchone()[0] > 0
    if game in ("texas-holdem", "mahjong-pai-gow"):
        assert states[0] == {} and all(states[1:]), states


def _flip_winner(body: Body) -> None:
    body["winner"] = next(hand for hand in body["hands"] if hand != body["winner"])


def _pay_a_losing_line(body: Body) -> str:
    """Every losing line of a game with house bets now pays 1000 (the probe's forgery); in
    Hold'em (no house bets: the pots are the settlement) the pot goes to another seat.
    Returns what the problem names."""
    if body["bets"]:
        for line in body["bets"]:
            if line["payout"] == "0":
                line["payout"] = "1000"
        return 'payout: the journal says "1000", the rules give "0"'
    payouts = body["details"]["payouts"]
    seat, amount = next(iter(payouts.items()))
    other = next(hand for hand in body["hands"] if hand != seat)
    body["details"]["payouts"] = {other: amount}
    return f"details.payouts.{seat}: the journal says nothing, the rules give {amount}"


@pytest.mark.parametrize("game", GAMES)
def test_a_flipped_winner_and_payout_with_a_recomputed_chain_are_found(copy_of, game, capsys):
    journal = copy_of(game)
    seq, round_id, result = _rows(journal, "round_result")[1]
    named: list[str] = []

    def forge(body: Body) -> None:
        named.append(_pay_a_losing_line(body))
        _flip_winner(body)

    rewrite(journal, seq, forge)
    # The file's own checks (all journal verify did before): the rewrite passes them.
    code, alone = _verify(journal, "--no-rules", capsys=capsys)
    assert code == 0, alone["problems"]
    code, report = _verify(journal, capsys=capsys)
    assert code == 1
    problems = _problems(report)
    # Named at the result's entry and round; the next round's carry-over follows from the
    # cards as journalled, so nothing else is reported.
    assert all((p_seq, p_round) == (seq, round_id) for p_seq, p_round, _ in problems), problems
    whats = [what for _, _, what in problems]
    forged = next(hand for hand in result["hands"] if hand != result["winner"])
    assert whats[0] == (
        f"winner: the journal says {json.dumps(forged)}, the rules give "
        f"{json.dumps(result['winner'])}"
    )
    payouts = [what for what in whats if named[0] in what]
    assert payouts, whats
    if result["bets"]:
        # Each forged line is named by its bet id and qualifiers (the first 20 differences;
        # Break Poker has a line per setting, so the rest are counted).
        first = next(line for line in result["bets"] if line["payout"] == "0")
        qualifiers = "".join(
            f", {name} {json.dumps(first[name])}"
            for name in ("position", "path", "setting")
            if first.get(name) is not None
        )
        assert payouts[0] == (
            f"settlement (bet {json.dumps(first['bet'])}{qualifiers}): {named[0]}"
        )
        forged_lines = sum(1 for line in result["bets"] if line["payout"] == "0")
        if forged_lines + 1 > 20:
            assert whats[-1].startswith(f"... and {forged_lines + 1 - 20} more differences")
        else:
            assert len(payouts) == forged_lines


DECISION_GAMES = ("three-card-mulligan", "break-poker", "texas-holdem", "mahjong-pai-gow")


def _other_choice(game: str, opened: Body, applied: Body) -> None:
    """Turn a journalled decision into another one its window offered."""
    decision = applied["decision"]
    options = [option for option in opened["options"] if option not in decision.values()]
    if game == "texas-holdem":
        decision["action"] = "fold" if decision["action"] != "fold" else "all_in"
        decision["amount"] = 0 if decision["action"] == "fold" else decision["amount"]
    elif game == "break-poker":
        decision[next(iter(decision))] = "invalid-setting"
    else:
        key = next(key for key, value in decision.items() if value in opened["options"])
        decision[key] = options[0]


@pytest.mark.parametrize("game", DECISION_GAMES)
def test_a_changed_decision_with_a_recomputed_chain_is_found(copy_of, game, capsys):
    journal = copy_of(game)
    opens = {(r, b["window"]): b for _, r, b in _rows(journal, "decision_open")}
    seq, round_id, _ = _rows(journal, "decision_applied")[0]
    rewrite(journal, seq, lambda body: _other_choice(game, opens[round_id, body["window"]], body))
    code, alone = _verify(journal, "--no-rules", capsys=capsys)
    assert code == 0, alone["problems"]
    code, report = _verify(journal, capsys=capsys)
    assert code == 1
    problems = _problems(report)
    # The decision's round is named first (a refused decision, or a result the rules would
    # not give); a later round may follow (what it carried over no longer follows).
    assert problems and problems[0][1] == round_id, problems
    assert problems[0][0] is not None and problems[0][0] >= seq, problems


@pytest.mark.parametrize(
    ("game", "change", "named"),
    [
        ("texas-holdem", lambda state: state["stacks"].update({"1": 99999}), '"1":99999'),
        ("texas-holdem", lambda state: state.update(button=state["button"] + 1), '"button"'),
        ("mahjong-pai-gow", lambda state: state.update(banker="P4"), '"banker":"P4"'),
    ],
)
def test_a_changed_carry_over_with_a_recomputed_chain_is_found(
    copy_of, game, change, named, capsys
):
    journal = copy_of(game)
    seq, round_id, opened = _rows(journal, "round_opened")[2]
    previous = _rows(journal, "round_opened")[1][1]
    if game == "mahjong-pai-gow" and opened["table_state"].get("banker") == "P4":
        change = lambda state: state.update(banker="P1")  # noqa: E731
        named = '"banker":"P1"'
    rewrite(journal, seq, lambda body: change(body["table_state"]))
    code, alone = _verify(journal, "--no-rules", capsys=capsys)
    assert code == 0, alone["problems"]
    code, report = _verify(journal, capsys=capsys)
    assert code == 1
    first = _problems(report)[0]
    assert first[:2] == (seq, round_id)
    assert "round_opened carries table state" in first[2] and named in first[2]
    assert f"but round {previous} left" in first[2]


def test_the_table_config_gives_the_options_and_pay_tables(played, tmp_path, capsys):
    """Re-evaluated with the config's pay tables: a table paying 1.98 on player A is not
    what this journal (played on the default 1.95) recorded; the same config with the
    defaults verifies clean."""
    config = tmp_path / "table.toml"
    base = 'table_id = "jv-0"\ngame = "teen-patti-20-20"\n[device]\nurl = "serial:///dev/x"\n'
    config.write_text(base)
    code, report = _verify(played["teen-patti-20-20"], "--config", str(config), capsys=capsys)
    assert code == 0, report["problems"]
    config.write_text(base + '[paytables.player_a]\nwin = "1.98"\n')
    code, report = _verify(played["teen-patti-20-20"], "--config", str(config), capsys=capsys)
    results = [b for _, _, b in _rows(played["teen-patti-20-20"], "round_result")]
    won_a = sum(1 for body in results if body["winner"] == "A")
    assert won_a > 0
    assert code == 1
    assert (
        sum(
            '(bet "player_a"): payout: the journal says "1.95", the rules give "2.98"' in p["what"]
            for p in report["problems"]
        )
        == won_a
    )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_rewrites_of_played_rounds_give_problems_never_an_exception(played, data):
    """Any field of any entry of a played round (every game) replaced, or removed: the
    re-evaluation reports what it finds and never raises."""
    game = data.draw(st.sampled_from(GAMES))
    with Journal.open_readonly(played[game]) as journal:
        rounds: dict[str, list[tuple[int, str, Body]]] = {}
        for entry in journal.entries():
            if entry.round_id is not None:
                rounds.setdefault(entry.round_id, []).append((entry.seq, entry.kind, entry.body))
    entries = data.draw(st.sampled_from(list(rounds.values())))
    index = data.draw(st.integers(0, len(entries) - 1))
    seq, kind, body = entries[index]
    body = json.loads(json.dumps(body))
    key = data.draw(st.sampled_from(sorted(body)) | st.text(max_size=5)) if body else "x"
    if data.draw(st.booleans()):
        body.pop(key, None)
    else:
        body[key] = data.draw(JSON_VALUES)
    changed = [*entries[:index], (seq, kind, body), *entries[index + 1 :]]
    problems = list(RulesCheck().check_round("r", changed, finished=True))
    assert all(isinstance(problem, Problem) and problem.what for problem in problems)
