"""Opening a journal file: the lock, the connection, the migrations and the session.

:meth:`controller.journal.Journal.open` takes an exclusive ``flock`` on ``<path>.lock`` (a
second controller on the same file is refused), connects, switches to WAL with
``synchronous=FULL``, applies the missing migrations (:data:`~controller.journal.MIGRATIONS`)
and starts a new session. :meth:`~controller.journal.Journal.open_readonly` connects with
SQLite's ``mode=ro``: no lock, no session, nothing created or migrated. Both read the chain's
head (the last ``seq`` and its hash), from which the next append continues.
"""

from __future__ import annotations

import contextlib
import fcntl
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import quote

import structlog

from controller.errors import JournalError
from controller.journal.format import GENESIS_HASH, JOURNAL_ID_KEY, MIGRATIONS, SCHEMA_VERSION
from controller.journal.meta import read_meta

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Opened:
    """What preparing an open journal file found.

    Attributes:
        session: This run's session (a read-only journal: the last writer's).
        last_seq: The highest ``seq`` in the file (0 when empty).
        last_hash: Its hash (:data:`~controller.journal.GENESIS_HASH` when empty or v1).
        schema_version: The file's ``PRAGMA user_version``.
        journal_id: The journal's identity (``None``: a read-only file of schema 2 or older,
            not migrated yet).
    """

    session: int
    last_seq: int
    last_hash: str
    schema_version: int = SCHEMA_VERSION
    journal_id: str | None = None


def lock(path: Path) -> IO[bytes]:
    """Take the exclusive lock of a journal (``<path>.lock``), creating its directory.

    Raises:
        JournalError: The lock file cannot be created, or another process holds the lock.
    """
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
    return lock_file


def in_use(path: Path) -> bool:
    """Whether another process holds the lock of journal ``path`` (a controller runs on it).

    Probes ``<path>.lock`` without creating anything: no lock file means no controller.
    """
    lock_path = path.with_name(path.name + ".lock")
    try:
        probe = lock_path.open("rb")
    except OSError:
        return False
    with probe:
        try:
            fcntl.flock(probe.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(probe.fileno(), fcntl.LOCK_UN)
    return False


def unlock(lock_file: IO[bytes]) -> None:
    """Release a lock taken with :func:`lock` and close its file."""
    with contextlib.suppress(OSError):
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)
    lock_file.close()


def connect(path: Path) -> sqlite3.Connection:
    """Connect to a journal file for writing (created if missing).

    Raises:
        JournalError: SQLite cannot open it.
    """
    try:
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5.0)
    except sqlite3.Error as exc:
        raise JournalError(f"cannot open journal: {exc}", path=str(path)) from exc


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Connect to an existing journal file with SQLite's ``mode=ro``.

    Raises:
        JournalError: There is no file at ``path``, or SQLite cannot open it.
    """
    if not path.is_file():
        raise JournalError("no journal file at this path", path=str(path))
    uri = f"file:{quote(str(path.resolve()))}?mode=ro"
    try:
        return sqlite3.connect(
            uri, uri=True, isolation_level=None, check_same_thread=False, timeout=5.0
        )
    except sqlite3.Error as exc:
        raise JournalError(f"cannot open journal: {exc}", path=str(path)) from exc


def _newer_version(version: int, path: Path) -> JournalError:
    return JournalError(
        f"journal schema version {version} is newer than this tablectl knows ({SCHEMA_VERSION})",
        path=str(path),
        version=version,
    )


def prepare_readonly(db: sqlite3.Connection, path: Path) -> Opened:
    """Check a file opened read-only and read its session and chain head (nothing written).

    Raises:
        JournalError: The file is not a journal, is of a newer schema, or cannot be read.
    """
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise _newer_version(version, path)
        if version < 1:
            raise JournalError("not a tablectl journal (schema version 0)", path=str(path))
        chain_column = "hash" if version >= 2 else "NULL"
        db.execute("BEGIN")
        try:
            session = int(read_meta(db, "session") or "0")
            journal_id = read_meta(db, JOURNAL_ID_KEY)
            row = db.execute(
                f"SELECT seq, {chain_column} FROM entries ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        finally:
            db.execute("COMMIT")
    except sqlite3.Error as exc:
        raise JournalError(f"cannot read journal: {exc}", path=str(path)) from exc
    if row is None:
        return Opened(
            session=session,
            last_seq=0,
            last_hash=GENESIS_HASH,
            schema_version=version,
            journal_id=journal_id,
        )
    return Opened(
        session=session,
        last_seq=int(row[0]),
        last_hash=row[1] or GENESIS_HASH,
        schema_version=version,
        journal_id=journal_id,
    )


def prepare(db: sqlite3.Connection, path: Path) -> Opened:
    """Set a file opened for writing up (WAL, migrations) and start a new session.

    Raises:
        JournalError: WAL cannot be enabled, the file is of a newer schema, or SQLite fails.
    """
    try:
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise JournalError(
                f"journal could not switch to WAL mode (got {mode!r})", path=str(path)
            )
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA foreign_keys=ON")
        migrate(db, path)
        db.execute("BEGIN IMMEDIATE")
        try:
            session = int(read_meta(db, "session") or "0") + 1
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('session', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(session),),
            )
            journal_id = read_meta(db, JOURNAL_ID_KEY)
            last = db.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    except sqlite3.Error as exc:
        raise JournalError(f"cannot prepare journal: {exc}", path=str(path)) from exc
    if journal_id is None:  # migration 3 makes it: only a hand-edited file lacks it
        raise JournalError("the journal has no identity (meta journal_id)", path=str(path))
    opened = Opened(session=session, last_seq=0, last_hash=GENESIS_HASH, journal_id=journal_id)
    if last is not None:
        opened = Opened(
            session=session,
            last_seq=int(last[0]),
            last_hash=str(last[1]) if last[1] is not None else GENESIS_HASH,
            journal_id=journal_id,
        )
    log.info(
        "journal opened",
        path=str(path),
        journal_id=journal_id,
        session=session,
        last_seq=opened.last_seq,
    )
    return opened


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Apply the migrations the file lacks, each in one transaction with its version bump.

    Raises:
        JournalError: The file is of a newer schema than this code knows.
        sqlite3.Error: A migration failed (rolled back).
    """
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise _newer_version(version, path)
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
        log.info("journal migrated", path=str(path), version=target)
