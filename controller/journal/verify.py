"""``Journal.verify``: the checks of a whole journal file, and what they found.

The file's own checks (``seq`` contiguous, the hash chain, times, sessions, bodies) are here;
the order of each round's entries is checked by the shared round fold
(:meth:`controller.journal.fold.RoundFold.check`). What follows from a round's cards (its
result, what it leaves the next round) is the game's to say: the journal knows no game, so a
:class:`RoundCheck` given to :meth:`Journal.verify` (``controller.rules_check.RulesCheck``:
the game's rules through the game registry) is handed each round's entries as it ends.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.journal.anchors import Anchor
from controller.journal.entries import EntryKind
from controller.journal.fold import ROUND_KINDS, RoundFold
from controller.journal.format import GENESIS_HASH, TIME_TEXT, entry_hash


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing :meth:`Journal.verify` found wrong.

    Attributes:
        what: What is wrong, in a sentence.
        seq: The entry concerned, if one is.
        round_id: The round concerned, if one is.
    """

    what: str
    seq: int | None = None
    round_id: str | None = None

    def __str__(self) -> str:
        where = []
        if self.seq is not None:
            where.append(f"seq {self.seq}")
        if self.round_id is not None:
            where.append(f"round {self.round_id}")
        return f"{', '.join(where)}: {self.what}" if where else self.what

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form."""
        return {"seq": self.seq, "round": self.round_id, "what": self.what}


RoundEntries = Sequence[tuple[int, str, Mapping[str, Any]]]
"""A round's entries as :class:`RoundCheck` gets them: ``(seq, kind, body)``, in ``seq`` order."""


class RoundCheck(Protocol):
    """A check of each round as a whole, beyond the order of its entries.

    :meth:`Journal.verify` calls it once per round, in the order the rounds end, with every
    entry of the round it folded (``round_opened`` first): when the round's result or void is
    read, and at the end for a round left unfinished. It must not raise: whatever is wrong is
    a :class:`Problem`.
    """

    def check_round(
        self, round_id: str, entries: RoundEntries, *, finished: bool
    ) -> Iterable[Problem]:
        """The problems of one round (``finished``: it has its result or void)."""
        ...


MAX_PROBLEMS = 1000
""":meth:`Journal.verify` keeps the first this many problems (and counts them all)."""


