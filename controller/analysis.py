"""Par sheets: what every bet pays, how often, and its return to player.

Each game's ``par_sheet`` module (named in its spec; :func:`controller.games.registry.analyzer_for`
finds it) provides ``analyze(method, samples, seed, progress) -> AnalysisReport``. This module
holds the report model and its JSON and text forms.

JSON form (one document)::

    {"game": "teen-patti-20-20", "method": "exact" | "monte-carlo", "seconds": 12.3,
     "bets": {BET_ID: {"rtp": 0.97, "rtp_exact": "p/q"?, "rtp_se": 0.001?,
                       "outcomes": [{"name", "pays", "probability",
                                     "probability_exact"?, "count"?}]}}}

``pays`` is the profit per unit staked as an exact decimal string (``"0.95"``; a loss is
``"-1"``, a push ``"0"``). ``probability`` and ``rtp`` are JSON numbers for convenience; the
exact fractions ride along as strings when the method is exact.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol, TypeVar

from controller.errors import RulesError, TablectlError
from controller.money import to_decimal_str

T = TypeVar("T")


class Method(enum.StrEnum):
    """How probabilities were obtained."""

    EXACT = "exact"
    MONTE_CARLO = "monte-carlo"


@dataclass(frozen=True, slots=True)
class OutcomeRow:
    """One line of a bet's par sheet.

    Attributes:
        name: The outcome (``"trail"``, ``"player wins"``, ``"push"``).
        pays: Profit per unit staked when it happens (-1 for a loss, 0 for a push).
        probability: Exact (``Fraction``) or estimated (``float``).
        count: How many enumerated cases gave it (exact method only).
    """

    name: str
    pays: Fraction
    probability: Fraction | float
    count: int | None = None


@dataclass(slots=True)
class BetReport:
    """A bet's par sheet: its outcomes and its return to player.

    Attributes:
        outcomes: Every outcome of the bet.
        rtp: Return per unit staked (stake included): 0.9725 means 97.25%. Must be given
            explicitly where the bet's return is not a plain sum over ``outcomes`` (e.g. a
            bet with a second, optional wager); otherwise derived from the outcomes.
        rtp_se: Standard error of ``rtp`` for Monte Carlo.
    """

    outcomes: list[OutcomeRow]
    rtp: Fraction | float | None = None
    rtp_se: float | None = None

    def __post_init__(self) -> None:
        if self.rtp is None:
            total: Fraction | float = sum(
                (row.probability * (1 + row.pays) for row in self.outcomes), Fraction(0)
            )
            self.rtp = total


@dataclass(slots=True)
class AnalysisReport:
    """A game's par sheet.

    Attributes:
        game: The game id.
        method: Exact enumeration or Monte Carlo.
        bets: Bet id -> its report, in the game's order.
        seconds: Wall time of the analysis.
        notes: Assumptions worth printing (strategy used, sample count, ...).
    """

    game: str
    method: Method
    bets: dict[str, BetReport]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    samples: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The documented JSON form."""
        bets: dict[str, Any] = {}
        for bet_id, bet in self.bets.items():
            entry: dict[str, Any] = {"rtp": float(bet.rtp or 0)}
            if isinstance(bet.rtp, Fraction):
                entry["rtp_exact"] = f"{bet.rtp.numerator}/{bet.rtp.denominator}"
            if bet.rtp_se is not None:
                entry["rtp_se"] = bet.rtp_se
            outcomes = []
            for row in bet.outcomes:
                item: dict[str, Any] = {
                    "name": row.name,
                    "pays": to_decimal_str(row.pays),
                    "probability": float(row.probability),
                }
                if isinstance(row.probability, Fraction):
                    exact = row.probability
                    item["probability_exact"] = f"{exact.numerator}/{exact.denominator}"
                if row.count is not None:
                    item["count"] = row.count
                outcomes.append(item)
            entry["outcomes"] = outcomes
            bets[bet_id] = entry
        document: dict[str, Any] = {
            "game": self.game,
            "method": self.method.value,
            "seconds": round(self.seconds, 3),
            "bets": bets,
        }
        if self.samples is not None:
            document["samples"] = self.samples
        if self.notes:
            document["notes"] = list(self.notes)
        return document

    def to_text(self) -> str:
        """A par sheet for people."""
        lines = [
            f"{self.game} — {self.method.value}"
            + (f", {self.samples:,} samples" if self.samples else "")
            + f", {self.seconds:.1f} s"
        ]
        lines.extend(f"  note: {note}" for note in self.notes)
        for bet_id, bet in self.bets.items():
            wager = any(row.pays != 0 for row in bet.outcomes)
            rtp = float(bet.rtp or 0)
            se = f" ± {bet.rtp_se * 100:.4f}" if bet.rtp_se is not None else ""
            lines.append("")
            lines.append(
                f"{bet_id}: return to player {rtp * 100:.4f}%{se}"
                f"  (house edge {(1 - rtp) * 100:.4f}%)"
                if wager
                else f"{bet_id}: no house bet (how often each outcome comes; nothing is staked)"
            )
            width = max((len(row.name) for row in bet.outcomes), default=10)
            for row in bet.outcomes:
                count = f"  n={row.count:,}" if row.count is not None else ""
                pays = f"{payout_words(row.pays):<{PAYOUT_WIDTH}}  " if wager else ""
                lines.append(f"  {row.name:<{width}}  {pays}p={float(row.probability):.10f}{count}")
        return "\n".join(lines)

    def dumps(self) -> str:
        """The JSON form as text."""
        return json.dumps(self.to_json(), indent=2)


