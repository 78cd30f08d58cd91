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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import structlog

from controller.aio import first_completed
from controller.commands import Answer, Command
from controller.errors import IllegalAction
from controller.games.live.base import (
    DealStep,
    DecisionStep,
    FinishStep,
    InfoStep,
    LiveGame,
    LiveRound,
    RevealStep,
    Step,
)
from controller.journal import (
    BettingClosedData,
    BettingOpenedData,
    CardsRevealedData,
    Journal,
    JournalEntry,
    RoundOpenedData,
    RoundResultData,
    RoundVoidedData,
    SettledBet,
    TableInfoData,
    TableStatusData,
)
from controller.metrics import TableMetrics
from controller.orchestration.answers import Answers
from controller.orchestration.dealing import Dealer
from controller.orchestration.decisions import DecisionWindows, utc_text
from controller.orchestration.desk import Desk, LeftHalted, RoundVoided
from controller.round import Phase, Round, round_id_for
from controller.settings import RoundSettings
from drivers.source import CardSource

META_NEXT_ROUND = "round.next_no"
META_CURRENT_ROUND = "round.current"
META_FINISHED = "round.finished"
META_TABLE_STATE = "table.state"

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


def _before_betting(step: Step) -> bool:
    """Whether ``step`` belongs to the round's opening, before the betting window."""
    return isinstance(step, DecisionStep | InfoStep) and step.before_betting