@dataclass(slots=True)
class VerifyReport:
    """What :meth:`Journal.verify` found.

    Attributes:
        path: The journal file.
        schema_version: Its ``PRAGMA user_version``.
        entries: How many entries it holds.
        last_seq: The highest ``seq`` (0 when empty).
        chain_head: The last entry's hash (anchor it elsewhere to detect a cut tail).
        rounds: Rounds opened.
        settled: Rounds with a result.
        voided: Rounds voided.
        unfinished: Rounds with neither (at most the last one in a sound journal).
        undelivered: Entries the broker has not acknowledged yet.
        problems: The first :data:`MAX_PROBLEMS` problems, in the order found.
        problems_total: How many problems there were in all.
        anchors_checked: Chain heads from a recorded feed checked against the file (0 when
            no feed was given).
        anchored_seq: The highest ``seq`` the feed anchors (``None`` without anchors).
        truncated: The feed anchors an entry beyond the journal's last one: its tail is gone.
        rounds_checked: Rounds handed to the :class:`RoundCheck` (the game's rules), or
            ``None`` when none was given (the file's own checks only).
    """

    path: str
    schema_version: int = 0
    entries: int = 0
    last_seq: int = 0
    chain_head: str | None = None
    rounds: int = 0
    settled: int = 0
    voided: int = 0
    unfinished: list[str] = field(default_factory=list)
    undelivered: int = 0
    problems: list[Problem] = field(default_factory=list)
    problems_total: int = 0
    anchors_checked: int = 0
    anchored_seq: int | None = None
    truncated: bool = False
    rounds_checked: int | None = None

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return self.problems_total == 0

    def add(self, what: str, *, seq: int | None = None, round_id: str | None = None) -> None:
        """Record a problem (kept if fewer than :data:`MAX_PROBLEMS` are kept already)."""
        self.problems_total += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(what, seq, round_id))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form."""
        return {
            "path": self.path,
            "ok": self.ok,
            "schema_version": self.schema_version,
            "entries": self.entries,
            "last_seq": self.last_seq,
            "chain_head": self.chain_head,
            "rounds": self.rounds,
            "settled": self.settled,
            "voided": self.voided,
            "unfinished": list(self.unfinished),
            "undelivered": self.undelivered,
            "anchors_checked": self.anchors_checked,
            "anchored_seq": self.anchored_seq,
            "truncated": self.truncated,
            "rounds_checked": self.rounds_checked,
            "problems_total": self.problems_total,
            "problems": [problem.to_dict() for problem in self.problems],
        }


class Verifier:
    """The checks of :meth:`Journal.verify`, fed the rows in ``seq`` order."""

    def __init__(
        self,
        report: VerifyReport,
        meta_session: int,
        *,
        with_hash: bool,
        anchors: Sequence[Anchor] = (),
        round_check: RoundCheck | None = None,
    ) -> None:
        self.report = report
        self.round_check = round_check
        if round_check is not None:
            report.rounds_checked = 0
        self.round_entries: dict[str, list[tuple[int, str, Mapping[str, Any]]]] = {}
        self.anchors: dict[int, list[Anchor]] = {}
        for anchor in anchors:
            self.anchors.setdefault(anchor.seq, []).append(anchor)
        self.anchored: set[int] = set()
        self.meta_session = meta_session
        self.with_hash = with_hash
        self.prev_hash = GENESIS_HASH
        self.expected_seq = 1
        self.last_session = 0
        self.rounds: dict[str, RoundFold] = {}
        self.open_round: str | None = None
        self.opened_at: dict[str, int] = {}

    def run(self, db: sqlite3.Connection) -> None:
        """Check every row of ``db``'s journal, in pages, and what is left unfinished."""
        chain = "hash" if self.with_hash else "NULL"
        after = 0
        while True:
            rows = db.execute(
                "SELECT seq, session, round_id, kind, happened_at, body, delivered_at, "
                f"{chain} FROM entries WHERE seq > ? ORDER BY seq LIMIT 5000",
                (after,),
            ).fetchall()
            for row in rows:
                self.row(row)
                after = int(row[0])
            if len(rows) < 5000:
                break
        report = self.report
        report.last_seq = after
        report.chain_head = self.prev_hash if self.with_hash and after else None
        for round_id, fold in self.rounds.items():
            if fold.outcome is None:
                report.unfinished.append(round_id)
                self._check_round(round_id, finished=False)
        for round_id in report.unfinished[:-1]:
            report.add("round never finished (neither result nor void)", round_id=round_id)
        self.check_anchors()

    def check_anchors(self) -> None:
        """The feed's chain heads the rows did not meet: beyond the end (cut), or missing."""
        report = self.report
        if not self.anchors:
            return
        report.anchors_checked = sum(len(found) for found in self.anchors.values())
        report.anchored_seq = max(self.anchors)
        for anchor in self.anchors.get(0, ()):
            if anchor.hash != GENESIS_HASH:
                report.add(
                    f"the feed anchors seq 0 with hash {anchor.hash[:12]}... ({anchor.source}), "
                    "not the genesis hash: a different journal"
                )
        beyond = sorted(seq for seq in self.anchors if seq > report.last_seq)
        if beyond:
            report.truncated = True
            last = self.anchors[beyond[-1]][0]
            report.add(
                f"journal truncated: the feed anchors seq {last.seq} (hash {last.hash[:12]}..., "
                f"{last.source}) but the journal ends at seq {report.last_seq}; "
                f"{len(beyond)} anchored entr{'y is' if len(beyond) == 1 else 'ies are'} "
                "missing from its tail"
            )
        for seq in sorted(self.anchors):
            if 0 < seq <= report.last_seq and seq not in self.anchored:
                anchor = self.anchors[seq][0]
                report.add(
                    f"the feed anchors seq {seq} ({anchor.source}) but the journal has no such "
                    "entry",
                    seq=seq,
                )

    def anchor(self, seq: int, chain: Any, round_id: str | None) -> None:
        """Compare a stored entry's hash with the feed's anchors of its ``seq``."""
        self.anchored.add(seq)
        for anchor in self.anchors[seq]:
            if chain != anchor.hash:
                self.report.add(
                    f"hash differs from the feed's anchor ({anchor.source}: "
                    f"{anchor.hash[:12]}..., journal: {str(chain)[:12]}...): the journal was "
                    "rewritten at or before this entry",
                    seq=seq,
                    round_id=round_id,
                )

    def row(self, row: tuple[Any, ...]) -> None:
        """Check one stored row (its seq, hash, session, times, body) and its round."""
        seq, session, round_id, kind, happened_at, body_text, delivered_at, chain = row
        report = self.report
        report.entries += 1
        self._check_seq(seq, round_id)
        if self.with_hash:
            self._check_hash(row)
        if seq in self.anchors:
            self.anchor(seq, chain, round_id)
        self._check_session(seq, round_id, session)
        self._check_times(seq, round_id, happened_at, delivered_at)
        try:
            body = json.loads(body_text)
        except RecursionError:
            report.add("body is nested too deeply to read", seq=seq, round_id=round_id)
            return
        except (TypeError, ValueError) as exc:
            report.add(f"body is not JSON: {exc}", seq=seq, round_id=round_id)
            return
        if not isinstance(body, dict):
            report.add("body is not a JSON object", seq=seq, round_id=round_id)
            return
        self.round_order(seq, round_id, kind, body)

    def _check_seq(self, seq: int, round_id: str | None) -> None:
        report = self.report
        if seq != self.expected_seq:
            if seq > self.expected_seq:
                missing = (
                    f"seq {self.expected_seq}"
                    if seq == self.expected_seq + 1
                    else f"seq {self.expected_seq}-{seq - 1}"
                )
                report.add(f"gap: {missing} missing", seq=seq, round_id=round_id)
            else:
                report.add(f"seq out of order (expected {self.expected_seq})", seq=seq)
        self.expected_seq = seq + 1

    def _check_hash(self, row: tuple[Any, ...]) -> None:
        seq, session, round_id, kind, happened_at, body_text, _, chain = row
        try:
            expected = entry_hash(
                self.prev_hash,
                seq=seq,
                session=session,
                round_id=round_id,
                kind=kind,
                happened_at=happened_at,
                body=body_text,
            )
        except (TypeError, ValueError):
            expected = ""
        if chain != expected:
            self.report.add(
                "hash chain broken: the entry or one before it was altered, inserted "
                f"or removed (stored {str(chain)[:12]}..., computed {expected[:12]}...)",
                seq=seq,
                round_id=round_id,
            )
        # Continue from the stored hash, so one altered entry is reported once.
        self.prev_hash = chain if isinstance(chain, str) and len(chain) == 64 else expected

    def _check_session(self, seq: int, round_id: str | None, session: int) -> None:
        report = self.report
        if session < self.last_session:
            report.add(
                f"session {session} after session {self.last_session}", seq=seq, round_id=round_id
            )
        self.last_session = max(self.last_session, session)
        if session > self.meta_session:
            report.add(
                f"session {session} is beyond the meta counter {self.meta_session}",
                seq=seq,
                round_id=round_id,
            )

    def _check_times(
        self, seq: int, round_id: str | None, happened_at: Any, delivered_at: Any
    ) -> None:
        report = self.report
        # The stored format is fixed-width UTC, so the texts compare as the times do.
        happened_ok = isinstance(happened_at, str) and TIME_TEXT.match(happened_at) is not None
        if not happened_ok:
            report.add(f"happened_at {happened_at!r} is not a journal time", seq=seq)
        if delivered_at is None:
            return
        if not (isinstance(delivered_at, str) and TIME_TEXT.match(delivered_at)):
            report.add(f"delivered_at {delivered_at!r} is not a journal time", seq=seq)
        elif happened_ok and delivered_at < happened_at:
            report.add(
                f"delivered_at {delivered_at} is before happened_at {happened_at}",
                seq=seq,
                round_id=round_id,
            )

    def round_order(self, seq: int, round_id: str | None, kind: str, body: dict[str, Any]) -> None:
        """Check an entry against its round (the shared fold) and fold it in."""
        report = self.report
        if round_id is None:
            if kind in ROUND_KINDS:
                report.add(f"{kind} without a round id", seq=seq)
            return
        if kind == EntryKind.ROUND_OPENED:
            self._opened(seq, round_id, body)
            return
        fold = self.rounds.get(round_id)
        if fold is None:
            report.add(f"{kind} for a round that was never opened", seq=seq, round_id=round_id)
            return
        if fold.outcome is not None:
            report.add(f"{kind} after the round's {fold.outcome}", seq=seq, round_id=round_id)
            return
        for what in fold.check(kind, body):
            report.add(what, seq=seq, round_id=round_id)
        fold = self.rounds[round_id] = fold.apply(kind, body)
        if self.round_check is not None:
            self.round_entries[round_id].append((seq, kind, body))
        if fold.outcome is not None:
            self._finished(round_id, fold.outcome)

    def _opened(self, seq: int, round_id: str, body: dict[str, Any]) -> None:
        report = self.report
        if round_id in self.rounds:
            first = self.opened_at[round_id]
            report.add(f"round opened again (first at seq {first})", seq=seq, round_id=round_id)
            return
        if body.get("round_id", round_id) != round_id:
            report.add(
                f"round_opened names round {body.get('round_id')!r}",
                seq=seq,
                round_id=round_id,
            )
        if self.open_round is not None:
            report.add(
                f"round opened while round {self.open_round} is unfinished",
                seq=seq,
                round_id=round_id,
            )
        self.rounds[round_id] = RoundFold(round_id=round_id).apply(EntryKind.ROUND_OPENED, body)
        if self.round_check is not None:
            self.round_entries[round_id] = [(seq, EntryKind.ROUND_OPENED, body)]
        self.opened_at[round_id] = seq
        self.open_round = round_id
        report.rounds += 1

    def _check_round(self, round_id: str, *, finished: bool) -> None:
        """Hand a round's entries to the :class:`RoundCheck` (if any) and keep its problems."""
        entries = self.round_entries.pop(round_id, None)
        if self.round_check is None or entries is None:
            return
        report = self.report
        report.rounds_checked = (report.rounds_checked or 0) + 1
        for problem in self.round_check.check_round(round_id, entries, finished=finished):
            report.add(problem.what, seq=problem.seq, round_id=problem.round_id or round_id)

    def _finished(self, round_id: str, outcome: str) -> None:
        self._check_round(round_id, finished=True)
        if outcome == "result":
            self.report.settled += 1
        else:
            self.report.voided += 1
        if self.open_round == round_id:
            self.open_round = None
