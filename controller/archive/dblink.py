"""A PostgreSQL connection that comes back: bounded awaits, back-off, quiet logs.

:class:`DbLink` holds one connection for one user (the ingest, the gap checks). Every call
through :meth:`DbLink.call` is bounded by ``database.timeout_seconds``; a call that fails for
the connection's sake (:func:`lost`: the server restarted, the link dropped, a timeout) closes
it, and the next call reconnects, each attempt bounded by ``database.connect_timeout_seconds``,
after a capped, jittered back-off (``database.reconnect_min_seconds`` doubling up to
``reconnect_max_seconds``). What the caller was doing is retried by :meth:`DbLink.call` until
it succeeds or is cancelled: nothing is dropped, the consumer only waits (and, waiting, does
not acknowledge what the broker sent it).

Logs: one warning when the connection is lost, one summary line per doubling of the failed
attempts (at most every :data:`SUMMARY_EVERY` seconds otherwise), one line when it is back.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from controller.archive import backend
from controller.archive.config import DatabaseSettings

if TYPE_CHECKING:
    import psycopg

log = structlog.get_logger("archive")

T = TypeVar("T")


def lost() -> tuple[type[BaseException], ...]:
    """Failures that are the connection's, not a message's: reconnect and retry.

    :func:`controller.archive.backend.lost` (either store's), and a call past
    ``database.timeout_seconds``.
    """
    return (*backend.lost(), TimeoutError)


SUMMARY_EVERY = 60.0
"""Seconds between "still unreachable" lines once the attempts no longer double quickly."""


class DbLink:
    """One reconnecting connection to the archive database.

    Args:
        settings: The ``[database]`` table (URL, timeouts, back-off).
        name: What it is for, in logs (``ingest``, ``gaps``).
        conn: An open connection to start with (``None``: connect on first use).
        rng: The back-off's jitter.

    Attributes:
        losses: How many times the connection was lost.
        reconnects: How many times it was made again after a loss.
    """

    def __init__(
        self,
        settings: DatabaseSettings,
        name: str,
        *,
        conn: psycopg.AsyncConnection[Any] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self.name = name
        self.losses = 0
        self.reconnects = 0
        self._conn = conn
        self._rng = rng or random.Random()
        self._failures = 0
        self._lost_at: float | None = None
        self._reported = 0
        self._reported_at = 0.0
        self._on_connect: list[Callable[[psycopg.AsyncConnection[Any]], None]] = []

    def on_connect(self, callback: Callable[[psycopg.AsyncConnection[Any]], None]) -> None:
        """Call ``callback`` with each new connection (e.g. to rebuild what wraps it)."""
        self._on_connect.append(callback)
        if self._conn is not None:
            callback(self._conn)

    @property
    def connected(self) -> bool:
        """Whether a connection is held (it may still turn out to be dead)."""
        return self._conn is not None and not self._conn.closed

    async def call(self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """Run ``work`` on the connection, bounded; after a loss, reconnect and run it again.

        Raises:
            psycopg.Error: A failure that is not the connection's (the caller decides).
        """
        while True:
            conn = await self.connection()
            try:
                async with asyncio.timeout(self.settings.timeout_seconds):
                    return await work(conn)
            except lost() as exc:
                await self.lost(exc)

    async def retry(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` bounded; after a loss, back off and run it again (no connection to make).

        For a store that holds its own file (SQLite: :class:`ArchiveDatabaseLost`, a file
        locked or read-only past its busy timeout): the same bounds, back-off and logs as
        :meth:`call`, without :meth:`connection`.

        Raises:
            Exception: A failure that is not :func:`lost` (the caller decides).
        """
        while True:
            if self._failures:
                await asyncio.sleep(self._backoff())
            try:
                async with asyncio.timeout(self.settings.timeout_seconds):
                    result = await work()
            except lost() as exc:
                if self._lost_at is not None:
                    self._failed(exc)
                else:
                    await self.lost(exc)
                continue
            if self._lost_at is not None:
                self._back(None)
            return result

    async def connection(self) -> psycopg.AsyncConnection[Any]:
        """The connection; made again (with back-off between attempts) if it was lost."""
        import psycopg  # here: a link that only retries (SQLite's) never connects

        while self._conn is None or self._conn.closed:
            if self._failures:
                await asyncio.sleep(self._backoff())
            try:
                async with asyncio.timeout(self.settings.connect_timeout_seconds + 1.0):
                    conn = await psycopg.AsyncConnection.connect(
                        self.settings.url,
                        autocommit=True,
                        connect_timeout=max(1, round(self.settings.connect_timeout_seconds)),
                    )
            except lost() as exc:
                self._failed(exc)
                continue
            self._conn = conn
            self._back(conn)
        return self._conn

    async def lost(self, exc: BaseException) -> None:
        """Drop the connection after ``exc`` (the next use reconnects); logged once a streak."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                async with asyncio.timeout(1.0):
                    await conn.close()
            except Exception:  # a dead connection may fail to close: ignored
                pass
        if self._lost_at is None:
            self.losses += 1
            self._lost_at = time.monotonic()
            log.warning(
                "archive database connection lost: holding acknowledgements, reconnecting",
                connection=self.name,
                error=f"{type(exc).__name__}: {exc}",
            )
        self._failures = max(self._failures, 1)

    async def close(self) -> None:
        """Close the connection (if any)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def _failed(self, exc: BaseException) -> None:
        self._failures += 1
        if self._lost_at is None:
            self._lost_at = time.monotonic()
            log.warning(
                "archive database unreachable, retrying",
                connection=self.name,
                error=f"{type(exc).__name__}: {exc}",
            )
            return
        now = time.monotonic()
        if self._failures >= 2 * max(self._reported, 1) or now - self._reported_at >= SUMMARY_EVERY:
            self._reported, self._reported_at = self._failures, now
            log.warning(
                f"archive database still unreachable after {self._failures} attempts",
                connection=self.name,
                down_seconds=round(now - self._lost_at, 1),
                last_error=f"{type(exc).__name__}: {exc}",
            )

    def _back(self, conn: psycopg.AsyncConnection[Any] | None) -> None:
        if self._lost_at is not None:
            self.reconnects += 1
            log.info(
                "archive database reachable again",
                connection=self.name,
                failed_attempts=self._failures - 1,
                down_seconds=round(time.monotonic() - self._lost_at, 2),
            )
        self._failures = 0
        self._reported = 0
        self._lost_at = None
        if conn is not None:
            for callback in self._on_connect:
                callback(conn)

    def _backoff(self) -> float:
        low = self.settings.reconnect_min_seconds
        high = min(self.settings.reconnect_max_seconds, low * 2 ** (self._failures - 1))
        return self._rng.uniform(low, max(low, high))
