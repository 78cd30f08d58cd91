"""A simulated table's scanner: what ``tablectl run --simulate`` and the tests start.

:class:`Simulation` says how the simulated scanner behaves; :func:`simulated_scanner` starts
it on a real pseudo-terminal and yields the ``serial://`` URL the ordinary driver opens, so a
simulated table exercises the same code path as a real one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal

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
            ``deal_delay`` seconds (its dealer has no cue to wait for). A position reader's
            profile (``position_reader = true``: ``rfid-ntag``) makes a multi-reader table:
            one simulated reader a hand of the game, each on its own pty, bound to the
            hand's slots (``[[devices]]``).
        codes: A code table file replacing the profile's (the URL's ``codes=``: an enrolled
            deck; ``codes/rfid-demo-tiles.toml`` for Mahjong on ``rfid-ntag``).
        hid: With a profile: the device is a USB HID scanner in this mode (``pos`` or
            ``kbd``) on the simulated pyusb backend, read through ``hidpos://`` or
            ``hidkbd://``; it takes no cues, so its dealer deals every ``deal_delay``
            seconds.
        wrong_reader_at: On a multi-reader table, 0-based indices of cards (in dealing
            order) the dealer first puts on the wrong reader.
    """

    seed: int = 1
    cards: tuple[str, ...] | None = None
    faults: FaultPlan | None = None
    deal_delay: float = 0.4
    misreads_at: dict[int, int] = field(default_factory=dict)
    profile: str | None = None
    codes: str | None = None
    hid: Literal["pos", "kbd"] | None = None
    wrong_reader_at: tuple[int, ...] = ()

    def fault_plan(self) -> FaultPlan:
        """The faults to inject, with ``misreads_at`` merged in."""
        plan = self.faults if self.faults is not None else FaultPlan()
        if self.misreads_at:
            plan = replace(plan, misreads_at={**plan.misreads_at, **self.misreads_at})
        return plan


@asynccontextmanager
async def simulated_scanner(
    game_id: str, sim: Simulation, *, memory: str | None = None
) -> AsyncIterator[str]:
    """Start the scanner simulator on a pseudo-terminal; yields the driver URL.

    ``memory``: serve the framed scanner on the in-memory null modem under that name instead
    (``memory://NAME``, ``drivers/memory.py``: the fast test tier); not for a device profile.
    """
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
    if memory is not None:
        async with simulator.serve_memory(memory) as url:
            yield url
        return
    async with simulator.serve_pty() as path:
        yield f"serial://{path}"


@dataclass(frozen=True, slots=True)
class SimulatedDevices:
    """What a simulated table's settings get, and the USB backend its driver needs.

    Attributes:
        settings: ``{"device": {"url": ...}}`` or ``{"devices": [{"name", "url",
            "positions"}, ...]}``, merged into the table's settings.
        usb_backend: The simulated pyusb backend (a HID scanner), else ``None``.
        simulator: The device simulator (for its statistics).
    """

    settings: dict[str, Any]
    usb_backend: Any = None
    simulator: Any = None


@asynccontextmanager
async def simulated_devices(game_id: str, sim: Simulation) -> AsyncIterator[SimulatedDevices]:
    """The simulated table's device(s), started: one scanner, a HID scanner, or readers.

    A position reader's profile (``position_reader``) deals on one reader a hand of the
    game; ``hid`` puts the profile's codes on a simulated USB HID scanner; otherwise as
    :func:`simulated_scanner`.
    """
    if sim.profile is not None and sim.hid is not None:
        async with _hid_scanner(game_id, sim) as devices:
            yield devices
        return
    if sim.profile is not None:
        from drivers.profile import load_profile

        loaded = load_profile(sim.profile, sim.codes)
        if loaded.profile.position_reader:
            async with _readers(game_id, sim, loaded) as devices:
                yield devices
            return
    async with simulated_scanner(game_id, sim) as url:
        yield SimulatedDevices({"device": {"url": url}})


def _profile_query(sim: Simulation) -> str:
    codes = f"&codes={sim.codes}" if sim.codes else ""
    return f"profile={sim.profile}{codes}"


@asynccontextmanager
async def _readers(game_id: str, sim: Simulation, loaded: Any) -> AsyncIterator[SimulatedDevices]:
    """One reader a hand of the game, each on its own pty, one dealer for them all."""
    from controller.games.registry import game_spec
    from simulators.decks import deck_for_game
    from simulators.multi_reader import MultiReaderSimulator

    plan = game_spec(game_id).deal_plan
    readers = {
        f"hand-{hand}": [slot.name for slot in plan.slots if slot.hand == hand]
        for hand in plan.hands
    }
    device = MultiReaderSimulator(
        loaded,
        readers,
        wrong_reader_at=frozenset(sim.wrong_reader_at),
        deck=deck_for_game(game_id),
        seed=sim.seed,
        cards=list(sim.cards) if sim.cards else None,
        faults=sim.fault_plan(),
        deal_delay=sim.deal_delay,
    )
    async with device.serve_ptys() as links:
        devices = [
            {
                "name": name,
                "url": f"profile+serial://{links[name]}?{_profile_query(sim)}",
                "positions": [name.removeprefix("hand-")],
            }
            for name in readers
        ]
        yield SimulatedDevices({"devices": devices}, simulator=device)


@asynccontextmanager
async def _hid_scanner(game_id: str, sim: Simulation) -> AsyncIterator[SimulatedDevices]:
    """A USB HID scanner on the simulated pyusb backend, dealing every ``deal_delay`` s."""
    import asyncio

    from drivers.profile import load_profile
    from simulators.decks import deck_for_game
    from simulators.usb import VENDOR_ID, HidScannerSimulator, SimulatedUsbBackend

    assert sim.profile is not None
    assert sim.hid is not None
    loaded = load_profile(sim.profile, sim.codes)
    backend = SimulatedUsbBackend(hid=sim.hid)
    scanner = HidScannerSimulator(backend, loaded, [])
    deck = [str(piece) for piece in deck_for_game(game_id)]
    url = f"hid{sim.hid}://{VENDOR_ID:04x}:{backend.product_id:04x}?{_profile_query(sim)}"
    task = asyncio.create_task(
        scanner.free_run(max(sim.deal_delay, 0.05), deck, sim.seed), name="hid-sim-dealer"
    )
    try:
        yield SimulatedDevices({"device": {"url": url}}, usb_backend=backend, simulator=scanner)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
