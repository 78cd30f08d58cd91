"""``tablectl archive report --table T --from --to``: a table's rounds over a period.

The queries read the folded ``rounds`` rows (docs/archive.md): a round belongs to the period
when it *opened* in ``[from, to)`` (its result time when the archive lacks the opening, e.g. a
gap a replay filled with the result only). Counted: rounds, results, voids, unfinished rounds,
delayed results (published late by the table: after an outage or a restart), and, from the
v2 settlement lines of the results (``bets``: one line per bet id and qualifiers), how many
times each bet won, lost, pushed or was refunded. A void's refunds are not settlement lines
and are not counted per bet: the voids are listed with their reasons instead.

:func:`table_report` is the library (the pit console's recall can call it);
:func:`format_report` the text the command prints.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime
from typing import Any

import psycopg

from controller.archive.errors import ArchiveError
from controller.archive.sqlite_store import from_time_text, is_sqlite_url, read_rows, time_text
from controller.journal.entries import QUALIFIERS
from controller.messages import utc_text

OUTCOMES = ("win", "lose", "push", "refund")
"""The settlement outcomes, in the report's column order."""


@dataclasses.dataclass(frozen=True)
class Finished:
    """A void or a delayed result in the period.

    Attributes:
        round_id: The round.
        finished_at: When the result or void happened at the table.
        detail: A void's reason; a delayed result's winner.
    """

    round_id: str
    finished_at: datetime | None
    detail: str


@dataclasses.dataclass(frozen=True)
class TableReport:
    """A table's rounds in ``[start, end)``.

    Attributes:
        table: The table id.
        start: The period's start (inclusive).
        end: Its end (exclusive).
        rounds: Rounds in the period.
        results: Of which settled with a result.
        voids: Of which voided.
        unfinished: Of which with neither (still running, or their result is missing).
        delayed: Results and voids published late (``delayed``).
        bets: Per bet (the bet id, then ``name=value`` qualifiers), the count per outcome.
        void_rounds: The voids, in time order.
        delayed_rounds: The delayed results and voids, in time order.
        journals: Per journal of the table with rounds in the period (its chain id, the
            table's id for its first journal: docs/archive.md, "Journals"), in time order:
            ``(chain, rounds, games)``.
        returns: Per game and settlement line (``(game, bet id, position, path, setting)``)
            of the results, how many times each payout per unit staked (the line's exact
            decimal ``payout``, stake included) was settled: what
            :mod:`controller.archive.drift` compares with the game's par sheet. A setting's
            default line (the house way) has no ``setting``; the others are taken together
            under :data:`OWN_SETTINGS`.
        games: Results per game.
        refunds: Per game and settlement line, the lines refunded in a result (no play: a
            Mahjong position that holds the bank), left out of ``returns``.
    """

    table: str
    start: datetime
    end: datetime
    rounds: int
    results: int
    voids: int
    unfinished: int
    delayed: int
    bets: dict[str, dict[str, int]]
    void_rounds: list[Finished]
    delayed_rounds: list[Finished]
    journals: list[tuple[str, int, str]] = dataclasses.field(default_factory=list)
    returns: dict[tuple[str, str, str | None, str | None, str | None], dict[str, int]] = (
        dataclasses.field(default_factory=dict)
    )
    games: dict[str, int] = dataclasses.field(default_factory=dict)
    refunds: dict[tuple[str, str, str | None, str | None, str | None], int] = dataclasses.field(
        default_factory=dict
    )


_IN_PERIOD = (
    "(table_id = %s OR starts_with(table_id, %s || '/'))"
    " AND coalesce(opened_at, finished_at) >= %s AND coalesce(opened_at, finished_at) < %s"
)
"""A table's rounds (of every journal's chain) in a period."""


