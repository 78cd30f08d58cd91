"""PC/SC readers through the real pcscd: a virtual card on vsmartcard-vpcd, read by pyscard.

Every test starts its own pcscd (``tests/support/pcsc.py``) with two virtual readers; the
card is put on a reader's slot and taken off (``simulators/vpcd.py``) as a dealer puts a card
on an ACR122U and lifts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from drivers.errors import TransportError
from drivers.pcsc_source import PcscCardSource
from drivers.pcsc_url import PcscSpec
from drivers.source import (
    CardRead,
    CardRemoved,
    CardSource,
    DeviceStatus,
    DriverSettings,
    Misread,
    Read,
    parse_url,
)
from drivers.source import open_card_source as build
from drivers.supervisor import SupervisedCardSource
from simulators.vpcd import VirtualCard
from tests.support.pcsc import FIRST, SECOND, needs_pcscd, pcsc_table, pcsc_url

pytestmark = needs_pcscd

AS = bytes.fromhex("044C177EC5DC80")  # "As" in codes/rfid-demo-deck.toml
KD = bytes.fromhex("04AAC9AB1D6346")
SETTINGS = DriverSettings(read_timeout=0.2, backoff_min=0.05, backoff_max=0.2)


async def next_of(source: CardSource, within: float = 5.0) -> Read:
    async with asyncio.timeout(within):
        return await source.next_read()


async def quiet_for(source: CardSource, seconds: float) -> None:
    """Nothing comes out of the source for ``seconds`` (a removal would)."""
    read: Read | None = None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            read = await source.next_read()
    assert read is None, f"unexpected read {read}"


def slow_profile(folder: Path) -> Path:
    """pcsc-uid with a removal time of 1.5 s."""
    shipped = Path(str(resources.files("drivers.profiles.readers").joinpath("pcsc-uid.toml")))
    text = shipped.read_text(encoding="utf-8")
    text = text.replace("remove_after_ms = 600", "remove_after_ms = 1500")
    text = text.replace('"../codes/', f'"{shipped.parent.parent}/codes/')
    path = folder / "pcsc-slow.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def test_a_card_is_read_by_its_uid_and_removed() -> None:
    async with pcsc_table() as daemon:
        source = build(pcsc_url(daemon, "ACS ACR122U"), SETTINGS)
        assert isinstance(source, PcscCardSource)
        await source.open()
        try:
            assert source.reader == FIRST
            card = VirtualCard("127.0.0.1", daemon.slot("ACS ACR122U").port)
            tag = await card.place(AS)
            read = await next_of(source)
            assert isinstance(read, CardRead)
            assert read.value == "As"
            assert read.position is None
            assert tag.uid_reads >= 1
            lifted = time.monotonic()
            await card.remove()
            removed = await next_of(source)
            assert isinstance(removed, CardRemoved)
            assert removed.value == "As"
            # Not before the latch's removal time (600 ms in pcsc-uid) after the lift.
            assert removed.at - lifted >= source.profile.presence.remove_after_ms / 1000 - 0.05
        finally:
            await source.close()


async def test_a_card_back_within_the_latch_time_is_no_removal_and_no_second_read(
    tmp_path: Path,
) -> None:
    # A latch of 1.5 s: pcscd (polling every 400 ms) sees the lift and the card back, well
    # within it, also on a loaded machine.
    profile = slow_profile(tmp_path)
    async with pcsc_table() as daemon:
        source = build(pcsc_url(daemon, "ACS ACR122U", profile=str(profile)), SETTINGS)
        assert isinstance(source, PcscCardSource)
        await source.open()
        try:
            card = VirtualCard("127.0.0.1", daemon.slot("ACS ACR122U").port)
            await card.place(AS)
            assert isinstance(await next_of(source), CardRead)
            await card.remove()
            again = await card.place(AS)  # pcscd sees it gone for a poll, then back
            async with asyncio.timeout(3):
                while again.uid_reads == 0:  # the driver read it again: it saw the absence
                    await asyncio.sleep(0.02)
            await quiet_for(source, 1.8)  # past the latch time: no removal, no second card
            await card.remove()
            removed = await next_of(source)
            assert isinstance(removed, CardRemoved)
        finally:
            await source.close()


async def test_a_tag_of_another_deck_is_refused_by_its_uid() -> None:
    async with pcsc_table() as daemon:
        source = build(pcsc_url(daemon, "ACS ACR122U"), SETTINGS)
        await source.open()
        try:
            card = VirtualCard("127.0.0.1", daemon.slot("ACS ACR122U").port)
            await card.place(bytes.fromhex("04000000000001"))
            read = await next_of(source)
            assert isinstance(read, Misread)
            assert read.cause == "unknown_code"
            assert "04000000000001" in read.detail
            assert FIRST in read.detail
            await card.remove()
            await quiet_for(source, 1.0)  # an unknown tag is never placed: no removal either
        finally:
            await source.close()


async def test_several_readers_by_name_each_sees_its_own_cards() -> None:
    async with pcsc_table() as daemon:
        seat_one = build(pcsc_url(daemon, "ACS ACR122U"), SETTINGS)
        seat_two = build(pcsc_url(daemon, SECOND), SETTINGS)
        await seat_one.open()
        await seat_two.open()
        try:
            card = VirtualCard("127.0.0.1", daemon.slot(SECOND).port)
            await card.place(AS)
            read = await next_of(seat_two)
            assert isinstance(read, CardRead)
            assert read.value == "As"
            await quiet_for(seat_one, 0.8)
            await card.remove()
        finally:
            await seat_one.close()
            await seat_two.close()


async def test_a_reader_not_plugged_in_is_named_with_the_readers_there_are() -> None:
    async with pcsc_table() as daemon:
        source = build(pcsc_url(daemon, "Identiv uTrust"), SETTINGS)
        with pytest.raises(TransportError) as caught:
            await source.open()
        assert "no PC/SC reader of that name" in caught.value.message
        assert "Identiv uTrust" in str(caught.value)
        assert f"{FIRST}, {SECOND}" in str(caught.value)
        ambiguous = build(pcsc_url(daemon, "ACS ACR122U 00"), SETTINGS)
        with pytest.raises(TransportError, match="more than one"):
            await ambiguous.open()


async def test_a_pcscd_restart_is_lost_and_recovered_and_the_card_on_it_is_not_read_twice() -> None:
    async with pcsc_table() as daemon:
        source = SupervisedCardSource(pcsc_url(daemon, "ACS ACR122U"), SETTINGS)
        await source.open()
        try:
            first = await next_of(source)
            assert isinstance(first, DeviceStatus)
            assert first.state == "connected"
            card = VirtualCard("127.0.0.1", daemon.slot("ACS ACR122U").port)
            await card.place(AS)
            read = await next_of(source)
            assert isinstance(read, CardRead)
            assert read.value == "As"
            await card.remove()  # the virtual card's connection dies with pcscd anyway
            await daemon.restart()
            await card.place(AS)  # the same card, still on the reader after the restart
            states: list[str] = []
            while "recovered" not in states:
                status = await next_of(source, within=10)
                assert isinstance(status, DeviceStatus), status
                states.append(status.state)
            assert states[0] == "lost"
            # Back on the reader: the same placement (no second read, no removal) ...
            await quiet_for(source, 1.0)
            # ... and lifting it now is its removal.
            await card.remove()
            removed = await next_of(source)
            assert isinstance(removed, CardRemoved)
            assert removed.value == "As"
        finally:
            await source.close()


async def test_tablectl_devices_lists_the_pcsc_readers_by_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import argparse

    from controller.cli.devices import register, run

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    async with pcsc_table() as daemon:
        args = parser.parse_args(["devices", "--usb-only", "--pcscd", str(daemon.socket_path)])
        assert await asyncio.to_thread(run, args) == 0
    out = capsys.readouterr().out
    listed = [line.split()[1] for line in out.splitlines() if "pcsc://" in line]
    assert listed == [
        pcsc_url(daemon, FIRST),
        pcsc_url(daemon, SECOND),
    ]
    assert "suggested profile: pcsc-uid" in out
    # The URL it prints opens the reader it names.
    spec = parse_url(listed[1])
    assert isinstance(spec, PcscSpec)
    assert spec.reader == SECOND


async def test_check_config_opens_the_reader_and_names_it_and_its_deck() -> None:
    from controller.checkconfig import check_device

    async with pcsc_table() as daemon:
        good = await check_device(pcsc_url(daemon, "ACS ACR122U"), SETTINGS, 5.0)
        missing = await check_device(pcsc_url(daemon, "Identiv"), SETTINGS, 5.0)
    assert good.verdict == "OK"
    assert f"PC/SC reader {FIRST!r} found through pcscd" in good.detail
    assert "code table 'rfid-demo-deck' (53 tags)" in good.detail
    assert missing.verdict == "FAIL"
    assert "no PC/SC reader of that name" in missing.detail
    bad_codes = await check_device("pcsc://?reader=X&codes=/nonexistent.toml", SETTINGS, 5.0)
    assert bad_codes.verdict == "FAIL"
    assert "/nonexistent.toml" in bad_codes.detail


async def test_a_deck_is_enrolled_from_a_pcsc_reader_by_its_uids() -> None:
    from drivers.enrolment import enrol
    from drivers.pcsc_url import parse_pcsc_url

    async with pcsc_table() as daemon:
        url = pcsc_url(daemon, "ACS ACR122U")
        source = PcscCardSource(
            url, parse_pcsc_url(url, "pcsc"), DriverSettings(heartbeat_timeout=None), raw_codes=True
        )
        await source.open()
        card = VirtualCard("127.0.0.1", daemon.slot("ACS ACR122U").port)
        asked: list[str] = []

        async def dealer() -> None:
            # The operator puts each card asked for down, and lifts it once it was read.
            for uid in (AS, KD):
                await card.place(uid)
                await card.uid_read.wait()
                await card.remove()

        try:
            task = asyncio.create_task(dealer(), name="enrol-dealer")
            async with asyncio.timeout(10):
                table = await enrol(source, ["As", "Kd"], deck="test-deck", say=asked.append)
            await task
        finally:
            await source.close()
    assert table.codes == {AS.hex().upper(): "As", KD.hex().upper(): "Kd"}
    assert asked


class _CardThread:
    """A virtual card served from a thread of its own (its event loop), so it keeps
    answering pcscd while the test's loop is held up."""

    def __init__(self, port: int) -> None:
        import threading

        self.port = port
        self.loop = asyncio.new_event_loop()
        self.card: VirtualCard | None = None
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> _CardThread:
        self.thread.start()
        self.card = VirtualCard("127.0.0.1", self.port)
        return self

    def __exit__(self, *exc: object) -> None:
        self.run(self._remove())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def _remove(self) -> None:
        assert self.card is not None
        await self.card.remove()

    async def _place(self, uid: bytes) -> None:
        assert self.card is not None
        await self.card.place(uid)

    def run(self, coroutine: Any) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(5)

    def place_later(self, uid: bytes, seconds: float) -> None:
        self.loop.call_soon_threadsafe(
            lambda: self.loop.call_later(seconds, lambda: self.loop.create_task(self._place(uid)))
        )


