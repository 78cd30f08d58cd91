"""Hold'em live equity: every live seat's chance to win (and to tie) from here on.

Given the hole cards of the seats still in the hand, the board so far and the cards known to
be out of play (folded hands, burns), :func:`win_probabilities` looks at the run-outs of the
rest of the board:

* **Exact enumeration** when there are at most :data:`EXACT_LIMIT` run-outs (always after
  the flop, the turn and the river; pre-flop never with a full deck), every run-out counted
  once;
* **Monte Carlo** otherwise (pre-flop), with ``samples`` random run-outs drawn from numpy's
  generator seeded from the cards themselves, so a replayed round (or another controller)
  computes exactly the same figures.

Both evaluate seven-card hands in numpy batches (:func:`controller.games.poker.evaluate7_batch`).
Pure: no I/O, no clock; the only randomness is the seeded generator.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from math import comb
from typing import Final

import numpy as np
import numpy.typing as npt

from controller.cards import Card
from controller.errors import RulesError
from controller.games.poker.evaluator import evaluate7_batch

EXACT_LIMIT: Final = 20_000
"""Most run-outs enumerated exactly (the flop has at most C(47, 2) = 1,081)."""

DEFAULT_SAMPLES: Final = 60_000
"""Monte Carlo run-outs when the caller does not say: 1 s.e. <= 0.21 percentage points, so
every seat's figure within 0.5 pp of the exact one (bench/equity.py, docs/performance.md)."""

BOARD_SIZE: Final = 5


@dataclass(frozen=True, slots=True)
class Equity:
    """One seat's chances.

    Attributes:
        win: Probability that the seat alone has the best hand at showdown.
        tie: Probability that it shares the best hand with at least one other seat.
    """

    win: float
    tie: float

    def to_wire(self, digits: int = 4) -> dict[str, float]:
        """JSON form, rounded (``{"win": 0.8123, "tie": 0.0101}``)."""
        return {"win": round(self.win, digits), "tie": round(self.tie, digits)}


@dataclass(frozen=True, slots=True)
class EquityReport:
    """The chances of every seat, and how they were computed.

    Attributes:
        seats: Each seat's :class:`Equity`, in the order the seats were given.
        method: ``"exact"`` or ``"monte_carlo"``.
        runouts: Run-outs evaluated (all of them when exact).
        standard_error: Largest one-sigma error of a ``win`` figure (0 when exact).
    """

    seats: Mapping[str, Equity]
    method: str
    runouts: int
    standard_error: float

    def to_wire(self, digits: int = 4) -> dict[str, object]:
        """JSON form for an overlay."""
        return {
            "seats": {seat: equity.to_wire(digits) for seat, equity in self.seats.items()},
            "method": self.method,
            "runouts": self.runouts,
            "standard_error": round(self.standard_error, 6),
        }


def _codes(cards: Sequence[Card], what: str) -> list[int]:
    codes = []
    for card in cards:
        if not isinstance(card, Card) or card.is_joker:
            raise RulesError(f"{what}: {card!r} is not a standard card", where=what)
        codes.append(card.code)
    return codes


def derive_seed(hole: Mapping[str, Sequence[Card]], board: Sequence[Card]) -> int:
    """A seed that depends only on the cards (and which seat holds which)."""
    text = "|".join(
        f"{seat}:{''.join(str(card) for card in cards)}" for seat, cards in sorted(hole.items())
    )
    text += "|board:" + "".join(str(card) for card in board)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


@lru_cache(maxsize=16)
def _combinations(n: int, k: int) -> npt.NDArray[np.intp]:
    """Every k-subset of range(n) as rows (cached: the same shapes recur street after street)."""
    if k == 0:
        return np.zeros((1, 0), dtype=np.intp)
    flat = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(n), k)),
        dtype=np.intp,
        count=comb(n, k) * k,
    )
    flat.setflags(write=False)
    return flat.reshape(-1, k)


