"""Scenario files (loading, errors naming file, line and field), the shipped scenarios
replayed end to end, the fault options of the CLIs, and the resumable shoe."""

from __future__ import annotations

import argparse
import asyncio
import random
from pathlib import Path

import pytest

from drivers.source import CardRead, CardRemoved, DeviceStatus, DriverSettings, Misread
from drivers.supervisor import SupervisedCardSource
from simulators.cli import add_fault_arguments, fault_plan_from_args, scenario_from_args
from simulators.errors import SimulatorConfigError
from simulators.scanner import CardFault, FaultPlan, ScannerSimulator
from simulators.scenario import ScenarioError, load_scenario, shipped_scenarios

SETTINGS = DriverSettings(
    read_timeout=0.05, heartbeat_timeout=0.5, backoff_min=0.05, backoff_max=0.3
)


def test_shipped_scenarios_load() -> None:
    names = {path.stem: load_scenario(path) for path in shipped_scenarios()}
    assert {"worn-card", "cable-pulled", "noisy-line"} <= set(names)
    worn = names["worn-card"]
    assert worn.faults.script == (CardFault(at=2, kind="misread", times=3),)
    assert worn.game == "teen-patti-20-20" and len(worn.cards) == 6
    assert names["cable-pulled"].faults.unplugs


@pytest.mark.parametrize(
    ("body", "line", "field", "reason"),
    [
        ('cards = ["As"]\nbogus = 1\n', 2, "bogus", "unknown key"),
        ('cards = "As Kd"\n', 1, "cards", "non-empty list"),
        ('cards = ["As", "Zz"]\ngame = "teen-patti-20-20"\n', 1, "cards[1]", "card 2 'Zz'"),
        (
            'cards = ["As"]\n\n[[fault]]\nat_card = 1\nkind = "explode"\n',
            5,
            "fault[1].kind",
            "explode",
        ),
        (
            'cards = ["As"]\n[[fault]]\nat_card = 2\nkind = "misread"\n',
            3,
            "fault[1].at_card",
            "1-1",
        ),
        (
            'cards = ["As"]\n[[fault]]\nat_card = 1\nkind = "unplug"\nseconds = -1\n',
            5,
            "fault[1].seconds",
            "above 0",
        ),
        ('cards = ["As"]\n[faults]\nmisread_rate = 1.0\n', 2, "faults", "below 1"),
        ('cards = ["As"]\nname = \n', 2, "", "not valid TOML"),
    ],
)
def test_scenario_errors_name_file_line_field(
    tmp_path: Path, body: str, line: int, field: str, reason: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    error = info.value
    assert isinstance(error, SimulatorConfigError)
    assert (error.path, error.line, error.field) == (path, line, field), str(error)
    assert reason in str(error)
    assert str(error).startswith(f"{path}:{line}")


def test_missing_scenario_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "nope.toml")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_fault_arguments(parser.add_argument_group("faults"))
    return parser.parse_args(argv)


def test_fault_options_build_the_plan() -> None:
    args = parse(
        "--misread-rate", "0.1", "--garbage-rate", "0.2", "--corrupt-rate", "0.05",
        "--double-read-rate", "0.3", "--loss-rate", "0.04", "--delay", "0.01",
        "--byte-by-byte", "--unplug-every", "7", "--unplug-seconds", "2",
        "--heartbeat-stop-after", "3", "--heartbeat-stop-seconds", "4",
    )  # fmt: skip
    plan = fault_plan_from_args(args, seed=9)
    assert plan == FaultPlan(
        misread_rate=0.1,
        garbage_rate=0.2,
        corrupt_rate=0.05,
        double_read_rate=0.3,
        loss_rate=0.04,
        delay=0.01,
        byte_by_byte=True,
        unplug_every=7,
        unplug_seconds=2.0,
        heartbeat_stop_after=3,
        heartbeat_stop_seconds=4.0,
        seed=9,
    )
    assert fault_plan_from_args(parse()) == FaultPlan()
    with pytest.raises(SystemExit):
        parse("--loss-rate", "2")
    with pytest.raises(SystemExit):
        parse("--unplug-every", "0")


