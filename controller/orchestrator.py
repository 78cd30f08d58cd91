"""The round orchestrator: from the betting window to the settlement of every bet.

Betting window, dealing in the game's order, decision windows, reveals, result, settlement,
for any game that speaks the step protocol (:mod:`controller.games.live.base`).

The orchestrator owns the clock of the round. Every state change is appended to the journal
(durably) before anything else happens: the publisher only ever sends what the journal holds,
and a restart rebuilds the round by replaying the same entries into the game's state machine.

It never guesses a card. A misread asks the dealer to scan the same card again and the slot
waits for a good read, without limit (after ``rescan_alert_after`` misreads in a row an alert
asks for the pit boss, and the slot keeps waiting). A card that cannot be in the round (not in
the game's deck, a duplicate, a joker where there is none, read at the wrong position) is
refused with a reason and the slot keeps waiting. A second read of the card just accepted,
within ``bounce_seconds``, is the same physical card bouncing and is ignored.

If the card source reports the device lost, the round waits; after ``device_halt_seconds``
it is halted for the pit boss, whose ``resume`` or ``void`` command ends the halt.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import structlog

from controller.aio import first_completed
from controller.cards import Piece
from controller.commands import Answer, Command
from controller.errors import IllegalAction, NotationError, PieceRefused, TablectlError
from controller.games.live.base import (
    DealStep,
    DecisionStep,
    FinishStep,
    InfoStep,
    LiveGame,
    LiveRound,
    RevealStep,
)
from controller.journal import (
    BettingClosedData,
    CardDealtData,
    CardRefusedData,
    CardsRevealedData,
    DecisionAppliedData,
    DecisionOpenData,
    DeviceStatusData,
    EntryBody,
    Journal,
    JournalEntry,
    PitAlertData,
    RescanRequestedData,
    RoundHaltedData,
    RoundOpenedData,
    RoundResultData,
    RoundResumedData,
    RoundVoidedData,
    SettledBet,
    TableInfoData,
    TableStatusData,
)
from controller.metrics import TableMetrics
from controller.round import Phase, Round, round_id_for
from controller.settings import RoundSettings
from drivers.errors import DriverError
from drivers.source import CardRead, CardSource, DeviceStatus, Misread, Read

META_NEXT_ROUND = "round.next_no"
META_CURRENT_ROUND = "round.current"
META_FINISHED = "round.finished"
META_TABLE_STATE = "table.state"
LINK_CAUSES = frozenset({"crc", "malformed"})
"""Misread causes the link layer recovers from by itself (the device retransmits)."""
LOST_STATES = frozenset({"lost"})
BACK_STATES = frozenset({"recovered", "connected"})

log = structlog.get_logger(__name__)


class Gate(Protocol):
    """A condition that must hold before a new round opens (broker up, betting system up)."""

    @property
    def name(self) -> str:
        """Short machine name (``"broker"``)."""
        ...

    def is_open(self) -> bool:
        """Whether a round may open now."""
        ...

    async def wait_open(self) -> None:
        """Return once the gate is open."""
        ...

    @property
    def reason(self) -> str:
        """Why the table waits, for people (``"broker unreachable"``)."""
        ...


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


class _RoundVoided(TablectlError):
    """Internal: the pit boss voided the round in progress."""


@dataclass(frozen=True, slots=True)
class _Failed:
    """Internal: the card source raised ``error`` (handed through the inbox)."""

    error: Exception


class Orchestrator:
    """Runs the rounds of one table.

    Args:
        table_id: The table's id.
        game: The game's live form.
        source: The card source (started, ideally supervised).
        journal: The table's journal.
        settings: Round timing and escalation.
        gates: Conditions checked before each betting window opens.
        replay: Re-sends results from a sequence number (for the ``replay`` command).
        on_card: Called with each accepted card's journal entry and the monotonic time its
            bytes arrived (metrics: scan-to-publish latency).
        metrics: Counters and gauges of the table (rounds, misreads, refusals, device).
        outbox_idle: Waits (at most the given seconds) until the broker has acknowledged
            everything published; awaited after each card and before each cue
            (``settle_seconds``).
        between_cards: Called after each card and before each cue, when no card is in
            flight (the process's garbage collection:
            :func:`controller.collector.collect_if_due`).
    """

    def __init__(
        self,
        *,
        table_id: str,
        game: LiveGame,
        source: CardSource,
        journal: Journal,
        settings: RoundSettings,
        gates: Sequence[Gate] = (),
        replay: Callable[[int, int | None], Awaitable[int]] | None = None,
        on_card: Callable[[JournalEntry, float], None] | None = None,
        metrics: TableMetrics | None = None,
        outbox_idle: Callable[[float], Awaitable[bool]] | None = None,
        between_cards: Callable[[], object] | None = None,
    ) -> None:
        self.table_id = table_id
        self.game = game
        self.source = source
        self.journal = journal
        self.settings = settings
        self.gates = tuple(gates)
        self._replay = replay
        self._on_card = on_card
        self.metrics = metrics
        self._outbox_idle = outbox_idle
        self._between_cards = between_cards
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._log = log.bind(table=table_id, game=game.id)
        self.current: Round | None = None
        self.open_window: DecisionStep | None = None
        self._window_done = False
        self._void_reason: str | None = None
        self._last_accept: tuple[str, float] | None = None
        self._inbox: asyncio.Queue[Read | _Failed | None] = asyncio.Queue()
        self._pump: asyncio.Task[None] | None = None
        self._device_lost_at: float | None = None
        self._cued_at = 0.0
        self._resumed = False
        self._card_held = False
        self.waiting_for: str | None = None

    # ------------------------------------------------------------------ control

    def request_stop(self) -> None:
        """Open no new round; void the current one if betting is still open.

        A round that has started is completed first: the operator's rule.
        """
        self._stop.set()
        self._poke()

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stop.is_set()

    # ------------------------------------------------------------------ journal helpers

    def _append(self, body: EntryBody, *, fold: bool = True) -> JournalEntry:
        """Journal an entry of the current round, then fold it into the round's state.

        Args:
            body: Its typed body (the model names the kind).
            fold: ``False`` when the state already holds it (a decision is applied to the
                game first, because applying is what validates and normalises it).
        """
        round_id = self.current.round_id if self.current is not None else None
        entry = self.journal.record(body, round_id=round_id)
        if fold and self.current is not None:
            self.current.apply(entry.kind, entry.body)
        return entry

    def finished_rounds(self) -> int:
        """How many rounds of this table the journal holds as settled or voided."""
        value = self.journal.get_meta(META_FINISHED)
        return int(value) if value else 0

    def table_state(self) -> dict[str, Any]:
        """What the last finished round left for the next (button, banker...)."""
        raw = self.journal.get_meta(META_TABLE_STATE)
        return dict(json.loads(raw)) if raw else {}

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
        try:
            recovered = self.recover()
            if recovered is not None:
                self.current = recovered
                if recovered.started:
                    summaries.append(await self._complete(recovered))
                else:
                    # The operator's rule: a round whose betting had not closed is cancelled
                    # and every stake refunded, never played on after a failure.
                    summaries.append(
                        self._void(recovered, "controller restarted before betting closed")
                    )
            while not self._stop.is_set():
                if rounds is not None and self.finished_rounds() >= rounds:
                    break
                await self._pass_gates()
                if self._stop.is_set():
                    break
                summary = await self.play_round()
                if summary is not None:
                    summaries.append(summary)
                if self.settings.pause_seconds and not self._stop.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), self.settings.pause_seconds)
        finally:
            if self._pump is not None:
                self._pump.cancel()
                with contextlib.suppress(BaseException):
                    await self._pump
                self._pump = None
        return summaries

    async def _pass_gates(self) -> None:
        """Wait until every gate is open, telling the table (once) why it waits."""
        for gate in self.gates:
            if gate.is_open():
                continue
            # A gate that opens within the grace period (the broker connection at start-up)
            # is not worth telling the table about.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gate.wait_open(), self.settings.gate_grace_seconds)
            if gate.is_open():
                continue
            self.waiting_for = gate.reason
            self._append(TableStatusData.model_construct(state="waiting", detail=gate.reason))
            self._log.warning("no new round: waiting", gate=gate.name, reason=gate.reason)
            await self._wait_or_stop(gate.wait_open())
            if self._stop.is_set():
                return
            self._append(
                TableStatusData.model_construct(state="ready", detail=f"{gate.name} is back")
            )
        self.waiting_for = None

    async def _wait_or_stop(self, awaitable: Awaitable[None]) -> None:
        await first_completed(awaitable, self._stop.wait())

    def recover(self) -> Round | None:
        """The round an earlier run left unfinished, rebuilt from the journal, if any."""
        current_id = self.journal.get_meta(META_CURRENT_ROUND)
        if not current_id:
            return None
        entries = [(entry.kind, entry.body) for entry in self.journal.entries(round_id=current_id)]
        restored = Round.replay(entries, self.game)
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

    async def _new_live_round(self, table_state: Mapping[str, Any]) -> LiveRound | None:
        """The game's next round; while the game cannot open one, the table idles (says why).

        Returns ``None`` when a stop is requested while idling.
        """
        told = False
        while True:
            try:
                return self.game.new_round(table_state)
            except IllegalAction as exc:
                if not told:
                    self._append(TableStatusData.model_construct(state="idle", detail=exc.reason))
                    self._log.warning("no round can open", reason=exc.reason)
                    told = True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.settings.idle_retry_seconds)
                if self._stop.is_set():
                    return None

    async def play_round(self) -> RoundSummary | None:
        """Open a betting window, close it, play the round through, judge and settle.

        Returns ``None`` when no round could open before a stop was requested.
        """
        round_no = int(self.journal.get_meta(META_NEXT_ROUND) or "1")
        round_id = round_id_for(self.table_id, round_no)
        table_state = self.table_state()
        live = await self._new_live_round(table_state)
        if live is None:
            return None
        # Meta first: a crash between the two leaves a pointer to a round with no entries,
        # which recovery ignores; the reverse order could lose a round that must be voided.
        self.journal.set_metas({META_NEXT_ROUND: str(round_no + 1), META_CURRENT_ROUND: round_id})
        self.current = Round(round_id, round_no, self.game.id, live, table_state)
        self._void_reason = None
        closes_at = datetime.now(UTC) + timedelta(seconds=self.settings.betting_seconds)
        self._append(
            RoundOpenedData.model_construct(
                round_id=round_id,
                round_no=round_no,
                game=self.game.id,
                betting_seconds=self.settings.betting_seconds,
                betting_closes_at=_utc(closes_at),
                table_state=table_state,
            )
        )
        self._log.info("betting open", round=round_id, seconds=self.settings.betting_seconds)
        await self._betting_window()
        return await self._complete(self.current)

    async def _complete(self, current: Round) -> RoundSummary:
        self.current = current
        rlog = self._log.bind(round=current.round_id)
        if not current.started:
            if self._stop.is_set():
                return self._void(current, "controller stopped before betting closed")
            if self._void_reason is not None:
                return self._void(current, self._void_reason)
            self._append(BettingClosedData.model_construct())
            rlog.info("betting closed")
        try:
            while True:
                step = current.live.next_step()
                if isinstance(step, DealStep):
                    await self._deal(current, step)
                elif isinstance(step, DecisionStep):
                    await self._decide(current, step)
                elif isinstance(step, RevealStep):
                    self._append(
                        CardsRevealedData.model_construct(hand=step.hand, cards=list(step.cards))
                    )
                elif isinstance(step, InfoStep):
                    self._append(
                        TableInfoData.model_construct(
                            kind=step.kind, data=dict(step.data), secure=step.secure
                        )
                    )
                elif isinstance(step, FinishStep):
                    break
        except _RoundVoided as voided:
            return self._void(current, voided.message)
        body: dict[str, Any] = {
            "game": self.game.id,
            "round_no": current.round_no,
            **current.live.result(),
        }
        self._append(RoundResultData.model_construct(**body))
        table_state = json.dumps(dict(current.live.table_state_after()))
        self._finish(current, Phase.SETTLED, {META_TABLE_STATE: table_state})
        rlog.info("round settled", winner=body.get("winner"))
        return RoundSummary(current.round_id, Phase.SETTLED, body)

    def _void(self, current: Round, reason: str) -> RoundSummary:
        self._append(
            RoundVoidedData.model_construct(
                reason=reason,
                started=current.started,
                bets={
                    bet: SettledBet.model_construct(outcome="refund", payout="1")
                    for bet in self.game.bet_ids
                },
            )
        )
        self._finish(current, Phase.VOIDED)
        self._log.warning("round voided", round=current.round_id, reason=reason)
        return RoundSummary(current.round_id, Phase.VOIDED, None)

    def _finish(self, current: Round, phase: Phase, meta: Mapping[str, str] | None = None) -> None:
        self.journal.set_metas(
            {
                **(meta or {}),
                META_FINISHED: str(self.finished_rounds() + 1),
                META_CURRENT_ROUND: "",
            }
        )
        self.current = None
        self.open_window = None
        self._void_reason = None
        self._last_accept = None
        self._resumed = False
        self._card_held = False
        if self.metrics is not None:
            self.metrics.round_finished("settled" if phase is Phase.SETTLED else "voided")

    # ------------------------------------------------------------------ waiting

    async def _settle(self) -> None:
        """Let the broker acknowledge what was published, then do the between-cards work.

        Waits ``settle_seconds`` at most (without suspending when the outbox is idle already),
        then runs what is best done with no card in flight (``between_cards``: garbage
        collection). Without an outbox to ask, it yields once so the outbox task can run.
        """
        if self._outbox_idle is not None and self.settings.settle_seconds > 0:
            await self._outbox_idle(self.settings.settle_seconds)
        else:
            await asyncio.sleep(0)  # the outbox task runs at least once
        if self._between_cards is not None:
            self._between_cards()

    def _poke(self) -> None:
        """Wake the waiting loop up (a command or a stop changed what it waits for)."""
        self._wake.set()
        self._inbox.put_nowait(None)

    async def _pump_reads(self) -> None:
        """Move the card source's reads into the inbox, in order, as they arrive.

        One ``next_read`` is always pending, so a read never waits for the orchestrator to
        ask and none is lost to a timeout. A failure is handed over and ends the pump; the
        next :meth:`_next` starts a new one.
        """
        while True:
            try:
                read = await self.source.next_read()
            except Exception as exc:
                self._inbox.put_nowait(_Failed(exc))
                return
            self._inbox.put_nowait(read)

    async def _next(self, timeout: float) -> Read | None:  # noqa: ASYNC109
        """The next read; ``None`` when ``timeout`` passes or something woke us up.

        The reads come through the inbox (:meth:`_pump_reads`), where :meth:`_poke` also
        drops its wake-ups: one queue, one wait, no helper task per call. A wake-up whose
        cause the caller has already seen (``_wake`` cleared since) is skipped.

        Raises:
            DriverError: The card source failed (an unsupervised source lost its device).
        """
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._pump_reads(), name="card-source-read")
        inbox = self._inbox
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        while True:
            if inbox.empty():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return None
                try:
                    async with asyncio.timeout(remaining):
                        item = await inbox.get()
                except TimeoutError:
                    return None
            else:
                item = inbox.get_nowait()
            if item is None:
                if self._wake.is_set():
                    return None
                continue
            if isinstance(item, _Failed):
                raise item.error
            return item

    def _check_void(self) -> None:
        if self._void_reason is not None:
            raise _RoundVoided(self._void_reason)

    async def _betting_window(self) -> None:
        """Wait out the betting window; a card scanned now is refused (betting is open)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.betting_seconds
        while (remaining := deadline - loop.time()) > 0:
            self._wake.clear()
            if self._stop.is_set() or self._void_reason is not None:
                return
            read = await self._next(remaining)
            if read is not None:
                await self._out_of_turn(read, "betting is still open")

    async def _out_of_turn(self, read: Read, reason: str) -> None:
        """A read while no card is expected: refuse cards, record device states."""
        if isinstance(read, CardRead):
            self._append(CardRefusedData.model_construct(slot=None, card=read.value, reason=reason))
            await self._command(self.source.reject("", reason))
        elif isinstance(read, DeviceStatus):
            self._device_status(read)

    async def _command(self, awaitable: Awaitable[None]) -> None:
        """Send a command to the device; a device that is away does not stop the round."""
        try:
            await awaitable
        except DriverError as exc:
            self._log.warning("device command not delivered", error=str(exc))

    # ------------------------------------------------------------------ dealing

    async def _deal(self, current: Round, step: DealStep) -> None:
        slot = step.slot
        rlog = self._log.bind(round=current.round_id, slot=slot.name)
        # What was just published (a round's opening) is acknowledged before the dealer is
        # cued: the card that follows finds the loop idle instead of racing those PUBACKs.
        await self._settle()
        self._cued_at = time.monotonic()
        await self._command(self.source.expect(current.round_no, step.index, slot.name))
        waiting_since = time.monotonic()
        loop = asyncio.get_running_loop()
        while True:
            # A started round is completed even when a stop is requested: only the pit boss
            # (void) or a second signal (cancellation) interrupts it.
            self._wake.clear()
            self._check_void()
            if self._resumed:
                self._resumed = False
                if self._card_held:
                    self._card_held = False
                    await self._command(
                        self.source.request_rescan(slot.name, "round resumed: scan the card again")
                    )
                else:
                    await self._command(self.source.expect(current.round_no, step.index, slot.name))
            timeout = self.settings.waiting_log_seconds
            if self._device_lost_at is not None and not current.halted:
                halt_at = self._device_lost_at + self.settings.device_halt_seconds
                timeout = min(timeout, halt_at - loop.time())
                if timeout <= 0:
                    self._halt(current, f"device lost for {self.settings.device_halt_seconds:g} s")
                    continue
            read = await self._next(timeout)
            if read is None:
                if not self._wake.is_set() and self._device_lost_at is None:
                    rlog.info("waiting for a card", seconds=round(time.monotonic() - waiting_since))
                continue
            if isinstance(read, DeviceStatus):
                resumed = self._device_status(read)
                if resumed and not current.halted:
                    await self._command(self.source.expect(current.round_no, step.index, slot.name))
                continue
            if current.halted:
                if isinstance(read, CardRead):
                    # Not rejected: the dealer keeps the card and rescans it after the resume.
                    self._append(
                        CardRefusedData.model_construct(
                            slot=slot.name,
                            card=read.value,
                            reason="round halted: keep the card until the pit boss resumes",
                        )
                    )
                    self._card_held = True
                continue
            if isinstance(read, Misread):
                if read.cause in LINK_CAUSES:
                    # The frame never reached us intact and was not acknowledged: the device
                    # sends it again (stop-and-wait), so the dealer need not scan again. If
                    # the device gives up, its next frame or heartbeat reveals a gap.
                    rlog.warning(
                        "line error, waiting for the retransmission",
                        cause=read.cause,
                        detail=read.detail,
                    )
                    continue
                await self._rescan(current, slot.name, read)
                continue
            if await self._accept(current, step, read) is not None:
                # The card is journalled and already handed to the broker (the journal's
                # listener did it). What comes next (the next cue; the result, or a Hold'em
                # equity, computed and journalled with fsyncs) waits for its PUBACK.
                await self._settle()
                return

    def _halt(self, current: Round, reason: str) -> None:
        self._append(RoundHaltedData.model_construct(reason=reason))
        self._append(
            PitAlertData.model_construct(slot=None, reason=f"round halted: {reason}: pit boss")
        )
        self._log.error("round halted", round=current.round_id, reason=reason)

    async def _rescan(self, current: Round, slot: str, read: Misread) -> None:
        attempt = current.misreads + 1
        reason = f"misread ({read.cause}): scan the same card again"
        self._append(
            RescanRequestedData.model_construct(
                slot=slot, cause=read.cause, detail=read.detail, attempt=attempt
            )
        )
        await self._command(self.source.request_rescan(slot, reason))
        if self.metrics is not None:
            self.metrics.misread()
            self.metrics.rescan()
        if attempt == self.settings.rescan_alert_after:
            self._append(
                PitAlertData.model_construct(
                    slot=slot, reason=f"{attempt} misreads in a row at {slot}: pit boss needed"
                )
            )

    async def _accept(self, current: Round, step: DealStep, read: CardRead) -> Piece | None:
        slot = step.slot
        if self._is_bounce(read):
            self._log.debug("bounce ignored", card=read.value, slot=slot.name)
            return None
        try:
            if read.position is not None and read.position not in (slot.name, slot.hand):
                raise PieceRefused(
                    read.value,
                    f"read at position {read.position} but the table waits for {slot.name}",
                )
            piece = self.game.deck.parse(read.value)
            self.game.deck.check_can_add(current.dealt, piece)
        except (NotationError, PieceRefused) as exc:
            reason = exc.reason
            self._append(
                CardRefusedData.model_construct(slot=slot.name, card=read.value, reason=reason)
            )
            if self.metrics is not None:
                self.metrics.card_refused(reason.split(":")[0])
            await self._command(self.source.reject(slot.name, reason))
            await self._command(self.source.expect(current.round_no, step.index, slot.name))
            return None
        # The hot path: five plain fields, validated here (cheaper than model_construct) and
        # dumped by pydantic-core (bench/journal_append.py).
        entry = self._append(
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
        self._last_accept = (str(piece), read.at)
        return piece

    def _is_bounce(self, read: CardRead) -> bool:
        """Whether ``read`` is the card just accepted passing the reader a second time.

        Within ``bounce_seconds`` of the acceptance, the same value is a bounce when the deck
        holds one copy of it (a second copy cannot exist), or when it was read before the
        next slot was even cued. A set with two copies of a tile may deal the second one
        straight after the first: read after the cue, it is a new tile.
        """
        if self._last_accept is None:
            return False
        value, at = self._last_accept
        if read.value != value or read.at - at > self.settings.bounce_seconds:
            return False
        try:
            copies = self.game.deck.copies.get(self.game.deck.parse(read.value), 0)
        except (NotationError, PieceRefused):
            return False
        return copies <= 1 or read.at < self._cued_at

    def _device_status(self, read: DeviceStatus) -> bool:
        """Journal a device state; returns whether the device just came back."""
        self._append(
            DeviceStatusData.model_construct(
                device=self.source.url, state=read.state, detail=read.detail
            )
        )
        if self.metrics is not None:
            if read.state in LOST_STATES:
                self.metrics.set_device_connected(False)
            elif read.state in BACK_STATES:
                self.metrics.set_device_connected(True)
                if read.state == "recovered":
                    self.metrics.device_reconnected()
        if read.state in LOST_STATES:
            if self._device_lost_at is None:
                self._device_lost_at = asyncio.get_running_loop().time()
            return False
        if read.state in BACK_STATES and self._device_lost_at is not None:
            self._device_lost_at = None
            return True
        return False

    # ------------------------------------------------------------------ decisions

    async def _decide(self, current: Round, step: DecisionStep) -> None:
        closes_at = datetime.now(UTC) + timedelta(seconds=step.seconds)
        self._append(
            DecisionOpenData.model_construct(
                window=step.window,
                kind=step.kind,
                seat=step.seat,
                seconds=step.seconds,
                options=list(step.options),
                info=dict(step.info),
                closes_at=_utc(closes_at),
            )
        )
        self.open_window = step
        self._window_done = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + step.seconds
        try:
            while not self._window_done:
                self._wake.clear()
                self._check_void()
                remaining = deadline - loop.time()
                if remaining <= 0:
                    decision = current.live.apply_decision(step.window, step.default)
                    self._append(
                        DecisionAppliedData.model_construct(
                            window=step.window,
                            decision=dict(decision),
                            default=True,
                            command_id=None,
                        ),
                        fold=False,
                    )
                    break
                read = await self._next(remaining)
                if read is not None:
                    await self._out_of_turn(read, f"decision window {step.window} is open")
        finally:
            self.open_window = None

    # ------------------------------------------------------------------ commands

    async def handle_command(self, command: Command) -> Answer:
        """Answer one inbound command (decision, pit resume/void, replay).

        Everything is checked before anything changes: an illegal or late command is
        refused with the reason and changes nothing.
        """
        if command.name == "replay":
            return await self._replay_command(command)
        current = self.current
        if current is None:
            return Answer(False, "no round is in progress")
        if command.round_id is not None and command.round_id != current.round_id:
            return Answer(
                False, f"round {command.round_id} is not the current round ({current.round_id})"
            )
        if command.name == "decision":
            return self._decision_command(current, command)
        if command.name == "void":
            if command.role != "pit":
                return Answer(False, "only the pit boss can void a round")
            reason = str(command.data.get("reason") or "").strip()
            if not reason:
                return Answer(False, "a void needs a reason")
            self._void_reason = f"voided by the pit boss: {reason}"
            self._poke()
            return Answer(True, "", {"round": current.round_id})
        if command.name == "resume":
            if command.role != "pit":
                return Answer(False, "only the pit boss can resume a round")
            if not current.halted:
                return Answer(False, f"round {current.round_id} is not halted")
            self._append(RoundResumedData.model_construct(by="pit"))
            self._device_lost_at = None
            self._resumed = True
            self._poke()
            return Answer(True, "", {"round": current.round_id})
        return Answer(False, f"unknown command {command.name!r}")

    def _decision_command(self, current: Round, command: Command) -> Answer:
        window = command.data.get("window")
        step = self.open_window
        if step is None or self._window_done:
            return Answer(
                False, f"no decision window is open (window {window!r} is late or unknown)"
            )
        if window != step.window:
            return Answer(
                False, f"window {window!r} is not open; the open window is {step.window!r}"
            )
        decision = command.data.get("decision")
        if not isinstance(decision, Mapping):
            return Answer(False, "decision must be a JSON object")
        try:
            normalised = current.live.apply_decision(step.window, decision)
        except IllegalAction as exc:
            return Answer(False, exc.reason)
        self._append(
            DecisionAppliedData.model_construct(
                window=step.window,
                decision=dict(normalised),
                default=False,
                command_id=command.command_id,
            ),
            fold=False,
        )
        self._window_done = True
        self._poke()
        return Answer(True, "", {"decision": dict(normalised)})

    async def _replay_command(self, command: Command) -> Answer:
        if self._replay is None:
            return Answer(False, "replay is not available on this controller")
        try:
            from_seq = int(command.data["from_seq"])
            raw_to = command.data.get("to_seq")
            to_seq = int(raw_to) if raw_to is not None else None
        except (KeyError, TypeError, ValueError):
            return Answer(False, "replay needs an integer from_seq (and optional to_seq)")
        if from_seq < 1 or (to_seq is not None and to_seq < from_seq):
            return Answer(False, "from_seq must be >= 1 and to_seq >= from_seq")
        count = await self._replay(from_seq, to_seq)
        return Answer(True, "", {"resent": count})


def _utc(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