async def table_report(url: str, table: str, start: datetime, end: datetime) -> TableReport:
    """The report of ``table``'s rounds opened in ``[start, end)`` (aware times).

    Raises:
        ArchiveError: ``start`` is not before ``end``, or the archive cannot be read.
    """
    if start >= end:
        raise ArchiveError(
            f"the report's --from ({utc_text(start)}) must be before --to ({utc_text(end)})",
            table=table,
        )
    if is_sqlite_url(url):
        counts, lines, finished, chains = await asyncio.to_thread(
            _sqlite_rows, url, table, start, end
        )
        payouts = await asyncio.to_thread(_sqlite_payouts, url, table, start, end)
    else:
        counts, lines, finished, chains = await _postgres_rows(url, table, start, end)
        payouts = await _postgres_payouts(url, table, start, end)
    if counts is None:  # pragma: no cover (an aggregate always answers)
        raise ArchiveError("the report's count returned nothing", table=table)
    return TableReport(
        table=table,
        start=start,
        end=end,
        rounds=int(counts[0]),
        results=int(counts[1]),
        voids=int(counts[2]),
        unfinished=int(counts[3]),
        delayed=int(counts[4]),
        bets=_bets(lines),
        void_rounds=[_finished(row) for row in finished if row[2] == "void"],
        delayed_rounds=[_finished(row) for row in finished if row[3]],
        journals=[(str(chain), int(count), str(games or "")) for chain, count, games in chains],
        returns=_returns(payouts),
        games=_games(payouts),
        refunds=_refunds(payouts),
    )


_Rows = tuple[
    tuple[Any, ...] | None, list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]
]


async def _postgres_rows(url: str, table: str, start: datetime, end: datetime) -> _Rows:
    """The report's queries on PostgreSQL: counts, settlement lines, voids/delayed, journals."""
    period = (table, table, start, end)
    try:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            cursor = await conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE outcome = 'result'),"
                " count(*) FILTER (WHERE outcome = 'void'),"
                " count(*) FILTER (WHERE outcome IS NULL),"
                " count(*) FILTER (WHERE outcome IS NOT NULL AND delayed)"
                f" FROM rounds WHERE {_IN_PERIOD}",
                period,
            )
            counts = await cursor.fetchone()
            cursor = await conn.execute(
                "SELECT line->>'bet', line->>'position', line->>'path', line->>'setting',"
                " line->>'outcome', count(*) FROM rounds,"
                " jsonb_array_elements(CASE WHEN jsonb_typeof(bets) = 'array' THEN bets"
                " ELSE '[]'::jsonb END) AS line"
                f" WHERE outcome = 'result' AND {_IN_PERIOD} GROUP BY 1, 2, 3, 4, 5",
                period,
            )
            lines = await cursor.fetchall()
            cursor = await conn.execute(
                "SELECT round_id, finished_at, outcome, delayed, result->>'winner',"
                " (SELECT envelope->'data'->>'reason' FROM events e"
                "  WHERE e.table_id = rounds.table_id AND e.seq = rounds.result_seq LIMIT 1)"
                f" FROM rounds WHERE outcome IS NOT NULL AND (outcome = 'void' OR delayed)"
                f" AND {_IN_PERIOD} ORDER BY finished_at, round_id",
                period,
            )
            finished = await cursor.fetchall()
            cursor = await conn.execute(
                "SELECT table_id, count(*), string_agg(DISTINCT game, ',') FROM rounds"
                f" WHERE {_IN_PERIOD} GROUP BY table_id"
                " ORDER BY min(coalesce(opened_at, finished_at)), table_id",
                period,
            )
            chains = await cursor.fetchall()
    except psycopg.Error as exc:
        raise ArchiveError(f"cannot read the archive: {exc}", table=table) from exc
    return counts, lines, finished, chains


_SQLITE_IN_PERIOD = (
    "(table_id = ? OR substr(table_id, 1, length(?) + 1) = ? || '/')"
    " AND coalesce(opened_at, finished_at) >= ? AND coalesce(opened_at, finished_at) < ?"
)


