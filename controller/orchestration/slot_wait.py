"""What the slot being dealt waits on: the device, the pit boss, a card the dealer holds.

Pure (no I/O, no clock: the caller passes the loop time). The deal loop
(:mod:`controller.orchestration.dealing`) reads it to know what a read means and what to send
the device; the transitions are named for what happened at the table:

::

    CUED ──device lost for device_halt_seconds──▶ HALTED ──card read──▶ CARD_HELD
      ▲                                              │                      │
      │                                       pit boss resumes        pit boss resumes
      │                                              ▼                      ▼
      └────────── slot cued again ─────────── RESUMED          RESUMED_CARD_HELD
                  (EXPECT, or RESCAN of the held card) ◀────────────────────┘

The device's absence (:attr:`SlotWait.device_lost_at`) is tracked beside the state: it
starts in any state (a betting window, a decision window, a halted round), counts towards the
halt only while the round runs (``CUED``), and ends when the device is back or the pit boss
resumes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class WaitState(enum.Enum):
    """Where the slot's wait is."""

    CUED = "cued"
    """The round runs: a good read fills the slot."""
    HALTED = "halted"
    """The round waits for the pit boss; a card read now is held, not rejected."""
    CARD_HELD = "card held"
    """Halted, and the dealer holds a card refused while halted."""
    RESUMED = "resumed"
    """The pit boss resumed: the slot is cued again."""
    RESUMED_CARD_HELD = "resumed, card held"
    """The pit boss resumed: the dealer is asked to scan the held card again."""


_HALTED = frozenset({WaitState.HALTED, WaitState.CARD_HELD})
_RESUMED = frozenset({WaitState.RESUMED, WaitState.RESUMED_CARD_HELD})


@dataclass(slots=True)
class SlotWait:
    """The waiting state of the table's slot, kept across slots and rounds.

    Attributes:
        state: Where the wait is.
        device_lost_at: The loop time the device was reported lost, while it is away.
    """

    state: WaitState = WaitState.CUED
    device_lost_at: float | None = None

    @property
    def halted(self) -> bool:
        """Whether the round waits for the pit boss."""
        return self.state in _HALTED

    @property
    def resumed(self) -> bool:
        """Whether the pit boss resumed and the slot is not cued again yet."""
        return self.state in _RESUMED

    def start(self, *, halted: bool) -> None:
        """A round starts (or is recovered, ``halted`` as its journal says)."""
        self.state = WaitState.HALTED if halted else WaitState.CUED

    def device_lost(self, now: float) -> None:
        """The device is reported lost at loop time ``now`` (the first report counts)."""
        if self.device_lost_at is None:
            self.device_lost_at = now

    def device_back(self) -> bool:
        """The device is reported back; returns whether it had been lost."""
        if self.device_lost_at is None:
            return False
        self.device_lost_at = None
        return True

    def halt_in(self, now: float, halt_seconds: float) -> float | None:
        """Seconds until the device's absence halts the round (``None``: no halt is due)."""
        if self.device_lost_at is None or self.halted:
            return None
        return self.device_lost_at + halt_seconds - now

    def halt(self) -> None:
        """The round is halted for the pit boss."""
        self.state = WaitState.HALTED

    def hold_card(self) -> None:
        """A card was read while halted: the dealer keeps it until the resume."""
        self.state = WaitState.CARD_HELD

    def resume(self) -> None:
        """The pit boss resumed the round (the device's absence is forgiven)."""
        self.device_lost_at = None
        held = self.state is WaitState.CARD_HELD
        self.state = WaitState.RESUMED_CARD_HELD if held else WaitState.RESUMED

    def card_entered(self) -> None:
        """The pit boss entered the slot's card by hand.

        A card the dealer held is not asked for again; the halt, if any, stays until the pit
        boss resumes.
        """
        if self.state is WaitState.CARD_HELD:
            self.state = WaitState.HALTED
        elif self.state is WaitState.RESUMED_CARD_HELD:
            self.state = WaitState.RESUMED

    def cue_again(self) -> bool:
        """The slot is cued again after the resume; returns whether a card is held."""
        held = self.state is WaitState.RESUMED_CARD_HELD
        self.state = WaitState.CUED
        return held
