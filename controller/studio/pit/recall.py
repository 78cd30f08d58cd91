"""Recall of a round by id for the pit console: from the studio archive, or as seen.

* With ``archive_url`` set: :func:`controller.archive.recall.recall_from_archive` (the
  archive checked every result's signature when it took it in: the ``signed`` column).
* Without: the public entries of the rounds the console received since it started
  (:class:`SeenRounds`, the last ``recent_rounds`` rounds of each table). Results are checked
  against the table's public key when ``public_keys`` names one. A round the console did not
  see is answered plainly: recall of older rounds needs the archive.

Both render with :class:`controller.recall.RoundRecord` (``tablectl recall``'s own view). The
page draws the round from :meth:`Recalled.to_json` (``record``'s cards, hands and result,
``bet_lines``: every settlement line in words) and lists the pit's actions on it
(``actions``: those this console sent, with who, when and the table's answer; the table's
journal holds every one, ``tablectl recall --journal``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.errors import TablectlError
from controller.journal import JournalEntry, settlement_rows
from controller.recall import RoundRecord, round_record
from controller.studio.pit.errors import RecallError

RESULT_KINDS = frozenset({"round_result", "round_voided"})


@dataclass
class _Seen:
    entries: dict[int, JournalEntry] = field(default_factory=dict)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Recalled:
    """A recalled round, as the page shows it.

    Attributes:
        round_id: The round.
        source: ``archive`` or ``console`` (what the console saw since it started).
        text: ``tablectl recall``'s text view.
        record: Its JSON view.
        signatures: One line per result: ``seq``, kind, and whether its signature verified.
        note: What the source means (public view, since when...).
        actions: The pit's actions on the round that this console sent (``{at, table, by,
            action, status, sentence, ...}``), oldest first.
    """

    round_id: str
    source: str
    text: str
    record: dict[str, Any]
    signatures: list[dict[str, Any]]
    note: str
    actions: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The page's form."""
        return {
            "round": self.round_id,
            "source": self.source,
            "text": self.text,
            "record": self.record,
            "signatures": self.signatures,
            "note": self.note,
            "bet_lines": bet_lines(self.record.get("settlement")),
            "actions": self.actions,
        }


def bet_lines(settlement: Any) -> list[dict[str, str]]:
    """Every settlement line (a result's, or a void's refunds) as the page lists it.

    Returns:
        ``{bet, outcome, payout, reason}`` per line, as text (``payout``: the exact decimal
        returned per unit staked, stake included).
    """
    return [
        {
            "bet": label,
            "outcome": str(line.get("outcome") or ""),
            "payout": str(line.get("payout") or ""),
            "reason": str(line.get("reason") or ""),
        }
        for label, line in settlement_rows(settlement).items()
    ]


def _time(text: Any) -> datetime:
    if isinstance(text, str):
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            pass
    return datetime.now(UTC)


class SeenRounds:
    """The public entries of the last rounds of each table, as the console received them.

    Args:
        per_table: Rounds kept per table (the oldest is forgotten first).
    """

    def __init__(self, per_table: int = 50) -> None:
        self._per_table = per_table
        self._rounds: dict[str, OrderedDict[str, _Seen]] = {}

    def add(self, table: str, leaf: str, envelope: Mapping[str, Any]) -> None:
        """Keep one ``events`` or ``results`` envelope that belongs to a round."""
        round_id = envelope.get("round")
        seq = envelope.get("seq")
        if leaf not in ("events", "results") or not isinstance(round_id, str):
            return
        if not isinstance(seq, int):
            return
        rounds = self._rounds.setdefault(table, OrderedDict())
        seen = rounds.get(round_id)
        if seen is None:
            seen = rounds[round_id] = _Seen()
            while len(rounds) > self._per_table:
                rounds.popitem(last=False)
        data = envelope.get("data")
        if leaf == "events" and seq not in seen.entries:
            seen.entries[seq] = JournalEntry(
                seq=seq,
                session=int(envelope.get("session") or 0),
                round_id=round_id,
                kind=str(envelope.get("kind")),
                happened_at=_time(envelope.get("at")),
                body=dict(data) if isinstance(data, Mapping) else {},
                delivered_at=datetime.now(UTC),  # as the archive: when it was received
            )
        if envelope.get("kind") in RESULT_KINDS and seq not in seen.results:
            seen.results[seq] = dict(envelope)

    def find(self, round_id: str) -> tuple[str, list[JournalEntry], list[dict[str, Any]]] | None:
        """The table, entries (``seq`` order) and result envelopes of a round, if seen."""
        for table, rounds in self._rounds.items():
            seen = rounds.get(round_id)
            if seen is not None and seen.entries:
                entries = [seen.entries[seq] for seq in sorted(seen.entries)]
                return table, entries, [seen.results[seq] for seq in sorted(seen.results)]
        return None