@pytest.mark.parametrize("rule", ["stall-is-no-absence", "control-without-the-rule"])
async def test_a_stall_of_this_process_removes_nothing(
    rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import drivers.pcsc_source

    if rule == "control-without-the-rule":
        monkeypatch.setattr(drivers.pcsc_source, "STALL", float("inf"))
    async with pcsc_table() as daemon:
        source = build(pcsc_url(daemon, "ACS ACR122U"), SETTINGS)
        assert isinstance(source, PcscCardSource)
        await source.open()
        try:
            with _CardThread(daemon.slot("ACS ACR122U").port) as card:
                card.run(card._place(AS))
                assert isinstance(await next_of(source), CardRead)
                lifted = time.monotonic()
                card.run(card._remove())
                async with asyncio.timeout(3):  # pcscd (a 400 ms poll) and the driver see it go
                    while (source.emptied_at or 0) < lifted:
                        await asyncio.sleep(0.01)
                card.place_later(AS, 0.2)  # back during the stall, within the 600 ms latch
                time.sleep(1.5)  # noqa: ASYNC251 - this process held up past the removal time
                reads: list[Read] = []
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.5):
                        while True:
                            reads.append(await source.next_read())
        finally:
            await source.close()
    if rule == "stall-is-no-absence":
        assert reads == []  # the same placement: no removal, no second read
    else:
        # Without the rule the stall reads as the card's absence: a removal (a fold in
        # Hold'em) and the card read again. The test above fails without the rule.
        assert [type(read) for read in reads] == [CardRemoved, CardRead]