def test_scenario_option_with_overrides() -> None:
    path = next(p for p in shipped_scenarios() if p.stem == "noisy-line")
    args = parse("--scenario", str(path), "--garbage-rate", "0.5")
    scenario = scenario_from_args(args)
    assert scenario is not None
    plan = fault_plan_from_args(args)
    assert plan.garbage_rate == 0.5  # typed on the command line: wins
    assert plan.corrupt_rate == 0.1  # from the file
    assert plan.script == scenario.faults.script and plan.seed == 3


async def deal(
    source: SupervisedCardSource, count: int
) -> tuple[list[str], list[Misread], list[str]]:
    """Cue ``count`` slots of round 1 as the orchestrator does (rescan device misreads and
    gaps, cue again after a recovery, ignore bounces): the cards, misreads and statuses."""
    cards: list[str] = []
    misreads: list[Misread] = []
    states: list[str] = []
    await source.expect(1, 0, "S0")
    last: CardRead | None = None
    while len(cards) < count:
        read = await source.next_read()
        if isinstance(read, DeviceStatus):
            states.append(read.state)
            if read.state == "recovered":
                await source.expect(1, len(cards), f"S{len(cards)}")
        elif isinstance(read, Misread):
            misreads.append(read)
            if read.cause in ("device", "gap"):
                await source.request_rescan(f"S{len(cards)}", "misread")
        elif isinstance(read, CardRemoved):
            raise AssertionError(read)  # the framed scanner is not latched
        elif last is not None and read.value == last.value and read.at - last.at < 0.5:
            continue  # bounce
        else:
            cards.append(read.value)
            last = read
            if len(cards) < count:
                await source.expect(1, len(cards), f"S{len(cards)}")
    return cards, misreads, states


@pytest.mark.parametrize("name", ["worn-card", "cable-pulled", "noisy-line"])
async def test_shipped_scenario_replays_on_a_pty(name: str) -> None:
    scenario = load_scenario(next(p for p in shipped_scenarios() if p.stem == name))
    sim = ScannerSimulator(
        cards=list(scenario.cards),
        faults=scenario.faults,
        deal_delay=0.0,
        ack_timeout=0.05,
        heartbeat_interval=0.05,
    )
    async with asyncio.timeout(20), sim.serve_pty() as path:
        source = SupervisedCardSource(f"serial://{path}", SETTINGS, rng=random.Random(0))
        await source.open()
        try:
            cards, misreads, states = await deal(source, len(scenario.cards))
        finally:
            await source.close()
    assert cards == list(scenario.cards)
    if name == "worn-card":
        assert [m.cause for m in misreads] == ["device"] * 3
        assert all("card #2" in m.detail for m in misreads)
    if name == "cable-pulled":
        assert [s for s in states if s in ("lost", "recovered")] == ["lost", "recovered"]
    if name == "noisy-line":
        assert sim.stats.double_reads == 1 and sim.stats.lost >= 1
        assert {m.cause for m in misreads} <= {"crc", "malformed"}


async def test_resumed_round_continues_the_shoe() -> None:
    """A controller that restarts mid-round cues slot 3 of a round the simulator has not
    seen: a seeded shoe deals from position 3, as if cards 0-2 had been dealt before."""
    reference = ScannerSimulator(seed=5)
    reference._start_round(12)
    shoe = list(reference._shoe)

    sim = ScannerSimulator(seed=5, deal_delay=0.0, ack_timeout=0.05, heartbeat_interval=0.05)
    async with asyncio.timeout(10), sim.serve_tcp() as (host, port):
        source = SupervisedCardSource(f"socket://{host}:{port}", SETTINGS)
        await source.open()
        try:
            values = []
            for slot in (3, 4):
                await source.expect(12, slot, f"S{slot}")
                while not isinstance(read := await source.next_read(), CardRead):
                    pass
                values.append(read.value)
        finally:
            await source.close()
    assert values == shoe[3:5]
