"""One slot dealt: the cue, the reads, misreads, refusals, bounces, the device away, the halt.

The deal loop waits for reads and hands each to one handler: a good card is checked and
journalled (:meth:`Dealer._accept`: the card's hot path, ``docs/architecture.md``), a
misread asks for a rescan, a device state is journalled (and the slot cued again when the
device is back), a card read while the round is halted is held for the pit boss. What the
slot waits on is :class:`controller.orchestration.slot_wait.SlotWait`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from controller.cards import Piece
from controller.errors import NotationError, PieceRefused
from controller.games.live.base import DealStep
from controller.journal import (
    CardDealtData,
    CardRefusedData,
    JournalEntry,
    PitAlertData,
    RescanRequestedData,
    RoundHaltedData,
    TableStatusData,
)
from controller.orchestration.desk import Desk, LeftHalted
from controller.orchestration.removals import is_removal
from controller.round import Round
from drivers.source import CardRead, DeviceStatus, Misread, Read

LINK_CAUSES = frozenset({"crc", "malformed"})
"""Misread causes the link layer recovers from by itself (the device retransmits)."""


class Dealer:
    """Deals the slots of the rounds of one table.

    Args:
        desk: The round in progress and the table's services.
        on_card: Called with each accepted card's journal entry and the monotonic time its
            bytes arrived (metrics: scan-to-publish latency).
    """

    def __init__(
        self, desk: Desk, on_card: Callable[[JournalEntry, float], None] | None = None
    ) -> None:
        self._desk = desk
        self._on_card = on_card
        self._last_accept: tuple[str, float, bool] | None = None
        self._away_rescan = False
        self._cued_at = 0.0
        self._stopped_halted_at: float | None = None

    def round_finished(self) -> None:
        """Forget the last card (a bounce never spans rounds)."""
        self._last_accept = None
        self._away_rescan = False

    async def deal(self, current: Round, step: DealStep) -> None:
        """Cue the dealer and wait for a good read of the slot, however long it takes.

        A started round is completed even when a stop is requested: only the pit boss (void:
        :class:`controller.orchestration.desk.RoundVoided`) or a second signal (cancellation)
        interrupts it, or a stop while the round is halted that the pit boss does not answer
        within ``halted_stop_seconds`` (:class:`controller.orchestration.desk.LeftHalted`).
        """
        desk = self._desk
        wait = desk.wait
        inbox = desk.inbox
        # What was just published (a round's opening) is acknowledged before the dealer is
        # cued: the card that follows finds the loop idle instead of racing those PUBACKs.
        await desk.settle()
        self._cued_at = time.monotonic()
        desk.waiting = step
        await self._cue(current, step)
        waiting_since = time.monotonic()
        while True:
            inbox.woken.clear()
            desk.check_void()
            if desk.waiting is None:
                # The pit boss entered the card by hand (journalled by the command's answer).
                self._last_accept = None
                await desk.settle()
                return
            if wait.resumed:
                await self._cue_after_resume(current, step)
            timeout = self._timeout(current)
            if timeout is None:
                continue
            read = await inbox.next(timeout)
            if read is not None and desk.waiting is None:
                # The slot was filled by hand while this read was on its way: it goes back to
                # the front of the inbox for whatever waits next (the next slot, where a
                # second copy of the entered card is refused, or the round's end).
                inbox.unread(read)
                continue
            if read is None:
                self._still_waiting(current, step, waiting_since)
            elif is_removal(read) or desk.card_back(read):
                desk.removed(read)  # a latched reader's card left (or came back): no deal
            elif isinstance(read, CardRead) and not wait.halted:
                if await self._accept(current, step, read) is not None:
                    # The card is journalled and already handed to the broker (the journal's
                    # listener did it). What comes next (the next cue; the result, or a
                    # Hold'em equity, computed and journalled with fsyncs) waits for its
                    # PUBACK.
                    await desk.settle()
                    return
            else:
                await self._other(current, step, read)

    async def _cue(self, current: Round, step: DealStep) -> None:
        desk = self._desk
        await desk.command(desk.source.expect(current.round_no, step.index, step.slot.name))

    async def _cue_after_resume(self, current: Round, step: DealStep) -> None:
        """The pit boss resumed: cue the slot again, or ask for the held card again."""
        desk = self._desk
        if desk.wait.cue_again():
            await desk.command(
                desk.source.request_rescan(step.slot.name, "round resumed: scan the card again")
            )
        else:
            await self._cue(current, step)

    def _timeout(self, current: Round) -> float | None:
        """How long to wait for the next read; ``None`` when the round was halted just now.

        The wait is cut short when the device, away, is due to halt the round.
        """
        desk = self._desk
        settings = desk.settings
        timeout = settings.waiting_log_seconds
        now = asyncio.get_running_loop().time()
        halt_in = desk.wait.halt_in(now, settings.device_halt_seconds)
        if halt_in is not None:
            timeout = min(timeout, halt_in)
            if timeout <= 0:
                self._halt(current, f"device lost for {settings.device_halt_seconds:g} s")
                return None
        exit_in = self._stopped_halted(current, now)
        if exit_in is not None:
            timeout = min(timeout, exit_in)
        return timeout

    def _stopped_halted(self, current: Round, now: float) -> float | None:
        """A stop while the round is halted: say what the table waits for, and for how long.

        The pit boss has ``halted_stop_seconds`` from the stop (or from the halt, if the stop
        came first) to resume or void; then the controller exits with the round halted.

        Returns:
            Seconds left before the exit, or ``None`` when not stopping while halted.

        Raises:
            LeftHalted: The time is up.
        """
        desk = self._desk
        if not (desk.stop.is_set() and desk.wait.halted):
            self._stopped_halted_at = None
            return None
        limit = desk.settings.halted_stop_seconds
        if self._stopped_halted_at is None:
            self._stopped_halted_at = now
            detail = (
                "stop requested while halted: waiting for the pit boss (resume/void) or a "
                f"second signal; exiting in {limit:g} s with the round left halted"
            )
            desk.append(TableStatusData.model_construct(state="stopping", detail=detail))
            desk.log.warning(detail, round=current.round_id, seconds=limit)
        left = self._stopped_halted_at + limit - now
        if left <= 0:
            self._stopped_halted_at = None
            raise LeftHalted(f"the pit boss did not resume or void within {limit:g} s")
        return left

    def _still_waiting(self, current: Round, step: DealStep, since: float) -> None:
        desk = self._desk
        if not desk.inbox.woken.is_set() and desk.wait.device_lost_at is None:
            desk.log.info(
                "waiting for a card",
                round=current.round_id,
                slot=step.slot.name,
                seconds=round(time.monotonic() - since),
            )

    async def _other(self, current: Round, step: DealStep, read: Read) -> None:
        """A read that is not a card for the slot: a device state, a misread, a held card."""
        desk = self._desk
        if isinstance(read, DeviceStatus):
            if desk.device_status(read) and not desk.wait.halted:
                await self._cue(current, step)
        elif desk.wait.halted:
            if isinstance(read, CardRead):
                self._hold(step, read)
        elif isinstance(read, Misread):
            await self._misread(current, step, read)

    def _hold(self, step: DealStep, read: CardRead) -> None:
        """A card read while halted: not rejected, the dealer rescans it after the resume."""
        self._desk.append(
            CardRefusedData.model_construct(
                slot=step.slot.name,
                card=read.value,
                reason="round halted: keep the card until the pit boss resumes",
            )
        )
        self._desk.wait.hold_card()

    async def _misread(self, current: Round, step: DealStep, read: Misread) -> None:
        if read.cause in LINK_CAUSES:
            # The frame never reached us intact and was not acknowledged: the device sends it
            # again (stop-and-wait), so the dealer need not scan again. If the device gives
            # up, its next frame or heartbeat reveals a gap.
            self._desk.log.warning(
                "line error, waiting for the retransmission",
                round=current.round_id,
                slot=step.slot.name,
                cause=read.cause,
                detail=read.detail,
            )
            return
        if read.cause == "away":
            # The device was away and reads nothing it made meanwhile: the card may have
            # been read then and lost, so it is asked for again. If it was not (the dealer
            # placed it only after the device came back), the rescan reads it a second time:
            # that second read is a bounce even for a tile the set holds twice.
            self._away_rescan = True
        await self._rescan(current, step.slot.name, read)

    def _halt(self, current: Round, reason: str) -> None:
        desk = self._desk
        desk.append(RoundHaltedData.model_construct(reason=reason))
        desk.append(
            PitAlertData.model_construct(slot=None, reason=f"round halted: {reason}: pit boss")
        )
        desk.wait.halt()
        desk.log.error("round halted", round=current.round_id, reason=reason)

    async def _rescan(self, current: Round, slot: str, read: Misread) -> None:
        desk = self._desk
        attempt = current.misreads + 1
        reason = f"misread ({read.cause}): scan the same card again"
        desk.append(
            RescanRequestedData.model_construct(
                slot=slot, cause=read.cause, detail=read.detail, attempt=attempt
            )
        )
        await desk.command(desk.source.request_rescan(slot, reason))
        if desk.metrics is not None:
            desk.metrics.misread()
            desk.metrics.rescan()
        if attempt == desk.settings.rescan_alert_after:
            desk.append(
                PitAlertData.model_construct(
                    slot=slot, reason=f"{attempt} misreads in a row at {slot}: pit boss needed"
                )
            )

    async def _accept(self, current: Round, step: DealStep, read: CardRead) -> Piece | None:
        desk = self._desk
        slot = step.slot
        if self._is_bounce(read):
            desk.log.debug("bounce ignored", card=read.value, slot=slot.name)
            return None
        deck = desk.game.deck
        try:
            if read.position is not None and read.position not in (slot.name, slot.hand):
                raise PieceRefused(
                    read.value,
                    f"read at position {read.position} but the table waits for {slot.name}",
                )
            piece = deck.parse(read.value)
            deck.check_can_add(current.dealt, piece)
        except (NotationError, PieceRefused) as exc:
            await self._refuse(current, step, read, exc.reason)
            return None
        # The hot path: five plain fields, validated here (cheaper than model_construct) and
        # dumped by pydantic-core (bench/journal_append.py).
        desk.waiting = None
        entry = desk.append(
            CardDealtData(
                slot=slot.name,
                hand=slot.hand,
                index=step.index,
                card=str(piece),
                face=slot.face.value,
            )
        )
        if self._on_card is not None:
            self._on_card(entry, read.at)
        self._last_accept = (str(piece), read.at, self._away_rescan)
        self._away_rescan = False
        return piece

    async def _refuse(self, current: Round, step: DealStep, read: CardRead, reason: str) -> None:
        """A card that cannot be in the round: refused with the reason, the slot cued again."""
        desk = self._desk
        slot = step.slot.name
        desk.append(CardRefusedData.model_construct(slot=slot, card=read.value, reason=reason))
        if desk.metrics is not None:
            desk.metrics.card_refused(reason.split(":", maxsplit=1)[0])
        await desk.command(desk.source.reject(slot, reason))
        await self._cue(current, step)

    def _is_bounce(self, read: CardRead) -> bool:
        """Whether ``read`` is the card just accepted passing the reader a second time.

        Within ``bounce_seconds`` of the acceptance, the same value is a bounce when the deck
        holds one copy of it (a second copy cannot exist), or when it was read before the
        next slot was even cued. A set with two copies of a tile may deal the second one
        straight after the first: read after the cue, it is a new tile, unless the card just
        accepted had been asked for again after its device came back (``Misread("away")``):
        then its second read is the rescan's.
        """
        if self._last_accept is None:
            return False
        value, at, rescanned = self._last_accept
        if read.value != value or read.at - at > self._desk.settings.bounce_seconds:
            return False
        deck = self._desk.game.deck
        try:
            copies = deck.copies.get(deck.parse(read.value), 0)
        except (NotationError, PieceRefused):
            return False
        return copies <= 1 or read.at < self._cued_at or rescanned
