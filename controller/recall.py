"""``tablectl recall`` and ``tablectl journal verify``: a round as recorded, and the proof.

Both read the journal with :meth:`~controller.journal.Journal.open_readonly`, so they run
beside a live controller (no lock, no new session, nothing written).

``tablectl recall ROUND_ID --journal PATH [--json]`` prints one round as the journal holds
it: every entry with its ``seq`` and time, the cards by slot, misreads and rescans, refusals,
decisions, pit alerts, the result and the settlement of every bet (or the void and its
refunds), the pit's actions on the round (void, resume, replay and alert acknowledgements:
the pit role's ``command_received`` entries naming the round, with the operator and the
table's verdict), and the timing (betting window, deal, time to result). ``tablectl journal verify
--journal PATH [--json]`` runs :meth:`~controller.journal.Journal.verify`: exit 0 when the
journal is sound, 1 with every problem listed (seq, round, what).

The command line is :mod:`controller.cli.recall`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controller.errors import JournalError
from controller.journal import (
    Journal,
    JournalEntry,
    RoundFold,
    VerifyReport,
    format_time,
    settlement_rows,
)
from controller.wording import reason_words, returns_words, settled_reason


class RoundNotFound(JournalError):
    """The journal holds no entry of the round asked for (context: ``path``, ``round_id``)."""


@dataclass(frozen=True, slots=True)
class Timing:
    """How long the parts of a round took, in seconds (``None`` when a part did not happen).

    Attributes:
        betting_window: ``round_opened`` (``betting_opened`` after a round's opening, such as
            Mahjong's bank offers) → ``betting_closed``.
        betting_seconds: The window the round announced (from ``round_opened``).
        deal: ``betting_closed`` → the last ``card_dealt``.
        time_to_result: ``betting_closed`` → ``round_result`` (or the void).
        total: ``round_opened`` → ``round_result`` or ``round_voided``.
    """

    betting_window: float | None
    betting_seconds: float | None
    deal: float | None
    time_to_result: float | None
    total: float | None

    def to_dict(self) -> dict[str, float | None]:
        """A JSON-able form (seconds, rounded to the microsecond)."""
        return {
            name: (None if value is None else round(value, 6))
            for name, value in (
                ("betting_window", self.betting_window),
                ("betting_seconds", self.betting_seconds),
                ("deal", self.deal),
                ("time_to_result", self.time_to_result),
                ("total", self.total),
            )
        }


@dataclass(frozen=True, slots=True)
class PitAction:
    """A pit command about a round, as the table journalled it.

    Attributes:
        seq: The ``command_received`` entry's seq.
        at: When the table received it.
        name: ``void``, ``resume``, ``replay`` or ``ack``.
        operator: Who sent it (the pit console's signed-in user), if named.
        data: The command's fields (``reason``, ``from_seq``, ``alert_seq``...).
        accepted: The table's verdict (``None``: no answer journalled).
        reason: The table's reason, when it refused.
    """

    seq: int
    at: datetime
    name: str
    operator: str | None
    data: dict[str, Any]
    accepted: bool | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able form."""
        return {
            "seq": self.seq,
            "at": format_time(self.at),
            "name": self.name,
            "operator": self.operator,
            "data": self.data,
            "accepted": self.accepted,
            "reason": self.reason,
        }

    def to_text(self) -> str:
        """One line for people."""
        who = f" by {self.operator}" if self.operator else ""
        fields = {k: v for k, v in self.data.items() if k != "operator"}
        what = " ".join(f"{k}={v}" for k, v in fields.items())
        if self.accepted is None:
            verdict = "no answer journalled"
        else:
            verdict = "accepted" if self.accepted else f"refused: {self.reason}"
        return f"{self.name}{who}{(' ' + what) if what else ''} -> {verdict}"


def pit_actions(journal: Journal, round_id: str) -> list[PitAction]:
    """The pit's commands naming ``round_id`` and their answers (read through the kind index).

    Command entries are table-level (no ``round_id`` column): the round is the command's own
    ``round`` field (void and resume name the round shown, a replay by round and an alert's
    acknowledgement the round concerned).
    """
    received: dict[str, JournalEntry] = {}
    answers: dict[str, dict[str, Any]] = {}
    for entry in journal.entries_of_kinds(["command_received", "command_answered"]):
        body = entry.body
        if body.get("role") != "pit":
            continue
        command_id = str(body.get("command_id"))
        if entry.kind == "command_received":
            if body.get("round") == round_id and command_id not in received:
                received[command_id] = entry
        elif command_id in received and not body.get("duplicate"):
            answers.setdefault(command_id, body)
    actions = []
    for command_id, entry in received.items():
        data = entry.body.get("data")
        fields = dict(data) if isinstance(data, dict) else {}
        answer = answers.get(command_id)
        operator = fields.get("operator")
        actions.append(
            PitAction(
                seq=entry.seq,
                at=entry.happened_at,
                name=str(entry.body.get("name")),
                operator=operator if isinstance(operator, str) else None,
                data=fields,
                accepted=None if answer is None else bool(answer.get("accepted")),
                reason=str(answer.get("reason") or "") if answer is not None else "",
            )
        )
    return actions


@dataclass(slots=True)
class RoundRecord:
    """One round as the journal recorded it.

    Attributes:
        round_id: The round.
        entries: Its entries, in ``seq`` order.
        status: ``settled``, ``voided``, ``dealing`` or ``betting_open`` (the last two: the
            round is unfinished).
        sessions: The controller runs that journalled it (more than one: resumed after a
            restart).
        fold: Its entries folded (the round fold the snapshot and the verifier share).
        verification: How far the record can be trusted, when read from the archive
            (``unsigned: not verifiable``, ``provisional: ...``, ``verified: ...``); empty
            from a journal (``journal verify`` checks one).
        pit_actions: The pit's commands naming the round (:func:`pit_actions`; from a
            journal only: the public feed carries no operator).
    """

    round_id: str
    entries: list[JournalEntry]
    status: str = "betting_open"
    sessions: list[int] = field(default_factory=list)
    fold: RoundFold = field(default_factory=RoundFold)
    verification: str = ""
    pit_actions: list[PitAction] = field(default_factory=list)

    # -- views ---------------------------------------------------------------------------------

    def _of(self, *kinds: str) -> list[JournalEntry]:
        return [entry for entry in self.entries if entry.kind in kinds]

    def _first(self, kind: str) -> JournalEntry | None:
        found = self._of(kind)
        return found[0] if found else None

    @property
    def opened(self) -> JournalEntry | None:
        """The ``round_opened`` entry."""
        return self._first("round_opened")

    @property
    def cards(self) -> list[JournalEntry]:
        """The ``card_dealt`` entries, in slot order."""
        return self._of("card_dealt")

    @property
    def rescans(self) -> list[JournalEntry]:
        """Misreads: the ``rescan_requested`` entries."""
        return self._of("rescan_requested")

    @property
    def refusals(self) -> list[JournalEntry]:
        """The ``card_refused`` entries."""
        return self._of("card_refused")

    @property
    def alerts(self) -> list[JournalEntry]:
        """The ``pit_alert`` entries (and any other ``pit_*`` entry)."""
        return [entry for entry in self.entries if entry.kind.startswith("pit_")]

    @property
    def decisions(self) -> list[JournalEntry]:
        """Decisions recorded in the round (player or dealer choices of games that have them)."""
        return [entry for entry in self.entries if "decision" in entry.kind]

    @property
    def result(self) -> JournalEntry | None:
        """The ``round_result`` entry, if the round was settled."""
        return self._first("round_result")

    @property
    def void(self) -> JournalEntry | None:
        """The ``round_voided`` entry, if the round was voided."""
        return self._first("round_voided")

    @property
    def settlement(self) -> Any:
        """The ``bets`` of the result (or the void's refunds); ``None`` while unfinished."""
        return self.fold.bets

    @property
    def timing(self) -> Timing:
        """How long its parts took."""
        opened = self.opened
        betting = self._first("betting_opened") or opened
        closed = self._first("betting_closed")
        cards = self.cards
        end = self.result or self.void

        def seconds(start: JournalEntry | None, stop: JournalEntry | None) -> float | None:
            if start is None or stop is None:
                return None
            return (stop.happened_at - start.happened_at).total_seconds()

        announced = opened.body.get("betting_seconds") if opened is not None else None
        return Timing(
            betting_window=seconds(betting, closed),
            betting_seconds=float(announced) if isinstance(announced, int | float) else None,
            deal=seconds(closed, cards[-1] if cards else None),
            time_to_result=seconds(closed, end),
            total=seconds(opened, end),
        )

    # -- output --------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The record as one JSON-able document."""
        opened = self.opened
        result = self.result
        void = self.void
        return {
            "round_id": self.round_id,
            "round_no": opened.body.get("round_no") if opened is not None else None,
            "game": opened.body.get("game") if opened is not None else None,
            "status": self.status,
            "sessions": self.sessions,
            **({"verification": self.verification} if self.verification else {}),
            "entries": [_entry_dict(entry) for entry in self.entries],
            "cards": [
                {
                    "slot": entry.body.get("slot"),
                    "hand": entry.body.get("hand"),
                    "index": entry.body.get("index"),
                    "card": entry.body.get("card"),
                    "face": entry.body.get("face"),
                    "seq": entry.seq,
                    "at": format_time(entry.happened_at),
                    **_manual(entry.body),
                }
                for entry in self.cards
            ],
            "rescans": [_entry_dict(entry) for entry in self.rescans],
            "refusals": [_entry_dict(entry) for entry in self.refusals],
            "decisions": [_entry_dict(entry) for entry in self.decisions],
            "alerts": [_entry_dict(entry) for entry in self.alerts],
            "pit_actions": [action.to_dict() for action in self.pit_actions],
            "result": None
            if result is None
            else {
                "seq": result.seq,
                "winner": result.body.get("winner"),
                "hands": result.body.get("hands"),
                "cards": result.body.get("cards"),
                "details": result.body.get("details"),
            },
            "settlement": self.settlement,
            "void": None if void is None else {"seq": void.seq, "reason": void.body.get("reason")},
            "timing": self.timing.to_dict(),
        }

    def to_text(self) -> str:
        """The record for people."""
        lines = [f"round {self.round_id}"]
        if self.verification:
            lines.append(self.verification)
        self._text_header(lines)
        self._text_entries(lines)
        self._text_cards(lines)
        for title, items in (
            ("misreads and rescans", self.rescans),
            ("refusals", self.refusals),
            ("decisions", self.decisions),
            ("pit alerts", self.alerts),
        ):
            if items:
                lines.append("")
                lines.append(title)
                lines.extend(f"  seq {entry.seq}  {_brief(entry)}" for entry in items)
        if self.pit_actions:
            lines.append("")
            lines.append("pit actions")
            lines.extend(
                f"  seq {action.seq}  {_when(action.at)}  {action.to_text()}"
                for action in self.pit_actions
            )
        lines.append("")
        self._text_outcome(lines)
        self._text_settlement(lines)
        self._text_timing(lines)
        return "\n".join(lines)

    def _text_header(self, lines: list[str]) -> None:
        opened = self.opened
        if opened is not None:
            lines.append(
                f"  game {opened.body.get('game')}, round no {opened.body.get('round_no')}, "
                f"opened {_when(opened.happened_at)}"
            )
        lines.append(f"  status: {self.status}")
        if len(self.sessions) > 1:
            lines.append(
                "  journalled by controller sessions "
                + ", ".join(str(s) for s in self.sessions)
                + " (resumed after a restart)"
            )

    def _text_entries(self, lines: list[str]) -> None:
        lines.append("")
        lines.append("entries")
        for entry in self.entries:
            delivered = (
                f"  [delivered {_when(entry.delivered_at)}]"
                if entry.delivered_at is not None
                else "  [not delivered yet]"
            )
            lines.append(
                f"  seq {entry.seq:>8}  {_when(entry.happened_at)}  s{entry.session}  "
                f"{entry.kind:<17} {_brief(entry)}{delivered}"
            )

    def _text_cards(self, lines: list[str]) -> None:
        lines.append("")
        lines.append("cards")
        if not self.cards:
            lines.append("  (none)")
        for entry in self.cards:
            body = entry.body
            lines.append(
                f"  {body.get('slot')!s:<4} hand {body.get('hand')!s:<3} {body.get('card')!s:<4} "
                f"{body.get('face', '')!s:<6} seq {entry.seq}  {_when(entry.happened_at)}"
                + _manual_text(body)
            )

    def _text_outcome(self, lines: list[str]) -> None:
        result = self.result
        void = self.void
        if result is not None:
            body = result.body
            lines.append(f"result (seq {result.seq}): winner {body.get('winner')}")
            hands = body.get("hands") or {}
            for hand, cards in (body.get("cards") or {}).items():
                summary = hands.get(hand, {}) if isinstance(hands, dict) else {}
                lines.append(
                    f"  {hand}: {' '.join(str(c) for c in cards)}  "
                    f"{summary.get('description', '') if isinstance(summary, dict) else ''}"
                )
        elif void is not None:
            lines.append(f"voided (seq {void.seq}): {reason_words(void.body.get('reason'))}")
        else:
            lines.append("no result yet: the round is unfinished")

    def _text_settlement(self, lines: list[str]) -> None:
        rows = settlement_rows(self.settlement)
        if rows:
            lines.append("")
            lines.append("settlement (what each bet returns, stake included)")
            for bet, outcome in rows.items():
                why = settled_reason(outcome)
                reason = f"  ({why})" if why else ""
                lines.append(
                    f"  {bet:<20} {outcome.get('outcome')!s:<7} "
                    f"{returns_words(outcome.get('payout'))}{reason}"
                )

    def _text_timing(self, lines: list[str]) -> None:
        timing = self.timing
        lines.append("")
        lines.append("timing")
        announced = (
            f" (announced {timing.betting_seconds:g} s)"
            if timing.betting_seconds is not None
            else ""
        )
        lines.append(f"  betting window  {_seconds(timing.betting_window)}{announced}")
        lines.append(f"  deal            {_seconds(timing.deal)}")
        lines.append(f"  time to result  {_seconds(timing.time_to_result)}")
        lines.append(f"  total           {_seconds(timing.total)}")


def _entry_dict(entry: JournalEntry) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        "session": entry.session,
        "kind": entry.kind,
        "at": format_time(entry.happened_at),
        "delivered_at": None if entry.delivered_at is None else format_time(entry.delivered_at),
        "data": entry.body,
    }


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else format_time(moment)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _manual(body: Mapping[str, Any]) -> dict[str, Any]:
    """A card entered by the pit boss: ``source``, with who and why where the record has them.

    The journal and ``secure/events`` have them; the public feed has ``source`` alone.
    """
    if body.get("source") != "manual":
        return {}
    return {key: body.get(key) for key in ("source", "operator", "reason") if key in body}


def _manual_text(body: Mapping[str, Any]) -> str:
    """``  MANUAL by alice: reader dead`` for a card the pit boss entered, else nothing."""
    if body.get("source") != "manual":
        return ""
    who = f" by {body['operator']}" if body.get("operator") else ""
    why = f": {body['reason']}" if body.get("reason") else ""
    return f"  MANUAL{who}{why}"


def _brief(entry: JournalEntry) -> str:
    body = entry.body
    kind = entry.kind
    if kind == "card_dealt":
        return f"{body.get('slot')} {body.get('card')}{_manual_text(body)}"
    if kind == "rescan_requested":
        return (
            f"{body.get('slot')}: {body.get('cause')} (attempt {body.get('attempt')}) "
            f"{body.get('detail', '')}"
        ).rstrip()
    if kind == "card_refused":
        return f"{body.get('slot') or '-'} {body.get('card')}: {body.get('reason')}"
    if kind == "round_result":
        return f"winner {body.get('winner')}"
    if kind == "round_voided":
        return str(body.get("reason"))
    if kind == "round_opened":
        return f"betting {body.get('betting_seconds')} s"
    if not body:
        return ""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


_STATUS: dict[str | None, str] = {"result": "settled", "void": "voided"}
"""A finished round's status in a record, by the fold's outcome."""


def recall_round(journal: Journal, round_id: str) -> RoundRecord:
    """A round as the journal recorded it (read through the ``round_id`` index).

    Raises:
        RoundNotFound: The journal holds no entry of this round.
    """
    entries = list(journal.entries(round_id=round_id))
    if not entries:
        raise RoundNotFound(
            "no such round in the journal", path=str(journal.path), round_id=round_id
        )
    return round_record(round_id, entries, pit_actions(journal, round_id))


def round_record(
    round_id: str, entries: list[JournalEntry], actions: list[PitAction] | None = None
) -> RoundRecord:
    """A round's record from its entries in ``seq`` order (the journal's, or the archive's).

    Args:
        round_id: The round.
        entries: Its entries.
        actions: The pit's actions on it (a journal's :func:`pit_actions`), if known.
    """
    fold = RoundFold.replay(round_id, ((entry.kind, entry.body) for entry in entries))
    return RoundRecord(
        round_id=round_id,
        entries=entries,
        status=_STATUS.get(fold.outcome, "dealing" if fold.betting_closed else "betting_open"),
        sessions=sorted({entry.session for entry in entries}),
        fold=fold,
        pit_actions=list(actions or []),
    )


def verify_text(report: VerifyReport) -> str:
    """A :class:`~controller.journal.VerifyReport` for people."""
    lines = [
        f"journal {report.path}: schema v{report.schema_version}, {report.entries} entries "
        f"(last seq {report.last_seq}), {report.rounds} rounds: {report.settled} settled, "
        f"{report.voided} voided, {len(report.unfinished)} unfinished"
        + (f" ({', '.join(report.unfinished)})" if report.unfinished else ""),
        f"undelivered: {report.undelivered}",
    ]
    if report.chain_head is not None:
        lines.append(f"hash chain head: seq {report.last_seq} {report.chain_head}")
    if report.rounds_checked is not None:
        lines.append(
            f"checked with the games' rules: {report.rounds_checked} round(s) "
            "(each result re-evaluated)"
        )
    if report.anchors_checked:
        lines.append(
            f"against the feed: {report.anchors_checked} chain head(s) checked, the highest "
            f"at seq {report.anchored_seq}"
            + ("; the journal is TRUNCATED" if report.truncated else "")
        )
    if report.ok:
        lines.append("OK: no problem found")
    else:
        lines.append(f"{report.problems_total} problem(s):")
        lines.extend(f"  {problem}" for problem in report.problems)
        if report.problems_total > len(report.problems):
            lines.append(f"  ... and {report.problems_total - len(report.problems)} more")
    return "\n".join(lines)
