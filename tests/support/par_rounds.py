"""Teen Patti 20-20 rounds for the archive's comparison with the par sheet (test support).

Cards judged and settled by the game's own rules (``resolve``, ``settle``: the settlement lines
a table publishes), from fair shuffles, a short deck (2s to 5s out) or a reader that reads
every heart as the diamond of its rank (a round it would read a card twice in is refused, as a
table refuses it); archived through the store as a table's entries.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.archive.backend import open_store
from controller.archive.ingest import Entry, TableKeys, classify
from controller.cards import Card, standard_cards
from controller.games.teen_patti.rules import DEFAULT_PAYTABLES, TEEN_PATTI_20_20

GAME = "teen-patti-20-20"
TABLES = ("fair", "short", "misread")
KEYS = TableKeys({table: None for table in TABLES})
DAY = datetime(2026, 11, 25, tzinfo=UTC)
"""The day the rounds are played by default."""
ROUNDS = 600


def _text(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def deal(kind: str, rng: random.Random) -> list[Card] | None:
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


def lines_of(cards: list[Card]) -> list[dict[str, Any]]:
    """Deal A1 B1 A2 B2 A3 B3; the game's own result and settlement lines."""
    result = TEEN_PATTI_20_20.resolve({"A": cards[0::2], "B": cards[1::2]})
    settled = TEEN_PATTI_20_20.settle(result, DEFAULT_PAYTABLES)
    return [{"bet": bet, **outcome.to_wire()} for bet, outcome in settled.items()]


class Table:
    """One table's entries, seq by seq, and the payouts it settled."""

    def __init__(self, table: str, day: datetime = DAY) -> None:
        self.table = table
        self.day = day
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
        at = self.day + timedelta(seconds=30 * n)
        self.add("round_opened", at, {"round_no": n, "game": game}, rid)
        self.add("round_result", at + timedelta(seconds=20), {"game": game, "bets": lines}, rid)
        for line in lines:
            self.payouts.setdefault(line["bet"], Counter())[line["payout"]] += 1


def tables(day: datetime = DAY) -> dict[str, Table]:
    """:data:`ROUNDS` rounds of each of :data:`TABLES` (their names say how they deal), and
    three Texas Hold'em rounds (no house bet) at ``fair``."""
    tables = {name: Table(name, day) for name in TABLES}
    for name, table in tables.items():
        rng = random.Random(f"{name}-2026")
        n = 0
        while n < ROUNDS:
            cards = deal(name, rng)
            if cards is not None:
                n += 1
                table.round(n, GAME, lines_of(cards))
    for n in range(ROUNDS + 1, ROUNDS + 4):  # a game without a house bet
        tables["fair"].round(n, "texas-holdem", [])
    return tables


async def fill(url: str, tables: dict[str, Table]) -> None:
    """Archive the tables' entries into ``url``."""
    store = await open_store(url)
    try:
        await store.store_entries([e for table in tables.values() for e in table.entries])
    finally:
        await store.close()
