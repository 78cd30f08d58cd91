"""A simulated table's scanner: what ``tablectl run --simulate`` and the tests start.

:class:`Simulation` says how the simulated scanner behaves; :func:`simulated_scanner` starts
it on a real pseudo-terminal and yields the ``serial://`` URL the ordinary driver opens, so a
simulated table exercises the same code path as a real one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

from simulators.faults import FaultPlan


@dataclass(frozen=True, slots=True)
class Simulation:
    """How the simulated scanner behaves (``--simulate``).

    Attributes:
        seed: Seed of the shuffles (one fresh deck per round) and of the betting policy.
        cards: A scripted sequence of card values instead of shuffled decks.
        faults: Faults to inject on the simulated device and line.
        deal_delay: Seconds the simulated dealer takes per card.
        misreads_at: Card index -> misreads before its good read (deterministic faults),
            merged into ``faults``.
        profile: A device profile (``drivers/profiles``): the simulated device speaks it
            (:class:`simulators.line_device.LineDeviceSimulator`) and the driver is
            ``profile+serial://``. A profile without a cue command deals every
            ``deal_delay`` seconds (its dealer has no cue to wait for).
    """

    seed: int = 1
    cards: tuple[str, ...] | None = None
    faults: FaultPlan | None = None
    deal_delay: float = 0.4
    misreads_at: dict[int, int] = field(default_factory=dict)
    profile: str | None = None

    def fault_plan(self) -> FaultPlan:
        """The faults to inject, with ``misreads_at`` merged in."""
        plan = self.faults if self.faults is not None else FaultPlan()
        if self.misreads_at:
            plan = replace(plan, misreads_at={**plan.misreads_at, **self.misreads_at})
        return plan


@asynccontextmanager
async def simulated_scanner(game_id: str, sim: Simulation) -> AsyncIterator[str]:
    """Start the scanner simulator on a pseudo-terminal; yields the driver URL."""
    from simulators.scanner import ScannerSimulator, deck_for_game

    if sim.profile is not None:
        from drivers.profile import load_profile
        from simulators.line_device import LineDeviceSimulator

        loaded = load_profile(sim.profile)
        takes_cues = loaded.profile.commands.cue is not None
        device = LineDeviceSimulator(
            loaded,
            deck=deck_for_game(game_id),
            seed=sim.seed,
            cards=list(sim.cards) if sim.cards else None,
            faults=sim.fault_plan(),
            deal_delay=sim.deal_delay,
            interval=None if takes_cues else max(sim.deal_delay, 0.05),
        )
        async with device.serve_pty() as path:
            yield f"profile+serial://{path}?profile={sim.profile}"
        return
    simulator = ScannerSimulator(
        deck=deck_for_game(game_id),
        seed=sim.seed,
        cards=list(sim.cards) if sim.cards else None,
        faults=sim.fault_plan(),
        deal_delay=sim.deal_delay,
    )
    async with simulator.serve_pty() as path:
        yield f"serial://{path}"
