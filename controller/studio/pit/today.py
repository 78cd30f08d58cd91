"""The pit console's "today against the par sheet" page (``/pit/today``).

For each table of the console (its ``tables``, else every table on the floor), the day's
results from the studio archive (:func:`controller.archive.report.table_report`, the UTC day:
``?day=YYYY-MM-DD``, today by default) against the game's par sheet
(:func:`controller.archive.drift.compare`: what ``tablectl archive report`` prints). Drawn on
the server (no script): a headline saying which tables drift, then per table its bets, the
worst first, each with a large verdict (``DRIFT`` red, ``watch`` amber, ``in line`` green),
what it returned per 1 staked beside the par sheet, and its outcomes (open for a bet that is
not in line). Everything taken from the archive is escaped.
"""

from __future__ import annotations

import asyncio
import html
from datetime import UTC, date, datetime, timedelta

from controller.archive import drift
from controller.archive.errors import ArchiveError
from controller.archive.report import table_report
from controller.money import to_decimal_str

_BADGE = {
    drift.DRIFT: "bad",
    drift.WATCH: "warn",
    drift.IN_LINE: "ok",
    drift.NOT_COMPARED: "unknown",
}
_RANK = {drift.DRIFT: 0, drift.WATCH: 1, drift.IN_LINE: 2, drift.NOT_COMPARED: 3}
_WORD = {
    drift.DRIFT: "DRIFT",
    drift.WATCH: "watch",
    drift.IN_LINE: "in line",
    drift.NOT_COMPARED: "not compared",
}


def parse_day(text: str | None, now: datetime | None = None) -> date:
    """The ``day`` query parameter (``YYYY-MM-DD``), today (UTC) when absent.

    Raises:
        ValueError: Not a date, naming what was given.
    """
    if not text:
        return (now or datetime.now(UTC)).date()
    try:
        return date.fromisoformat(text)
    except ValueError:
        shown = repr(text[:40])
        shown = shown if len(shown) <= 60 else shown[:56] + "...'"
        raise ValueError(f"day {shown} is not a date (YYYY-MM-DD)") from None


async def table_fits(
    url: str, table: str, day: date, read_seconds: float
) -> tuple[int, list[drift.BetFit], list[drift.GameNote]]:
    """A table's results of ``day`` (UTC) against the par sheet: results, bets, notes.

    The archive read is bounded by ``read_seconds``; the par sheets are computed in a thread.

    Raises:
        ArchiveError: The archive cannot be read.
        TimeoutError: It took longer than ``read_seconds``.
    """
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    async with asyncio.timeout(read_seconds):
        report = await table_report(url, table, start, start + timedelta(days=1))
    fits, notes = await asyncio.to_thread(drift.compare, report)
    return report.results, fits, notes


def _e(text: object) -> str:
    return html.escape(str(text))


def _percent(value: object) -> str:
    return "-" if value is None else f"{float(value) * 100:.2f}%"  # type: ignore[arg-type]


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if value >= 0.001 else f"{value:.0e}"


def _bet_rows(fit: drift.BetFit) -> str:
    verdict = fit.verdict
    row = (
        f"<tr class='bet v-{_BADGE[verdict]}' data-bet='{_e(fit.name)}'"
        f" data-verdict='{_e(verdict)}'>"
        f"<td class=bet-name>{_e(fit.name.replace('_', ' '))}</td>"
        f"<td class=num>{fit.lines}</td>"
        f"<td class=num>{_percent(fit.returned)}</td>"
        f"<td class=num>{_percent(fit.par)}</td>"
        f"<td><span class='badge {_BADGE[verdict]} verdict'>{_WORD[verdict]}</span></td>"
        f"<td class=num>{_p(fit.p_value)}</td></tr>"
    )
    if not fit.outcomes:
        return row
    opened = " open" if verdict in (drift.DRIFT, drift.WATCH) else ""
    items = "".join(
        f"<tr><td>{_e(', '.join(item.names).replace('_', ' ') or 'not on the par sheet')}</td>"
        f"<td class=num>{_e(to_decimal_str(item.returns))}</td>"
        f"<td class=num>{item.seen}</td><td class=num>{item.expected:.1f}</td>"
        f"<td class=num>{_p(item.p_value) if fit.par is not None else '-'}</td></tr>"
        for item in fit.outcomes
    )
    note = f"<p class=note>{_e(fit.note)}</p>" if fit.note else ""
    return row + (
        f"<tr class=outcomes><td colspan=6><details{opened}><summary>outcomes</summary>{note}"
        "<table class=outcomes><tr><th>outcome</th><th>returns</th><th>seen</th>"
        f"<th>expected</th><th>p</th></tr>{items}</table></details></td></tr>"
    )


