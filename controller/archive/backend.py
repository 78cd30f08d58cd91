"""Which archive store a database URL names, and what every store answers to.

``postgresql://...`` (or ``postgres://``): :class:`controller.archive.store.ArchiveStore`,
the studio's archive; ``sqlite:///PATH``:
:class:`controller.archive.sqlite_store.SqliteArchiveStore`, the embedded default of
``make run`` (docs/archive.md, "SQLite"). :func:`lost` and :func:`refused` are the errors a
consumer tells apart, whatever the store.

psycopg is imported only by what speaks to PostgreSQL (its store, the connection a
:class:`controller.archive.dblink.DbLink` makes, the tools): the archive beside a table on
SQLite runs without it, 9 MiB of the demo's memory (docs/performance.md, "The demo").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from controller.archive.batch import GapStamp, Stored
from controller.archive.errors import ArchiveDatabaseLost, ArchiveError, ArchiveRefused
from controller.archive.ingest import Entry, Rejected, Status
from controller.archive.journals import JournalRecord
from controller.archive.sqlite_store import SqliteArchiveStore, is_sqlite_url


def lost() -> tuple[type[Exception], ...]:
    """The errors that say the database is gone (or the connection closed), for ``except``.

    Not a message's fault: the consumer holds its batch and acknowledgements, and retries
    (:class:`controller.archive.dblink.DbLink`). psycopg's are among them once psycopg is
    imported; until then none of its errors can have been raised.
    """
    if "psycopg" not in sys.modules:
        return (ArchiveDatabaseLost,)
    import psycopg

    return (psycopg.OperationalError, psycopg.InterfaceError, ArchiveDatabaseLost)


def refused() -> tuple[type[Exception], ...]:
    """The errors that say the database refused a write, for ``except``.

    Check :func:`lost` first: it is a kind of these. psycopg's are among them once it is
    imported, as in :func:`lost`.
    """
    if "psycopg" not in sys.modules:
        return (ArchiveRefused,)
    import psycopg

    return (psycopg.Error, ArchiveRefused)


POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class Store(Protocol):
    """What the consumer needs of an archive store (both stores have it).

    Attributes:
        gaps_shared: Whether gaps are kept in the database, shared by the archive's
            instances (PostgreSQL), or by the one consumer in memory (SQLite).
        resolved: The archived entries the last batch's walks down the signed chain moved
            to ``rejected`` as ``forged`` (docs/archive.md, "Provisional entries").
    """

    resolved: list[Rejected]

    @property
    def gaps_shared(self) -> bool:
        """Whether gaps are kept in the database (see above)."""

    async def close(self) -> None:
        """Close it."""

    async def store_entry(self, entry: Entry) -> Stored:
        """Store one entry."""

    async def store_entries(self, entries: Sequence[Entry]) -> list[Stored]:
        """Store a batch in one transaction."""

    async def store_rejected(self, rejected: Rejected) -> None:
        """Keep a rejected message."""

    async def store_status(self, status: Status) -> None:
        """Keep a status message."""

    async def journals(self) -> list[JournalRecord]:
        """Every journal of every table the archive knows."""

    async def adopt_journal(
        self, table: str, journal: str, *, head_seq: int | None, at: datetime
    ) -> tuple[JournalRecord, bool]:
        """The chain of a journal met for the first time (recorded, alerted); whether new."""

    async def highest_seqs(self, tables: Sequence[str] | None = None) -> dict[str, int]:
        """Each table's highest archived seq (of ``tables`` only, if given)."""

    async def open_gap(self, table: str, from_seq: int, to_seq: int) -> int:
        """Record a gap."""

    async def mark_gap(
        self,
        gap_id: int,
        what: GapStamp,
        missing: Sequence[int] = (),
    ) -> None:
        """Stamp a gap."""

    async def raise_alert(
        self,
        table: str | None,
        kind: str,
        detail: str,
        *,
        gap_id: int | None = None,
        missing: Sequence[int] = (),
    ) -> None:
        """Keep an alert."""


async def open_store(url: str, *, run_migrations: bool = True) -> Store:
    """The store of ``url``, connected, its schema brought up to date.

    Raises:
        ArchiveError: A URL of neither kind (named), or the store's own errors.
    """
    if is_sqlite_url(url):
        return await SqliteArchiveStore.open(url, run_migrations=run_migrations)
    if url.startswith(POSTGRES_SCHEMES):
        from controller.archive.store import ArchiveStore

        return await ArchiveStore.open(url, run_migrations=run_migrations)
    raise ArchiveError(
        "the archive database URL must be postgresql://USER@HOST:PORT/DB or sqlite:///PATH",
        url=url.rsplit("@", maxsplit=1)[-1],
    )
