"""The journal: every state change of the table, appended and fsynced before it is published.

The journal is one SQLite file per table (``journal_mode=WAL``, ``synchronous=FULL``). Each
entry gets the table's sequence number ``seq`` (DESIGN.md §6): gap-free, never repeated, kept
across restarts. The outbox (:mod:`controller.publisher`) publishes entries in ``seq`` order and
marks each one delivered once the broker has acknowledged it.

Every :meth:`Journal.open` starts a new *session*: a counter kept in the ``meta`` table, carried
in every message so consumers can tell a controller restart from a network blip.

Every entry also stores ``hash = sha256(previous hash || canonical(entry))`` (schema v2), a
chain that :meth:`Journal.verify` recomputes: an entry altered or removed after the fact breaks
it. Tools that run beside a live controller (``tablectl recall``, ``tablectl journal verify``)
use :meth:`Journal.open_readonly`: no lock, no new session, nothing written.

The API is synchronous and is called from the event loop thread: a commit costs about 0.2 ms
on the target hardware. A journal is used by one process at a time; a second
:meth:`Journal.open` of the same file is refused (an advisory ``flock`` on ``<path>.lock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import structlog

from controller.errors import JournalError

log = structlog.get_logger(__name__)

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_TIME_TEXT = re.compile(
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{6}Z\Z"
)
"""What :func:`format_time` writes (checked by :meth:`Journal.verify`)."""

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first entry of a journal."""


def entry_hash(
    prev_hash: str,
    *,
    seq: int,
    session: int,
    round_id: str | None,
    kind: str,
    happened_at: str,
    body: str,
) -> str:
    """The chained hash of one entry: ``sha256(prev_hash || canonical(entry))``, in hex.

    ``canonical`` is the compact JSON array ``[seq, session, round_id, kind, happened_at,
    body]`` (UTF-8), where ``happened_at`` and ``body`` are the exact texts stored in the file.
    ``delivered_at`` is not covered: it changes after the append.

    Args:
        prev_hash: The previous entry's hash (hex), :data:`GENESIS_HASH` for ``seq`` 1.
        seq: The entry's sequence number.
        session: The session that appended it.
        round_id: Its round, or ``None``.
        kind: Its kind.
        happened_at: The stored time text.
        body: The stored JSON text of the body.
    """
    canonical = json.dumps(
        [seq, session, round_id, kind, happened_at, body], separators=(",", ":"), ensure_ascii=False
    )
    digest = hashlib.sha256(bytes.fromhex(prev_hash))
    digest.update(canonical.encode("utf-8"))
    return digest.hexdigest()


def _chain_existing_entries(db: sqlite3.Connection) -> None:
    """Migration 2: compute the hash chain of the entries written before it existed."""
    prev = GENESIS_HASH
    after = 0
    while True:
        rows = db.execute(
            "SELECT seq, session, round_id, kind, happened_at, body FROM entries "
            "WHERE seq > ? ORDER BY seq LIMIT 5000",
            (after,),
        ).fetchall()
        if not rows:
            return
        updates = []
        for seq, session, round_id, kind, happened_at, body in rows:
            prev = entry_hash(
                prev,
                seq=seq,
                session=session,
                round_id=round_id,
                kind=kind,
                happened_at=happened_at,
                body=body,
            )
            updates.append((prev, seq))
            after = seq
        db.executemany("UPDATE entries SET hash = ? WHERE seq = ?", updates)


MigrationStep = str | Callable[[sqlite3.Connection], None]
"""One step of a migration: an SQL statement, or a function run inside its transaction."""

