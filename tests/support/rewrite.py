"""Rewriting a journal file as someone who can write it could: a body changed, the chain redone.

The hash chain has no key (docs/journal.md, "What a keyless chain can and cannot show"): after
any change, recomputing every link with :func:`controller.journal.entry_hash` makes the file
pass its own checks again. The tests of what only the anchors or the game's rules can see use
this to make such a journal. Test support: not part of the product.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.journal import GENESIS_HASH, entry_hash


def rechain(db: sqlite3.Connection) -> None:
    """Recompute every entry's hash from the genesis, in ``seq`` order (not committed)."""
    prev = GENESIS_HASH
    rows = db.execute(
        "SELECT seq, session, round_id, kind, happened_at, body FROM entries ORDER BY seq"
    ).fetchall()
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
        db.execute("UPDATE entries SET hash = ? WHERE seq = ?", (prev, seq))


def rewrite(path: Path, seq: int, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the body of entry ``seq`` in place (``change`` edits the parsed body) and
    recompute the whole chain: the file's own checks find nothing."""
    with sqlite3.connect(path) as db:
        (text,) = db.execute("SELECT body FROM entries WHERE seq = ?", (seq,)).fetchone()
        body = json.loads(text)
        change(body)
        db.execute(
            "UPDATE entries SET body = ? WHERE seq = ?",
            (json.dumps(body, separators=(",", ":"), ensure_ascii=False), seq),
        )
        rechain(db)