def _sqlite_rows(url: str, table: str, start: datetime, end: datetime) -> _Rows:
    """The same queries on an SQLite archive.

    Times are UTC text (text order is time order); JSON through SQLite's JSON functions.
    """
    period = (table, table, table, time_text(start), time_text(end))
    counts = read_rows(
        url,
        "SELECT count(*), count(*) FILTER (WHERE outcome = 'result'),"
        " count(*) FILTER (WHERE outcome = 'void'), count(*) FILTER (WHERE outcome IS NULL),"
        " count(*) FILTER (WHERE outcome IS NOT NULL AND delayed)"
        f" FROM rounds WHERE {_SQLITE_IN_PERIOD}",
        period,
    )
    lines = read_rows(
        url,
        "SELECT line.value ->> 'bet', line.value ->> 'position', line.value ->> 'path',"
        " line.value ->> 'setting', line.value ->> 'outcome', count(*) FROM rounds,"
        " json_each(CASE WHEN json_type(bets) = 'array' THEN bets ELSE '[]' END) AS line"
        f" WHERE outcome = 'result' AND {_SQLITE_IN_PERIOD} GROUP BY 1, 2, 3, 4, 5",
        period,
    )
    finished = read_rows(
        url,
        "SELECT round_id, finished_at, outcome, delayed, result ->> 'winner',"
        " (SELECT envelope -> 'data' ->> 'reason' FROM events e"
        "  WHERE e.table_id = rounds.table_id AND e.seq = rounds.result_seq LIMIT 1)"
        " FROM rounds WHERE outcome IS NOT NULL AND (outcome = 'void' OR delayed)"
        f" AND {_SQLITE_IN_PERIOD} ORDER BY finished_at, round_id",
        period,
    )
    chains = read_rows(
        url,
        "SELECT table_id, count(*), group_concat(DISTINCT game) FROM rounds"
        f" WHERE {_SQLITE_IN_PERIOD} GROUP BY table_id"
        " ORDER BY min(coalesce(opened_at, finished_at)), table_id",
        period,
    )
    return (
        counts[0] if counts else None,
        lines,
        [(r[0], from_time_text(r[1]), r[2], bool(r[3]), *r[4:]) for r in finished],
        chains,
    )


_PAYOUTS_POSTGRES = (
    "SELECT game, line->>'bet', line->>'position', line->>'path', line->>'setting',"
    " line->>'payout', line->>'outcome' = 'refund', line->>'default' = 'true', count(*)"
    " FROM rounds"
    " LEFT JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(bets) = 'array' THEN bets"
    " ELSE '[]'::jsonb END) AS line ON true"
    f" WHERE outcome = 'result' AND {_IN_PERIOD} GROUP BY 1, 2, 3, 4, 5, 6, 7, 8"
)
"""Per game and settlement line, each payout's count, refunds apart (a line ``NULL`` for a
game without bets: its rounds still counted by game)."""

_PAYOUTS_SQLITE = (
    "SELECT game, line.value ->> 'bet', line.value ->> 'position', line.value ->> 'path',"
    " line.value ->> 'setting', line.value ->> 'payout', line.value ->> 'outcome' = 'refund',"
    " coalesce(line.value ->> 'default', 0) IN (1, 'true'), count(*) FROM rounds"
    " LEFT JOIN json_each(CASE WHEN json_type(bets) = 'array' THEN bets"
    " ELSE '[]' END) AS line"
    f" WHERE outcome = 'result' AND {_SQLITE_IN_PERIOD} GROUP BY 1, 2, 3, 4, 5, 6, 7, 8"
)


async def _postgres_payouts(
    url: str, table: str, start: datetime, end: datetime
) -> list[tuple[Any, ...]]:
    try:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            cursor = await conn.execute(_PAYOUTS_POSTGRES, (table, table, start, end))
            return await cursor.fetchall()
    except psycopg.Error as exc:
        raise ArchiveError(f"cannot read the archive: {exc}", table=table) from exc


def _sqlite_payouts(url: str, table: str, start: datetime, end: datetime) -> list[tuple[Any, ...]]:
    period = (table, table, table, time_text(start), time_text(end))
    return read_rows(url, _PAYOUTS_SQLITE, period)


OWN_SETTINGS = "*"
"""The ``setting`` of the lines of the players' own settings, taken together (a Break Poker
result settles every setting the player could send: about 160 lines a round)."""


def _line_key(
    game: Any, bet: Any, position: Any, path: Any, setting: Any, *, default: Any
) -> tuple[str, str, str | None, str | None, str | None]:
    """A settlement line's key in :attr:`TableReport.returns`.

    A ``setting`` line is the house way's when it is the default one (``setting`` ``None``:
    the bet as the par sheet plays it), else one of the players' own (:data:`OWN_SETTINGS`).
    """
    if setting is not None:
        setting = None if default in (True, 1, "true") else OWN_SETTINGS
    return (str(game or ""), str(bet), position, path, setting)


def _returns(
    rows: list[tuple[Any, ...]],
) -> dict[tuple[str, str, str | None, str | None, str | None], dict[str, int]]:
    returns: dict[tuple[str, str, str | None, str | None, str | None], dict[str, int]] = {}
    for game, bet, position, path, setting, payout, refund, default, count in rows:
        if bet is None or payout is None or refund:
            continue  # a result without settlement lines (a game without bets), or no play
        key = _line_key(game, bet, position, path, setting, default=default)
        row = returns.setdefault(key, {})
        row[str(payout)] = row.get(str(payout), 0) + int(count)
    return dict(sorted(returns.items(), key=lambda item: tuple(str(v or "") for v in item[0])))


def _games(rows: list[tuple[Any, ...]]) -> dict[str, int]:
    """Results per game.

    The rounds of its most frequent settlement line (every result has its main bets'
    lines), or its results without lines (a game without bets).
    """
    per_line: dict[tuple[Any, ...], int] = {}
    for game, bet, position, path, setting, _payout, _refund, default, count in rows:
        key = _line_key(game, bet, position, path, setting, default=default)
        per_line[key] = per_line.get(key, 0) + int(count)
    games: dict[str, int] = {}
    for (game, *_), count in per_line.items():
        games[game] = max(games.get(game, 0), count)
    return games


def _refunds(
    rows: list[tuple[Any, ...]],
) -> dict[tuple[str, str, str | None, str | None, str | None], int]:
    refunds: dict[tuple[str, str, str | None, str | None, str | None], int] = {}
    for game, bet, position, path, setting, _payout, refund, default, count in rows:
        if bet is not None and refund:
            key = _line_key(game, bet, position, path, setting, default=default)
            refunds[key] = refunds.get(key, 0) + int(count)
    return refunds


def _bets(lines: list[tuple[Any, ...]]) -> dict[str, dict[str, int]]:
    bets: dict[str, dict[str, int]] = {}
    for bet, position, path, setting, outcome, count in lines:
        qualifiers = dict(zip(QUALIFIERS, (position, path, setting), strict=True))
        name = " ".join(
            [str(bet), *(f"{key}={value}" for key, value in qualifiers.items() if value)]
        )
        row = bets.setdefault(name, dict.fromkeys(OUTCOMES, 0))
        row[str(outcome)] = row.get(str(outcome), 0) + int(count)
    return dict(sorted(bets.items()))


def _finished(row: tuple[Any, ...]) -> Finished:
    round_id, finished_at, outcome, _delayed, winner, reason = row
    detail = f"void: {reason or 'no reason given'}" if outcome == "void" else f"winner {winner}"
    return Finished(str(round_id), finished_at, detail)


def format_report(report: TableReport) -> str:
    """The report as the command prints it."""
    out = [
        f"table {report.table}: rounds opened from {utc_text(report.start)} "
        f"to {utc_text(report.end)} (end excluded)",
        f"rounds           {report.rounds}",
        f"  results        {report.results}",
        f"  voids          {report.voids}",
        f"  unfinished     {report.unfinished}",
        f"delayed results  {report.delayed}",
    ]
    if report.bets:
        width = max(len("bet"), *(len(name) for name in report.bets))
        out.append("")
        out.append(f"{'bet':<{width}}  " + "  ".join(f"{o:>6}" for o in OUTCOMES))
        for name, row in report.bets.items():
            cells = "  ".join(f"{row.get(o, 0):>6}" for o in OUTCOMES)
            extra = sorted(set(row) - set(OUTCOMES))
            more = "".join(f"  {o} {row[o]}" for o in extra)
            out.append(f"{name:<{width}}  {cells}{more}")
    if len(report.journals) > 1 or any("/" in chain for chain, _, _ in report.journals):
        width = max(len(chain) for chain, _, _ in report.journals)
        out.append("")
        out.append("journals (each its own seq; round ids carry the journal's short id):")
        for chain, count, games in report.journals:
            plural = "round" if count == 1 else "rounds"
            out.append(f"  {chain:<{width}}  {count} {plural}  {games}")
    for title, rows in (("voids", report.void_rounds), ("delayed", report.delayed_rounds)):
        if rows:
            out.append("")
            out.append(f"{title}:")
            for item in rows:
                when = "-" if item.finished_at is None else utc_text(item.finished_at)
                out.append(f"  {item.round_id}  {when}  {item.detail}")
    return "\n".join(out)
