"""A table's results against its game's math: the par sheet beside what the table paid.

The table does not know the stakes, but every settlement line of a result says what a bet
returned per unit staked (its ``payout``, stake included). Over a period, per game and
settlement line (a bet id and its qualifiers), :func:`compare` puts beside each other:

* the **observed return per unit staked** (the mean of the lines' payouts, an exact
  fraction) and the **par sheet's** (``tablectl analyze GAME``: the bet's return to player,
  exact where the game's analysis is);
* per **outcome** (the par sheet's outcomes grouped by what they return per unit staked:
  Teen Patti's Pair Plus ``pair`` returns 2, ``flush`` 4), how often it was seen beside how
  often it should be, with an exact two-sided binomial p-value, and for the bet a goodness of
  fit over all its outcomes (:func:`controller.archive.fit.fit_outcomes`: Pearson's
  chi-square, or exact binomials where the expected counts are small).

A bet whose p-value is below :data:`DRIFT_LEVEL` is ``drift``: its results are unlikely from
the game's math by chance (a short or stacked deck, a reader mapping a card wrongly, a pay
table other than the par sheet's); below :data:`WATCH_LEVEL`, ``watch``. A payout the par
sheet does not have is ``drift`` at once (p 0).

A line refunded in a result (no play: a Mahjong position that holds the bank) is no trial
of the game's math: it is left out, and counted in the bet's note.

What is not compared (and says why): a line that depends on the player's choice (a
``path``: Three Card Mulligan's bets, the par sheet assuming the house way's mixture of both
paths; Break Poker's own settings, taken together as one row, while the main bet's default
line, the house way, is compared as the bet itself), a game without a house bet (Texas
Hold'em), and a game without a par sheet. The par sheets are those of the games' default
pay tables and options (a table with other pay tables shows its own payouts as ``drift``).

:func:`par_sheet` computes a game's par sheet once per process (Three Card Mulligan's exact
count takes about 12 s, Break Poker's 7 s, the others under 2 s).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from controller.archive.fit import fit_outcomes
from controller.archive.report import OWN_SETTINGS
from controller.messages import utc_text
from controller.money import to_decimal_str

if TYPE_CHECKING:
    from controller.analysis import AnalysisReport, BetReport
    from controller.archive.report import TableReport

DRIFT_LEVEL = 0.001
"""A bet whose p-value is below this is ``drift`` (one fair bet in a thousand is, by chance)."""

WATCH_LEVEL = 0.01
"""A bet whose p-value is below this (and not below :data:`DRIFT_LEVEL`) is ``watch``."""

IN_LINE, WATCH, DRIFT, NOT_COMPARED = "in line", "watch", "drift", "not compared"
"""The verdicts."""


@dataclass(frozen=True, slots=True)
class OutcomeFit:
    """One outcome of a bet: what it returns, how often it should and did happen.

    Attributes:
        returns: What it returns per unit staked, stake included (``2`` for even money).
        names: The par sheet's outcomes that return this (``()``: not on the par sheet).
        probability: Their probability (``None``: not on the par sheet).
        seen: Lines settled with this return in the period.
        expected: Lines expected with it (``probability`` times the bet's lines).
        p_value: The exact two-sided binomial test of ``seen``.
    """

    returns: Fraction
    names: tuple[str, ...]
    probability: Fraction | float | None
    seen: int
    expected: float
    p_value: float

    @property
    def label(self) -> str:
        """``returns 2 (pair)`` for people."""
        names = ", ".join(self.names) if self.names else "not on the par sheet"
        return f"returns {to_decimal_str(self.returns)} ({names})"


@dataclass(frozen=True, slots=True)
class BetFit:
    """A bet (a settlement line: bet id and qualifiers) of a game, against its par sheet.

    Attributes:
        game: The game id.
        bet: The bet id.
        qualifiers: The line's ``name=value`` qualifiers (``position=P2``).
        lines: Lines settled in the period (one a result).
        returned: Observed return per unit staked (exact).
        par: The par sheet's return per unit staked (``None``: not compared).
        test: ``chi-square``, ``exact binomial`` or ``none``.
        dof: The chi-square's degrees of freedom.
        p_value: The goodness of fit's p-value (``None``: not compared).
        verdict: ``in line``, ``watch``, ``drift`` or ``not compared``.
        note: Why not compared, or what was pooled.
        outcomes: Each outcome, in the par sheet's order, then returns it does not have.
    """

    game: str
    bet: str
    qualifiers: tuple[str, ...]
    lines: int
    returned: Fraction
    par: Fraction | float | None
    test: str
    dof: int | None
    p_value: float | None
    verdict: str
    note: str = ""
    outcomes: list[OutcomeFit] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The bet as the report names it (``player position=P2``)."""
        return " ".join([self.bet, *self.qualifiers])


@dataclass(frozen=True, slots=True)
class GameNote:
    """A game of the period with nothing to compare, and why."""

    game: str
    results: int
    note: str


@functools.cache
def par_sheet(game: str) -> AnalysisReport | None:
    """The game's par sheet as ``tablectl analyze GAME`` computes it (``None``: no such game).

    Exact enumeration with the game's default options; computed once per process.
    """
    from controller.analysis import Method, UnknownGame
    from controller.errors import ConfigError
    from controller.games.registry import analyzer_for

    try:
        analyze = analyzer_for(game)
    except (UnknownGame, ConfigError):
        return None
    return analyze(method=Method.EXACT, samples=0, seed=1, progress=False)


def compare(report: TableReport) -> tuple[list[BetFit], list[GameNote]]:
    """Every settlement line of ``report``'s results against its game's par sheet.

    Returns:
        The bets (by game, then in the par sheet's bet order, then by name), and the games
        with nothing to compare (a game without a house bet, or without a par sheet).
    """
    fits: list[BetFit] = []
    notes: list[GameNote] = []
    games_with_lines = {game for game, *_ in report.returns}
    for game, results in sorted(report.games.items()):
        if game in games_with_lines:
            continue
        sheet = par_sheet(game)
        if sheet is not None and all(
            row.pays == 0 for bet in sheet.bets.values() for row in bet.outcomes
        ):
            notes.append(GameNote(game, results, "no house bet: no return to compare"))
        else:
            notes.append(GameNote(game, results, "no settlement lines in its results"))
    for key in sorted(set(report.returns) | set(report.refunds), key=_key_order):
        game, bet, position, path, setting = key
        qualifiers = tuple(
            f"{name}={value}"
            for name, value in (("position", position), ("path", path), ("setting", setting))
            if value
        )
        fit = _bet_fit(
            game, bet, qualifiers, report.returns.get(key, {}), choice=bool(path or setting)
        )
        if setting == OWN_SETTINGS:
            fit = dataclasses.replace(
                fit,
                qualifiers=("(the players' own settings)",),
                note="the settings players chose, taken together; the par sheet plays the "
                "house way (the bet's line without a setting)",
            )
        refunded = report.refunds.get(key, 0)
        if refunded:
            said = f"{refunded} refunded (no play) left out"
            fit = dataclasses.replace(fit, note="; ".join(filter(None, [said, fit.note])))
        fits.append(fit)
    for game in sorted({fit.game for fit in fits}):
        if par_sheet(game) is None:
            notes.append(GameNote(game, report.games.get(game, 0), "no par sheet for this game"))
    order = _bet_order(fits)
    fits.sort(key=lambda fit: (fit.game, order.get((fit.game, fit.bet), 99), fit.name))
    return fits, notes


def _key_order(key: tuple[str, str, str | None, str | None, str | None]) -> tuple[str, ...]:
    return tuple(str(value or "") for value in key)


def _bet_order(fits: Sequence[BetFit]) -> dict[tuple[str, str], int]:
    order: dict[tuple[str, str], int] = {}
    for game in {fit.game for fit in fits}:
        sheet = par_sheet(game)
        for index, bet in enumerate(sheet.bets if sheet is not None else ()):
            order[game, bet] = index
    return order


_PAYOUT = re.compile(r"[0-9]{1,12}(\.[0-9]{1,12})?")
"""A settlement line's ``payout`` as the contract writes it (docs/mqtt.md), of a sane size."""


def _payout(text: str) -> Fraction | None:
    """A payout as an exact fraction; ``None`` for anything the contract does not write."""
    if not _PAYOUT.fullmatch(text):
        return None
    return Fraction(Decimal(text))


def _bet_fit(
    game: str, bet: str, qualifiers: tuple[str, ...], payouts: dict[str, int], *, choice: bool
) -> BetFit:
    seen: dict[Fraction, int] = {}
    unreadable = 0
    for text, count in payouts.items():
        value = _payout(text)
        if value is None:
            unreadable += count
            continue
        seen[value] = seen.get(value, 0) + count
    lines = sum(seen.values())
    returned = sum((value * count for value, count in seen.items()), Fraction(0))
    returned = returned / lines if lines else Fraction(0)
    sheet = par_sheet(game)
    par_bet = sheet.bets.get(bet) if sheet is not None else None
    note = f"{unreadable} line(s) without a readable payout left out" if unreadable else ""

    def not_compared(why: str) -> BetFit:
        outcomes = [
            OutcomeFit(value, (), None, count, 0.0, 1.0) for value, count in sorted(seen.items())
        ]
        return BetFit(
            game, bet, qualifiers, lines, returned, None, "none", None, None, NOT_COMPARED,
            "; ".join(filter(None, [why, note])), outcomes,
        )  # fmt: skip

    if sheet is None:
        return not_compared("no par sheet for this game")
    if choice:
        return not_compared(
            "depends on the player's choice (the table settles each; the par sheet assumes "
            "the house way)"
        )
    if par_bet is None or not par_bet.outcomes:
        return not_compared("not a bet of the par sheet")
    classes = _classes(par_bet)
    outcomes_order = list(classes)
    extra = sorted(value for value in seen if value not in classes)
    probabilities = [classes[value][1] for value in outcomes_order] + [Fraction(0)] * len(extra)
    counts = [seen.get(value, 0) for value in outcomes_order + extra]
    fit = fit_outcomes(counts, probabilities)
    outcomes = [
        OutcomeFit(
            value,
            classes[value][0] if value in classes else (),
            classes[value][1] if value in classes else None,
            count,
            lines * float(probability),
            p_value,
        )
        for value, count, probability, p_value in zip(
            outcomes_order + extra, counts, probabilities, fit.outcome_p, strict=True
        )
    ]
    if extra:
        note = "; ".join(filter(None, [note, "a return the par sheet does not have"]))
    elif fit.pooled:
        rare = "1 rare outcome" if fit.pooled == 1 else f"{fit.pooled} rare outcomes"
        note = "; ".join(filter(None, [note, f"{rare} pooled in the test"]))
    return BetFit(
        game, bet, qualifiers, lines, returned, par_bet.rtp, fit.test, fit.dof, fit.p_value,
        _verdict(fit.p_value) if lines else NOT_COMPARED, note, outcomes,
    )  # fmt: skip


def _classes(bet: BetReport) -> dict[Fraction, tuple[tuple[str, ...], Fraction | float]]:
    """The par sheet's outcomes grouped by what they return per unit staked."""
    classes: dict[Fraction, tuple[tuple[str, ...], Fraction | float]] = {}
    for row in bet.outcomes:
        value = 1 + Fraction(row.pays)
        names, probability = classes.get(value, ((), Fraction(0)))
        classes[value] = ((*names, row.name), probability + row.probability)
    return classes


def _verdict(p_value: float) -> str:
    if p_value < DRIFT_LEVEL:
        return DRIFT
    if p_value < WATCH_LEVEL:
        return WATCH
    return IN_LINE


# --- forms -------------------------------------------------------------------------------


def _percent(value: Fraction | float | None) -> str:
    return "-" if value is None else f"{float(value) * 100:.2f}%"


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if value >= 0.0001 else f"{value:.1e}"


def _test(fit: BetFit) -> str:
    if fit.test == "chi-square":
        return f"chi-square, {fit.dof} dof"
    return fit.test if fit.test != "none" else "-"


def format_text(fits: list[BetFit], notes: list[GameNote]) -> str:
    """The comparison for people (appended to ``archive report``'s text)."""
    if not fits and not notes:
        return ""
    out = [
        "",
        "against the par sheet (tablectl analyze GAME): what each bet returned per 1 staked, "
        f"and how often each outcome came; drift at p < {DRIFT_LEVEL}, watch at p < {WATCH_LEVEL}",
    ]
    for game in sorted({fit.game for fit in fits} | {note.game for note in notes}):
        out.append("")
        out.append(game)
        out.extend(f"  {note.note} ({note.results} results)" for note in notes if note.game == game)
        mine = [fit for fit in fits if fit.game == game]
        if not mine:
            continue
        width = max(len("bet"), *(len(fit.name) for fit in mine))
        out.append(
            f"  {'bet':<{width}}  {'lines':>6}  {'returned':>9}  {'par sheet':>9}  "
            f"{'test':<16}  {'p-value':>8}  verdict"
        )
        for fit in mine:
            verdict = fit.verdict.upper() if fit.verdict == DRIFT else fit.verdict
            out.append(
                f"  {fit.name:<{width}}  {fit.lines:>6}  {_percent(fit.returned):>9}  "
                f"{_percent(fit.par):>9}  {_test(fit):<16}  {_p(fit.p_value):>8}  {verdict}"
                + (f"  ({fit.note})" if fit.note else "")
            )
            if fit.par is None:
                continue
            for item in fit.outcomes:
                share = item.seen / fit.lines if fit.lines else 0.0
                out.append(
                    f"      {item.label}: seen {item.seen} ({share * 100:.2f}%), expected "
                    f"{item.expected:.1f} ({_percent(item.probability)}), p {_p(item.p_value)}"
                )
    return "\n".join(out)


def _fraction(value: Fraction | float | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, float):
        return repr(value)
    return f"{value.numerator}/{value.denominator}"


def _decimal(value: Fraction | float | None) -> str | None:
    return None if value is None else f"{float(value):.6f}"


def to_json(fits: list[BetFit], notes: list[GameNote]) -> dict[str, Any]:
    """The comparison as a JSON object: ``{"levels", "bets": [...], "games": [...]}``.

    Returns and probabilities are exact fractions as strings (``"9543327/9787750"``) with a
    rounded decimal beside (``..._decimal``); p-values are numbers.
    """
    return {
        "levels": {"drift": DRIFT_LEVEL, "watch": WATCH_LEVEL},
        "bets": [
            {
                "game": fit.game,
                "bet": fit.bet,
                "qualifiers": list(fit.qualifiers),
                "lines": fit.lines,
                "returned": _fraction(fit.returned),
                "returned_decimal": _decimal(fit.returned),
                "par": _fraction(fit.par),
                "par_decimal": _decimal(fit.par),
                "test": fit.test,
                "dof": fit.dof,
                "p_value": fit.p_value,
                "verdict": fit.verdict,
                "note": fit.note,
                "outcomes": [
                    {
                        "returns": to_decimal_str(item.returns),
                        "names": list(item.names),
                        "probability": _fraction(item.probability),
                        "probability_decimal": _decimal(item.probability),
                        "seen": item.seen,
                        "expected": round(item.expected, 6),
                        "p_value": item.p_value,
                    }
                    for item in fit.outcomes
                ],
            }
            for fit in fits
        ],
        "games": [{"game": n.game, "results": n.results, "note": n.note} for n in notes],
    }


CSV_COLUMNS = (
    "table", "from", "to", "game", "bet", "qualifiers", "row", "returns", "outcomes", "lines",
    "seen", "expected", "frequency", "probability", "returned", "par", "test", "dof",
    "p_value", "verdict", "note",
)  # fmt: skip
"""The CSV form's columns: one ``bet`` row per bet, then one ``outcome`` row per outcome."""


def to_csv(report: TableReport, fits: list[BetFit], notes: list[GameNote]) -> str:
    """The comparison as CSV (:data:`CSV_COLUMNS`).

    A game with nothing to compare is one ``game`` row with its note.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    period = (report.table, utc_text(report.start), utc_text(report.end))
    for fit in fits:
        base = (*period, fit.game, fit.bet, " ".join(fit.qualifiers))
        writer.writerow(
            (*base, "bet", "", "", fit.lines, "", "", "", "", _decimal(fit.returned),
             _decimal(fit.par) or "", fit.test, fit.dof or "", _p_csv(fit.p_value),
             fit.verdict, fit.note)
        )  # fmt: skip
        for item in fit.outcomes:
            share = item.seen / fit.lines if fit.lines else 0.0
            writer.writerow(
                (*base, "outcome", to_decimal_str(item.returns), " / ".join(item.names),
                 fit.lines, item.seen, f"{item.expected:.3f}", f"{share:.6f}",
                 _decimal(item.probability) or "", "", "", "exact binomial", "",
                 _p_csv(item.p_value), "", "")
            )  # fmt: skip
    for note in notes:
        row = [*period, note.game, "", "", "game", "", "", note.results]
        writer.writerow(row + [""] * (len(CSV_COLUMNS) - len(row) - 2) + [NOT_COMPARED, note.note])
    return buffer.getvalue()


def _p_csv(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def report_json(report: TableReport, fits: list[BetFit], notes: list[GameNote]) -> str:
    """``archive report --format json``: the counts and the comparison, one JSON document."""
    document = {
        "table": report.table,
        "from": utc_text(report.start),
        "to": utc_text(report.end),
        "rounds": report.rounds,
        "results": report.results,
        "voids": report.voids,
        "unfinished": report.unfinished,
        "delayed": report.delayed,
        "bets": report.bets,
        "void_rounds": [_finished(item) for item in report.void_rounds],
        "delayed_rounds": [_finished(item) for item in report.delayed_rounds],
        "journals": [
            {"chain": chain, "rounds": count, "games": games}
            for chain, count, games in report.journals
        ],
        "par_sheet": to_json(fits, notes),
    }
    return json.dumps(document, indent=2)


def _finished(item: Any) -> dict[str, Any]:
    return {
        "round": item.round_id,
        "finished_at": None if item.finished_at is None else utc_text(item.finished_at),
        "detail": item.detail,
    }