# Ordered migrations: migration i (0-based) takes the schema from user_version i to i + 1.
# Never edit a released migration; append a new one.
MIGRATIONS: tuple[tuple[MigrationStep, ...], ...] = (
    (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE entries (
            seq INTEGER PRIMARY KEY,
            session INTEGER NOT NULL,
            round_id TEXT,
            kind TEXT NOT NULL,
            happened_at TEXT NOT NULL,
            body TEXT NOT NULL,
            delivered_at TEXT
        )""",
        "CREATE INDEX entries_round ON entries (round_id, seq)",
        "CREATE INDEX entries_undelivered ON entries (seq) WHERE delivered_at IS NULL",
        "INSERT INTO meta (key, value) VALUES ('session', '0')",
    ),
    (
        # v2: the tamper-evident hash chain, and an index for "the last entry of a kind".
        "ALTER TABLE entries ADD COLUMN hash TEXT",
        "CREATE INDEX entries_kind ON entries (kind, seq)",
        _chain_existing_entries,
    ),
)
"""The schema, as an ordered list of migrations (each a list of steps)."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The ``PRAGMA user_version`` of a journal this code wrote."""


def format_time(moment: datetime) -> str:
    """A UTC ISO-8601 time with microseconds and ``Z`` (``2026-11-22T02:10:59.123456Z``).

    Raises:
        JournalError: The datetime is naive (no time zone).
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise JournalError(f"time {moment.isoformat()} has no time zone", moment=str(moment))
    # isoformat pads the year to four digits (strftime's %Y does not below 1000).
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_time(text: str) -> datetime:
    """Read a time written by :func:`format_time` (an aware UTC datetime)."""
    return datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journalled state change.

    Attributes:
        seq: The table's sequence number: gap-free, never repeated, survives restarts.
        session: The session counter of the controller run that appended it.
        round_id: The round it belongs to, or ``None`` (device and table status).
        kind: What happened (``"card_dealt"``, ``"round_result"``, ...).
        happened_at: When it happened (aware, UTC).
        body: The event's fields (JSON-able).
        delivered_at: When the broker acknowledged it, or ``None`` while undelivered.
        hash: The entry's link in the hash chain (hex sha256), ``None`` in a v1 file read
            without migrating it.
    """

    seq: int
    session: int
    round_id: str | None
    kind: str
    happened_at: datetime
    body: dict[str, Any]
    delivered_at: datetime | None = None
    hash: str | None = None


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing :meth:`Journal.verify` found wrong.

    Attributes:
        what: What is wrong, in a sentence.
        seq: The entry concerned, if one is.
        round_id: The round concerned, if one is.
    """

    what: str
    seq: int | None = None
    round_id: str | None = None

    def __str__(self) -> str:
        where = []
        if self.seq is not None:
            where.append(f"seq {self.seq}")
        if self.round_id is not None:
            where.append(f"round {self.round_id}")
        return f"{', '.join(where)}: {self.what}" if where else self.what

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form."""
        return {"seq": self.seq, "round": self.round_id, "what": self.what}


MAX_PROBLEMS = 1000
""":meth:`Journal.verify` keeps the first this many problems (and counts them all)."""


@dataclass(slots=True)
class VerifyReport:
    """What :meth:`Journal.verify` found.

    Attributes:
        path: The journal file.
        schema_version: Its ``PRAGMA user_version``.
        entries: How many entries it holds.
        last_seq: The highest ``seq`` (0 when empty).
        chain_head: The last entry's hash (anchor it elsewhere to detect a cut tail).
        rounds: Rounds opened.
        settled: Rounds with a result.
        voided: Rounds voided.
        unfinished: Rounds with neither (at most the last one in a sound journal).
        undelivered: Entries the broker has not acknowledged yet.
        problems: The first :data:`MAX_PROBLEMS` problems, in the order found.
        problems_total: How many problems there were in all.
    """

    path: str
    schema_version: int = 0
    entries: int = 0
    last_seq: int = 0
    chain_head: str | None = None
    rounds: int = 0
    settled: int = 0
    voided: int = 0
    unfinished: list[str] = field(default_factory=list)
    undelivered: int = 0
    problems: list[Problem] = field(default_factory=list)
    problems_total: int = 0

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return self.problems_total == 0

    def add(self, what: str, *, seq: int | None = None, round_id: str | None = None) -> None:
        """Record a problem (kept if fewer than :data:`MAX_PROBLEMS` are kept already)."""
        self.problems_total += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(what, seq, round_id))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form."""
        return {
            "path": self.path,
            "ok": self.ok,
            "schema_version": self.schema_version,
            "entries": self.entries,
            "last_seq": self.last_seq,
            "chain_head": self.chain_head,
            "rounds": self.rounds,
            "settled": self.settled,
            "voided": self.voided,
            "unfinished": list(self.unfinished),
            "undelivered": self.undelivered,
            "problems_total": self.problems_total,
            "problems": [problem.to_dict() for problem in self.problems],
        }


_COLUMNS = "seq, session, round_id, kind, happened_at, body, delivered_at, hash"
_COLUMNS_V1 = "seq, session, round_id, kind, happened_at, body, delivered_at, NULL"
_INSERT_COLUMNS = "seq, session, round_id, kind, happened_at, body, delivered_at, hash"
_MARK_DELIVERED = "UPDATE entries SET delivered_at = COALESCE(delivered_at, ?) WHERE seq = ?"


def _row_to_entry(row: tuple[Any, ...]) -> JournalEntry:
    seq, session, round_id, kind, happened_at, body, delivered_at, chain = row
    return JournalEntry(
        seq=int(seq),
        session=int(session),
        round_id=round_id,
        kind=kind,
        happened_at=parse_time(happened_at),
        body=json.loads(body),
        delivered_at=parse_time(delivered_at) if delivered_at is not None else None,
        hash=chain,
    )


@dataclass(slots=True)
class _RoundState:
    """What :class:`_Verifier` remembers of one round."""

    opened_seq: int
    slots: list[str] | None
    closed: bool = False
    cards: list[str] = field(default_factory=list)
    next_index: int = 0
    outcome: str | None = None


_ROUND_KINDS = frozenset(
    {"round_opened", "betting_closed", "card_dealt", "round_result", "round_voided"}
)


class _Verifier:
    """The checks of :meth:`Journal.verify`, fed the rows in ``seq`` order."""

    def __init__(self, report: VerifyReport, meta_session: int, *, with_hash: bool) -> None:
        self.report = report
        self.meta_session = meta_session
        self.with_hash = with_hash
        self.prev_hash = GENESIS_HASH
        self.expected_seq = 1
        self.last_session = 0
        self.rounds: dict[str, _RoundState] = {}
        self.open_round: str | None = None

    def run(self, db: sqlite3.Connection) -> None:
        chain = "hash" if self.with_hash else "NULL"
        after = 0
        while True:
            rows = db.execute(
                "SELECT seq, session, round_id, kind, happened_at, body, delivered_at, "
                f"{chain} FROM entries WHERE seq > ? ORDER BY seq LIMIT 5000",
                (after,),
            ).fetchall()
            for row in rows:
                self.row(row)
                after = int(row[0])
            if len(rows) < 5000:
                break
        report = self.report
        report.last_seq = after
        report.chain_head = self.prev_hash if self.with_hash and after else None
        for round_id, state in self.rounds.items():
            if state.outcome is None:
                report.unfinished.append(round_id)
        for round_id in report.unfinished[:-1]:
            report.add("round never finished (neither result nor void)", round_id=round_id)

    def row(self, row: tuple[Any, ...]) -> None:
        seq, session, round_id, kind, happened_at, body_text, delivered_at, chain = row
        report = self.report
        report.entries += 1
        if seq != self.expected_seq:
            if seq > self.expected_seq:
                missing = (
                    f"seq {self.expected_seq}"
                    if seq == self.expected_seq + 1
                    else f"seq {self.expected_seq}-{seq - 1}"
                )
                report.add(f"gap: {missing} missing", seq=seq, round_id=round_id)
            else:
                report.add(f"seq out of order (expected {self.expected_seq})", seq=seq)
        self.expected_seq = seq + 1
        if self.with_hash:
            try:
                expected = entry_hash(
                    self.prev_hash,
                    seq=seq,
                    session=session,
                    round_id=round_id,
                    kind=kind,
                    happened_at=happened_at,
                    body=body_text,
                )
            except (TypeError, ValueError):
                expected = ""
            if chain != expected:
                report.add(
                    "hash chain broken: the entry or one before it was altered, inserted "
                    f"or removed (stored {str(chain)[:12]}..., computed {expected[:12]}...)",
                    seq=seq,
                    round_id=round_id,
                )
            # Continue from the stored hash, so one altered entry is reported once.
            self.prev_hash = chain if isinstance(chain, str) and len(chain) == 64 else expected
        if session < self.last_session:
            report.add(
                f"session {session} after session {self.last_session}", seq=seq, round_id=round_id
            )
        self.last_session = max(self.last_session, session)
        if session > self.meta_session:
            report.add(
                f"session {session} is beyond the meta counter {self.meta_session}",
                seq=seq,
                round_id=round_id,
            )
        # The stored format is fixed-width UTC, so the texts compare as the times do.
        happened_ok = isinstance(happened_at, str) and _TIME_TEXT.match(happened_at) is not None
        if not happened_ok:
            report.add(f"happened_at {happened_at!r} is not a journal time", seq=seq)
        if delivered_at is not None:
            if not (isinstance(delivered_at, str) and _TIME_TEXT.match(delivered_at)):
                report.add(f"delivered_at {delivered_at!r} is not a journal time", seq=seq)
            elif happened_ok and delivered_at < happened_at:
                report.add(
                    f"delivered_at {delivered_at} is before happened_at {happened_at}",
                    seq=seq,
                    round_id=round_id,
                )
        try:
            body = json.loads(body_text)
        except (TypeError, ValueError) as exc:
            report.add(f"body is not JSON: {exc}", seq=seq, round_id=round_id)
            return
        if not isinstance(body, dict):
            report.add("body is not a JSON object", seq=seq, round_id=round_id)
            return
        self.round_order(seq, round_id, kind, body)

    def round_order(self, seq: int, round_id: str | None, kind: str, body: dict[str, Any]) -> None:
        report = self.report
        if round_id is None:
            if kind in _ROUND_KINDS:
                report.add(f"{kind} without a round id", seq=seq)
            return
        state = self.rounds.get(round_id)
        if kind == "round_opened":
            if state is not None:
                report.add(
                    f"round opened again (first at seq {state.opened_seq})",
                    seq=seq,
                    round_id=round_id,
                )
                return
            if body.get("round_id", round_id) != round_id:
                report.add(
                    f"round_opened names round {body.get('round_id')!r}",
                    seq=seq,
                    round_id=round_id,
                )
            if self.open_round is not None:
                report.add(
                    f"round opened while round {self.open_round} is unfinished",
                    seq=seq,
                    round_id=round_id,
                )
            slots = body.get("slots")
            self.rounds[round_id] = _RoundState(
                seq, [str(s) for s in slots] if isinstance(slots, list) else None
            )
            self.open_round = round_id
            report.rounds += 1
            return
        if state is None:
            report.add(f"{kind} for a round that was never opened", seq=seq, round_id=round_id)
            return
        if state.outcome is not None:
            report.add(f"{kind} after the round's {state.outcome}", seq=seq, round_id=round_id)
            return
        if kind == "betting_closed":
            if state.closed:
                report.add("betting closed twice", seq=seq, round_id=round_id)
            state.closed = True
        elif kind == "card_dealt":
            self.card(seq, round_id, state, body)
        elif kind == "cards_revealed":
            revealed = body.get("cards")
            if isinstance(revealed, list):
                state.cards.extend(str(piece) for piece in revealed)
        elif kind == "round_result":
            self.result(seq, round_id, state, body)
        elif kind == "round_voided":
            bets = body.get("bets")
            if not isinstance(bets, dict) or any(
                not isinstance(bet, dict) or bet.get("outcome") != "refund" for bet in bets.values()
            ):
                report.add("void without a refund of every bet", seq=seq, round_id=round_id)
            self.finish(round_id, state, "void")
            report.voided += 1

    def card(self, seq: int, round_id: str, state: _RoundState, body: dict[str, Any]) -> None:
        report = self.report
        if not state.closed:
            report.add("card dealt before betting closed", seq=seq, round_id=round_id)
        index = body.get("index")
        if not isinstance(index, int) or index < state.next_index:
            report.add(
                f"card_dealt index {index!r} out of order (next is {state.next_index})",
                seq=seq,
                round_id=round_id,
            )
        else:
            state.next_index = index + 1
        if state.slots is not None and len(state.cards) >= len(state.slots):
            report.add("more cards than the round has slots", seq=seq, round_id=round_id)
        state.cards.append(str(body.get("card")))

    def result(self, seq: int, round_id: str, state: _RoundState, body: dict[str, Any]) -> None:
        report = self.report
        if not state.closed:
            report.add("result before betting closed", seq=seq, round_id=round_id)
        if state.slots is not None and len(state.cards) != len(state.slots):
            report.add(
                f"result after {len(state.cards)} of {len(state.slots)} cards",
                seq=seq,
                round_id=round_id,
            )
        cards = body.get("cards")
        if not isinstance(cards, dict):
            report.add("result without its cards", seq=seq, round_id=round_id)
        else:
            left = list(state.cards)  # a multiset: some decks hold copies (tiles)
            for hand, pieces in cards.items():
                for piece in pieces if isinstance(pieces, list) else [pieces]:
                    if str(piece) in left:
                        left.remove(str(piece))
                    else:
                        report.add(
                            f"result card {piece} of hand {hand} was not dealt in the round",
                            seq=seq,
                            round_id=round_id,
                        )
        self.finish(round_id, state, "result")
        report.settled += 1

    def finish(self, round_id: str, state: _RoundState, outcome: str) -> None:
        state.outcome = outcome
        state.cards = []
        if self.open_round == round_id:
            self.open_round = None


class Journal:
    """An open journal file. Create one with :meth:`open`.

    Attributes:
        path: The SQLite file.
        session: This run's session counter (1 for the first run of a new file); for a
            read-only journal, the session of the last run that opened it for writing.
        readonly: Opened with :meth:`open_readonly` (every write is refused).
        schema_version: The file's ``PRAGMA user_version`` (older than
            :data:`SCHEMA_VERSION` only for a read-only journal nobody has migrated yet).
    """

    def __init__(
        self,
        path: Path,
        connection: sqlite3.Connection,
        lock_file: IO[bytes] | None,
        *,
        readonly: bool = False,
    ) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = connection
        self._lock_file: IO[bytes] | None = lock_file
        self._listeners: list[Callable[[JournalEntry], None]] = []
        self.session = 0
        self.readonly = readonly
        self.schema_version = SCHEMA_VERSION
        self._columns = _COLUMNS
        self._last_seq = 0
        self._last_hash = GENESIS_HASH
        self._pending_marks: list[tuple[str, int]] = []

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path) -> Journal:
        """Open (creating and migrating if needed) a journal and start a new session.

        Raises:
            JournalError: The file cannot be opened, is locked by another process, is not a
                journal, or was written by a newer version of tablectl.
        """
        path = Path(path)
        lock_path = path.with_name(path.name + ".lock")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock_file = lock_path.open("ab")
        except OSError as exc:
            raise JournalError(f"cannot open journal: {exc}", path=str(path)) from exc
        try:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            lock_file.close()
            raise JournalError(
                "journal is in use by another process", path=str(path), lock=str(lock_path)
            ) from exc
        try:
            connection = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=5.0
            )
        except sqlite3.Error as exc:
            lock_file.close()
            raise JournalError(f"cannot open journal: {exc}", path=str(path)) from exc
        journal = cls(path, connection, lock_file)
        try:
            journal._prepare()
        except BaseException:
            journal.close()
            raise
        return journal

    @classmethod
    def open_readonly(cls, path: str | Path) -> Journal:
        """Open a journal to read it beside a live controller: no lock, no session, no writes.

        The file is opened with SQLite's ``mode=ro``; nothing is created or migrated. A file
        of an older schema is read as it is (its entries have no ``hash``).

        Raises:
            JournalError: The file does not exist, is not a journal, or was written by a newer
                version of tablectl.
        """
        path = Path(path)
        if not path.is_file():
            raise JournalError("no journal file at this path", path=str(path))
        uri = f"file:{quote(str(path.resolve()))}?mode=ro"
        try:
            connection = sqlite3.connect(
                uri, uri=True, isolation_level=None, check_same_thread=False, timeout=5.0
            )
        except sqlite3.Error as exc:
            raise JournalError(f"cannot open journal: {exc}", path=str(path)) from exc
        journal = cls(path, connection, None, readonly=True)
        try:
            journal._prepare_readonly()
        except BaseException:
            journal.close()
            raise
        return journal

    def _prepare_readonly(self) -> None:
        db = self._connection()
        try:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise JournalError(
                    f"journal schema version {version} is newer than this tablectl knows "
                    f"({SCHEMA_VERSION})",
                    path=str(self.path),
                    version=version,
                )
            if version < 1:
                raise JournalError("not a tablectl journal (schema version 0)", path=str(self.path))
            self.schema_version = version
            chain_column = "hash"
            if version < 2:
                self._columns = _COLUMNS_V1
                chain_column = "NULL"
            db.execute("BEGIN")
            try:
                session = int(self._meta(db, "session") or "0")
                row = db.execute(
                    f"SELECT seq, {chain_column} FROM entries ORDER BY seq DESC LIMIT 1"
                ).fetchone()
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        self.session = session
        if row is not None:
            self._last_seq = int(row[0])
            self._last_hash = row[1] or GENESIS_HASH

    def _prepare(self) -> None:
        db = self._connection()
        try:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise JournalError(
                    f"journal could not switch to WAL mode (got {mode!r})", path=str(self.path)
                )
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            self._migrate(db)
            db.execute("BEGIN IMMEDIATE")
            try:
                session = int(self._meta(db, "session") or "0") + 1
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('session', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(session),),
                )
                last = db.execute(
                    "SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(f"cannot prepare journal: {exc}", path=str(self.path)) from exc
        self.session = session
        if last is not None:
            self._last_seq = int(last[0])
            self._last_hash = str(last[1]) if last[1] is not None else GENESIS_HASH
        log.info("journal opened", path=str(self.path), session=session, last_seq=self._last_seq)

    def _migrate(self, db: sqlite3.Connection) -> None:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise JournalError(
                f"journal schema version {version} is newer than this tablectl knows "
                f"({SCHEMA_VERSION})",
                path=str(self.path),
                version=version,
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            db.execute("BEGIN IMMEDIATE")
            try:
                for step in MIGRATIONS[target - 1]:
                    if isinstance(step, str):
                        db.execute(step)
                    else:
                        step(db)
                db.execute(f"PRAGMA user_version = {target}")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            log.info("journal migrated", path=str(self.path), version=target)

    @staticmethod
    def _meta(db: sqlite3.Connection, key: str) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise JournalError("journal is closed", path=str(self.path))
        return self._db

    def _reading(self) -> sqlite3.Connection:
        """The connection, for a read that shows delivery state: noted marks written first."""
        db = self._connection()
        if self._pending_marks:
            self.flush_delivered()
        return db

    def _writable(self) -> sqlite3.Connection:
        if self.readonly:
            raise JournalError("journal is open read-only", path=str(self.path))
        return self._connection()

    # -- writing ---------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The highest ``seq`` appended so far (0 for an empty journal)."""
        return self._last_seq

    def append(
        self,
        kind: str,
        body: Mapping[str, Any],
        *,
        round_id: str | None = None,
        happened_at: datetime | None = None,
    ) -> JournalEntry:
        """Append an entry and return once it is durably committed; then tell the listeners.

        Args:
            kind: What happened (``"card_dealt"``).
            body: The event's fields; must be JSON-able (strings, numbers, lists, dicts).
            round_id: The round it belongs to, if any.
            happened_at: When it happened (aware); now if omitted.

        Raises:
            JournalError: The body is not JSON-able, the time is naive, the write failed, or
                the journal is read-only.
        """
        db = self._writable()
        seq = self._last_seq + 1
        when = happened_at if happened_at is not None else datetime.now(UTC)
        when_text = format_time(when)
        try:
            body_text = json.dumps(dict(body), separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise JournalError(
                f"entry body is not JSON-able: {exc}", path=str(self.path), seq=seq, kind=kind
            ) from exc
        chain = entry_hash(
            self._last_hash,
            seq=seq,
            session=self.session,
            round_id=round_id,
            kind=kind,
            happened_at=when_text,
            body=body_text,
        )
        marks = len(self._pending_marks)
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                if marks:  # delivery marks noted since the last write ride along for free
                    db.executemany(_MARK_DELIVERED, self._pending_marks[:marks])
                db.execute(
                    f"INSERT INTO entries ({_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
                    (seq, self.session, round_id, kind, when_text, body_text, chain),
                )
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot append entry: {exc}", path=str(self.path), seq=seq, kind=kind
            ) from exc
        self._last_seq = seq
        self._last_hash = chain
        del self._pending_marks[:marks]
        entry = JournalEntry(
            seq=seq,
            session=self.session,
            round_id=round_id,
            kind=kind,
            happened_at=when.astimezone(UTC),  # == parse_time(when_text): format keeps the µs
            body=json.loads(body_text),
            hash=chain,
        )
        for listener in tuple(self._listeners):
            try:
                listener(entry)
            except Exception:
                log.exception("journal listener failed", path=str(self.path), seq=seq)
        return entry

    def add_listener(self, callback: Callable[[JournalEntry], None]) -> None:
        """Call ``callback(entry)`` after each append is committed (in the appending thread).

        A listener must be quick and must not raise; an exception is logged and ignored.
        """
        self._listeners.append(callback)

    def remove_listener(self, callback: Callable[[JournalEntry], None]) -> None:
        """Stop calling a listener added with :meth:`add_listener` (no error if absent)."""
        with contextlib.suppress(ValueError):
            self._listeners.remove(callback)

    def mark_delivered(self, seq: int) -> None:
        """Record that the broker acknowledged entry ``seq``.

        Raises:
            JournalError: No such entry, or the write failed.
        """
        self.mark_delivered_many((seq,))

    def mark_delivered_many(self, seqs: Iterable[int], *, at: datetime | None = None) -> None:
        """Record that the broker acknowledged every entry of ``seqs``, in one transaction.

        The commit uses ``synchronous=NORMAL``: losing a delivery mark in a power cut only
        means the entry is published again, which consumers de-duplicate on ``seq``. Marks
        noted with :meth:`note_delivered` and not written yet are written in the same
        transaction.

        Raises:
            JournalError: An entry does not exist, the write failed, or the journal is read-only.
        """
        self._writable()
        wanted = sorted(set(seqs))
        when = format_time(at if at is not None else datetime.now(UTC))
        for seq in wanted:
            if not 1 <= seq <= self._last_seq:
                raise JournalError(f"no journal entry with seq {seq}", path=str(self.path), seq=seq)
        self._pending_marks.extend((when, seq) for seq in wanted)
        self.flush_delivered()

    def note_delivered(self, seqs: Iterable[int], *, at: datetime | None = None) -> None:
        """Note that the broker acknowledged ``seqs``; written with the next write.

        The outbox's way to mark deliveries without a commit of their own on the event loop:
        the marks ride along in the next :meth:`append` transaction, or are written by
        :meth:`flush_delivered` (the publisher calls it when nothing is in flight). Every
        read that shows delivery state (:meth:`undelivered`, :meth:`entries`, ...) and
        :meth:`close` write them first, so callers never see a noted mark missing. A crash
        loses at most the unwritten marks: those entries are published again, and consumers
        de-duplicate on ``seq``.

        Raises:
            JournalError: An entry does not exist, or the journal is read-only.
        """
        self._writable()
        when = format_time(at if at is not None else datetime.now(UTC))
        wanted = list(seqs)
        for seq in wanted:  # all or nothing
            if not 1 <= seq <= self._last_seq:
                raise JournalError(f"no journal entry with seq {seq}", path=str(self.path), seq=seq)
        self._pending_marks.extend((when, seq) for seq in wanted)

    @property
    def unwritten_marks(self) -> int:
        """Delivery marks noted with :meth:`note_delivered` and not written yet."""
        return len(self._pending_marks)

    def flush_delivered(self) -> None:
        """Write the delivery marks noted so far, in one ``synchronous=NORMAL`` transaction.

        Raises:
            JournalError: The write failed (the marks stay noted).
        """
        if not self._pending_marks or self._db is None or self.readonly:
            return
        db = self._db
        marks = len(self._pending_marks)
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    db.executemany(_MARK_DELIVERED, self._pending_marks[:marks])
                    db.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                    raise
            finally:
                db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot mark delivered: {exc}", path=str(self.path), seq=self._pending_marks[0][1]
            ) from exc
        del self._pending_marks[:marks]

    # -- reading ---------------------------------------------------------------------------

    def undelivered(self, *, limit: int = 500, from_seq: int = 1) -> list[JournalEntry]:
        """Up to ``limit`` entries with ``seq >= from_seq`` not yet acknowledged by the broker.

        In ``seq`` order.
        """
        db = self._reading()
        try:
            rows = db.execute(
                f"SELECT {self._columns} FROM entries WHERE delivered_at IS NULL AND seq >= ? "
                "ORDER BY seq LIMIT ?",
                (from_seq, limit),
            ).fetchall()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return [_row_to_entry(row) for row in rows]

    def undelivered_count(self) -> int:
        """How many entries the broker has not acknowledged yet."""
        db = self._reading()
        try:
            row = db.execute("SELECT COUNT(*) FROM entries WHERE delivered_at IS NULL").fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return int(row[0])

    def get(self, seq: int) -> JournalEntry | None:
        """The entry ``seq``, or ``None`` if there is none."""
        db = self._reading()
        try:
            row = db.execute(
                f"SELECT {self._columns} FROM entries WHERE seq = ?", (seq,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path), seq=seq) from exc
        return None if row is None else _row_to_entry(row)

    def entries(
        self, *, from_seq: int = 0, round_id: str | None = None, page: int = 500
    ) -> Iterator[JournalEntry]:
        """Entries with ``seq >= from_seq`` (of one round if given), in ``seq`` order.

        Read in pages, so appending while iterating is safe (new entries are included).
        """
        db = self._reading()
        after = from_seq - 1
        while True:
            try:
                if round_id is None:
                    rows = db.execute(
                        f"SELECT {self._columns} FROM entries WHERE seq > ? ORDER BY seq LIMIT ?",
                        (after, page),
                    ).fetchall()
                else:
                    rows = db.execute(
                        f"SELECT {self._columns} FROM entries WHERE round_id = ? AND seq > ? "
                        "ORDER BY seq LIMIT ?",
                        (round_id, after, page),
                    ).fetchall()
            except sqlite3.Error as exc:
                raise JournalError(
                    f"cannot read journal: {exc}", path=str(self.path), seq=after + 1
                ) from exc
            for row in rows:
                entry = _row_to_entry(row)
                after = entry.seq
                yield entry
            if len(rows) < page:
                return

    def last_of_kind(self, kind: str, *, before_seq: int | None = None) -> JournalEntry | None:
        """The most recent entry of ``kind`` (with ``seq < before_seq`` if given), or ``None``."""
        db = self._reading()
        limit = before_seq if before_seq is not None else self._last_seq + 1
        try:
            row = db.execute(
                f"SELECT {self._columns} FROM entries WHERE kind = ? AND seq < ? "
                "ORDER BY seq DESC LIMIT 1",
                (kind, limit),
            ).fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return None if row is None else _row_to_entry(row)

    def last_round_id(self) -> str | None:
        """The round id of the most recent ``round_opened`` entry, if any."""
        db = self._connection()
        try:
            row = db.execute(
                "SELECT round_id FROM entries WHERE kind = 'round_opened' ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read journal: {exc}", path=str(self.path)) from exc
        return None if row is None else row[0]

    # -- verification ----------------------------------------------------------------------

    def verify(self) -> VerifyReport:
        """Check the whole file, in one read transaction, and say precisely what is wrong.

        Checks: SQLite's ``integrity_check``; the schema version; ``seq`` contiguous from 1;
        the hash chain (an entry altered, inserted or removed breaks it); every body is a JSON
        object and every time readable; sessions never go backwards and none is beyond the
        ``meta`` counter; ``delivered_at`` never before ``happened_at``; and every round's
        entries in a legal order: ``round_opened`` → (``betting_closed`` → ``card_dealt`` in
        slot order → ``round_result`` with exactly the dealt cards) or ``round_voided`` (with
        a refund of every bet), one result or void per round, nothing after it, no round
        opened while another is unfinished. Only the last round may be unfinished.

        Returns:
            The report; ``report.ok`` when nothing was found.

        Raises:
            JournalError: The file cannot be read at all.
        """
        db = self._reading()
        report = VerifyReport(path=str(self.path), schema_version=self.schema_version)
        try:
            db.execute("BEGIN")
            try:
                for (line,) in db.execute("PRAGMA integrity_check").fetchall():
                    if line != "ok":
                        report.add(f"SQLite integrity check: {line}")
                version = int(db.execute("PRAGMA user_version").fetchone()[0])
                report.schema_version = version
                if version < SCHEMA_VERSION:
                    report.add(
                        f"schema version {version} is older than {SCHEMA_VERSION}: no hash "
                        "chain to check (opening it for writing migrates it)"
                    )
                meta_session = int(self._meta(db, "session") or "0")
                report.undelivered = int(
                    db.execute(
                        "SELECT COUNT(*) FROM entries WHERE delivered_at IS NULL"
                    ).fetchone()[0]
                )
                _Verifier(report, meta_session, with_hash=version >= 2).run(db)
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise JournalError(f"cannot verify journal: {exc}", path=str(self.path)) from exc
        return report

    # -- meta ------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """A value of the ``meta`` table, or ``None``."""
        db = self._connection()
        try:
            return self._meta(db, key)
        except sqlite3.Error as exc:
            raise JournalError(f"cannot read meta: {exc}", path=str(self.path), key=key) from exc

    def set_meta(self, key: str, value: str) -> None:
        """Store a value in the ``meta`` table (durably).

        Raises:
            JournalError: The write failed, or ``key`` is one the journal manages itself.
        """
        self.set_metas({key: value})

    def set_metas(self, values: Mapping[str, str]) -> None:
        """Store several ``meta`` values in one transaction (one durable commit, not one each).

        Raises:
            JournalError: The write failed (nothing is stored), or a key is one the journal
                manages itself.
        """
        if "session" in values:
            raise JournalError("the session counter is managed by the journal", key="session")
        db = self._writable()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [(key, str(value)) for key, value in values.items()],
                )
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise JournalError(
                f"cannot write meta: {exc}", path=str(self.path), keys=",".join(values)
            ) from exc

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file and release the lock (idempotent); noted marks are written first."""
        if self._db is not None:
            with contextlib.suppress(JournalError):
                self.flush_delivered()
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._db is None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Journal({os.fspath(self.path)!r}, session={self.session})"
