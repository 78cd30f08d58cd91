"""A table's journals in the archive: which chain each one is kept in (pure, no I/O).

A table's journal can be replaced (a new computer, a dead disk, a new file): the new one has
another identity (``journal`` in every envelope and status since schema version 3) and its
``seq`` starts over. The archive keeps each journal of a table as its own **chain**
(:func:`~controller.archive.ingest.chain_id`): the first journal it met for the table (and
whatever came before journal ids, version 2) under the table's id, each later one under
``table/journal``. Every rule that holds per ``seq`` (keys, conflicts, gaps, the signed
chain's walks, ``verify``) then holds per journal, and the old and the new journal never meet
as "conflicting copies" (docs/archive.md, "Journals").

A table the archive holds version 2 entries of, that comes back with its first journal id,
is the same journal upgraded (its journal was migrated and given an identity) when its
online status's chain head is not below what the archive holds of it: it goes on in the
table's chain. A head below it is a new journal. The stores decide in one transaction
(``adopt_journal``); :func:`place` is the rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from controller.archive.ingest import chain_id
from controller.tablefold import at_text

NEW_JOURNAL = "new_journal"
"""The ``alerts.kind`` of a table that started a new journal."""


@dataclass(frozen=True, slots=True)
class JournalRecord:
    """One journal of a table, as the archive knows it (a ``journals`` row).

    Attributes:
        table: The table id.
        journal: The journal id.
        chain: The chain its entries are kept in.
        first_seen: When the archive first met it (the message's time, else on receipt).
        previous_chain: The chain of the journal it replaced (``None``: the table's first).
        previous_last_seq: The highest ``seq`` archived of that one when this one came.
    """

    table: str
    journal: str
    chain: str
    first_seen: datetime
    previous_chain: str | None = None
    previous_last_seq: int | None = None

    @property
    def alert(self) -> str | None:
        """The alert it raised (``None``: the table's first journal, or its upgrade)."""
        if self.previous_chain is None:
            return None
        return (
            f"{self.table} started a new journal at {at_text(self.first_seen)}; the previous "
            f"one ended at seq {self.previous_last_seq or 0}"
        )


def place(
    table: str,
    journal: str,
    known: Sequence[JournalRecord],
    *,
    plain_highest: int | None,
    head_seq: int | None,
) -> tuple[str, str | None]:
    """The chain of a journal the archive meets for the first time, and the one it replaced.

    Args:
        table: The table id.
        journal: The new journal's id.
        known: The table's journals the archive knows (none: this is the first id it meets).
        plain_highest: The highest ``seq`` archived in the table's own chain (``None``: none).
        head_seq: The journal's chain head in its online status, if that is how it came.

    Returns:
        ``(chain, previous_chain)``: ``previous_chain`` is ``None`` when nothing was replaced
        (the table's first journal, or its version 2 journal upgraded).
    """
    if not known:
        replaced = plain_highest is not None and head_seq is not None and head_seq < plain_highest
        if not replaced:
            return table, None
        return chain_id(table, journal), table
    latest = max(known, key=lambda record: record.first_seen)
    return chain_id(table, journal), latest.chain
