"""The round orchestrator: betting window, dealing in the game's order, result, settlement.

The orchestrator owns the clock of the round. Every state change is appended to the journal
(durably) before anything else happens: the publisher only ever sends what the journal holds,
and a restart rebuilds the round from the same entries.

It never guesses a card. A misread asks the dealer to scan the same card again and the slot
waits for a good read, without limit (after ``rescan_alert_after`` misreads in a row an alert
asks for the pit boss, and the slot keeps waiting). A card that cannot be in the round (not in
the game's deck, a duplicate, a joker where there is none) is refused with a reason and the
slot keeps waiting. A second read of the card just accepted, within ``bounce_seconds``, is the
same physical card bouncing and is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from controller.cards import Piece
from controller.errors import NotationError, PieceRefused, TablectlError
from controller.games.base import TableGame
from controller.journal import Journal
from controller.money import PayTables
from controller.round import EntryKind, Phase, Round, round_id_for
from controller.settings import RoundSettings
from drivers.source import CardRead, CardSource, DeviceStatus, Misread, Read

META_NEXT_ROUND = "round.next_no"
LINK_CAUSES = frozenset({"crc", "malformed"})
"""Misread causes the link layer recovers from by itself (the device retransmits)."""
META_CURRENT_ROUND = "round.current"

log = structlog.get_logger(__name__)


class RoundInterrupted(TablectlError):
    """A started round was left unfinished because the controller was told to stop now."""


@dataclass(frozen=True, slots=True)
class RoundSummary:
    """What one finished round came to.

    Attributes:
        round_id: The round.
        phase: Settled or voided.
        result: The ``round_result`` body, or ``None`` for a void.
    """

    round_id: str
    phase: Phase
    result: Mapping[str, Any] | None


class Orchestrator:
    """Runs the rounds of one table.

    Args:
        table_id: The table's id.
        game: The game's rules.
        paytables: The pay tables in force (defaults merged with the table's overrides).
        source: The card source (a started driver).
        journal: The table's journal.
        settings: Round timing and escalation.
        may_open_round: Awaited before each betting window; returns when a new round may open
            (e.g. once the broker is reachable). ``None``: always.
    """

    def __init__(
        self,
        *,
        table_id: str,
        game: TableGame,
        paytables: PayTables,
        source: CardSource,
        journal: Journal,
        settings: RoundSettings,
        may_open_round: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.table_id = table_id
        self.game = game
        self.paytables = paytables
        self.source = source
        self.journal = journal
        self.settings = settings
        self._may_open_round = may_open_round
        self._stop = asyncio.Event()
        self._log = log.bind(table=table_id, game=game.id)
        self.current: Round | None = None
        self._last_accept: tuple[str, float] | None = None

    # ------------------------------------------------------------------ control

    def request_stop(self) -> None:
        """Open no new round; void the current one if betting is still open.

        A round that has started is completed first: the operator's rule.
        """
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stop.is_set()

    # ------------------------------------------------------------------ journal helpers

    def _append(self, kind: EntryKind, body: dict[str, Any]) -> None:
        round_id = self.current.round_id if self.current is not None else None
        self.journal.append(kind.value, body, round_id=round_id)
        if self.current is not None:
            self.current.apply(kind.value, body)

    def finished_rounds(self) -> int:
        """How many rounds of this table the journal holds as settled or voided."""
        value = self.journal.get_meta("round.finished")
        return int(value) if value else 0

    def _count_finished(self) -> None:
        self.journal.set_meta("round.finished", str(self.finished_rounds() + 1))

    # ------------------------------------------------------------------ rounds

    async def run(self, rounds: int | None = None) -> list[RoundSummary]:
        """Play rounds until ``rounds`` are finished in the journal, or until stopped.

        A round left unfinished by an earlier run is recovered first: voided with a refund if
        it had not started, otherwise completed from where it was.

        Args:
            rounds: Stop once the journal holds this many finished rounds (``None``: never).

        Returns:
            The rounds this call finished, in order.
        """
        summaries: list[RoundSummary] = []
        recovered = self.recover()
        if recovered is not None:
            summaries.append(await self._complete(recovered))
        while not self._stop.is_set():
            if rounds is not None and self.finished_rounds() >= rounds:
                break
            if self._may_open_round is not None:
                await self._wait_or_stop(self._may_open_round())
                if self._stop.is_set():
                    break
            summaries.append(await self.play_round())
            if self.settings.pause_seconds and not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.settings.pause_seconds)
        return summaries

    async def _wait_or_stop(self, awaitable: Awaitable[None]) -> None:
        waiter = asyncio.ensure_future(awaitable)
        stopper = asyncio.create_task(self._stop.wait(), name="orchestrator-stop-wait")
        try:
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (waiter, stopper):
                task.cancel()
            await asyncio.gather(waiter, stopper, return_exceptions=True)

    def recover(self) -> Round | None:
        """The round an earlier run left unfinished, rebuilt from the journal, if any."""
        current_id = self.journal.get_meta(META_CURRENT_ROUND)
        if not current_id:
            return None
        entries = [(entry.kind, entry.body) for entry in self.journal.entries(round_id=current_id)]
        restored = Round.replay(entries, self.game.deal_plan)
        if restored is None or restored.finished:
            self.journal.set_meta(META_CURRENT_ROUND, "")
            return None
        self._log.warning(
            "recovering unfinished round",
            round=restored.round_id,
            phase=restored.phase.value,
            cards=len(restored.dealt),
        )
        return restored

    async def play_round(self) -> RoundSummary:
        """Open a betting window, close it, deal, judge and settle one round."""
        round_no = int(self.journal.get_meta(META_NEXT_ROUND) or "1")
        round_id = round_id_for(self.table_id, round_no)
        # Meta first: a crash between the two leaves a pointer to a round with no entries,
        # which recovery ignores; the reverse order could lose a round that must be voided.
        self.journal.set_meta(META_NEXT_ROUND, str(round_no + 1))
        self.journal.set_meta(META_CURRENT_ROUND, round_id)
        self.current = Round(round_id, round_no, self.game.id, self.game.deal_plan)
        closes_at = datetime.now(UTC) + timedelta(seconds=self.settings.betting_seconds)
        self._append(
            EntryKind.ROUND_OPENED,
            {
                "round_id": round_id,
                "round_no": round_no,
                "game": self.game.id,
                "betting_seconds": self.settings.betting_seconds,
                "betting_closes_at": closes_at.isoformat().replace("+00:00", "Z"),
                "slots": [slot.name for slot in self.game.deal_plan.slots],
            },
        )
        self._log.info("betting open", round=round_id, seconds=self.settings.betting_seconds)
        await self._betting_window(self.current)
        return await self._complete(self.current)

    async def _complete(self, current: Round) -> RoundSummary:
        self.current = current
        rlog = self._log.bind(round=current.round_id)
        if not current.started:
            if self._stop.is_set():
                return self._void(current, "controller stopped before betting closed")
            self._append(EntryKind.BETTING_CLOSED, {})
            rlog.info("betting closed")
        while (slot_index := len(current.dealt)) < len(current.plan):
            await self._deal_slot(current, slot_index)
        result = self.game.resolve(current.hands())
        settlement = self.game.settle(result, self.paytables)
        body: dict[str, Any] = {
            "game": self.game.id,
            "round_no": current.round_no,
            "cards": {
                hand: [str(piece) for piece in pieces] for hand, pieces in current.hands().items()
            },
            "winner": result.winner,
            "hands": {
                hand: {"category": summary.category, "description": summary.description}
                for hand, summary in result.hands.items()
            },
            "bets": {bet: outcome.to_wire() for bet, outcome in settlement.items()},
            "details": dict(result.details),
        }
        self._append(EntryKind.ROUND_RESULT, body)
        self._finish(current)
        rlog.info("round settled", winner=result.winner)
        return RoundSummary(current.round_id, Phase.SETTLED, body)

    def _void(self, current: Round, reason: str) -> RoundSummary:
        self._append(
            EntryKind.ROUND_VOIDED,
            {
                "reason": reason,
                "bets": {bet: {"outcome": "refund", "payout": "1"} for bet in self.game.bet_ids},
            },
        )
        self._finish(current)
        self._log.warning("round voided", round=current.round_id, reason=reason)
        return RoundSummary(current.round_id, Phase.VOIDED, None)

    def _finish(self, current: Round) -> None:
        self._count_finished()
        self.journal.set_meta(META_CURRENT_ROUND, "")
        self.current = None
        self._last_accept = None

    # ------------------------------------------------------------------ reading

    async def _read(self, timeout: float) -> Read | None:  # noqa: ASYNC109
        """The next read, or ``None`` when ``timeout`` passes or a stop is requested."""
        reader = asyncio.create_task(self.source.next_read(), name="card-source-read")
        stopper = asyncio.create_task(self._stop.wait(), name="orchestrator-stop-wait")
        try:
            done, _ = await asyncio.wait(
                {reader, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopper.cancel()
            if not reader.done():
                reader.cancel()
            await asyncio.gather(stopper, return_exceptions=True)
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(reader, return_exceptions=True)
        if reader in done:
            return reader.result()
        return None

    async def _betting_window(self, current: Round) -> None:
        """Wait out the betting window; a card scanned now is refused (betting is open)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.betting_seconds
        while (remaining := deadline - loop.time()) > 0 and not self._stop.is_set():
            read = await self._read(remaining)
            if read is None:
                continue
            if isinstance(read, CardRead):
                reason = "betting is still open"
                self._append(
                    EntryKind.CARD_REFUSED, {"slot": None, "card": read.value, "reason": reason}
                )
                await self.source.reject("", reason)
            elif isinstance(read, DeviceStatus):
                self._device_status(read)

    async def _deal_slot(self, current: Round, index: int) -> None:
        slot = current.plan.slots[index]
        rlog = self._log.bind(round=current.round_id, slot=slot.name)
        await self.source.expect(current.round_no, index, slot.name)
        waiting_since = time.monotonic()
        while True:
            # A started round is completed even when a stop is requested: only a second
            # signal (cancellation) interrupts it, and the journal resumes it on restart.
            read = await self._read_for_slot()
            if read is None:
                rlog.info("waiting for a card", seconds=round(time.monotonic() - waiting_since))
                continue
            if isinstance(read, DeviceStatus):
                self._device_status(read)
                continue
            if isinstance(read, Misread):
                if read.cause in LINK_CAUSES:
                    # The frame never reached us intact and was not acknowledged: the device
                    # sends it again (stop-and-wait), so the dealer need not scan again. If the
                    # device gives up, its next frame or heartbeat reveals a gap -> rescan.
                    rlog.warning(
                        "line error, waiting for the retransmission",
                        cause=read.cause,
                        detail=read.detail,
                    )
                    continue
                await self._rescan(current, slot.name, read)
                continue
            piece = await self._accept(current, index, read)
            if piece is not None:
                return

    async def _read_for_slot(self) -> Read | None:
        try:
            return await asyncio.wait_for(
                self.source.next_read(), self.settings.waiting_log_seconds
            )
        except TimeoutError:
            return None

    async def _rescan(self, current: Round, slot: str, read: Misread) -> None:
        attempt = current.misreads + 1
        reason = f"misread ({read.cause}): scan the same card again"
        self._append(
            EntryKind.RESCAN_REQUESTED,
            {"slot": slot, "cause": read.cause, "detail": read.detail, "attempt": attempt},
        )
        await self.source.request_rescan(slot, reason)
        if attempt == self.settings.rescan_alert_after:
            self._append(
                EntryKind.PIT_ALERT,
                {
                    "slot": slot,
                    "reason": f"{attempt} misreads in a row at {slot}: pit boss needed",
                },
            )

    async def _accept(self, current: Round, index: int, read: CardRead) -> Piece | None:
        slot = current.plan.slots[index]
        if self._is_bounce(read):
            self._log.debug("bounce ignored", card=read.value, slot=slot.name)
            return None
        try:
            piece = self.game.deck.parse(read.value)
            self.game.deck.check_can_add(current.dealt, piece)
        except (NotationError, PieceRefused) as exc:
            reason = exc.reason
            self._append(
                EntryKind.CARD_REFUSED, {"slot": slot.name, "card": read.value, "reason": reason}
            )
            await self.source.reject(slot.name, reason)
            await self.source.expect(current.round_no, index, slot.name)
            return None
        self._append(
            EntryKind.CARD_DEALT,
            {
                "slot": slot.name,
                "hand": slot.hand,
                "index": index,
                "card": str(piece),
                "face": slot.face.value,
            },
        )
        self._last_accept = (str(piece), read.at)
        return piece

    def _is_bounce(self, read: CardRead) -> bool:
        if self._last_accept is None:
            return False
        value, at = self._last_accept
        return read.value == value and read.at - at <= self.settings.bounce_seconds

    def _device_status(self, read: DeviceStatus) -> None:
        self._append(
            EntryKind.DEVICE_STATUS,
            {"device": self.source.url, "state": read.state, "detail": read.detail},
        )
