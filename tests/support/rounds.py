"""The round ids a table's journal gives its rounds (issue 22: they carry the journal's id)."""

from __future__ import annotations

from pathlib import Path

from controller.journal import Journal
from controller.round import round_id_for


def round_id(journal: Path, table: str, round_no: int = 1) -> str:
    """The id of round ``round_no`` of ``table`` as the journal at ``journal`` names it.

    Args:
        journal: The table's journal file (opened read-only; it must exist).
        table: The table id.
        round_no: The round's number.
    """
    with Journal.open_readonly(journal) as store:
        return round_id_for(table, round_no, store.identity)