def table_section(
    table: str, results: int, fits: list[drift.BetFit], notes: list[drift.GameNote]
) -> str:
    """One table's section of the page."""
    worst = min((fit.verdict for fit in fits), key=lambda v: _RANK[v], default=drift.NOT_COMPARED)
    games = sorted({fit.game for fit in fits} | {note.game for note in notes})
    head = (
        f"<section class=today-table data-table='{_e(table)}' data-verdict='{_e(worst)}'>"
        f"<h2>{_e(table)} <span class='badge {_BADGE[worst]}'>{_WORD[worst]}</span></h2>"
        f"<p class=label>{_e(', '.join(games) or 'no game')}: {results} results</p>"
    )
    notes_html = "".join(f"<p class=note>{_e(n.game)}: {_e(n.note)}</p>" for n in notes)
    if not fits:
        return head + (notes_html or "<p class=note>No result this day.</p>") + "</section>"
    ordered = sorted(fits, key=lambda fit: (_RANK[fit.verdict], fit.p_value or 1.0))
    return (
        head
        + notes_html
        + "<table class=drift><tr><th>bet</th><th>rounds</th><th>returned per 1 staked</th>"
        "<th>par sheet</th><th>verdict</th><th>p (luck)</th></tr>"
        + "".join(_bet_rows(fit) for fit in ordered)
        + "</table></section>"
    )


def headline(sections: list[tuple[str, list[drift.BetFit]]], day: date) -> str:
    """The page's first line: which tables drift (or that every bet is in line)."""
    if not any(fits for _, fits in sections):
        return (
            "<p class='headline unknown' data-role=drift-headline>"
            f"No result on {_e(day.isoformat())} yet.</p>"
        )
    drifting = [
        (table, [fit.name for fit in fits if fit.verdict == drift.DRIFT])
        for table, fits in sections
    ]
    drifting = [(table, bets) for table, bets in drifting if bets]
    watched = [t for t, fits in sections if any(fit.verdict == drift.WATCH for fit in fits)]
    if drifting:
        names = "; ".join(
            f"{table}: {', '.join(bet.replace('_', ' ') for bet in bets)}"
            for table, bets in drifting
        )
        return (
            f"<p class='headline bad' data-role=drift-headline>DRIFT at {len(drifting)} "
            f"table(s): {_e(names)}. Check the deck and the reader; recall the rounds.</p>"
        )
    if watched:
        return (
            "<p class='headline warn' data-role=drift-headline>Watch: "
            f"{_e(', '.join(watched))} (unusual, not yet unlikely by chance)</p>"
        )
    return "<p class='headline ok' data-role=drift-headline>Every bet in line with its game.</p>"


async def today_body(
    url: str | None, tables: list[str], day: date, read_seconds: float, *, base: str
) -> str:
    """The page's body: the headline and a section per table."""
    top = (
        "<header><h1>Today against the par sheet</h1>"
        f"<span>{_e(day.isoformat())} (UTC day)</span>"
        f"<a href='{_e(base)}today?day={_e((day - timedelta(days=1)).isoformat())}'>"
        "previous day</a>"
        f"<a class=who href='{_e(base)}'>back to the floor</a></header><main class=today>"
    )
    if url is None:
        return (
            top + "<p class='headline warn'>This needs the studio archive (archive_url in the "
            "pit settings): the console keeps no results of its own.</p></main>"
        )
    if not tables:
        return top + "<p class=headline>No table on the floor yet.</p></main>"
    sections: list[tuple[str, list[drift.BetFit]]] = []
    parts: list[str] = []
    for table in tables:
        try:
            results, fits, notes = await table_fits(url, table, day, read_seconds)
        except (ArchiveError, TimeoutError) as exc:
            reason = "took too long" if isinstance(exc, TimeoutError) else str(exc)
            parts.append(
                f"<section class=today-table data-table='{_e(table)}'><h2>{_e(table)}</h2>"
                f"<p class='headline warn'>The archive could not be read: {_e(reason)}</p>"
                "</section>"
            )
            continue
        sections.append((table, fits))
        parts.append(table_section(table, results, fits, notes))
    legend = (
        "<p class=label>Per bet: what one unit staked on it every round returned, beside the "
        "game's par sheet (tablectl analyze); p (luck) is the chance a fair table is this far "
        f"off. DRIFT below {drift.DRIFT_LEVEL}, watch below {drift.WATCH_LEVEL}.</p>"
    )
    return top + headline(sections, day) + legend + "".join(parts) + "</main>"
