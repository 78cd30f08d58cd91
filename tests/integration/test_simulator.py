"""The scanner simulator on a real pty and on TCP, read through the real driver."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from controller.cards import Deck
from drivers.codec import ExpectFrame, LedColor, LedFrame, RejectFrame, RescanFrame
from drivers.serial_source import SerialCardSource
from drivers.source import (
    CardRead,
    CardRemoved,
    CardSource,
    DeviceStatus,
    DriverSettings,
    Misread,
    open_card_source,
)
from simulators.errors import SimulatorConfigError
from simulators.scanner import FaultPlan, ScannerSimulator, deck_for_game

SETTINGS = DriverSettings(read_timeout=0.05, heartbeat_timeout=5.0)
REPO = Path(__file__).resolve().parents[2]


def fast_sim(**kwargs: object) -> ScannerSimulator:
    defaults: dict[str, object] = {
        "deal_delay": 0.0,
        "ack_timeout": 0.05,
        "heartbeat_interval": 0.05,
    }
    defaults.update(kwargs)
    return ScannerSimulator(**defaults)  # type: ignore[arg-type]


class Host:
    """What the orchestrator will do: cue each slot, rescan misreads, collect the cards."""

    def __init__(self, source: CardSource) -> None:
        self.source = source
        self.misreads: list[Misread] = []
        self.statuses: list[DeviceStatus] = []

    async def card(self) -> CardRead:
        """The next card read; device misreads and gaps are answered with a RESCAN."""
        while True:
            read = await self.source.next_read()
            if isinstance(read, CardRead):
                return read
            if isinstance(read, DeviceStatus):
                self.statuses.append(read)
                continue
            assert not isinstance(read, CardRemoved), read  # the framed scanner is not latched
            self.misreads.append(read)
            if read.cause in ("device", "gap"):
                await self.source.request_rescan("X", f"misread ({read.cause})")

    async def deal(self, round_no: int, slots: Sequence[str]) -> list[CardRead]:
        reads = []
        for index, slot in enumerate(slots):
            await self.source.expect(round_no, index, slot)
            reads.append(await self.card())
        return reads

    def causes(self, cause: str) -> int:
        return sum(1 for misread in self.misreads if misread.cause == cause)


SLOTS = ["A1", "B1", "A2", "B2", "A3", "B3"]


async def test_pty_scripted_cards_with_faults() -> None:
    script = ["As", "Kd", "Kd", "JK", "5p", "Tc", "2h", "9s", "Qh", "3c", "7d", "wd"]
    faults = FaultPlan(misreads_at={0: 1, 3: 2, 7: 1}, garbage_rate=0.3, corrupt_rate=0.2, seed=11)
    sim = fast_sim(cards=script, faults=faults)
    async with asyncio.timeout(30), sim.serve_pty() as path:
        source = open_card_source(f"serial://{path}", SETTINGS)
        assert isinstance(source, SerialCardSource)
        await source.open()
        host = Host(source)
        try:
            reads = await host.deal(1, SLOTS) + await host.deal(2, SLOTS)
        finally:
            await source.close()
    assert [read.value for read in reads] == script  # exactly the script, duplicates kept
    assert sim.dealt == script
    assert host.causes("device") == 4 == sim.stats.misreads_sent
    assert host.causes("gap") == 0
    assert host.causes("malformed") == 0
    # Every corrupted frame (sent while the port was open) shows as a CRC misread; garbage
    # can add a few more but never invents a card.
    assert sim.stats.corrupted > 0
    assert sim.stats.garbage_bursts > 0
    assert 0 < host.causes("crc") <= sim.stats.corrupted + sim.stats.garbage_bursts
    assert source.garbage_bytes > 0
    assert [read.device_seq for read in reads] == sorted(read.device_seq for read in reads)


async def test_tcp_seeded_rounds_follow_the_documented_shuffle() -> None:
    sim = fast_sim(seed=42, faults=FaultPlan(misread_rate=0.3, seed=5))
    async with asyncio.timeout(30), sim.serve_tcp("127.0.0.1", 0) as (host_name, port):
        source = open_card_source(f"socket://{host_name}:{port}", SETTINGS)
        assert isinstance(source, SerialCardSource)
        await source.open()
        host = Host(source)
        try:
            first = await host.deal(7, SLOTS)
            second = await host.deal(8, SLOTS[:3])
        finally:
            await source.close()
    expected: list[str] = []
    for round_no, count in ((7, 6), (8, 3)):
        shoe = [str(piece) for piece in Deck.standard()]
        random.Random(f"42:{round_no}").shuffle(shoe)
        expected += shoe[:count]
    assert [read.value for read in first + second] == expected
    assert host.causes("device") == sim.stats.misreads_sent > 0
    assert host.statuses
    assert host.statuses[0].state == "boot"


async def test_rescan_reject_and_repeated_expect() -> None:
    sim = fast_sim(cards=["As", "As", "Kd", "Qc"])
    async with asyncio.timeout(20), sim.serve_pty() as path:
        source = open_card_source(path, SETTINGS)
        assert isinstance(source, SerialCardSource)
        await source.open()
        host = Host(source)
        try:
            await source.expect(1, 0, "A1")
            assert (await host.card()).value == "As"
            await source.request_rescan("A1", "bounce check")  # the same physical card
            assert (await host.card()).value == "As"
            await source.expect(1, 1, "B1")
            duplicate = await host.card()
            assert duplicate.value == "As"  # the scripted duplicate
            await source.reject("B1", "duplicate")
            await source.led(LedColor.RED, duration_ms=500)
            await source.expect(1, 1, "B1")  # same slot again: a new card
            assert (await host.card()).value == "Kd"
            await source.expect(1, 1, "B1")  # repeated cue for a dealt slot: ignored
            await source.expect(1, 2, "A2")
            assert (await host.card()).value == "Qc"
        finally:
            await source.close()
    assert sim.dealt == ["As", "As", "As", "Kd", "Qc"]
    assert sim.rejected == ["As"]
    assert sim.stats.ignored == 1
    commands = list(sim.host_commands())
    assert isinstance(commands[1], RescanFrame)
    assert isinstance(commands[3], RejectFrame)
    assert LedFrame(seq=commands[4].seq, color=LedColor.RED, duration_ms=500) == commands[4]
    assert sum(isinstance(frame, ExpectFrame) for frame in commands) == 5


async def test_repeated_frames_are_dropped() -> None:
    sim = fast_sim(cards=["2c", "3c", "4c"], faults=FaultPlan(duplicate_rate=1.0))
    async with asyncio.timeout(20), sim.serve_pty() as path:
        source = open_card_source(path, SETTINGS)
        assert isinstance(source, SerialCardSource)
        await source.open()
        try:
            reads = await Host(source).deal(1, SLOTS[:3])
        finally:
            await source.close()
    assert [read.value for read in reads] == ["2c", "3c", "4c"]
    # Each card went out twice; the copies of the boot status may have gone out before the
    # port was opened (a pty drops what was written before open).
    assert sim.stats.duplicates_sent >= 4
    assert source.stats.duplicates >= 3


async def test_frames_given_up_surface_as_gaps_and_the_rescan_recovers() -> None:
    # Every transmission is corrupted with probability 0.5 and never retransmitted: lost
    # cards must come back through gap -> RESCAN, in order, none invented.
    script = ["As", "Kd", "Qh", "Jc", "Ts", "9d"]
    sim = fast_sim(cards=script, faults=FaultPlan(corrupt_rate=0.5, seed=3), max_retransmits=0)
    async with asyncio.timeout(30), sim.serve_pty() as path:
        source = open_card_source(path, SETTINGS)
        assert isinstance(source, SerialCardSource)
        await source.open()
        host = Host(source)
        try:
            values: list[str] = []
            for index, slot in enumerate(SLOTS):
                await source.expect(1, index, slot)
                read = await host.card()
                # A rescan after a (possibly false) gap may deliver the last card again:
                # a bounce, as the orchestrator treats it.
                while values and read.value == values[-1]:
                    read = await host.card()
                values.append(read.value)
        finally:
            await source.close()
    assert values == script
    assert sim.stats.gave_up
    assert host.causes("gap") > 0
    assert set(sim.dealt) == set(script)


async def test_free_run_without_cues() -> None:
    sim = fast_sim(deck=deck_for_game("mahjong-pai-gow"), seed=9, interval=0.01)
    async with asyncio.timeout(20), sim.serve_pty() as path:
        source = open_card_source(path, SETTINGS)
        assert isinstance(source, SerialCardSource)
        await source.open()
        host = Host(source)
        try:
            reads = [await host.card() for _ in range(25)]  # more than one 20-tile set
        finally:
            await source.close()
    values = [read.value for read in reads]
    assert values == sim.dealt[:25]
    first_set = sorted(values[:20])
    assert first_set == sorted(str(tile) for tile in Deck.mahjong_pai_gow())


async def test_reset_sends_boot_and_restarts_sequence() -> None:
    sim = fast_sim(cards=["As", "Kd"])
    async with asyncio.timeout(20), sim.serve_pty() as path:
        source = open_card_source(path, SETTINGS)
        assert isinstance(source, SerialCardSource)
        await source.open()
        host = Host(source)
        try:
            await source.expect(1, 0, "A1")
            assert (await host.card()).value == "As"
            await source.reset()
            read = await source.next_read()
            while not isinstance(read, DeviceStatus):
                read = await source.next_read()
            assert read.state == "boot"
            assert "reset" in read.detail
            await source.expect(1, 1, "B1")
            card = await host.card()
            assert (card.value, card.device_seq) == ("Kd", 1)
        finally:
            await source.close()
    assert source.stats.gaps == 0


async def test_positions_and_as_task_in_taskgroup() -> None:
    sim = fast_sim(cards=["wd"], positions=True)
    ready: asyncio.Queue[str] = asyncio.Queue()
    async with asyncio.timeout(20):
        async with asyncio.TaskGroup() as group:
            task = group.create_task(sim.run_pty(ready.put_nowait))
            path = await ready.get()
            source = open_card_source(path, SETTINGS)
            await source.open()
            try:
                await source.expect(4, 0, "seat3")
                read = await Host(source).card()
            finally:
                await source.close()
            task.cancel()
    assert (read.value, read.position) == ("wd", "seat3")


def test_config_errors() -> None:
    with pytest.raises(SimulatorConfigError, match="misread_rate"):
        FaultPlan(misread_rate=1.5)
    with pytest.raises(SimulatorConfigError, match="empty"):
        ScannerSimulator(cards=[])
    with pytest.raises(SimulatorConfigError, match="CARD frame"):
        ScannerSimulator(cards=["A s"])
    with pytest.raises(SimulatorConfigError, match="unknown game"):
        deck_for_game("baccarat")
    assert len(deck_for_game("break-poker")) == 53


def _python_with_repo() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    return env


@contextlib.asynccontextmanager
async def scanner_process(
    args: list[str],
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """The simulator's command line in a subprocess, and the pty path it printed; killed on
    the way out if it is still running."""
    process = await asyncio.create_subprocess_exec(
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env=_python_with_repo(),
    )
    try:
        assert process.stdout is not None
        path = (await process.stdout.readline()).decode().strip()
        yield process, path
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize(
    "command",
    [
        [str(Path(sys.executable).with_name("tablectl"))],
        [sys.executable, "-m", "simulators.cli"],
    ],
    ids=["tablectl", "python-m"],
)
async def test_cli_subprocess_on_a_pty(command: list[str]) -> None:
    args = [*command, "simulate-scanner", "--pty", "--cards", "Ah 7s"]
    args += ["--deal-delay", "0", "--ack-timeout", "0.05", "--heartbeat", "0.1"]
    async with asyncio.timeout(30), scanner_process(args) as (process, path):
        assert path.startswith("/dev/"), path
        source = open_card_source(f"serial://{path}", SETTINGS)
        assert isinstance(source, SerialCardSource)
        await source.open()
        try:
            cards = await Host(source).deal(1, ["A1", "B1"])
        finally:
            await source.close()
        assert [card.value for card in cards] == ["Ah", "7s"]
        process.terminate()
        _, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        assert b"dealt 2 card(s)" in err


def test_cli_refuses_bad_options() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "simulators.cli", "simulate-scanner", "--misread-rate", "2"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_python_with_repo(),
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "between 0 and 1" in result.stderr


def test_cli_refuses_a_bad_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.toml"
    scenario.write_text('cards = ["As"]\n\n[[fault]]\nat_card = 1\nkind = "explode"\n')
    result = subprocess.run(
        [sys.executable, "-m", "simulators.cli", "simulate-scanner", "--scenario", str(scenario)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_python_with_repo(),
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert f"{scenario}:5 (fault[1].kind): unknown fault kind 'explode'" in result.stderr


def _is_link(path: str) -> bool:
    return os.path.islink(path)


async def test_cli_scenario_with_unplug_on_a_pty() -> None:
    scenario = REPO / "simulators" / "scenarios" / "cable-pulled.toml"
    args = [sys.executable, "-m", "simulators.cli", "simulate-scanner", "--scenario"]
    args += [str(scenario), "--unplug-seconds", "0.2", "--deal-delay", "0"]
    args += ["--ack-timeout", "0.05", "--heartbeat", "0.05"]
    async with asyncio.timeout(30), scanner_process(args) as (process, path):
        assert _is_link(path), path  # unplugs need a stable link to the pty
        source = open_card_source(f"serial://{path}", SETTINGS)
        await source.open()
        try:
            cards = await Host(source).deal(1, ["A1", "B1", "C1"])
        finally:
            await source.close()
        assert [card.value for card in cards] == ["Ah", "3s", "Tc"]
        process.terminate()
        await process.communicate()
        assert process.returncode == 0