def _signature_lines(
    table: str, results: list[dict[str, Any]], public_keys: Mapping[str, Path]
) -> list[dict[str, Any]]:
    from controller.signing import load_public_key, verify_envelope

    path = public_keys.get(table)
    key = None
    problem = "no public key configured for this table (public_keys)"
    if path is not None:
        try:
            key = load_public_key(path)
        except (TablectlError, OSError, ValueError) as exc:
            problem = f"public key {path} cannot be used: {exc}"
    lines = []
    for envelope in results:
        signed = "signature" in envelope
        if key is None:
            verdict = problem if signed else "not signed"
            verified = None
        else:
            verified = verify_envelope(envelope, key)
            verdict = "verified" if verified else "INVALID signature"
        lines.append(
            {
                "seq": envelope.get("seq"),
                "kind": envelope.get("kind"),
                "replayed": bool(envelope.get("replayed")),
                "verified": verified,
                "text": verdict,
            }
        )
    return lines


def recall_seen(
    seen: SeenRounds, round_id: str, public_keys: Mapping[str, Path]
) -> Recalled | None:
    """A round from what the console saw, or ``None`` when it did not see it."""
    found = seen.find(round_id)
    if found is None:
        return None
    table, entries, results = found
    record = round_record(round_id, entries)
    return Recalled(
        round_id=round_id,
        source="console",
        text=record.to_text(),
        record=record.to_dict(),
        signatures=_signature_lines(table, results, public_keys),
        note=(
            f"table {table}: the public entries this console received since it started "
            "(hidden cards as published; the studio archive in the pit settings recalls every "
            "round)"
        ),
    )


async def _archive_signatures(url: str, round_id: str) -> list[dict[str, Any]]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT seq, kind, signed FROM events WHERE round_id = %s"
            " AND kind IN ('round_result', 'round_voided') ORDER BY seq",
            (round_id,),
        )
        rows = await cursor.fetchall()
    return [
        {
            "seq": int(seq),
            "kind": str(kind),
            "replayed": False,
            "verified": bool(signed),
            "text": "signature verified by the archive" if signed else "not signed",
        }
        for seq, kind, signed in rows
    ]


async def recall_archived(url: str, round_id: str, *, timeout: float) -> Recalled:  # noqa: ASYNC109 (the settings' archive_timeout)
    """A round from the studio archive.

    Raises:
        RecallError: Not archived, the archive unreachable, or no answer within ``timeout``.
    """
    import psycopg

    from controller.archive.recall import recall_from_archive

    try:
        async with asyncio.timeout(timeout):
            record: RoundRecord = await recall_from_archive(url, round_id)
            signatures = await _archive_signatures(url, round_id)
    except TimeoutError as exc:
        raise RecallError(
            f"the archive did not answer within {timeout:g} s", round_id=round_id
        ) from exc
    except (TablectlError, psycopg.Error) as exc:
        raise RecallError(str(exc), round_id=round_id, source="archive") from exc
    return Recalled(
        round_id=round_id,
        source="archive",
        text=record.to_text(),
        record=record.to_dict(),
        signatures=signatures,
        note="from the studio archive (every entry the tables published, public view)",
    )
