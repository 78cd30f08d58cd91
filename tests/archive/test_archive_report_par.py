"""``archive report`` against the par sheet: a fair table is in line, a biased one drifts.

Real archives (PostgreSQL and SQLite) filled with Teen Patti 20-20 rounds whose cards are
judged and settled by the game's own rules (``resolve``, ``settle``: the settlement lines a
table publishes): 600 rounds from fair shuffles of a 52-card deck, 600 from a short deck (the
2s to 5s taken out), 600 from a reader that reads every heart as the diamond of its rank (a
round it would have read a card twice in is refused, as the table refuses it), and a few
Texas Hold'em rounds (no house bet). The fair table's every bet is in line, the short deck's
and the misreading reader's Pair Plus and 6 Card Bonus drift; the observed returns are the
exact means of the lines' payouts; ``--format csv`` and ``json`` carry the same.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

from controller.archive import drift
from controller.archive.backend import open_store
from controller.archive.ingest import Entry, TableKeys, classify
from controller.archive.report import table_report
from controller.cards import Card, standard_cards
from controller.cli import main
from controller.games.teen_patti.rules import DEFAULT_PAYTABLES, TEEN_PATTI_20_20
from controller.money import to_decimal_str

GAME = "teen-patti-20-20"
TABLES = ("fair", "short", "misread")
KEYS = TableKeys({table: None for table in TABLES})
DAY = datetime(2026, 11, 25, tzinfo=UTC)
ROUNDS = 600


def _text(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _deal(kind: str, rng: random.Random) -> list[Card] | None:
    deck = list(standard_cards())
    if kind == "short":
        deck = [card for card in deck if card.rank >= 6]
    rng.shuffle(deck)
    cards = deck[:6]
    if kind == "misread":  # a heart (code % 4 == 2) is read as the diamond of its rank
        cards = [Card(card.code - 1) if card.code % 4 == 2 else card for card in cards]
        if len(set(cards)) < len(cards):
            return None  # a card read twice: the table refuses it
    return cards


def _lines(cards: list[Card]) -> list[dict[str, Any]]:
    """Deal A1 B1 A2 B2 A3 B3; the game's own result and settlement lines."""
    result = TEEN_PATTI_20_20.resolve({"A": cards[0::2], "B": cards[1::2]})
    settled = TEEN_PATTI_20_20.settle(result, DEFAULT_PAYTABLES)
    return [{"bet": bet, **outcome.to_wire()} for bet, outcome in settled.items()]


class Table:
    """One table's entries, seq by seq, and the payouts it settled."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.seq = 0
        self.entries: list[Entry] = []
        self.payouts: dict[str, Counter[str]] = {}

    def add(self, kind: str, at: datetime, data: dict[str, Any], rid: str) -> None:
        self.seq += 1
        body = {
            "schema_version": "2",
            "table": self.table,
            "round": rid,
            "seq": self.seq,
            "session": 1,
            "kind": kind,
            "at": _text(at),
            "delayed": False,
            "data": data,
        }
        found = classify(f"tables/{self.table}/events", json.dumps(body).encode(), KEYS)
        assert isinstance(found, Entry), found
        self.entries.append(found)

    def round(self, n: int, game: str, lines: list[dict[str, Any]]) -> None:
        rid = f"{self.table}-{n:06d}"
        at = DAY + timedelta(seconds=30 * n)
        self.add("round_opened", at, {"round_no": n, "game": game}, rid)
        self.add("round_result", at + timedelta(seconds=20), {"game": game, "bets": lines}, rid)
        for line in lines:
            self.payouts.setdefault(line["bet"], Counter())[line["payout"]] += 1


def _tables() -> dict[str, Table]:
    tables = {name: Table(name) for name in TABLES}
    for name, table in tables.items():
        rng = random.Random(f"{name}-2026")
        n = 0
        while n < ROUNDS:
            cards = _deal(name, rng)
            if cards is not None:
                n += 1
                table.round(n, GAME, _lines(cards))
    for n in range(ROUNDS + 1, ROUNDS + 4):  # a game without a house bet
        tables["fair"].round(n, "texas-holdem", [])
    return tables


async def _fill(url: str, tables: dict[str, Table]) -> None:
    store = await open_store(url)
    try:
        await store.store_entries([e for table in tables.values() for e in table.entries])
    finally:
        await store.close()


def test_a_fair_table_is_in_line_and_a_short_deck_or_a_misreading_reader_drifts(archive_url):
    tables = _tables()
    asyncio.run(_fill(archive_url, tables))
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
            paid = tables[name].payouts[fit.bet]
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
    asyncio.run(_fill(url, _tables()))
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
        cards = _deal("fair", rng)
        assert cards is not None
        lines = _lines(cards)
        if n == 40:  # a pay table other than the par sheet's: the tie paid 60 to 1
            lines = [dict(line, payout="61") if line["bet"] == "tie" else line for line in lines]
        table.round(n, GAME, lines)
    asyncio.run(_fill(url, {"fair": table}))
    report = asyncio.run(table_report(url, "fair", DAY, DAY + timedelta(days=1)))
    fits, _ = drift.compare(report)
    tie = next(fit for fit in fits if fit.bet == "tie")
    assert tie.verdict == drift.DRIFT and tie.p_value == 0.0
    assert "a return the par sheet does not have" in tie.note
    assert tie.outcomes[-1].names == () and tie.outcomes[-1].returns == 61
