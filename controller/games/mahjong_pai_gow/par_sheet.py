"""Mahjong Pai Gow par sheet: every deal of two hands counted exactly (pure Python)."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from fractions import Fraction

from controller.analysis import AnalysisReport, BetReport, Method, OutcomeRow, exact_row
from controller.cards import Deck, Tile
from controller.games.mahjong_pai_gow.rules import (
    DEFAULT_PAYTABLES,
    GAME_ID,
    TILES_PER_HAND,
    Reason,
    Winner,
    compare,
    key_of_values,
)

# --------------------------------------------------------------------------------------------
# Par sheet


def count_deals() -> dict[tuple[Winner, Reason], int]:
    """Every ordered deal of two tiles to the player and two to the banker, by result.

    The deal is from the 20 tiles. The two copies of a value are distinct physical tiles: a
    deal of values (a, b, c, d) happens in as many ways as there are copies left of each
    value in turn.
    """
    copies = Counter(tile.value for tile in Deck.mahjong_pai_gow() if isinstance(tile, Tile))
    counts: Counter[tuple[Winner, Reason]] = Counter()
    values = sorted(copies)
    for deal in itertools.product(values, repeat=2 * TILES_PER_HAND):
        left = dict(copies)
        ways = 1
        for value in deal:
            ways *= left[value]
            left[value] -= 1
        if ways == 0:
            continue
        outcome = compare(key_of_values(deal[0], deal[1]), key_of_values(deal[2], deal[3]))
        counts[outcome] += ways
    return dict(counts)


def analyze(*, method: Method, samples: int, seed: int, progress: bool) -> AnalysisReport:
    """Mahjong Pai Gow par sheet, bets ``banker`` and ``player``, commission per bet.

    Always exact (the enumeration takes milliseconds): ``method``, ``samples`` and ``seed``
    are accepted for the common signature; a Monte Carlo request says so in the notes.
    ``progress`` is ignored.
    """
    del progress
    started = time.perf_counter()
    counts = count_deals()
    total = sum(counts.values())
    odds = DEFAULT_PAYTABLES["player"]["win"]
    player_rows: list[OutcomeRow] = []
    banker_rows: list[OutcomeRow] = []
    for winner in Winner:
        for reason in Reason:
            number = counts.get((winner, reason), 0)
            if number == 0:
                continue
            name = f"{winner.value} wins: {reason.value.replace('_', ' ')}"
            player_pays = odds if winner is Winner.PLAYER else Fraction(-1)
            banker_pays = odds if winner is Winner.BANKER else Fraction(-1)
            player_rows.append(exact_row(name, player_pays, number, total))
            banker_rows.append(exact_row(name, banker_pays, number, total))
    notes = [
        f"all {total:,} ordered deals of two tiles to the player and two to the banker "
        "(each physical tile distinct); commission per winning bet (0.95:1)",
        "banker: the banker's side against one position; player: one position against the banker",
    ]
    if method is Method.MONTE_CARLO:
        notes.append(
            f"exact enumeration used although Monte Carlo was asked (samples={samples}, "
            f"seed={seed}): it is cheaper"
        )
    return AnalysisReport(
        game=GAME_ID,
        method=Method.EXACT,
        bets={"banker": BetReport(banker_rows), "player": BetReport(player_rows)},
        seconds=time.perf_counter() - started,
        notes=notes,
    )
