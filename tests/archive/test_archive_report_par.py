"""``archive report`` against the par sheet: a fair table is in line, a biased one drifts.

Real archives (PostgreSQL and SQLite) filled with Teen Patti 20-20 rounds whose cards are
judged and settled by the game's own rules (``resolve``, ``settle``: the settlement lines a
table publishes): 600 rounds from fair shuffles of a 52-card deck, 600 from a short deck (the
2s to 5s taken out), 600 from a reader that reads every heart as the diamond of its rank (a
round it would have read a card twice in is refused, as the table refuses it), and a few
Texas Hold'em rounds (no house bet). The fair table's every bet is in line, the short deck's
and the misreading reader's Pair Plus and 6 Card Bonus drift; the observed returns are the
exact means of the lines' payouts; ``--format csv`` and ``json`` carry the same. And a real
``tablectl run --simulate`` of 40 rounds (its own shuffles, through Mosquitto into the archive
beside it) is in line on every bet.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import random
from datetime import timedelta
from fractions import Fraction

from controller.archive import drift
from controller.archive.report import table_report
from controller.cli import main
from controller.games.teen_patti.rules import DEFAULT_PAYTABLES
from controller.money import to_decimal_str
from tests.support.par_rounds import DAY, GAME, ROUNDS, TABLES, Table, deal, fill, lines_of, tables


def test_a_fair_table_is_in_line_and_a_short_deck_or_a_misreading_reader_drifts(archive_url):
    played = tables()
    asyncio.run(fill(archive_url, played))
    period = (DAY, DAY + timedelta(days=1))
    verdicts: dict[str, dict[str, str]] = {}
    for name in TABLES:
        report = asyncio.run(table_report(archive_url, name, *period))
        fits, notes = drift.compare(report)
        assert {fit.bet for fit in fits} == set(DEFAULT_PAYTABLES)
        sheet = drift.par_sheet(GAME)
        assert sheet is not None
        for fit in fits:
            assert fit.lines == ROUNDS
            # The observed return is the exact mean of what the lines paid.
            paid = played[name].payouts[fit.bet]
            mean = sum(Fraction(p) * c for p, c in paid.items()) / ROUNDS
            assert fit.returned == mean
            assert fit.par == sheet.bets[fit.bet].rtp
            assert sum(item.seen for item in fit.outcomes) == ROUNDS
            for item in fit.outcomes:
                assert item.seen == paid.get(to_decimal_str(item.returns), 0)
        verdicts[name] = {fit.bet: fit.verdict for fit in fits}
        if name == "fair":
            assert [(n.game, n.results, n.note) for n in notes] == [
                ("texas-holdem", 3, "no house bet: no return to compare")
            ]
        else:
            assert notes == []
    assert set(verdicts["fair"].values()) == {drift.IN_LINE}
    for biased in ("short", "misread"):
        for bet in ("pair_plus_a", "pair_plus_b", "six_card_bonus"):
            assert verdicts[biased][bet] == drift.DRIFT, (biased, bet)


def test_the_report_prints_it_as_text_csv_and_json(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'archive.sqlite'}"
    asyncio.run(fill(url, tables()))
    base = ["archive", "report", "--database", url, "--from", "2026-11-25", "--to", "2026-11-26"]
    assert main([*base, "--table", "short"]) == 0
    text = capsys.readouterr().out
    assert "against the par sheet (tablectl analyze GAME)" in text
    par = text.split("against the par sheet")[1].splitlines()
    six = next(line for line in par if line.strip().startswith("six_card_bonus"))
    assert six.split()[1] == str(ROUNDS) and "  DRIFT  (" in six
    assert "returns 2 (pair): seen " in text

    assert main([*base, "--table", "fair", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert tuple(rows[0]) == drift.CSV_COLUMNS
    bets = {row["bet"]: row for row in rows if row["row"] == "bet"}
    assert set(bets) == set(DEFAULT_PAYTABLES)
    assert {row["verdict"] for row in bets.values()} == {drift.IN_LINE}
    pair = [r for r in rows if r["bet"] == "pair_plus_a" and r["row"] == "outcome"]
    assert sum(int(r["seen"]) for r in pair) == ROUNDS
    assert {r["returns"] for r in pair} >= {"0", "2", "4", "7"}
    assert next(r for r in rows if r["row"] == "game")["game"] == "texas-holdem"

    assert main([*base, "--table", "misread", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["results"] == ROUNDS and document["table"] == "misread"
    by_bet = {item["bet"]: item for item in document["par_sheet"]["bets"]}
    assert by_bet["six_card_bonus"]["verdict"] == drift.DRIFT
    assert by_bet["player_a"]["par"] == "9543327/9787750"
    assert Fraction(by_bet["player_a"]["returned"]) * ROUNDS == sum(
        Fraction(o["returns"]) * o["seen"] for o in by_bet["player_a"]["outcomes"]
    )


def test_a_return_the_par_sheet_does_not_have_drifts(tmp_path):
    url = f"sqlite:///{tmp_path / 'archive.sqlite'}"
    table = Table("fair")
    rng = random.Random(3)
    for n in range(1, 41):
        cards = deal("fair", rng)
        assert cards is not None
        lines = lines_of(cards)
        if n == 40:  # a pay table other than the par sheet's: the tie paid 60 to 1
            lines = [dict(line, payout="61") if line["bet"] == "tie" else line for line in lines]
        table.round(n, GAME, lines)
    asyncio.run(fill(url, {"fair": table}))
    report = asyncio.run(table_report(url, "fair", DAY, DAY + timedelta(days=1)))
    fits, _ = drift.compare(report)
    tie = next(fit for fit in fits if fit.bet == "tie")
    assert tie.verdict == drift.DRIFT and tie.p_value == 0.0
    assert "a return the par sheet does not have" in tie.note
    assert tie.outcomes[-1].names == () and tie.outcomes[-1].returns == 61


def test_a_fair_simulated_run_is_in_line(mosquitto, tmp_path, capsys):
    """``tablectl run --simulate`` (its own shuffles, through MQTT into the archive beside it)."""
    journal = tmp_path / "sim-1.sqlite"
    run = ["run", "--simulate", "--no-studio", "--rounds", "40", "--seed", "11"]
    fast = ["--betting-seconds", "0.05", "--pause-seconds", "0", "--deal-delay", "0"]
    assert main([*run, *fast, "--broker", mosquitto.url, "--journal", str(journal)]) == 0
    capsys.readouterr()
    url = f"sqlite:///{tmp_path / 'archive.sqlite'}"
    assert main(["archive", "report", "--database", url, "--table", "sim-1", "--from",
                 "2000-01-01", "--to", "2100-01-01", "--format", "json"]) == 0  # fmt: skip
    document = json.loads(capsys.readouterr().out)
    assert document["results"] == 40
    bets = document["par_sheet"]["bets"]
    assert {item["bet"] for item in bets} == set(DEFAULT_PAYTABLES)
    assert all(item["lines"] == 40 for item in bets)
    assert {item["verdict"] for item in bets} == {drift.IN_LINE}


def test_refunds_are_left_out_and_own_settings_taken_together(archive_url):
    """On both stores: a refunded line (no play) is no trial; a setting's default line is the
    bet as the par sheet plays it, the players' own settings one row not compared."""
    table = Table("fair")
    rng = random.Random(5)
    house: list[Fraction] = []
    for n in range(1, 31):
        cards = deal("fair", rng)
        assert cards is not None
        lines = lines_of(cards)
        main = next(line for line in lines if line["bet"] == "player_a")
        house.append(Fraction(main["payout"]))
        lines = [line for line in lines if line["bet"] != "player_a"]
        # The house way's line, and two settings a player could have sent.
        lines.append(dict(main, setting="house", default=True))
        lines.append(dict(main, setting="own-1"))
        lines.append({"bet": "player_a", "setting": "own-2", "outcome": "lose", "payout": "0"})
        if n % 5 == 0:  # no play on Pair Plus A this round
            lines = [
                {"bet": "pair_plus_a", "outcome": "refund", "payout": "1"}
                if line["bet"] == "pair_plus_a"
                else line
                for line in lines
            ]
        table.round(n, GAME, lines)
    asyncio.run(fill(archive_url, {"fair": table}))
    report = asyncio.run(table_report(archive_url, "fair", DAY, DAY + timedelta(days=1)))
    fits, _ = drift.compare(report)
    by_name = {fit.name: fit for fit in fits}
    assert by_name["player_a"].lines == 30 and by_name["player_a"].par is not None
    assert by_name["player_a"].returned == sum(house) / 30
    own = by_name["player_a (the players' own settings)"]
    assert own.lines == 60 and own.verdict == drift.NOT_COMPARED
    pair = by_name["pair_plus_a"]
    assert pair.lines == 24 and pair.note.startswith("6 refunded (no play) left out")
    assert sum(item.seen for item in pair.outcomes) == 24
