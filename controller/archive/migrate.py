"""A plain versioned SQL migrator for the archive's PostgreSQL schema.

Migrations are the numbered files ``controller/archive/migrations/NNNN_name.sql``, shipped as
package data. :func:`migrate` applies, in number order, each one whose number is not yet in
``archive_migrations``; each file and its version row go in one transaction (PostgreSQL's DDL
is transactional: a failing migration leaves nothing behind). A transaction-level advisory
lock serialises archive instances that start together, so a migration runs once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from controller.archive.errors import ArchiveError

if TYPE_CHECKING:
    import psycopg

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
MIGRATION_LOCK = 0x7AB1EC71
"""The advisory lock key the migrator holds while it applies migrations."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file.

    Attributes:
        version: Its number.
        name: The rest of its file name.
        sql: Its text.
    """

    version: int
    name: str
    sql: str


def migrations(folder: str = "migrations") -> list[Migration]:
    """The shipped migrations, in version order.

    Args:
        folder: The package folder that holds them (``migrations``: PostgreSQL;
            ``migrations_sqlite``: the SQLite archive).

    Raises:
        ArchiveError: A file name that is not ``NNNN_name.sql``, or two files with one number.
    """
    found: dict[int, Migration] = {}
    for item in resources.files("controller.archive").joinpath(folder).iterdir():
        if not item.name.endswith(".sql"):
            continue
        match = _NAME.match(item.name)
        if match is None:
            raise ArchiveError("migration file name is not NNNN_name.sql", file=item.name)
        version = int(match.group(1))
        if version in found:
            raise ArchiveError("two migrations share a number", version=version, file=item.name)
        found[version] = Migration(version, match.group(2), item.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


async def migrate(conn: psycopg.AsyncConnection[object]) -> list[int]:
    """Apply every migration not applied yet; the versions applied now.

    Args:
        conn: A connection (autocommit or not: each migration is its own transaction).

    Raises:
        ArchiveError: A migration failed (its version and the server's message named).
    """
    import psycopg  # here: the SQLite archive reads this module's migrations() without it

    applied_now: list[int] = []
    async with conn.transaction():
        # Under the lock: two instances' CREATE ... IF NOT EXISTS would race on the catalog.
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS archive_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
    for migration in migrations():
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                cursor = await conn.execute(
                    "SELECT 1 FROM archive_migrations WHERE version = %s", (migration.version,)
                )
                if await cursor.fetchone() is not None:
                    continue
                await conn.execute(migration.sql.encode())
                await conn.execute(
                    "INSERT INTO archive_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )
        except psycopg.Error as exc:
            raise ArchiveError(
                f"migration {migration.version:04d}_{migration.name} failed: {exc}",
                version=migration.version,
            ) from exc
        applied_now.append(migration.version)
    return applied_now
