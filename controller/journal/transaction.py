"""One ``BEGIN IMMEDIATE`` … ``COMMIT`` transaction, rolled back on any failure."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator


@contextlib.contextmanager
def immediate(db: sqlite3.Connection) -> Iterator[None]:
    """Run the block in one ``BEGIN IMMEDIATE`` transaction: commit it, or roll it back.

    A failure of the rollback itself is swallowed, so the block's own error is the one raised.

    Raises:
        sqlite3.Error: The ``BEGIN`` or the ``COMMIT`` failed (anything the block raises passes
            through after the rollback).
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise
