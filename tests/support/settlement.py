"""Reading a result's ``bets`` list (settlement lines) in tests.

``group(bets, path="stayed")`` is the version 1 ``{bet_id: {outcome, payout, reason?}}`` map of
the lines with those qualifiers, so a test compares a whole path, position or setting at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

SETTLEMENT_KEYS = ("outcome", "payout", "reason")


def group(bets: Iterable[Mapping[str, Any]], **qualifiers: Any) -> dict[str, dict[str, Any]]:
    """``{bet_id: settlement}`` of the lines carrying exactly these qualifier values."""
    out: dict[str, dict[str, Any]] = {}
    for line in bets:
        if all(line.get(name) == value for name, value in qualifiers.items()):
            assert line["bet"] not in out, f"two lines for {line['bet']} with {qualifiers}"
            out[line["bet"]] = {k: line[k] for k in SETTLEMENT_KEYS if k in line}
    return out
