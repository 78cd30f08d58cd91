"""What every archive store does the same way around its database (pure, no I/O).

Both stores (:mod:`controller.archive.store`, PostgreSQL; :mod:`controller.archive.sqlite_store`,
SQLite) take a batch of entries and answer each one's outcome as if stored one by one
(:func:`first_copies`, :func:`outcomes`), and keep each round's fold to fold it on from its
new entries alone (:class:`RoundFolds`): the rules live here once.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import structlog

from controller.archive.ingest import Entry, Rejected, TableKeys, classify, table_of
from controller.journal.fold import RoundFold

_log = structlog.get_logger("archive.chain")

GapStamp = Literal["replay_requested", "filled", "alerted"]
"""What may be stamped on a gap (a store's ``mark_gap``)."""

GAP_STAMP_COLUMNS: dict[str, str] = {
    "replay_requested": "replay_requested_at",
    "filled": "filled_at",
    "alerted": "alerted_at",
}
"""The ``gaps`` column each stamp sets (the same in both stores' schemas)."""

Stored = Literal["new", "duplicate", "conflict"]
"""What became of an entry: archived now, a copy of an archived one, or a conflicting copy."""
Key = tuple[str, int, int]
"""An entry's idempotency key: ``(table, session, seq)``."""
RoundKey = tuple[str, str]
"""A round: ``(table, round_id)``."""
FOLDS_KEPT = 20_000
"""Rounds whose fold a store keeps, to fold a round on from its new entries alone."""


def key_of(entry: Entry) -> Key:
    """``entry``'s idempotency key."""
    return (entry.table, entry.session, entry.seq)


def first_copies(entries: Iterable[Entry]) -> dict[Key, Entry]:
    """Each key's first entry in ``entries``, in order."""
    first: dict[Key, Entry] = {}
    for entry in entries:
        first.setdefault((entry.table, entry.session, entry.seq), entry)
    return first


def outcomes(
    entries: Sequence[Entry], first: dict[Key, Entry], new: set[Key], stored: dict[Key, str]
) -> list[Stored]:
    """Each entry's outcome, in order, as if the batch had been stored one by one.

    Args:
        entries: The batch.
        first: :func:`first_copies` of it.
        new: The keys the batch archived now (their first copy is ``new``).
        stored: Each key's archived digest (a later copy with it is a ``duplicate``, with
            another a ``conflict``).
    """
    out: list[Stored] = []
    for entry in entries:
        key = (entry.table, entry.session, entry.seq)
        if key in new and first[key] is entry:
            out.append("new")
        elif stored.get(key) == entry.digest:
            out.append("duplicate")
        else:
            out.append("conflict")
    return out


def conflict(entry: Entry) -> Rejected:
    """The rejection of a copy of an archived key with other content."""
    return Rejected(
        entry.topic,
        entry.table,
        entry.seq,
        "conflict",
        f"seq {entry.seq} (session {entry.session}) is archived with other content",
        entry.raw or json.dumps(entry.envelope).encode(),
    )


def envelope_text(entry: Entry) -> str:
    """The envelope as stored: the payload's own text when it is UTF-8, else re-dumped."""
    return entry.raw.decode() if entry.raw else json.dumps(entry.envelope)


@dataclass(slots=True)
class Folded:
    """A round's entries folded so far, in ``seq`` order, and what its ``rounds`` row needs.

    Attributes:
        fold: The fold (``controller.journal.fold.RoundFold``).
        last_seq: The last entry's ``seq`` (0: none yet).
        count: How many entries.
        opened: When the round opened (its first ``round_opened``).
        final: ``(at, seq, delayed)`` of its first result or void.
    """

    fold: RoundFold
    last_seq: int = 0
    count: int = 0
    opened: datetime | None = None
    final: tuple[datetime, int, bool] | None = None

    def add(self, kind: str, data: Any, at: datetime, seq: int, delayed: bool) -> None:
        """Fold the next entry on (``seq`` above every one before)."""
        self.fold = self.fold.apply(kind, data)
        self.last_seq = seq
        self.count += 1
        if kind == "round_opened" and self.opened is None:
            self.opened = at
        if kind in {"round_result", "round_voided"} and self.final is None:
            self.final = (at, seq, delayed)

    def row(self, key: RoundKey) -> RoundRow:
        """Its ``rounds`` row."""
        fold, final = self.fold, self.final
        return RoundRow(
            table=key[0],
            round_id=key[1],
            round_no=fold.round_no,
            game=fold.game,
            state=fold.state,
            outcome=fold.outcome,
            opened_at=self.opened,
            finished_at=None if final is None else final[0],
            result_seq=None if final is None else final[1],
            delayed=False if final is None else final[2],
            result=None if fold.result is None else dict(fold.result),
            bets=fold.bets,
            entries=self.count,
        )


@dataclass(frozen=True, slots=True)
class RoundRow:
    """A ``rounds`` row, as both stores write it (``result`` and ``bets`` as JSON values)."""

    table: str
    round_id: str
    round_no: int | None
    game: str | None
    state: str
    outcome: str | None
    opened_at: datetime | None
    finished_at: datetime | None
    result_seq: int | None
    delayed: bool
    result: dict[str, Any] | None
    bets: Any
    entries: int


class RoundFolds:
    """The folds a store keeps, and which rounds of a batch must be read back and refolded.

    A round this store folded before, whose archived entries are exactly the ones it saw
    plus the batch's (same count, every new ``seq`` above its last), is folded on from its
    kept state with the new entries alone; any other (another instance wrote into it, an
    entry came out of ``seq`` order, a round not kept) is read back whole.
    """

    def __init__(self) -> None:
        self._folds: dict[RoundKey, Folded] = {}

    def clear(self) -> None:
        """Forget every fold (after a rolled-back transaction)."""
        self._folds.clear()

    def forget(self, keys: Iterable[RoundKey]) -> None:
        """Forget the folds of ``keys`` (rounds an entry left: they are read back whole)."""
        for key in keys:
            self._folds.pop(key, None)

    def kept(self, key: RoundKey) -> bool:
        """Whether a fold of ``key`` is kept (it had entries when last folded or loaded)."""
        return key in self._folds

    @staticmethod
    def touched(fresh: Iterable[Entry]) -> dict[RoundKey, list[Entry]]:
        """The rounds of ``fresh`` (new entries), each with its new entries."""
        added: dict[RoundKey, list[Entry]] = {}
        for entry in fresh:
            if entry.round_id is not None:
                added.setdefault((entry.table, entry.round_id), []).append(entry)
        return added

    def fold_on(
        self, added: dict[RoundKey, list[Entry]], archived: dict[RoundKey, int]
    ) -> list[RoundKey]:
        """Fold each round on with its new entries where the kept fold allows it.

        Args:
            added: :meth:`touched`.
            archived: Each round's entry count in the database, the batch's included.

        Returns:
            The rounds to read back whole (:meth:`load` them).
        """
        reread: list[RoundKey] = []
        for key, entries in added.items():
            new = sorted(entries, key=lambda e: e.seq)
            kept = self._folds.pop(key, None) or Folded(RoundFold(round_id=key[1]))
            if kept.count + len(new) == archived.get(key) and new[0].seq > kept.last_seq:
                for entry in new:
                    kept.add(entry.kind, entry.data, entry.at, entry.seq, entry.delayed)
                self._keep(key, kept)
            else:
                reread.append(key)
        return reread

    def load(self, rows: Iterable[tuple[str, str, str, Any, datetime, int, bool]]) -> None:
        """Fold rounds whole from their archived entries.

        Args:
            rows: ``(table, round, kind, data, at, seq, delayed)`` in ``(table, round, seq)``
                order.
        """
        folds: dict[RoundKey, Folded] = {}
        for table, round_id, kind, data, at, seq, delayed in rows:
            key = (table, round_id)
            folded = folds.get(key)
            if folded is None:
                folded = folds[key] = Folded(RoundFold(round_id=round_id))
            folded.add(kind, data, at, seq, delayed)
        for key, folded in folds.items():
            self._keep(key, folded)

    def rows(self, keys: Iterable[RoundKey]) -> list[RoundRow]:
        """The ``rounds`` rows of ``keys`` (each folded by :meth:`fold_on` or :meth:`load`)."""
        return [self._folds[key].row(key) for key in keys]

    def _keep(self, key: RoundKey, folded: Folded) -> None:
        """Keep a round's fold (the oldest kept one dropped past :data:`FOLDS_KEPT`)."""
        self._folds[key] = folded
        if len(self._folds) > FOLDS_KEPT:
            del self._folds[next(iter(self._folds))]


# -- the signed chain: provisional entries, verified ones, forged copies ------------------------

WALK_WINDOW = 64
"""Keys read below a batch's lowest new ``seq`` for a walk (more are read if it needs them)."""
WALK_LIMIT = 100_000
"""Steps of one walk at most (a table's entries between two signed results are far fewer)."""


@dataclass(slots=True)
class Linked:
    """An archived key's place in its table's hash chain (``entry_keys``).

    Attributes:
        seq: Its ``seq``.
        session: Its ``session``.
        prev: Its ``link.prev`` (``None``: archived without a link).
        hash: Its ``link.hash``.
        state: ``provisional``, ``verified`` or ``unsigned``.
    """

    seq: int
    session: int
    prev: str | None
    hash: str | None
    state: str


@dataclass(frozen=True, slots=True)
class Copy:
    """A conflicting copy kept in ``rejected`` (``conflict``): its row and its link."""

    id: int
    seq: int
    session: int
    prev: str
    hash: str


@dataclass(slots=True)
class Walk:
    """What one walk down the signed chain found.

    Attributes:
        verified: Keys ``(seq, session)`` the chain covers (now ``verified``).
        forged: Archived keys at a covered ``seq`` whose link is not the chain's: not the
            table's (moved to ``rejected`` as ``forged``).
        promoted: Conflicting copies that are the chain's own (archived as ``verified`` in
            place of the forged ones).
        stopped: Why it stopped: ``verified`` (it met what an earlier walk covered),
            ``missing`` (the chain's entry at ``seq`` is not archived yet), ``unlinked`` (an
            entry without a link), ``start`` (seq 1), ``window`` (more keys must be read).
        seq: Where it stopped.
        expected: The hash the entry at ``seq`` must have (to go on from there).
    """

    verified: list[tuple[int, int]] = field(default_factory=list)
    forged: list[tuple[int, int]] = field(default_factory=list)
    promoted: list[Copy] = field(default_factory=list)
    stopped: str = ""
    seq: int = 0
    expected: str = ""


def walk_chain(
    seq: int,
    expected: str,
    chain: dict[int, list[Linked]],
    copies: dict[int, list[Copy]],
    *,
    lowest: int = 1,
    start: bool = True,
) -> Walk:
    """Walk a table's chain down from ``seq``, whose entry's hash must be ``expected``.

    At each ``seq`` the archived key whose ``link.hash`` is ``expected`` is the table's (it
    becomes ``verified``; the next expected hash is its ``link.prev``), a conflicting copy with
    that hash stands in for a missing one (``promoted``), and every other key at that ``seq``
    is ``forged``. A ``verified`` key is never displaced: a walk that would displace one stops
    there. ``chain`` and ``copies`` are updated as the walk goes (several walks of one batch
    see each other's work). Pure.

    Args:
        seq: Where to start (a signed result's own ``seq``).
        expected: The hash there (its signed ``chain_head.hash``).
        chain: The table's archived keys by ``seq`` (at least ``lowest`` .. ``seq``).
        copies: The table's conflicting copies by ``seq``.
        lowest: The lowest ``seq`` read into ``chain``: below it the walk stops (``window``).
        start: ``seq`` is the walk's first step (a signed head: verified again is no stop).
    """
    walk = Walk()
    first = seq
    for _ in range(WALK_LIMIT):
        if seq < max(1, lowest):
            walk.stopped = "start" if seq < 1 else "window"
            break
        step = _step(seq, expected, chain.get(seq, []), copies.get(seq, []))
        if step.stop:
            walk.stopped = step.stop
            break
        if step.off:
            walk.forged += [(key.seq, key.session) for key in step.off]
            chain[seq] = [key for key in chain.get(seq, []) if key not in step.off]
        if step.on is not None:
            if step.on.state == "verified" and not (start and seq == first):
                walk.stopped = "verified"
                break
            step.on.state = "verified"
            walk.verified.append((seq, step.on.session))
            expected = step.on.prev or ""
        elif step.copy is not None:
            copy = step.copy
            walk.promoted.append(copy)
            copies[seq] = [c for c in copies[seq] if c is not copy]
            chain[seq] = [Linked(seq, copy.session, copy.prev, copy.hash, "verified")]
            expected = copy.prev
        else:
            walk.stopped = step.missing
            break
        seq -= 1
    walk.seq, walk.expected = seq, expected
    return walk


@dataclass(slots=True)
class _Step:
    """One ``seq`` of a walk: the chain's key or copy there, the keys off it, or a stop."""

    on: Linked | None = None
    copy: Copy | None = None
    off: list[Linked] = field(default_factory=list)
    stop: str = ""
    missing: str = ""


def _step(seq: int, expected: str, here: list[Linked], copies: list[Copy]) -> _Step:
    """What the walk finds at ``seq``.

    A linked key with another hash is off the chain; a key without a link (archived before
    links, or from a controller without them) is off it only when the chain's own copy is
    there to take its place, else the walk stops at it (``unlinked``: it cannot be judged). A
    verified key is never displaced (``verified``: the chain forks there).
    """
    if len(here) == 1 and here[0].hash == expected:
        return _Step(here[0])  # the common case: one key, the chain's
    on = next((key for key in here if key.hash == expected), None)
    copy = None if on is not None else next((c for c in copies if c.hash == expected), None)
    found = on is not None or copy is not None
    off = [key for key in here if key.hash != expected and (key.hash is not None or found)]
    if any(key.state == "verified" for key in off):
        return _Step(stop="verified")
    unlinked = any(key.hash is None for key in here)
    return _Step(on, copy, off, missing="unlinked" if unlinked else "missing")


def below_verified(seq: int, chain: dict[int, list[Linked]]) -> str | None:
    """The hash the entry at ``seq`` must have if the key above it is verified, else ``None``.

    A provisional entry archived after the walk that passed its ``seq`` (it came late) is
    covered from the verified key above it.
    """
    above = [key for key in chain.get(seq + 1, []) if key.state == "verified"]
    return above[0].prev if above and above[0].prev else None


class ChainWalks:
    """The walks a batch's new entries call for, table by table (both stores run them).

    A new signed result walks the chain down from its head; a new provisional entry whose
    ``seq`` is just below a verified key is covered from it. The store reads each table's keys
    in :meth:`windows` (and conflicting copies there), hands them over (:meth:`add`), calls
    :meth:`run` until it asks for nothing more (a walk that reached the bottom of what was
    read asks for the keys below: :meth:`run`'s answer), then applies :attr:`walks`.
    """

    def __init__(self, fresh: Iterable[Entry]) -> None:
        linked = [e for e in fresh if e.link is not None and not e.unsigned]
        self.chain: dict[str, dict[int, list[Linked]]] = {}
        self.copies: dict[str, dict[int, list[Copy]]] = {}
        self.lowest: dict[str, int] = {}
        self.walks: list[tuple[str, Walk]] = []
        heads = sorted(
            ((e.table, e.seq, e.head) for e in linked if e.head is not None),
            key=lambda item: (item[0], -item[1]),
        )
        self._pending: list[tuple[str, int, str, bool]] = [(t, s, h, True) for t, s, h in heads]
        self._late = sorted(
            ((e.table, e.seq) for e in linked if e.head is None), key=lambda i: (i[0], -i[1])
        )
        self._span: dict[str, tuple[int, int]] = {}
        for entry in linked:
            lo, hi = self._span.get(entry.table, (entry.seq, entry.seq))
            self._span[entry.table] = (min(lo, entry.seq), max(hi, entry.seq))

    def windows(self) -> dict[str, tuple[int, int]]:
        """Each table's ``seq`` range to read first (the batch's, a window below, one above)."""
        return {t: (max(1, lo - WALK_WINDOW), hi + 1) for t, (lo, hi) in self._span.items()}

    def add(self, table: str, lo: int, keys: Iterable[Linked], copies: Iterable[Copy]) -> None:
        """The keys and conflicting copies of ``table`` read from ``lo`` up (one read)."""
        chain = self.chain.setdefault(table, {})
        for key in keys:
            chain.setdefault(key.seq, []).append(key)
        found = self.copies.setdefault(table, {})
        for copy in copies:
            found.setdefault(copy.seq, []).append(copy)
        self.lowest[table] = min(lo, self.lowest.get(table, lo))

    def run(self) -> dict[str, tuple[int, int]]:
        """Walk what is pending; the ranges still to read (empty: done)."""
        more: dict[str, tuple[int, int]] = {}
        pending, self._pending = self._pending, []
        for table, seq, expected, start in pending:
            if table in more:
                self._pending.append((table, seq, expected, start))
                continue
            walk = walk_chain(
                seq,
                expected,
                self.chain.setdefault(table, {}),
                self.copies.setdefault(table, {}),
                lowest=self.lowest.get(table, 1),
                start=start,
            )
            self.walks.append((table, walk))
            if walk.stopped == "window":
                lowest = self.lowest[table]
                more[table] = (max(1, lowest - 8 * WALK_WINDOW), lowest - 1)
                self._pending.append((table, walk.seq, walk.expected, False))
        if more:
            return more
        late, self._late = self._late, []
        for table, seq in late:
            chain = self.chain.get(table, {})
            here = chain.get(seq, [])
            below = below_verified(seq, chain)
            if below is not None and any(k.state == "provisional" for k in here):
                walk = walk_chain(
                    seq,
                    below,
                    chain,
                    self.copies.setdefault(table, {}),
                    lowest=self.lowest.get(table, 1),
                    start=False,
                )
                self.walks.append((table, walk))
        return {}

    def outcome(self) -> tuple[list[Key], list[Key], list[tuple[str, Copy]]]:
        """Every walk's keys ``(table, session, seq)``: verified, forged; copies promoted."""
        verified: list[Key] = []
        forged: list[Key] = []
        promoted: list[tuple[str, Copy]] = []
        for table, walk in self.walks:
            verified += [(table, session, seq) for seq, session in walk.verified]
            forged += [(table, session, seq) for seq, session in walk.forged]
            promoted += [(table, copy) for copy in walk.promoted]
        promoted_keys = {(t, c.session, c.seq) for t, c in promoted}
        verified = [key for key in verified if key not in promoted_keys]
        return verified, forged, promoted


def forged(entry_topic: str, table: str, seq: int, session: int, envelope: str) -> Rejected:
    """The rejection of an archived entry the signed chain does not cover."""
    return Rejected(
        entry_topic,
        table,
        seq,
        "forged",
        f"seq {seq} (session {session}) is not on the table's signed chain: another copy is "
        "(it was archived provisionally, before a signed head covered its seq)",
        envelope.encode(),
    )


def link_of(payload: bytes) -> tuple[int, str, str] | None:
    """A conflicting copy's ``(session, prev, hash)`` from its stored bytes, if it has a link."""
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    link = value.get("link") if isinstance(value, dict) else None
    session = value.get("session") if isinstance(value, dict) else None
    if (
        isinstance(link, dict)
        and isinstance(prev := link.get("prev"), str)
        and isinstance(chained := link.get("hash"), str)
        and type(session) is int
    ):
        return session, prev, chained
    return None


def entry_of_copy(topic: str, payload: bytes, table: str) -> Entry | None:
    """A conflicting copy kept in ``rejected``, read again as the entry the chain shows it is.

    Its signature (if any) is not what makes it the table's: its place on the signed chain is.
    ``table`` is the chain's id (:func:`~controller.archive.ingest.chain_id`): the copy is
    read as its table's and placed in that chain.
    """
    real = table_of(table)
    found = classify(topic, payload, TableKeys({real: None}))
    if not isinstance(found, Entry) or found.table != real:
        return None
    return dataclasses.replace(found, table=table)


def state_of(entry: Entry) -> str:
    """A new key's state: ``unsigned`` (a table allowed to publish unsigned), ``provisional``."""
    return "unsigned" if entry.unsigned else "provisional"


def log_walks(walks: ChainWalks) -> None:
    """One line per walk that found copies not on the signed chain (never silent)."""
    for table, walk in walks.walks:
        if walk.forged or walk.promoted:
            seqs = sorted({seq for seq, _ in walk.forged} | {c.seq for c in walk.promoted})
            _log.warning(
                "copies not on the signed chain replaced by the chain's own",
                table=table,
                forged=len(walk.forged),
                promoted=len(walk.promoted),
                seqs=f"{seqs[0]}..{seqs[-1]}",
            )
