"""What the parts of a round's play share: the round in progress and the table's services.

The :class:`Desk` holds the round in progress, the journal (every state change is appended,
durably, before anything else happens), the card source and the commands sent to it, the
inbox of reads, the slot's waiting state, and the settle between cards. The orchestrator, the
deal loop and the decision windows each hold the same desk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from controller.errors import TablectlError
from controller.games.live.base import DealStep, LiveGame
from controller.journal import (
    CardRefusedData,
    DeviceStatusData,
    EntryBody,
    Journal,
    JournalEntry,
)
from controller.metrics import TableMetrics
from controller.orchestration.inbox import Inbox
from controller.orchestration.removals import Removals, is_removal
from controller.orchestration.slot_wait import SlotWait
from controller.round import Round
from controller.settings import RoundSettings
from drivers.errors import DriverError
from drivers.source import CardRead, CardRemoved, CardSource, DeviceStatus, Read

LOST_STATES = frozenset({"lost"})
BACK_STATES = frozenset({"recovered", "connected"})


class RoundVoided(TablectlError):
    """Internal: the pit boss voided the round in progress."""


class LeftHalted(TablectlError):
    """Internal: stopped while halted, the pit boss did not come in time; the round stays halted.

    Raised by the deal loop ``halted_stop_seconds`` after a stop was requested while the
    round was halted; the orchestrator ends its run without finishing the round, which the
    journal keeps (halted) for the next start.
    """


class Desk:
    """The round in progress and the services every part of its play uses.

    Args:
        game: The game's live form.
        source: The card source.
        journal: The table's journal.
        settings: Round timing and escalation.
        metrics: Counters and gauges of the table.
        outbox_idle: Waits (at most the given seconds) until the broker has acknowledged
            everything published.
        between_cards: Called after each card and before each cue, with no card in flight.
        log: The table's bound logger.

    Attributes:
        current: The round in progress.
        void_reason: Why the pit boss voided the round in progress (checked by the loops).
        inbox: The reads and the wake-ups.
        wait: What the slot being dealt waits on.
        waiting: The slot the deal loop waits for a card for (``None`` between slots, and
            once the slot is filled: by a read, or by the pit boss's manual entry).
        stop: Set when a stop is requested (no new round; a halted round waits for the pit
            boss at most ``halted_stop_seconds``).
        removals: The round's dealt cards that are off their reader (latched readers).
    """

    def __init__(
        self,
        *,
        game: LiveGame,
        source: CardSource,
        journal: Journal,
        settings: RoundSettings,
        metrics: TableMetrics | None,
        outbox_idle: Callable[[float], Awaitable[bool]] | None,
        between_cards: Callable[[], object] | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self.game = game
        self.source = source
        self.journal = journal
        self.settings = settings
        self.metrics = metrics
        self._outbox_idle = outbox_idle
        self._between_cards = between_cards
        self.log = log
        self.current: Round | None = None
        self.void_reason: str | None = None
        self.inbox = Inbox(source)
        self.wait = SlotWait()
        self.waiting: DealStep | None = None
        self.stop = asyncio.Event()
        self.removals = Removals(game.deck)
        self._away: set[str] = set()

    def append(self, body: EntryBody, *, fold: bool = True) -> JournalEntry:
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

    async def command(self, awaitable: Awaitable[None]) -> None:
        """Send a command to the device; a device that is away does not stop the round."""
        try:
            await awaitable
        except DriverError as exc:
            self.log.warning("device command not delivered", error=str(exc))

    def check_void(self) -> None:
        """Raise :class:`RoundVoided` if the pit boss voided the round.

        Raises:
            RoundVoided: The round is voided (with the reason).
        """
        if self.void_reason is not None:
            raise RoundVoided(self.void_reason)

    async def settle(self) -> None:
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

    def device_status(self, read: DeviceStatus) -> bool:
        """Journal a device state; returns whether the device just came back.

        A source of several devices (a multi-reader table) names the device of each state:
        the table is away while any of them is (the halt counts from the first loss), and
        each device coming back is answered (the slot cued again).
        """
        device = read.device or self.source.url
        self.append(
            DeviceStatusData.model_construct(device=device, state=read.state, detail=read.detail)
        )
        if read.state in LOST_STATES:
            self._away.add(device)
            self._device_metrics(read.state)
            self.wait.device_lost(asyncio.get_running_loop().time())
            return False
        if read.state not in BACK_STATES:
            return False
        was_away = device in self._away
        self._away.discard(device)
        self._device_metrics(read.state)
        if not was_away:
            return False
        if self._away:
            return True  # this one is back; the table still waits for the others
        return self.wait.device_back()

    def _device_metrics(self, state: str) -> None:
        """The table's device is connected when none of its devices is away."""
        if self.metrics is None:
            return
        self.metrics.set_device_connected(not self._away)
        if state == "recovered":
            self.metrics.device_reconnected()

    async def out_of_turn(self, read: Read, reason: str) -> None:
        """A read while no card is expected: refuse cards, record device states.

        A removal (a latched reader's) is noted; a card that was off its reader, read again,
        is put back, not refused.
        """
        if is_removal(read) or self.card_back(read):
            self.removed(read)
            return
        if isinstance(read, CardRead):
            self.append(CardRefusedData.model_construct(slot=None, card=read.value, reason=reason))
            await self.command(self.source.reject("", reason))
        elif isinstance(read, DeviceStatus):
            self.device_status(read)

    def removed(self, read: Read) -> str | None:
        """Note a removal (or a card put back) of the round in progress, and log it.

        Returns:
            The removed card (notation) when it is one dealt in the round, else ``None``.
        """
        current = self.current
        if current is None:
            self.log.info("card off a reader between rounds", read=repr(read))
            return None
        if isinstance(read, CardRead) and not is_removal(read):
            self.log.info("card back on its reader", round=current.round_id)
            return None
        card = self.removals.note(current, read)
        position = read.position if isinstance(read, CardRead | CardRemoved) else None
        if card is None:
            self.log.info("a card not dealt in this round left a reader", position=position)
        else:
            self.log.info("card off its reader", round=current.round_id, position=position)
        return card

    def card_back(self, read: Read) -> bool:
        """Whether ``read`` is a card of the round put back on its reader after a removal."""
        current = self.current
        return (
            current is not None and isinstance(read, CardRead) and self.removals.back(current, read)
        )
