"""The card-source contract, against every transport and every fault the simulator makes.

Whatever carries the bytes (a real pty, TCP, the USB driver on the simulated pyusb backend,
or a physical device named by ``TABLECTL_HW_URL``) and whatever goes wrong on the way, the
reads that come out of the supervised source are exactly the cards that went in, in order:
every misread comes out as a ``Misread`` (answered with RESCAN, as the orchestrator does),
a double read is a bounce (same value within the bounce window), and nothing is invented.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from drivers.errors import DeviceAway
from drivers.source import CardRead, DeviceStatus, DriverSettings, Misread
from drivers.supervisor import SupervisedCardSource
from simulators.scanner import FaultPlan, ScannerSimulator
from simulators.usb import PRODUCT_ID, VENDOR_ID

SETTINGS = DriverSettings(
    open_timeout=2.0,
    read_timeout=0.05,
    heartbeat_timeout=0.5,
    backoff_min=0.02,
    backoff_max=0.2,
    usb_poll_timeout=0.02,
)
CARDS = ["As", "Kd", "7h", "2c", "Qs", "9d", "Th", "3c", "Jd"]
BOUNCE_SECONDS = 0.5

FAULTS: dict[str, FaultPlan] = {
    "clean": FaultPlan(),
    "misreads": FaultPlan(misread_rate=0.25, misreads_at={2: 2}, seed=1),
    "garbage": FaultPlan(garbage_rate=0.5, seed=2),
    "corrupt": FaultPlan(corrupt_rate=0.3, seed=3),
    "double-read": FaultPlan(double_read_rate=0.5, seed=4),
    "repeats": FaultPlan(duplicate_rate=0.5, seed=5),
    "loss": FaultPlan(loss_rate=0.3, seed=6),
    "delay": FaultPlan(delay=0.03, seed=7),
    "byte-by-byte": FaultPlan(byte_by_byte=True),
    "unplug": FaultPlan(unplug_every=4, unplug_seconds=0.15),
    "heartbeat-stop": FaultPlan(heartbeat_stop_after=3, heartbeat_stop_seconds=0.8),
    "everything": FaultPlan(
        misread_rate=0.15,
        garbage_rate=0.2,
        corrupt_rate=0.15,
        loss_rate=0.15,
        double_read_rate=0.2,
        duplicate_rate=0.2,
        delay=0.01,
        unplug_every=5,
        unplug_seconds=0.1,
        seed=8,
    ),
}


SLOW_DEALER = {"heartbeat-stop": 0.1}
"""Faults that show only when the dealer takes time (a silence is noticed while waiting)."""


@dataclass
class Outcome:
    """What the emulated orchestrator saw."""

    cards: list[str] = field(default_factory=list)
    misreads: list[Misread] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    bounces: int = 0


async def command(call: Any) -> bool:
    """Send a command to the device; ``False`` if it is away (sent again after "recovered")."""
    try:
        await call
    except DeviceAway:
        return False
    return True


def is_bounce(read: CardRead, last: CardRead | None) -> bool:
    """The same card again within the bounce time: the same physical card read twice."""
    return last is not None and read.value == last.value and read.at - last.at <= BOUNCE_SECONDS


async def play(source: SupervisedCardSource, count: int, round_no: int = 1) -> Outcome:
    """What the orchestrator does: cue each slot, rescan misreads, ignore bounces, and cue
    again (and rescan again) after the device recovered."""
    out = Outcome()
    slot = 0
    last: CardRead | None = None
    owe_rescan = False
    await command(source.expect(round_no, slot, f"S{slot}"))
    while len(out.cards) < count:
        read = await source.next_read()
        if isinstance(read, DeviceStatus):
            out.statuses.append(read.state)
            if read.state == "recovered":
                await command(source.expect(round_no, slot, f"S{slot}"))
                if owe_rescan:
                    owe_rescan = not await command(source.request_rescan(f"S{slot}", "again"))
            continue
        if isinstance(read, Misread):
            out.misreads.append(read)
            if read.cause in ("device", "gap"):
                owe_rescan = not await command(source.request_rescan(f"S{slot}", "misread"))
            continue
        if is_bounce(read, last):
            out.bounces += 1
            continue
        out.cards.append(read.value)
        last = read
        owe_rescan = False
        slot += 1
        if slot < count:
            await command(source.expect(round_no, slot, f"S{slot}"))
    return out


@contextlib.asynccontextmanager
async def served(sim: ScannerSimulator, transport: str) -> AsyncIterator[SupervisedCardSource]:
    if transport == "pty":
        async with sim.serve_pty() as path:
            yield SupervisedCardSource(f"serial://{path}", SETTINGS)
    elif transport == "tcp":
        async with sim.serve_tcp() as (host, port):
            yield SupervisedCardSource(f"socket://{host}:{port}", SETTINGS)
    else:
        async with sim.serve_usb() as backend:
            url = f"usb://{VENDOR_ID:04x}:{PRODUCT_ID:04x}"
            yield SupervisedCardSource(url, SETTINGS, usb_backend=backend)


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("transport", ["pty", "tcp", "usb"])
async def test_contract(transport: str, fault: str) -> None:
    plan = FAULTS[fault]
    sim = ScannerSimulator(
        cards=CARDS,
        faults=plan,
        deal_delay=SLOW_DEALER.get(fault, 0.0),
        ack_timeout=0.05,
        heartbeat_interval=0.05,
    )
    async with asyncio.timeout(30), served(sim, transport) as source:
        await source.open()
        try:
            out = await play(source, len(CARDS))
        finally:
            await source.close()

    # Exactly the cards that went in, in order; nothing invented.
    assert out.cards == sim.drawn == CARDS
    # Every misread the device made came out as one Misread(device); the link recovered
    # everything else by retransmission, so no frame was ever reported lost.
    device_misreads = [m for m in out.misreads if m.cause == "device"]
    assert len(device_misreads) == sim.stats.misreads_sent
    assert [m for m in out.misreads if m.cause == "gap"] == []
    # A double read is one bounce, never a second card.
    assert out.bounces == sim.stats.double_reads
    assert out.statuses[0] == "connected"
    # The device's absences are reported, each lost followed by recovered.
    away = [s for s in out.statuses if s in ("lost", "recovered")]
    assert away == ["lost", "recovered"] * (len(away) // 2)
    if plan.unplug_every is not None or plan.heartbeat_stop_after is not None:
        assert source.losses >= 1
        assert source.reconnects == source.losses
    if fault == "clean":
        assert source.losses == 0 and out.misreads == [] and out.bounces == 0
    # The injected faults did happen (the parametrization tests what it says).
    stats = sim.stats
    expected_activity = {
        "misreads": stats.misreads_sent,
        "garbage": stats.garbage_bursts,
        "corrupt": stats.corrupted,
        "double-read": stats.double_reads,
        "repeats": stats.duplicates_sent,
        "loss": stats.lost,
        "unplug": stats.unplugs,
        "heartbeat-stop": stats.heartbeat_stops,
    }
    if fault in expected_activity:
        assert expected_activity[fault] > 0


@pytest.mark.hardware
async def test_contract_on_hardware() -> None:
    """A physical scanner: deal the cards listed in ``TABLECTL_HW_CARDS`` in that order.

    Faults cannot be injected into real hardware from here; a person (or a robot arm) deals,
    and may pull the cable or cover the window while doing it.
    """
    url = os.environ.get("TABLECTL_HW_URL")
    if not url:
        pytest.skip("TABLECTL_HW_URL is not set: no physical scanner to test")
    cards = os.environ.get("TABLECTL_HW_CARDS", "").replace(",", " ").split()
    if not cards:
        pytest.fail("TABLECTL_HW_CARDS must list the cards to deal, in order", pytrace=False)
    source = SupervisedCardSource(url, DriverSettings())
    await source.open()
    try:
        async with asyncio.timeout(float(os.environ.get("TABLECTL_HW_SECONDS", "300"))):
            out = await play(source, len(cards))
    finally:
        await source.close()
    assert out.cards == cards
