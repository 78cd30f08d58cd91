"""The Eccel Pepper C1 source (drivers/pepper_source.py) against the simulated reader.

A real pty (the module's USB-CDC port) or a real TCP port, the supervised source polling the
antennas, the simulator's tags put down and lifted by the test: one read per placement however
often the tag is repeated, removals after the latch's time and never for a brief drop or the
time the reader was away, a tag of another deck refused by name, two tags at once said,
garbled replies bridged, the cable pulled and back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from drivers.errors import UnsupportedUrl
from drivers.pepper_url import parse_pepper_url
from drivers.reader_profile import load_reader_profile
from drivers.source import CardRead, CardRemoved, DeviceStatus, DriverSettings, Misread, Read
from drivers.supervisor import SupervisedCardSource
from simulators.pepper_reader import UNKNOWN_UID, PepperFaults, PepperReaderSimulator

pytestmark = pytest.mark.hil

SETTINGS = DriverSettings(
    open_timeout=2.0, read_timeout=0.05, heartbeat_timeout=1.0, backoff_min=0.02, backoff_max=0.2
)
ANTENNAS = "antennas=1:seat1,2:seat2,8:muck"
TABLE = load_reader_profile("pepper-c1").table
REMOVE_AFTER = 0.3  # the shipped profile's remove_after_ms


@contextlib.asynccontextmanager
async def reader(
    tmp_path: Path, transport: str = "pty", faults: PepperFaults | None = None
) -> AsyncIterator[tuple[PepperReaderSimulator, SupervisedCardSource]]:
    sim = PepperReaderSimulator(TABLE, faults=faults)
    async with contextlib.AsyncExitStack() as stack:
        if transport == "pty":
            path = await stack.enter_async_context(sim.serve_pty(tmp_path / "pepper"))
            url = f"pepper+serial://{path}?{ANTENNAS}"
        else:
            host, port = await stack.enter_async_context(sim.serve_tcp())
            url = f"pepper://{host}:{port}?{ANTENNAS}"
        source = SupervisedCardSource(url, SETTINGS)
        await source.open()
        try:
            yield sim, source
        finally:
            await source.close()


async def until(source: SupervisedCardSource, kind: type[Read], seconds: float = 3.0) -> list[Read]:
    """Every read up to and including the first of ``kind``."""
    seen: list[Read] = []
    async with asyncio.timeout(seconds):
        while not seen or not isinstance(seen[-1], kind):
            seen.append(await source.next_read())
    return seen


async def quiet(source: SupervisedCardSource, seconds: float) -> list[Read]:
    """The reads of the next ``seconds`` (statuses included)."""
    seen: list[Read] = []
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            while True:
                seen.append(await source.next_read())
    return seen


def cards(reads: list[Read]) -> list[tuple[str, str | None]]:
    return [(r.value, r.position) for r in reads if isinstance(r, CardRead)]


@pytest.mark.parametrize("transport", ["pty", "tcp"])
async def test_a_tag_lying_still_is_one_read_and_its_lifting_one_removal(
    tmp_path: Path, transport: str
) -> None:
    async with asyncio.timeout(20), reader(tmp_path, transport) as (sim, source):
        connected = await until(source, DeviceStatus)
        assert [r.state for r in connected if isinstance(r, DeviceStatus)] == ["connected"]
        sim.place_card(1, "As")
        sim.place_card(2, "Kd")
        first = await until(source, CardRead)
        polls = sim.stats.requests
        later = await quiet(source, 0.4)  # many polls, each reporting both tags
        assert sim.stats.requests > polls + 20
        assert sorted(cards(first + later)) == [("As", "seat1"), ("Kd", "seat2")]
        sim.lift_card("As")
        removed = await until(source, CardRemoved)
        assert [(r.value, r.position) for r in removed if isinstance(r, CardRemoved)] == [
            ("As", "seat1")
        ]
        assert not any(isinstance(r, CardRemoved) for r in await quiet(source, 0.2))


async def test_a_drop_shorter_than_the_removal_time_is_no_removal(tmp_path: Path) -> None:
    async with asyncio.timeout(20), reader(tmp_path) as (sim, source):
        sim.place_card(1, "Qc")
        await until(source, CardRead)
        for _ in range(3):  # a hand passing over the antenna, three times
            sim.lift_card("Qc")
            await asyncio.sleep(REMOVE_AFTER / 3)
            sim.place_card(1, "Qc")
            await asyncio.sleep(0.05)
        assert [r for r in await quiet(source, 0.2) if not isinstance(r, DeviceStatus)] == []


async def test_a_card_on_the_muck_antenna_is_read_at_the_muck(tmp_path: Path) -> None:
    async with asyncio.timeout(20), reader(tmp_path) as (sim, source):
        sim.place_card(8, "7h")
        assert cards(await until(source, CardRead)) == [("7h", "muck")]


async def test_a_tag_of_another_deck_is_refused_by_name_never_guessed(tmp_path: Path) -> None:
    async with asyncio.timeout(20), reader(tmp_path) as (sim, source):
        sim.place(2, UNKNOWN_UID)
        reads = await until(source, Misread)
        misread = reads[-1]
        assert isinstance(misread, Misread) and misread.cause == "unknown_code"
        assert UNKNOWN_UID in misread.detail and "antenna 2 (seat2)" in misread.detail
        assert "rfid-demo-deck" in misread.detail
        # Lying there, it is not refused again at every poll; lifted, it is no removal.
        sim.lift(2, UNKNOWN_UID)
        assert [r for r in await quiet(source, 0.5) if not isinstance(r, DeviceStatus)] == []


async def test_two_tags_at_once_are_said_then_both_read(tmp_path: Path) -> None:
    async with asyncio.timeout(20), reader(tmp_path) as (sim, source):
        await until(source, DeviceStatus)
        sim.place_card(1, "2c")
        sim.place_card(1, "3c")
        reads = await until(source, CardRead)
        reads += await quiet(source, 0.1)
        two = [r for r in reads if isinstance(r, DeviceStatus) and r.state == "two_tags"]
        assert len(two) == 1 and "antenna 1 (seat1): 2 tags placed at once" in two[0].detail
        assert sorted(cards(reads)) == [("2c", "seat1"), ("3c", "seat1")]


async def test_garbled_replies_are_said_and_nothing_is_lost_or_doubled(tmp_path: Path) -> None:
    faults = PepperFaults(garble_rate=0.2, seed=3)
    async with asyncio.timeout(20), reader(tmp_path, faults=faults) as (sim, source):
        for card in ("As", "Kd", "Qh"):
            sim.place_card(1, card)
            await asyncio.sleep(0.1)
        reads = await quiet(source, 0.6)
        assert sim.stats.garbled > 5
        causes = {r.cause for r in reads if isinstance(r, Misread)}
        assert causes and causes <= {"crc", "malformed"}
        assert sorted(cards(reads)) == [("As", "seat1"), ("Kd", "seat1"), ("Qh", "seat1")]
        assert not any(isinstance(r, CardRemoved) for r in reads)  # a missed poll is no absence


@pytest.mark.parametrize("transport", ["pty", "tcp"])
async def test_the_cable_pulled_is_lost_and_recovered_and_the_time_away_no_removal(
    tmp_path: Path, transport: str
) -> None:
    async with asyncio.timeout(20), reader(tmp_path, transport) as (sim, source):
        sim.place_card(1, "9s")
        await until(source, CardRead)
        await sim.unplug(REMOVE_AFTER * 3)  # longer than the removal time
        sim.place_card(2, "8s")  # put down while the reader was away: not lost
        reads = await until(source, CardRead, seconds=8)
        states = [r.state for r in reads if isinstance(r, DeviceStatus)]
        assert states[:1] == ["lost"] and "recovered" in states
        assert cards(reads) == [("8s", "seat2")]
        assert not any(isinstance(r, CardRemoved | Misread) for r in reads)
        assert not any(isinstance(r, CardRemoved) for r in await quiet(source, 0.4))


async def test_an_unplug_removes_the_link_before_the_pty_closes_and_the_replug_restores_it(
    tmp_path: Path,
) -> None:
    """As udev's by-id link does: while the cable is out nothing may open the old pty's number.

    Linux gives a closed pty's number to the next pty anyone opens: a link left pointing at it
    let a host retrying through it open (and lock) another program's terminal (issue 26: the
    suite's ``Could not exclusively lock port`` on fresh ptys of other tests).
    """
    sim = PepperReaderSimulator(TABLE)
    async with asyncio.timeout(10):
        async with sim.serve_pty() as path:
            link = Path(path)
            assert not path.startswith("/dev/pts/"), path
            before = pointed(link)
            assert before is not None and before.startswith("/dev/pts/")
            unplug = asyncio.create_task(sim.unplug(0.3))
            await asyncio.sleep(0.1)
            assert pointed(link) is None  # gone while the cable is out
            await unplug
            assert (pointed(link) or "").startswith("/dev/pts/")
        assert pointed(link) is None and not folder_exists(link)  # removed at the end


def pointed(link: Path) -> str | None:
    """The pty ``link`` points at, if it is a link to one that exists (else ``None``)."""
    if not link.is_symlink():
        return None
    target = os.readlink(link)
    return target if os.path.exists(target) else None


def folder_exists(link: Path) -> bool:
    """Whether the folder the simulator made for ``link`` is still there."""
    return link.parent.exists()


async def test_a_dead_reader_is_lost_by_its_silence(tmp_path: Path) -> None:
    faults = PepperFaults(drop_rate=1.0)  # it answers nothing at all
    async with asyncio.timeout(20), reader(tmp_path, faults=faults) as (_sim, source):
        states = [r.state for r in await quiet(source, 1.5) if isinstance(r, DeviceStatus)]
        assert states[:2] == ["connected", "lost"] and "recovered" not in states
        assert source.losses >= 1 and source.reconnects == 0  # reopened, never answering


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("pepper://host?antennas=1", "pepper://HOST:PORT"),
        ("pepper://h:1?antennas=9", "1-8"),
        ("pepper://h:1?antennas=1,1", "twice"),
        ("pepper://h:1?antennas=1:seat%201", "position"),
        ("pepper://h:1?speed=3", "unknown option"),
        ("pepper://h:1?codes=", "empty"),
        ("pepper+serial://host/dev/ttyUSB0", "device path"),
        ("pepper+serial:///dev/ttyUSB0?baud=fast", "baud"),
        ("pepper://h:1?cues=yes", "cues"),
    ],
)
def test_bad_urls_say_what_is_wrong(url: str, words: str) -> None:
    with pytest.raises(UnsupportedUrl, match=words) as caught:
        parse_pepper_url(url, url.split(":", maxsplit=1)[0])
    assert caught.value.url == url


def test_urls() -> None:
    spec = parse_pepper_url("pepper://10.0.0.7:4001?antennas=1:seat1,3,8:muck&cues=1", "pepper")
    assert spec.port_url == "socket://10.0.0.7:4001" and spec.device == "10.0.0.7:4001"
    assert spec.antennas == ((1, "seat1"), (3, None), (8, "muck")) and spec.cues
    assert parse_pepper_url("pepper+serial:///dev/x?cues=1", "pepper+serial").cues
    serial = parse_pepper_url(
        "pepper+serial:///dev/ttyUSB0?baud=57600&codes=d.toml", "pepper+serial"
    )
    assert (serial.port_url, serial.baud, serial.codes, serial.antennas) == (
        "/dev/ttyUSB0",
        57600,
        "d.toml",
        (),
    )


async def test_check_config_says_whether_a_pepper_answers(tmp_path: Path) -> None:
    """``tablectl check-config``'s device check: the module must answer a poll, not only the
    port open (a dead module on a live port fails, naming the timeout)."""
    from controller.checkconfig import check_device

    for faults, verdict, words in (
        (None, "OK", "the Pepper C1 answers; profile pepper-c1, code table 'rfid-demo-deck'"),
        (PepperFaults(drop_rate=1.0), "FAIL", "no Pepper C1 answered within 1.0 s"),
    ):
        sim = PepperReaderSimulator(TABLE, faults=faults)
        async with asyncio.timeout(10), sim.serve_pty() as path:
            check = await check_device(f"pepper+serial://{path}?{ANTENNAS}", SETTINGS, 1.0)
        assert check.verdict == verdict and words in check.detail, check
    check = await check_device("pepper://127.0.0.1:1?profile=pcsc-uid", SETTINGS, 1.0)
    assert check.verdict == "FAIL" and "pepper-c1 family" in check.detail, check


async def test_a_host_stall_longer_than_the_removal_time_removes_nothing(tmp_path: Path) -> None:
    """Each poll is a whole inventory: a tag missed by no poll is not absent, however late
    the polls come (the event loop blocked here, as a loaded host would)."""
    import time

    async with asyncio.timeout(20), reader(tmp_path) as (sim, source):
        sim.place_card(1, "Tc")
        await until(source, CardRead)
        time.sleep(REMOVE_AFTER * 2)  # noqa: ASYNC251 (the fault: the process stalls, no poll)
        assert not any(isinstance(r, CardRemoved) for r in await quiet(source, REMOVE_AFTER))


async def test_a_late_reply_inside_a_poll_removes_nothing_and_places_nothing_again(
    tmp_path: Path,
) -> None:
    """A poll's inventory is of its tag count's moment: a UID answered later than the
    removal time (a slow module, or a host stalled inside one poll, as a loaded one is) removes
    none of the tags lying there, and reads none of them again (the suite's
    ``test_pepper_contract[pty-unknown-tag]``: six cards read twice, once)."""
    async with asyncio.timeout(20), reader(tmp_path) as (sim, source):
        for card in ("Tc", "Jd", "Qs"):
            sim.place_card(1, card)
        read: list[Read] = []
        while len(cards(read)) < 3:
            read += await until(source, CardRead)
        await quiet(source, REMOVE_AFTER)
        # Just past the removal time, well inside the reply time (response_ms, 0.5 s): a
        # loaded machine adds its own delay to the reply, and a timeout is another fault.
        sim.stall_next_uid(REMOVE_AFTER + 0.03, index=1)
        after = await quiet(source, REMOVE_AFTER * 4)
    assert sim.stats.stalls == 1
    # No card event and no "two tags at once" (a reply late enough to time out is the
    # supervisor's lost and recovered, which removes nothing either).
    assert [r for r in after if not isinstance(r, DeviceStatus) or r.state == "two_tags"] == []


async def test_enrol_reads_a_whole_deck_from_a_pepper_and_the_table_reads_it_back(
    tmp_path: Path,
) -> None:
    """``tablectl enrol --device pepper+serial://...``: each card's UID in the order asked,
    one card on the antenna at a time; the written table maps the tags as the deck has them."""
    from controller.cli.enrol import deck_cards, enrol_deck
    from drivers.profile import load_code_table

    deck = deck_cards("standard")
    sim = PepperReaderSimulator(TABLE, cards=deck, one_at_a_time=True)
    out = tmp_path / "deck.toml"
    async with asyncio.timeout(30), sim.serve_pty() as path:
        assert await enrol_deck(f"pepper+serial://{path}?cues=1", "standard", out) == 0
    written = load_code_table(out)
    assert written.codes == {TABLE.code_of(card): card for card in deck}


async def test_deck_check_on_a_pepper_reports_missing_and_unknown(tmp_path: Path) -> None:
    """``tablectl deck-check --device pepper+serial://...``: the deck put down on four
    antennas at once; a card missing and a tag of another deck are reported, nothing else."""
    from controller.cards import Deck
    from controller.deckcheck import scan_deck
    from drivers.source import open_card_source

    sim = PepperReaderSimulator(TABLE)
    cards = [str(piece) for piece in Deck.standard() if str(piece) != "Kd"]
    for index, card in enumerate(cards):
        sim.place_card(1 + index % 4, card)
    sim.place(4, UNKNOWN_UID)
    async with asyncio.timeout(20), sim.serve_pty() as path:
        source = open_card_source(f"pepper+serial://{path}?antennas=1,2,3,4", SETTINGS)
        await source.open()
        try:
            report = await scan_deck(
                source, Deck.standard(), idle_seconds=0.3, first_read_seconds=3.0
            )
        finally:
            await source.close()
    assert report.missing == ("Kd",) and report.read == 51
    assert report.unknown == (UNKNOWN_UID,) and not report.duplicated and not report.extra
