"""The supervisor with real unplugs: a pty that closes and comes back behind its link, a TCP
listener that goes away, a USB device that leaves enumeration, and a heartbeat that stops."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator

import pytest

from drivers.errors import DeviceAway, TransportError
from drivers.source import CardRead, DeviceStatus, DriverSettings, Read
from drivers.supervisor import SupervisedCardSource, backoff_delay
from simulators.scanner import FaultPlan, ScannerSimulator
from simulators.usb import PRODUCT_ID, VENDOR_ID

SETTINGS = DriverSettings(
    open_timeout=2.0,
    read_timeout=0.05,
    heartbeat_timeout=0.5,
    backoff_min=0.05,
    backoff_max=0.4,
    usb_poll_timeout=0.02,
)


def test_backoff_is_exponential_capped_and_jittered() -> None:
    fixed = random.Random(0)
    plain = [backoff_delay(n, 0.1, 2.0, 0.0, fixed) for n in range(8)]
    assert plain == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]
    draws = [backoff_delay(3, 0.1, 2.0, 0.5, random.Random(seed)) for seed in range(200)]
    assert all(0.4 <= draw <= 0.8 for draw in draws)
    assert max(draws) - min(draws) > 0.3  # spread, so tables do not reconnect in step
    assert backoff_delay(10_000, 0.1, 2.0, 0.0, fixed) == 2.0


def test_backoff_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="backoff_max"):
        DriverSettings(backoff_min=2.0, backoff_max=1.0)
    with pytest.raises(ValueError, match="backoff needs"):
        SupervisedCardSource("socket://127.0.0.1:1", SETTINGS, backoff_min=1.0, backoff_max=0.5)


def simulator(cards: list[str], faults: FaultPlan) -> ScannerSimulator:
    """A fast simulated scanner (no deal delay, short ACK timeout and heartbeat)."""
    return ScannerSimulator(
        cards=cards, faults=faults, deal_delay=0.0, ack_timeout=0.05, heartbeat_interval=0.05
    )


@contextlib.asynccontextmanager
async def served(sim: ScannerSimulator, transport: str) -> AsyncIterator[SupervisedCardSource]:
    """The simulator on ``transport`` and a supervised source on it, opened (closed after)."""
    async with _serving(sim, transport) as source:
        await source.open()
        try:
            yield source
        finally:
            await source.close()


@contextlib.asynccontextmanager
async def _serving(sim: ScannerSimulator, transport: str) -> AsyncIterator[SupervisedCardSource]:
    if transport == "pty":
        async with sim.serve_pty() as path:
            yield SupervisedCardSource(f"serial://{path}", SETTINGS, rng=random.Random(1))
    elif transport == "tcp":
        async with sim.serve_tcp() as (host, port):
            yield SupervisedCardSource(f"socket://{host}:{port}", SETTINGS, rng=random.Random(1))
    else:
        async with sim.serve_usb() as backend:
            url = f"usb://{VENDOR_ID:04x}:{PRODUCT_ID:04x}"
            yield SupervisedCardSource(url, SETTINGS, usb_backend=backend, rng=random.Random(1))


async def next_card(source: SupervisedCardSource, seen: list[Read]) -> CardRead:
    while True:
        read = await source.next_read()
        seen.append(read)
        if isinstance(read, CardRead):
            return read


@pytest.mark.parametrize("transport", ["pty", "tcp", "usb"])
async def test_unplug_and_replug(transport: str) -> None:
    """The cable is out for 0.6 s as the 2nd card is dealt: lost, commands refused with
    DeviceAway, then recovered after several attempts, and the card arrives once."""
    sim = simulator(["As", "Kd", "Qc"], FaultPlan(unplug_every=2, unplug_seconds=0.6))
    seen: list[Read] = []
    async with asyncio.timeout(15), served(sim, transport) as source:
        await source.expect(1, 0, "A")
        assert (await next_card(source, seen)).value == "As"
        await source.expect(1, 1, "B")
        lost = await source.next_read()
        assert isinstance(lost, DeviceStatus) and lost.state == "lost", lost
        lost_at = time.monotonic()
        assert source.state == "away"
        with pytest.raises(DeviceAway) as info:
            await source.led(0)  # type: ignore[arg-type]
        assert info.value.context["command"] == "led"
        recovered = await source.next_read()
        assert isinstance(recovered, DeviceStatus) and recovered.state == "recovered"
        away = time.monotonic() - lost_at
        assert 0.4 < away < 3.0, away
        assert "attempt(s)" in recovered.detail and "lost:" in recovered.detail
        await source.expect(1, 1, "B")  # the orchestrator cues again after recovered
        assert (await next_card(source, seen)).value == "Kd"
        await source.expect(1, 2, "C")
        assert (await next_card(source, seen)).value == "Qc"
    states = [read.state for read in seen if isinstance(read, DeviceStatus)]
    assert states[0] == "connected"
    assert (source.losses, source.reconnects) == (1, 1)
    assert [read.value for read in seen if isinstance(read, CardRead)] == ["As", "Kd", "Qc"]


@pytest.mark.parametrize("transport", ["tcp", "usb"])
async def test_heartbeat_stop_is_a_loss_until_heartbeats_return(transport: str) -> None:
    sim = simulator(["As", "Kd"], FaultPlan(heartbeat_stop_after=1, heartbeat_stop_seconds=1.2))
    seen: list[Read] = []
    async with asyncio.timeout(15), served(sim, transport) as source:
        await source.expect(1, 0, "A")
        assert (await next_card(source, seen)).value == "As"
        started = time.monotonic()
        lost = await source.next_read()
        assert isinstance(lost, DeviceStatus) and lost.state == "lost"
        assert "heartbeat" in lost.detail
        recovered = await source.next_read()
        assert isinstance(recovered, DeviceStatus) and recovered.state == "recovered"
        # Not before the heartbeats came back: a reopened port alone is not recovery.
        assert time.monotonic() - started >= 1.0
        await source.expect(1, 1, "B")
        assert (await next_card(source, seen)).value == "Kd"


async def test_first_open_fails_clearly_and_close_stops() -> None:
    source = SupervisedCardSource("socket://127.0.0.1:9", SETTINGS)
    with pytest.raises(TransportError, match="cannot open"):
        await source.open()
    assert source.state == "closed"
    with pytest.raises(TransportError, match="not open"):
        await source.next_read()


async def test_cancelled_read_keeps_the_backoff_going() -> None:
    """The orchestrator cancels next_read on its own timeouts: the reconnection resumes."""
    sim = simulator(["As"], FaultPlan(unplug_every=1, unplug_seconds=0.5))
    async with asyncio.timeout(15), served(sim, "tcp") as source:
        await source.expect(1, 0, "A")
        states: list[str] = []
        card = None
        while card is None:
            try:
                read = await asyncio.wait_for(source.next_read(), 0.03)
            except TimeoutError:
                continue
            if isinstance(read, DeviceStatus):
                states.append(read.state)
                if read.state == "recovered":
                    await source.expect(1, 0, "A")
            elif isinstance(read, CardRead):
                card = read
        assert card.value == "As"
        assert [s for s in states if s in ("lost", "recovered")] == ["lost", "recovered"]
