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
        broker_urls: The table's configured brokers (``--broker``): the simulated MQTT
            readers of ``--profile mqtt-json`` publish to the first (none: the broker the
            table would choose, started here and handed to the table).
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
    broker_urls: tuple[str, ...] = ()

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
    if sim.profile == MQTT_JSON:
        async with _mqtt_readers(game_id, sim) as devices:
            yield devices
        return
    if sim.profile == PEPPER_C1:
        async with _pepper_reader(game_id, sim) as devices:
            yield devices
        return
    if sim.profile == PCSC_UID:
        async with _pcsc_reader(game_id, sim) as devices:
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


MQTT_JSON = "mqtt-json"
"""``--profile mqtt-json``: MQTT-attached tag readers (``drivers/profiles/readers/``)."""


@asynccontextmanager
async def _mqtt_readers(game_id: str, sim: Simulation) -> AsyncIterator[SimulatedDevices]:
    """One simulated ESP32 reader a hand of the game, publishing to the table's broker.

    Each reader publishes on ``tablectl/readers/<hand>`` and takes cues on its ``/cmd``; the
    table reads each through its own ``mqtt-reader://`` URL (``[[devices]]``). The cards lie
    on their hand's antenna until the next round's first cue (the dealer collects them).
    Without ``--broker`` the broker is chosen as the table would (the local Mosquitto, else
    an embedded one started here) and handed to the table.
    """
    import contextlib as _contextlib
    import secrets

    from controller.broker import choose_broker, parse_broker_url
    from controller.games.registry import game_spec
    from drivers.reader_json import load_reader_setup
    from simulators.decks import deck_for_game
    from simulators.json_reader import JsonReaderSimulator

    table, times = load_reader_setup(MQTT_JSON, sim.codes)
    plan = game_spec(game_id).deal_plan
    readers = {
        f"hand-{hand}": [slot.name for slot in plan.slots if slot.hand == hand]
        for hand in plan.hands
    }
    device = JsonReaderSimulator(
        table,
        readers=readers,
        deck=deck_for_game(game_id),
        seed=sim.seed,
        cards=list(sim.cards) if sim.cards else None,
        faults=sim.fault_plan(),
        deal_delay=sim.deal_delay,
        collect=times.remove_after + 0.3,
    )
    async with _contextlib.AsyncExitStack() as stack:
        urls, embedded, protocol = await choose_broker(list(sim.broker_urls))
        if embedded is not None:
            await stack.enter_async_context(embedded)
        broker = parse_broker_url(urls[0])
        prefix = f"tablectl/readers/sim-{secrets.token_hex(3)}"
        topics = await stack.enter_async_context(
            device.serve_mqtt(broker.host, broker.port, prefix)
        )
        codes = f"&codes={sim.codes}" if sim.codes else ""
        devices: list[dict[str, Any]] = [
            {
                "name": name,
                "url": f"mqtt-reader://{broker.host}:{broker.port}/{topic}?cmd={cmd}{codes}",
                "positions": [name.removeprefix("hand-")],
            }
            for name, (topic, cmd) in topics.items()
        ]
        settings: dict[str, Any] = {"devices": devices}
        if not sim.broker_urls:
            settings["mqtt"] = {"urls": urls, "protocol": protocol}
        yield SimulatedDevices(settings, simulator=device)


PEPPER_C1 = "pepper-c1"
"""``--profile pepper-c1``: an Eccel Pepper C1 (``drivers/profiles/readers/pepper-c1.toml``)."""


@asynccontextmanager
async def _pepper_reader(game_id: str, sim: Simulation) -> AsyncIterator[SimulatedDevices]:
    """A simulated Pepper C1 on a pty, an antenna a hand of the game (up to 8).

    The table reads it through ``pepper+serial://PTY?antennas=1:HAND,...&cues=1``: each
    antenna bound to its hand (a card read on another hand's antenna is refused), the cues on
    the reader's UART passthrough, where the simulated dealer takes them. A game of more than
    eight hands is dealt on one antenna without positions. The cards lie on their antenna
    until the next round's first cue (the dealer collects them, the latch removes them).
    """
    from controller.games.registry import game_spec
    from drivers.reader_profile import load_reader_profile
    from simulators.decks import deck_for_game
    from simulators.pepper_reader import PepperReaderSimulator

    loaded = load_reader_profile(PEPPER_C1, sim.codes)
    plan = game_spec(game_id).deal_plan
    hands = list(plan.hands)
    antennas = {hand: number for number, hand in enumerate(hands, start=1)}
    if len(hands) > 8:
        antennas = {}
    device = PepperReaderSimulator(
        loaded.table,
        cards=list(sim.cards) if sim.cards else None,
        deck=[str(piece) for piece in deck_for_game(game_id)],
        seed=sim.seed,
        slot_antennas={slot.name: antennas[slot.hand] for slot in plan.slots if antennas},
        deal_delay=sim.deal_delay,
        relift_seconds=loaded.profile.presence.remove_after_ms / 1000 + 0.2,
    )
    async with device.serve_pty() as path:
        bound = ",".join(f"{number}:{hand}" for hand, number in antennas.items())
        query = f"cues=1&antennas={bound}" if bound else "cues=1"
        codes = f"&codes={sim.codes}" if sim.codes else ""
        url = f"pepper+serial://{path}?{query}{codes}"
        yield SimulatedDevices({"device": {"url": url}}, simulator=device)


PCSC_UID = "pcsc-uid"
"""``--profile pcsc-uid``: a PC/SC contactless reader through a real (private) pcscd."""


@asynccontextmanager
async def _pcsc_reader(game_id: str, sim: Simulation) -> AsyncIterator[SimulatedDevices]:
    """A virtual ACR122U on a private pcscd (vsmartcard-vpcd), read through pyscard.

    The table reads ``pcsc://?reader=ACS ACR122U&pcscd=SOCKET`` exactly as a real reader:
    pcscd, libpcsclite and pyscard are the real ones; only the tag is ours
    (``simulators/vpcd.py``). A PC/SC reader takes no cues, so the dealer deals on its own
    (:class:`simulators.pcsc_dealer.PcscDealer`): a card every ``deal_delay`` seconds (at
    least 0.5 s: pcscd polls the field every 400 ms), lifted after its read.
    """
    import asyncio
    from urllib.parse import quote

    from drivers.reader_profile import load_reader_profile
    from simulators.decks import deck_for_game
    from simulators.pcsc_dealer import PcscDealer
    from simulators.pcscd import PrivatePcscd
    from simulators.vpcd import VirtualCard

    loaded = load_reader_profile(PCSC_UID, sim.codes)
    daemon = PrivatePcscd("ACS ACR122U")
    await daemon.start()
    try:
        slot = daemon.slot("ACS ACR122U")
        dealer = PcscDealer(
            VirtualCard("127.0.0.1", slot.port),
            loaded.table,
            [str(piece) for piece in deck_for_game(game_id)],
            seed=sim.seed,
            cards=list(sim.cards) if sim.cards else None,
            interval=max(sim.deal_delay, 0.5),
        )
        codes = f"&codes={quote(sim.codes)}" if sim.codes else ""
        url = f"pcsc://?reader={quote(slot.name)}&pcscd={quote(str(daemon.socket_path))}{codes}"
        task = asyncio.create_task(dealer.run(), name="pcsc-sim-dealer")
        try:
            yield SimulatedDevices({"device": {"url": url}}, simulator=dealer)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    finally:
        await daemon.close()
