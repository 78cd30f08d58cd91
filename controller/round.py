"""A round's state, folded from its journal entries.

The journal is the truth: the live orchestrator and a restarted one build the same
:class:`Round` by applying the same entries in order, so a round survives a crash with the
cards and decisions already recorded. Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.cards import Piece, parse_piece
from controller.errors import JournalError
from controller.games.live.base import LiveGame, LiveRound
from controller.journal import EntryKind, short_journal_id


class Phase(enum.StrEnum):
    """Where a round is. ``started`` means betting has closed."""

    BETTING_OPEN = "betting_open"
    DEALING = "dealing"
    SETTLED = "settled"
    VOIDED = "voided"


def round_id_for(table_id: str, round_no: int, journal_id: str | None = None) -> str:
    """The id of a table's ``round_no``-th round: ``"t1-3f9a1c2e-000042"``.

    Unique across the journals of one table (issue 22): it carries the short form of the
    journal's identity (its first 8 hex digits, :func:`controller.journal.short_journal_id`),
    so a table that starts a new journal never repeats an earlier journal's round ids. Without
    ``journal_id``: the form before issue 22 (``"t1-000042"``), which tools reading old
    journals still meet.
    """
    if journal_id is None:
        return f"{table_id}-{round_no:06d}"
    return f"{table_id}-{short_journal_id(journal_id)}-{round_no:06d}"


@dataclass
class Round:
    """One round, as its journal entries describe it.

    Attributes:
        round_id: Unique per table.
        round_no: 1, 2, 3... per table.
        game: The game id.
        live: The game's state machine for this round.
        table_state: What the previous round left (button, banker...), as journalled.
        phase: Where the round is.
        dealt: The pieces accepted so far, in dealing order (for duplicate checks).
        misreads: Consecutive misreads of the slot now waiting.
        halted: Whether the round waits for the pit boss.
        opening: Whether the round is in its opening, before betting opens (its
            ``round_opened`` said ``before_betting`` and no ``betting_opened`` followed yet).
        result: The ``round_result`` body once settled.
    """

    round_id: str
    round_no: int
    game: str
    live: LiveRound
    table_state: Mapping[str, Any] = field(default_factory=dict)
    phase: Phase = Phase.BETTING_OPEN
    dealt: list[Piece] = field(default_factory=list)
    misreads: int = 0
    halted: bool = False
    opening: bool = False
    result: Mapping[str, Any] | None = None

    @property
    def started(self) -> bool:
        """Whether betting has closed: a started round is completed, never voided silently."""
        return self.phase is not Phase.BETTING_OPEN

    @property
    def finished(self) -> bool:
        """Whether the round has a result or was voided."""
        return self.phase in (Phase.SETTLED, Phase.VOIDED)

    def apply(self, kind: str, body: Mapping[str, Any]) -> None:
        """Fold one journal entry of this round into the state.

        Raises:
            JournalError: The entry contradicts the state (a journal that does not replay).
        """
        fold = _FOLDS.get(kind)
        if fold is not None:
            fold(self, body)

    def _opened(self, body: Mapping[str, Any]) -> None:
        self.opening = bool(body.get("before_betting"))

    def _betting_opened(self, body: Mapping[str, Any]) -> None:
        self.opening = False

    def _betting_closed(self, body: Mapping[str, Any]) -> None:
        self.opening = False
        self.phase = Phase.DEALING

    def _card_dealt(self, body: Mapping[str, Any]) -> None:
        index = int(body["index"])
        if index != len(self.dealt):
            raise JournalError(
                "card_dealt out of order in the journal",
                round_id=self.round_id,
                index=index,
                expected=len(self.dealt),
            )
        piece = parse_piece(str(body["card"]))
        self.live.apply_card(index, piece)
        self.dealt.append(piece)
        self.misreads = 0

    def _rescan_requested(self, body: Mapping[str, Any]) -> None:
        self.misreads = int(body.get("attempt", self.misreads + 1))

    def _decision_applied(self, body: Mapping[str, Any]) -> None:
        self.live.apply_decision(str(body["window"]), body["decision"])

    def _cards_revealed(self, body: Mapping[str, Any]) -> None:
        self.live.mark_revealed(str(body["hand"]))

    def _table_info(self, body: Mapping[str, Any]) -> None:
        self.live.mark_info_published()

    def _halted(self, body: Mapping[str, Any]) -> None:
        self.halted = True

    def _resumed(self, body: Mapping[str, Any]) -> None:
        self.halted = False

    def _result(self, body: Mapping[str, Any]) -> None:
        self.phase = Phase.SETTLED
        self.result = dict(body)

    def _voided(self, body: Mapping[str, Any]) -> None:
        self.phase = Phase.VOIDED

    @classmethod
    def replay(
        cls, entries: Iterable[tuple[str, Mapping[str, Any]]], game: LiveGame
    ) -> Round | None:
        """Rebuild a round from its entries (``(kind, body)`` pairs in journal order).

        Returns:
            The round, or ``None`` when the entries hold no ``round_opened``.
        """
        current: Round | None = None
        for kind, body in entries:
            if kind == EntryKind.ROUND_OPENED:
                table_state = dict(body.get("table_state") or {})
                current = cls(
                    round_id=str(body["round_id"]),
                    round_no=int(body["round_no"]),
                    game=str(body["game"]),
                    live=game.new_round(table_state),
                    table_state=table_state,
                )
                current.apply(kind, body)
            elif current is not None:
                current.apply(kind, body)
        return current


_FOLDS: dict[str, Callable[[Round, Mapping[str, Any]], None]] = {
    EntryKind.ROUND_OPENED: Round._opened,
    EntryKind.BETTING_OPENED: Round._betting_opened,
    EntryKind.BETTING_CLOSED: Round._betting_closed,
    EntryKind.CARD_DEALT: Round._card_dealt,
    EntryKind.RESCAN_REQUESTED: Round._rescan_requested,
    EntryKind.DECISION_APPLIED: Round._decision_applied,
    EntryKind.CARDS_REVEALED: Round._cards_revealed,
    EntryKind.TABLE_INFO: Round._table_info,
    EntryKind.ROUND_HALTED: Round._halted,
    EntryKind.ROUND_RESUMED: Round._resumed,
    EntryKind.ROUND_RESULT: Round._result,
    EntryKind.ROUND_VOIDED: Round._voided,
}
"""What each kind of entry does to a :class:`Round` (other kinds leave it as it is)."""
