"""A round's state, folded from its journal entries.

The journal is the truth: the live orchestrator and a restarted one build the same
:class:`Round` by applying the same entries in order, so a round survives a crash with the
cards already read. Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.cards import Piece, parse_piece
from controller.errors import JournalError
from controller.games.base import DealPlan, Slot


class Phase(enum.StrEnum):
    """Where a round is. ``started`` means betting has closed."""

    BETTING_OPEN = "betting_open"
    DEALING = "dealing"
    SETTLED = "settled"
    VOIDED = "voided"


class EntryKind(enum.StrEnum):
    """The kinds of journal entry the orchestrator writes."""

    ROUND_OPENED = "round_opened"
    BETTING_CLOSED = "betting_closed"
    CARD_DEALT = "card_dealt"
    RESCAN_REQUESTED = "rescan_requested"
    CARD_REFUSED = "card_refused"
    PIT_ALERT = "pit_alert"
    ROUND_RESULT = "round_result"
    ROUND_VOIDED = "round_voided"
    DEVICE_STATUS = "device_status"
    TABLE_STATUS = "table_status"


def round_id_for(table_id: str, round_no: int) -> str:
    """The id of a table's ``round_no``-th round: ``"t1-000042"``. Unique per table."""
    return f"{table_id}-{round_no:06d}"


@dataclass
class Round:
    """One round, as its journal entries describe it.

    Attributes:
        round_id: Unique per table.
        round_no: 1, 2, 3... per table.
        game: The game id.
        plan: The deal plan.
        phase: Where the round is.
        dealt: The pieces accepted so far, in plan order.
        misreads: Consecutive misreads of the slot now waiting.
    """

    round_id: str
    round_no: int
    game: str
    plan: DealPlan
    phase: Phase = Phase.BETTING_OPEN
    dealt: list[Piece] = field(default_factory=list)
    misreads: int = 0
    result: Mapping[str, Any] | None = None

    @property
    def started(self) -> bool:
        """Whether betting has closed: a started round is completed, never voided silently."""
        return self.phase is not Phase.BETTING_OPEN

    @property
    def finished(self) -> bool:
        """Whether the round has a result or was voided."""
        return self.phase in (Phase.SETTLED, Phase.VOIDED)

    @property
    def next_slot(self) -> Slot | None:
        """The slot waiting for a card, or ``None`` when every slot is filled."""
        if len(self.dealt) >= len(self.plan):
            return None
        return self.plan.slots[len(self.dealt)]

    def hands(self) -> dict[str, list[Piece]]:
        """The dealt pieces grouped by hand, each in dealing order."""
        return self.plan.group(self.dealt)

    def apply(self, kind: str, body: Mapping[str, Any]) -> None:
        """Fold one journal entry of this round into the state.

        Raises:
            JournalError: The entry contradicts the state (a journal that does not replay).
        """
        if kind == EntryKind.BETTING_CLOSED:
            self.phase = Phase.DEALING
        elif kind == EntryKind.CARD_DEALT:
            index = int(body["index"])
            if index != len(self.dealt):
                raise JournalError(
                    "card_dealt out of order in the journal",
                    round_id=self.round_id,
                    index=index,
                    expected=len(self.dealt),
                )
            self.dealt.append(parse_piece(str(body["card"])))
            self.misreads = 0
        elif kind == EntryKind.RESCAN_REQUESTED:
            self.misreads = int(body.get("attempt", self.misreads + 1))
        elif kind == EntryKind.ROUND_RESULT:
            self.phase = Phase.SETTLED
            self.result = dict(body)
        elif kind == EntryKind.ROUND_VOIDED:
            self.phase = Phase.VOIDED

    @classmethod
    def replay(
        cls, entries: Iterable[tuple[str, Mapping[str, Any]]], plan: DealPlan
    ) -> Round | None:
        """Rebuild a round from its entries (``(kind, body)`` pairs in journal order).

        Returns:
            The round, or ``None`` when the entries hold no ``round_opened``.
        """
        current: Round | None = None
        for kind, body in entries:
            if kind == EntryKind.ROUND_OPENED:
                current = cls(
                    round_id=str(body["round_id"]),
                    round_no=int(body["round_no"]),
                    game=str(body["game"]),
                    plan=plan,
                )
            elif current is not None:
                current.apply(kind, body)
        return current
