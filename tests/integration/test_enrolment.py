"""Deck enrolment against the line-device simulator on a real pty."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller.cli import build_parser
from controller.cli.enrol import deck_cards, enrol_deck
from drivers.enrolment import EnrolmentError, enrol, write_code_table
from drivers.profile import load_code_table, load_profile
from drivers.profile_source import ProfileCardSource
from drivers.source import DriverSettings, ProfileSpec, parse_url
from simulators.faults import CardFault, FaultPlan
from simulators.line_device import LineDeviceSimulator


def raw_source(path: str) -> ProfileCardSource:
    url = f"profile+serial://{path}?profile=line-shoe"
    spec = parse_url(url)
    assert isinstance(spec, ProfileSpec)
    return ProfileCardSource(url, spec, DriverSettings(heartbeat_timeout=None), raw_codes=True)


async def test_duplicate_tags_and_unreadable_records_are_refused_with_the_reason(
    tmp_path: Path,
) -> None:
    loaded = load_profile("line-shoe")
    # The dealer puts the As's tag down twice (a duplicate), then the 7h's record arrives
    # corrupt once (a bad checksum or an unreadable record): both refused, asked again.
    sim = LineDeviceSimulator(
        loaded,
        cards=["As", "As", "Kd", "7h"],
        faults=FaultPlan(script=(CardFault(at=3, kind="corrupt"),)),
        deal_delay=0.01,
    )
    said: list[str] = []
    async with asyncio.timeout(10), sim.serve_pty() as path:
        source = raw_source(path)
        await source.open()
        try:
            table = await enrol(source, ["As", "Kd", "7h"], deck="red-01", say=said.append)
        finally:
            await source.close()
    code = {card: loaded.table.code_of(card) for card in ("As", "Kd", "7h")}
    assert table.codes == {code["As"]: "As", code["Kd"]: "Kd", code["7h"]: "7h"}
    duplicate = [line for line in said if "already enrolled" in line]
    assert len(duplicate) == 1 and f"tag {code['As']} is already enrolled as As" in duplicate[0]
    unreadable = [line for line in said if "refused" in line and "already" not in line]
    assert len(unreadable) == 1 and "scan 7h again" in unreadable[0]
    assert sim.rejected == ["As"]
    out = tmp_path / "decks" / "red-01.toml"
    write_code_table(table, out)
    assert load_code_table(out) == table


async def test_a_deck_names_each_card_once() -> None:
    with pytest.raises(EnrolmentError, match="each card once"):
        await enrol(raw_source("/dev/null"), ["As", "As"], deck="x", say=print)


async def test_the_command_enrols_a_full_deck_and_the_profile_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cards = deck_cards("standard-joker")
    assert len(cards) == 53 and len(set(cards)) == 53
    sim = LineDeviceSimulator(load_profile("line-shoe"), cards=cards, deal_delay=0.0)
    out = tmp_path / "deck.toml"
    async with asyncio.timeout(20), sim.serve_pty() as path:
        args = build_parser().parse_args(
            ["enrol", "--device", f"profile+serial://{path}?profile=line-shoe",
             "--deck", "standard-joker", "--out", str(out)]
        )  # fmt: skip
        assert args.func.__module__ == "controller.cli.enrol"
        assert await enrol_deck(args.device, args.deck, Path(args.out)) == 0
    table = load_code_table(out)
    assert sorted(table.codes.values()) == sorted(cards)
    assert table.codes == load_profile("line-shoe").table.codes  # the shoe's own codes
    assert "[53/53] scan" in capsys.readouterr().out
