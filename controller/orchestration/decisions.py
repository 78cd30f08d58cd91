"""Decision windows: one open at a time, closed by the first accepted command or the default.

Everything is checked before anything changes: a late, unknown or illegal decision is refused
with the reason and changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from controller.commands import Answer, Command
from controller.errors import IllegalAction
from controller.games.live.base import DecisionStep
from controller.journal import DecisionAppliedData, DecisionOpenData
from controller.orchestration.desk import Desk
from controller.orchestration.removals import is_removal
from controller.round import Round
from drivers.source import CardRemoved, Read


def utc_text(moment: datetime) -> str:
    """``moment`` as the contract's UTC text (``...Z``)."""
    return moment.isoformat().replace("+00:00", "Z")


class DecisionWindows:
    """Opens the decision windows of the rounds of one table and answers the decisions.

    Args:
        desk: The round in progress and the table's services.

    Attributes:
        open_window: The window open now, if one is.
    """

    def __init__(self, desk: Desk) -> None:
        self._desk = desk
        self.open_window: DecisionStep | None = None
        self._window_done = False

    async def decide(self, current: Round, step: DecisionStep) -> None:
        """Open the window; return when a command closed it or its default was applied.

        A window of the round's opening (``before_betting``) also ends, undecided, when a
        stop is requested: the round is then voided (betting never opened), so nothing is
        left to wait for.
        """
        desk = self._desk
        closes_at = datetime.now(UTC) + timedelta(seconds=step.seconds)
        desk.append(
            DecisionOpenData.model_construct(
                window=step.window,
                kind=step.kind,
                seat=step.seat,
                seconds=step.seconds,
                options=list(step.options),
                info=dict(step.info),
                closes_at=utc_text(closes_at),
            )
        )
        self.open_window = step
        self._window_done = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + step.seconds
        try:
            while not self._window_done:
                desk.inbox.woken.clear()
                desk.check_void()
                if step.before_betting and desk.stop.is_set():
                    break
                remaining = deadline - loop.time()
                if remaining <= 0:
                    self._apply_default(current, step)
                    break
                read = await desk.inbox.next(remaining)
                if read is not None and is_removal(read):
                    self._removal(current, step, read)
                elif read is not None:
                    await desk.out_of_turn(read, f"decision window {step.window} is open")
        finally:
            self.open_window = None

    def _apply_default(self, current: Round, step: DecisionStep) -> None:
        decision = current.live.apply_decision(step.window, step.default)
        self._desk.append(
            DecisionAppliedData.model_construct(
                window=step.window,
                decision=dict(decision),
                default=True,
                command_id=None,
            ),
            fold=False,
        )

    def _removal(self, current: Round, step: DecisionStep, read: Read) -> None:
        """A card left its reader during the window: the window's removal decision, if due.

        Due when the card is one of ``step.removal_cards`` and every one of them is now off
        its reader (``controller/orchestration/removals.py``). Journalled as a
        ``decision_applied`` with ``source: removal`` and the reason (no card named).
        """
        desk = self._desk
        card = desk.removed(read)
        decision = step.removal_decision
        if card is None or decision is None or card not in step.removal_cards:
            return
        if not desk.removals.all_off(current, step.removal_cards):
            return
        try:
            normalised = current.live.apply_decision(step.window, decision)
        except IllegalAction as exc:
            desk.log.warning("removal decides nothing", window=step.window, reason=exc.reason)
            return
        who = step.seat if step.seat is not None else "the hand"
        muck = "" if isinstance(read, CardRemoved) else " (the last put on the muck)"
        reason = f"removal: {who}'s cards left the reader during its action{muck}"
        self._desk.append(
            DecisionAppliedData.model_construct(
                window=step.window,
                decision=dict(normalised),
                default=False,
                command_id=None,
                source="removal",
                reason=reason,
            ),
            fold=False,
        )
        desk.log.info("decision by removal", window=step.window, seat=step.seat, reason=reason)
        self._window_done = True

    def command(self, current: Round, command: Command) -> Answer:
        """Answer a ``decision`` command for ``current``: applied and journalled, or refused."""
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
        self._desk.append(
            DecisionAppliedData.model_construct(
                window=step.window,
                decision=dict(normalised),
                default=False,
                command_id=command.command_id,
            ),
            fold=False,
        )
        self._window_done = True
        self._desk.inbox.poke()
        return Answer(True, "", {"decision": dict(normalised)})