PAYOUT_WIDTH = 22
"""The width :meth:`AnalysisReport.to_text` gives :func:`payout_words` (``"pays 1000 to 1"``)."""


def payout_words(pays: Fraction) -> str:
    """A net payout per unit staked in words: ``"pays 0.95 to 1"``, a push, a lost stake.

    The par sheet counts profit per unit staked (net); the table's feed and the terminal view
    count what is returned, stake included (``"returns 1.95 per 1 staked"``): each says which.
    """
    if pays > 0:
        return f"pays {to_decimal_str(pays)} to 1"
    if pays == 0:
        return "push (stake back)"
    if pays == -1:
        return "loses the stake"
    return f"loses {to_decimal_str(-pays)} per 1 staked"


def standard_error(values_sum: float, squares_sum: float, n: int) -> float:
    """Standard error of a sample mean from running sums."""
    if n < 2:
        return math.inf
    mean = values_sum / n
    variance = max(squares_sum / n - mean * mean, 0.0) * n / (n - 1)
    return math.sqrt(variance / n)


def exact_row(name: str, pays: Fraction | int, count: int, total: int) -> OutcomeRow:
    """An exactly counted outcome: ``count`` of ``total`` enumerated cases.

    Args:
        name: The outcome.
        pays: Profit per unit staked.
        count: Cases that gave it.
        total: Every case enumerated.
    """
    return OutcomeRow(name, Fraction(pays), Fraction(count, total), count)


def sampled_bet(rows: Iterable[tuple[str, Fraction, int]]) -> BetReport:
    """A bet's Monte Carlo report from ``(outcome, pays, times seen)`` rows.

    The probabilities are the observed frequencies; ``rtp`` is the sample mean of the return
    (stake included) and ``rtp_se`` its standard error.
    """
    named = list(rows)
    total = sum(count for _, _, count in named)
    returns = [(float(1 + pays), count) for _, pays, count in named]
    value_sum = sum(value * count for value, count in returns)
    square_sum = sum(value * value * count for value, count in returns)
    return BetReport(
        [OutcomeRow(name, pays, count / total) for name, pays, count in named],
        rtp=value_sum / total,
        rtp_se=standard_error(value_sum, square_sum, total),
    )


def chunk_sizes(samples: int, chunk: int = 100_000) -> list[int]:
    """``samples`` cut into batches of at most ``chunk`` (for vectorised Monte Carlo)."""
    return [min(chunk, samples - done) for done in range(0, samples, chunk)]


def iterate_with_progress(
    items: Iterable[T], total: int | None, description: str, enabled: bool
) -> Iterator[T]:
    """Iterate, with a progress bar on stderr when ``enabled`` (tqdm)."""
    if not enabled:
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=description, unit="step", leave=False)


def exact_or_sampled(
    game: str,
    *,
    method: Method,
    samples: int,
    seed: int,
    progress: bool,
    exact: Callable[[bool], AnalysisReport],
    monte_carlo: Callable[[int, int, bool], AnalysisReport],
) -> AnalysisReport:
    """Run a par sheet's exact count or its Monte Carlo, as ``method`` asks.

    Args:
        game: The game's id (for the error).
        method: Which of the two to run.
        samples: Rounds to deal for Monte Carlo (at least 2).
        seed: Seed of the Monte Carlo generator.
        progress: Show a progress bar on stderr.
        exact: The exact report, given ``progress``.
        monte_carlo: The Monte Carlo report, given ``samples``, ``seed`` and ``progress``.

    Raises:
        RulesError: Monte Carlo with fewer than two samples.
    """
    if method is Method.EXACT:
        return exact(progress)
    if samples < 2:
        raise RulesError("Monte Carlo needs at least 2 samples", game=game, samples=samples)
    return monte_carlo(samples, seed, progress)


class AnalyzeFunction(Protocol):
    """The signature every game's ``analyze`` has."""

    def __call__(
        self, *, method: Method, samples: int, seed: int, progress: bool
    ) -> AnalysisReport:
        """Compute the par sheet."""
        ...


class UnknownGame(TablectlError):
    """A game id we do not have."""
