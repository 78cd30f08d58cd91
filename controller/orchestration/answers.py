"""The orchestrator's answers to inbound commands: decisions, pit commands, replay.

The pit's commands: void, resume, a card entered by hand (a dead reader), an alert's ack.

The command router (:mod:`controller.commands`) has checked the schema and the role's topic;
here the command is checked against the round: its id, the open window, the halt. Everything
is checked before anything changes: an illegal or late command is refused with the reason and
changes nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from controller.commands import Answer, Command
from controller.errors import NotationError, PieceRefused
from controller.journal import CardDealtData, RoundResumedData
from controller.orchestration.decisions import DecisionWindows
from controller.orchestration.desk import Desk
from controller.round import Round


class Answers:
    """Answers the commands of one table.

    Args:
        desk: The round in progress and the table's services.
        decisions: The decision windows (a ``decision`` command closes the open one).
        replay: Re-sends results from a sequence number (``None``: not available).
    """

    def __init__(
        self,
        desk: Desk,
        decisions: DecisionWindows,
        replay: Callable[[int, int | None], Awaitable[int]] | None,
    ) -> None:
        self._desk = desk
        self._decisions = decisions
        self._replay = replay

    async def answer(self, command: Command) -> Answer:
        """Answer one inbound command (decision, pit resume/void, replay).

        Everything is checked before anything changes: an illegal or late command is
        refused with the reason and changes nothing.
        """
        if command.name == "replay":
            return await self._replay_command(command)
        if command.name == "ack":  # journalled with its operator; any round, even a past one
            return Answer(True, "", {"alert_seq": command.data.get("alert_seq")})
        if command.name == "deck-check":  # the report is journalled with the command
            ok = bool(command.data.get("ok"))
            log = self._desk.log.info if ok else self._desk.log.warning
            log("deck check recorded", ok=ok, deck=command.data.get("deck"))
            findings = ("missing", "extra", "duplicated", "unknown")
            return Answer(True, "", {"ok": ok, **{k: command.data.get(k) for k in findings}})
        current = self._desk.current
        if current is None:
            return Answer(False, "no round is in progress")
        if command.round_id is not None and command.round_id != current.round_id:
            return Answer(
                False, f"round {command.round_id} is not the current round ({current.round_id})"
            )
        if command.name == "decision":
            return self._decisions.command(current, command)
        if command.name == "void":
            return self._void_command(current, command)
        if command.name == "resume":
            return self._resume_command(current, command)
        if command.name == "enter-card":
            return self._enter_card(current, command)
        return Answer(False, f"unknown command {command.name!r}")

    def _enter_card(self, current: Round, command: Command) -> Answer:
        """The pit boss enters the card of the slot the round waits for (a dead reader).

        Checked as a read card is (the game's deck, not dealt yet), and only for the slot the
        deal loop waits for; journalled as ``card_dealt`` with ``source: manual``, who and
        why, in this call (so no read can fill the slot between the check and the entry).
        A halt stays: the reader is still away; the pit boss enters the next cards too, or
        resumes once it is back.
        """
        desk = self._desk
        if command.role != "pit":
            return Answer(False, "only the pit boss can enter a card")
        operator = str(command.data.get("operator") or "").strip()
        reason = str(command.data.get("reason") or "").strip()
        if not operator:
            return Answer(False, "a manual entry needs the name of who enters it (operator)")
        if not reason:
            return Answer(False, "a manual entry needs a reason")
        step = desk.waiting
        if step is None:
            return Answer(
                False, f"round {current.round_id} is not waiting for a card (no slot is cued)"
            )
        slot = step.slot
        meant = command.data.get("slot")
        if meant is not None and meant != slot.name:
            return Answer(
                False,
                f"round {current.round_id} waits for a card for {slot.name}, not {meant}",
                {"slot": slot.name},
            )
        value = str(command.data.get("card") or "").strip()
        deck = desk.game.deck
        try:
            piece = deck.parse(value)
        except NotationError as exc:
            return Answer(False, f"{value!r} is not a card of this game's deck: {exc.reason}")
        try:
            deck.check_can_add(current.dealt, piece)
        except PieceRefused as exc:
            return Answer(False, f"{piece} cannot be entered for {slot.name}: {exc.reason}")
        desk.waiting = None
        entry = desk.append(
            CardDealtData(
                slot=slot.name,
                hand=slot.hand,
                index=step.index,
                card=str(piece),
                face=slot.face.value,
                source="manual",
                operator=operator,
                reason=reason,
            )
        )
        desk.wait.card_entered()
        desk.inbox.poke()
        desk.log.warning(
            "card entered by hand",
            round=current.round_id,
            slot=slot.name,
            operator=operator,
            reason=reason,
        )
        return Answer(True, "", {"round": current.round_id, "slot": slot.name, "seq": entry.seq})

    def _void_command(self, current: Round, command: Command) -> Answer:
        """The pit boss voids the round in progress (halted or not), with a reason."""
        if command.role != "pit":
            return Answer(False, "only the pit boss can void a round")
        reason = str(command.data.get("reason") or "").strip()
        if not reason:
            return Answer(False, "a void needs a reason")
        self._desk.void_reason = f"voided by the pit boss{_named(command)}: {reason}"
        self._desk.inbox.poke()
        return Answer(True, "", {"round": current.round_id})

    def _resume_command(self, current: Round, command: Command) -> Answer:
        """The pit boss ends a halt: the slot is cued again (or the held card rescanned)."""
        if command.role != "pit":
            return Answer(False, "only the pit boss can resume a round")
        if not current.halted:
            return Answer(False, f"round {current.round_id} is not halted")
        by = f"pit ({command.data['operator']})" if command.data.get("operator") else "pit"
        self._desk.append(RoundResumedData.model_construct(by=by))
        self._desk.wait.resume()
        self._desk.inbox.poke()
        return Answer(True, "", {"round": current.round_id})

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


def _named(command: Command) -> str:
    """`` (NAME)`` for a command that names its operator, else nothing."""
    operator = command.data.get("operator")
    return f" ({operator})" if operator else ""