class Orchestrator:
    """Runs the rounds of one table.

    The round's life (recovery, gates, betting window, the steps, result, void) is here; the
    parts it is made of are in :mod:`controller.orchestration`: the shared :class:`Desk`
    (round in progress, journal, device commands, inbox, the slot's waiting state), the
    :class:`Dealer` (one slot dealt) and the :class:`DecisionWindows`.

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
        self.metrics = metrics
        self._log = log.bind(table=table_id, game=game.id)
        self._desk = Desk(
            game=game,
            source=source,
            journal=journal,
            settings=settings,
            metrics=metrics,
            outbox_idle=outbox_idle,
            between_cards=between_cards,
            log=self._log,
        )
        self._stop = self._desk.stop
        self._dealer = Dealer(self._desk, on_card)
        self._decisions = DecisionWindows(self._desk)
        self._answers = Answers(self._desk, self._decisions, replay)
        self.waiting_for: str | None = None

    @property
    def current(self) -> Round | None:
        """The round in progress."""
        return self._desk.current

    @property
    def open_window(self) -> DecisionStep | None:
        """The decision window open now, if one is."""
        return self._decisions.open_window

    # ------------------------------------------------------------------ control

    def request_stop(self) -> None:
        """Open no new round; void the current one if betting is still open.

        A round that has started is completed first: the operator's rule.
        """
        self._stop.set()
        self._desk.inbox.poke()

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stop.is_set()

    # ------------------------------------------------------------------ journal helpers

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
                summary = await self._finish_recovered(recovered)
                if summary is not None:
                    summaries.append(summary)
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
            await self._desk.inbox.close()
        return summaries

    async def _finish_recovered(self, recovered: Round) -> RoundSummary | None:
        """Complete a recovered round that had started; void one that had not.

        ``None``: stopped while the round was halted (it stays halted in the journal).
        """
        self._desk.current = recovered
        if recovered.started:
            return await self._complete(recovered)
        if recovered.opening:
            # Still in its opening (Mahjong's bank offers): no bet could be placed yet, so the
            # round goes on from the journalled offers: the next offer, then betting.
            self._log.info("resuming the round's opening", round=recovered.round_id)
            await self._open_betting(recovered)
            return await self._complete(recovered)
        # The operator's rule: a round whose betting had not closed is cancelled and every
        # stake refunded, never played on after a failure.
        return self._void(recovered, "controller restarted before betting closed")

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
            self._desk.append(TableStatusData.model_construct(state="waiting", detail=gate.reason))
            self._log.warning("no new round: waiting", gate=gate.name, reason=gate.reason)
            await self._wait_or_stop(gate.wait_open())
            if self._stop.is_set():
                return
            self._desk.append(
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
                    self._desk.append(
                        TableStatusData.model_construct(state="idle", detail=exc.reason)
                    )
                    self._log.warning("no round can open", reason=exc.reason)
                    told = True
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.settings.idle_retry_seconds)
                if self._stop.is_set():
                    return None

    async def play_round(self) -> RoundSummary | None:
        """Open a betting window, close it, play the round through, judge and settle.

        Returns ``None`` when no round could open before a stop was requested, or when the
        round was left halted at a stop (``halted_stop_seconds``).
        """
        round_no = int(self.journal.get_meta(META_NEXT_ROUND) or "1")
        round_id = round_id_for(self.table_id, round_no, self.journal.identity)
        table_state = self.table_state()
        live = await self._new_live_round(table_state)
        if live is None:
            return None
        # Meta first: a crash between the two leaves a pointer to a round with no entries,
        # which recovery ignores; the reverse order could lose a round that must be voided.
        self.journal.set_metas({META_NEXT_ROUND: str(round_no + 1), META_CURRENT_ROUND: round_id})
        current = Round(round_id, round_no, self.game.id, live, table_state)
        self._desk.current = current
        self._desk.void_reason = None
        seconds = self.settings.betting_seconds
        before_betting = _before_betting(live.next_step())
        # A round that opens with steps before betting (Mahjong's bank offers) says so, and
        # its betting opens once they are done, with ``betting_opened``; any other round's
        # ``round_opened`` leaves ``before_betting`` unset.
        opening: dict[str, Any] = {"before_betting": True} if before_betting else {}
        closes_at = (
            None if before_betting else utc_text(datetime.now(UTC) + timedelta(seconds=seconds))
        )
        self._desk.append(
            RoundOpenedData.model_construct(
                round_id=round_id,
                round_no=round_no,
                game=self.game.id,
                betting_seconds=seconds,
                betting_closes_at=closes_at,
                table_state=table_state,
                **opening,
            )
        )
        if before_betting:
            self._log.info("round opened: its opening comes before betting", round=round_id)
        else:
            self._log.info("betting open", round=round_id, seconds=seconds)
        await self._open_betting(current)
        return await self._complete(current)

    async def _open_betting(self, current: Round) -> None:
        """Play the round's opening (if it has one), then wait out the betting window.

        The opening's steps (``before_betting``: Mahjong's bank offers and who banks) are
        played in order; then ``betting_opened`` opens the window. A stop or a pit void in
        the opening ends it (the round is voided by :meth:`_complete`); an opening that ends
        the round (every position declined the bank) opens no betting window.
        """
        desk = self._desk
        if current.opening:
            while _before_betting(step := current.live.next_step()):
                if self._stop.is_set() or desk.void_reason is not None:
                    return
                await self._step(current, step)
            if self._stop.is_set() or desk.void_reason is not None:
                return
            if isinstance(current.live.next_step(), FinishStep):
                self._log.info("the opening ended the round: no betting", round=current.round_id)
                return
            seconds = self.settings.betting_seconds
            closes_at = datetime.now(UTC) + timedelta(seconds=seconds)
            desk.append(
                BettingOpenedData.model_construct(
                    betting_seconds=seconds, betting_closes_at=utc_text(closes_at)
                )
            )
            self._log.info("betting open", round=current.round_id, seconds=seconds)
        await self._betting_window()

    async def _betting_window(self) -> None:
        """Wait out the betting window; a card scanned now is refused (betting is open)."""
        desk = self._desk
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.betting_seconds
        while (remaining := deadline - loop.time()) > 0:
            desk.inbox.woken.clear()
            if self._stop.is_set() or desk.void_reason is not None:
                return
            read = await desk.inbox.next(remaining)
            if read is not None:
                await desk.out_of_turn(read, "betting is still open")

    async def _complete(self, current: Round) -> RoundSummary | None:
        """Close betting (or void the round) and play its steps through to the result.

        Returns ``None`` when a stop left the round halted (the journal keeps it so: the
        next start rebuilds it halted, for the pit boss).
        """
        desk = self._desk
        desk.current = current
        desk.wait.start(halted=current.halted)
        if not current.started:
            if self._stop.is_set():
                return self._void(current, "controller stopped before betting closed")
            if desk.void_reason is not None:
                return self._void(current, desk.void_reason)
            desk.append(BettingClosedData.model_construct())
            self._log.info("betting closed", round=current.round_id)
        dealer = self._dealer
        try:
            while True:
                step = current.live.next_step()
                if isinstance(step, DealStep):
                    await dealer.deal(current, step)
                elif isinstance(step, FinishStep):
                    break
                else:
                    await self._step(current, step)
        except RoundVoided as voided:
            return self._void(current, voided.message)
        except LeftHalted as left:
            self._log.warning(
                "stopping with the round halted; it resumes halted at the next start",
                round=current.round_id,
                reason=left.message,
            )
            return None
        return self._judge(current)

    async def _step(self, current: Round, step: Step) -> None:
        """A step other than a deal or the finish: a decision, a reveal, information."""
        if isinstance(step, DecisionStep):
            await self._decisions.decide(current, step)
        elif isinstance(step, RevealStep):
            self._desk.append(
                CardsRevealedData.model_construct(hand=step.hand, cards=list(step.cards))
            )
        elif isinstance(step, InfoStep):
            self._desk.append(
                TableInfoData.model_construct(
                    kind=step.kind, data=dict(step.data), secure=step.secure
                )
            )

    def _judge(self, current: Round) -> RoundSummary:
        """Judge and settle the round (its result), and keep what it leaves for the next."""
        body: dict[str, Any] = {
            "game": self.game.id,
            "round_no": current.round_no,
            **current.live.result(),
        }
        self._desk.append(RoundResultData.model_construct(**body))
        table_state = json.dumps(dict(current.live.table_state_after()))
        self._finish(current, Phase.SETTLED, {META_TABLE_STATE: table_state})
        self._log.info("round settled", round=current.round_id, winner=body.get("winner"))
        return RoundSummary(current.round_id, Phase.SETTLED, body)

    def _void(self, current: Round, reason: str) -> RoundSummary:
        self._desk.append(
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
        desk = self._desk
        desk.current = None
        desk.void_reason = None
        desk.wait.start(halted=False)
        self._decisions.open_window = None
        self._dealer.round_finished()
        if self.metrics is not None:
            self.metrics.round_finished("settled" if phase is Phase.SETTLED else "voided")

    # ------------------------------------------------------------------ commands

    async def handle_command(self, command: Command) -> Answer:
        """Answer one inbound command (decision, pit resume/void, replay).

        Everything is checked before anything changes: an illegal or late command is
        refused with the reason and changes nothing.
        """
        return await self._answers.answer(command)
