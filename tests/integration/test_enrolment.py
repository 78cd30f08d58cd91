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


# ---------------------------------------------------------------------- RFID decks and tiles

TILES = "codes/rfid-demo-tiles.toml"


def rfid_source(path: str) -> ProfileCardSource:
    url = f"profile+serial://{path}?profile=rfid-ntag"
    spec = parse_url(url)
    assert isinstance(spec, ProfileSpec)
    return ProfileCardSource(url, spec, DriverSettings(heartbeat_timeout=None), raw_codes=True)


async def test_mahjong_tiles_enrol_each_copy_and_refuse_a_tag_twice_or_unread() -> None:
    """The 20 tiles: two tags a tile, both bound to it. The operator scans the first 1p's tag
    again when asked for a 2p (refused: already enrolled as 1p), a tag misreads once (no tag
    read), then the rest goes in order."""
    loaded = load_profile("rfid-ntag", TILES)
    tiles = deck_cards("mahjong-pai-gow-20")
    assert len(tiles) == 20 and set(tiles) == {f"{n}p" for n in range(1, 10)} | {"wd"}
    # The simulator's n-th "1p" carries the n-th 1p tag: the third is the first one again.
    script = ["1p", "1p", "1p", *tiles[2:]]
    sim = LineDeviceSimulator(
        loaded, cards=script, faults=FaultPlan(misreads_at={5: 1}), deal_delay=0.0
    )
    said: list[str] = []
    async with asyncio.timeout(20), sim.serve_pty() as path:
        source = rfid_source(path)
        await source.open()
        try:
            table = await enrol(source, tiles, deck="mj-01", say=said.append, copies=2)
        finally:
            await source.close()
    assert table.codes == loaded.table.codes and table.codes_per_card == 2
    first_1p, second_1p = loaded.table.codes_of("1p")
    assert table.codes[first_1p] == table.codes[second_1p] == "1p"
    assert any(line == "[1/20] scan 1p (copy 1 of 2)" for line in said)
    duplicate = [line for line in said if "already enrolled" in line]
    assert duplicate == [
        f"  refused: tag {first_1p} is already enrolled as 1p; "
        "put it aside and scan 2p (copy 1 of 2)"
    ]
    unread = [line for line in said if line.startswith("  no tag read")]
    assert len(unread) == 1 and "ERR" not in unread[0] and "READ" in unread[0]
    assert sim.rejected == ["1p"]


async def enrol_and_write(source: ProfileCardSource, said: list[str], out: Path) -> None:
    table = await enrol(source, ["As", "Kd", "7h"], deck="d", say=said.append, tag_timeout=0.2)
    write_code_table(table, out)


async def test_a_card_without_a_tag_is_asked_for_again_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    """The reader reads nothing for the 3rd card (the shoe's script ends: a card whose tag
    does not answer): the operator is asked whether it is tagged, again and again; nothing is
    skipped, and an enrolment that does not finish writes no file."""
    loaded = load_profile("rfid-ntag")
    sim = LineDeviceSimulator(loaded, cards=["As", "Kd"], deal_delay=0.0)
    said: list[str] = []
    out = tmp_path / "deck.toml"
    async with sim.serve_pty() as path:
        source = rfid_source(path)
        await source.open()
        try:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(enrol_and_write(source, said, out), timeout=1.0)
        finally:
            await source.close()
    asked = [line for line in said if "no tag read in 0.2 s: is 7h tagged?" in line]
    assert len(asked) >= 2
    assert not out.exists()


async def test_the_command_enrols_an_rfid_deck_and_the_table_reads_it(tmp_path: Path) -> None:
    """53 RFID cards through ``tablectl enrol`` on the rfid-ntag profile; the URL's
    ``codes=`` names the file written, and the profile reads each UID back as its card."""
    cards = deck_cards("standard-joker")
    demo = load_profile("rfid-ntag")
    sim = LineDeviceSimulator(demo, cards=cards, deal_delay=0.0)
    out = tmp_path / "red-01.toml"
    async with asyncio.timeout(20), sim.serve_pty() as path:
        url = f"profile+serial://{path}?profile=rfid-ntag"
        assert await enrol_deck(url, "standard-joker", out) == 0
    table = load_code_table(out)
    assert table.codes == demo.table.codes and len(table.codes) == 53
    assert load_profile("rfid-ntag", str(out)).table == table


async def test_the_command_enrols_the_mahjong_tiles(tmp_path: Path) -> None:
    loaded = load_profile("rfid-ntag", TILES)
    sim = LineDeviceSimulator(loaded, cards=deck_cards("mahjong-pai-gow-20"), deal_delay=0.0)
    out = tmp_path / "mj.toml"
    async with asyncio.timeout(20), sim.serve_pty() as path:
        args = build_parser().parse_args(
            ["enrol", "--device", f"profile+serial://{path}?profile=rfid-ntag",
             "--deck", "mahjong-pai-gow-20", "--out", str(out)]
        )  # fmt: skip
        assert await enrol_deck(args.device, args.deck, Path(args.out)) == 0
    table = load_code_table(out)
    assert table.codes == loaded.table.codes and table.codes_per_card == 2
    assert "codes_per_card = 2" in out.read_text()