def _tally(strengths: npt.NDArray[np.int16]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per seat (rows), the run-outs (columns) won alone and shared."""
    best = strengths.max(axis=0)
    top = strengths == best
    count = top.sum(axis=0)
    wins = (top & (count == 1)).sum(axis=1)
    ties = (top & (count > 1)).sum(axis=1)
    return wins.astype(np.int64), ties.astype(np.int64)


def _checked_codes(
    hole: Mapping[str, Sequence[Card]], board: Sequence[Card], dead: Sequence[Card]
) -> tuple[list[list[int]], list[int], list[int]]:
    """The hole cards' codes (seat by seat), the board's and every known card's.

    Raises:
        RulesError: No seat, a seat without exactly two cards, a board of more than five, a
            joker or a card twice.
    """
    if not hole:
        raise RulesError("equity needs at least one seat")
    hole_codes = []
    for seat in hole:
        codes = _codes(hole[seat], f"seat {seat}")
        if len(codes) != 2:
            raise RulesError(
                f"seat {seat} has {len(codes)} hole cards; equity needs two", seat=seat
            )
        hole_codes.append(codes)
    board_codes = _codes(board, "board")
    if len(board_codes) > BOARD_SIZE:
        raise RulesError(f"a board has at most five cards, got {len(board_codes)}")
    dead_codes = _codes(dead, "dead cards")
    known = [code for codes in hole_codes for code in codes] + board_codes + dead_codes
    if len(set(known)) != len(known):
        repeated = sorted({str(Card(c)) for c in known if known.count(c) > 1})
        raise RulesError(f"cards appear twice: {', '.join(repeated)}", cards=repeated)
    return hole_codes, board_codes, known


def _draw(rng: np.random.Generator, count: int, size: int, missing: int) -> npt.NDArray[np.int8]:
    """``count`` random choices of ``missing`` of ``size`` (at most 52) places.

    A partial Fisher-Yates shuffle of each row, one column at a time: about 6 ms for 60,000
    run-outs, a sixth of ranking ``size`` random keys a row.
    """
    places = np.tile(np.arange(size, dtype=np.int8), (count, 1))
    rows = np.arange(count)
    for column in range(missing):
        picked = rng.integers(column, size, size=count)
        chosen = places[rows, picked]
        places[rows, picked] = places[:, column]
        places[:, column] = chosen
    return places[:, :missing]


def win_probabilities(
    hole: Mapping[str, Sequence[Card]],
    board: Sequence[Card],
    dead: Sequence[Card] = (),
    *,
    samples: int | None = None,
    seed: int | None = None,
) -> EquityReport:
    """Every seat's probability of winning alone, and of tying, from the current board.

    Args:
        hole: Each live seat's two hole cards (at least one seat).
        board: The community cards so far (0, 3, 4 or 5; any count up to 5 is accepted).
        dead: Cards known to be out of play (folded hands, burns): never dealt to the board.
        samples: ``None``: exact when the run-outs are at most :data:`EXACT_LIMIT`, else Monte
            Carlo with :data:`DEFAULT_SAMPLES`. A number forces Monte Carlo with that many
            run-outs (unless the board is complete).
        seed: Monte Carlo seed; ``None`` derives it from the cards (:func:`derive_seed`).

    Returns:
        The report; ``report.seats[seat].win`` etc.

    Raises:
        RulesError: No seat, a seat without exactly two cards, a board of more than five, a
            joker, a card twice, or ``samples`` below one.
    """
    seats = list(hole)
    hole_codes, board_codes, known = _checked_codes(hole, board, dead)
    if samples is not None and samples < 1:
        raise RulesError(f"Monte Carlo needs at least one sample, got {samples}", samples=samples)

    missing = BOARD_SIZE - len(board_codes)
    remaining = np.array(sorted(set(range(52)) - set(known)), dtype=np.intp)
    if missing > len(remaining):
        raise RulesError(
            f"{len(remaining)} cards left cannot complete the board ({missing} needed)"
        )
    total = comb(len(remaining), missing)
    exact = missing == 0 or (samples is None and total <= EXACT_LIMIT)
    if exact:
        runouts = remaining[_combinations(len(remaining), missing)]
    else:
        count = DEFAULT_SAMPLES if samples is None else samples
        rng = np.random.default_rng(seed if seed is not None else derive_seed(hole, board))
        runouts = remaining[_draw(rng, count, len(remaining), missing)]
    n = len(runouts)
    base = np.broadcast_to(np.asarray(board_codes, dtype=np.intp), (n, len(board_codes)))
    strengths = np.empty((len(seats), n), dtype=np.int16)
    for row, codes in enumerate(hole_codes):
        pair = np.broadcast_to(np.asarray(codes, dtype=np.intp), (n, 2))
        strengths[row] = evaluate7_batch(np.hstack([pair, base, runouts]))
    wins, ties = _tally(strengths)
    result = {
        seat: Equity(float(wins[row]) / n, float(ties[row]) / n) for row, seat in enumerate(seats)
    }
    error = 0.0
    if not exact:
        error = max(float(np.sqrt(e.win * (1 - e.win) / n)) for e in result.values())
    return EquityReport(result, "exact" if exact else "monte_carlo", n, error)


__all__ = [
    "DEFAULT_SAMPLES",
    "EXACT_LIMIT",
    "Equity",
    "EquityReport",
    "derive_seed",
    "win_probabilities",
]
