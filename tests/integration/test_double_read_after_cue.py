"""A double read that arrives after the next slot was cued, on drivers that check positions.

A reader may send the card it just read a second time a moment later (the card passed the
antenna twice). If the table has already cued the next slot, that second record carries the
old position: the driver must pass it on as the card it is (the orchestrator ignores it as a
bounce, or refuses it for its position with the reason), not turn it into a ``position``
misread, which would ask the dealer to rescan a slot not yet dealt. A *different* card at
the old position is still refused as a misread. Real ptys, written to record by record, so
the order of cue and record is fixed (the contract suite meets it only by chance).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tty
from collections.abc import AsyncIterator, Iterator

from drivers.multi_reader import MultiReaderSource, ReaderBinding
from drivers.profile import load_profile, render_record
from drivers.source import CardRead, CardSource, DeviceStatus, DriverSettings, Misread, Read
from drivers.supervisor import SupervisedCardSource

SETTINGS = DriverSettings(
    open_timeout=2.0, read_timeout=0.05, backoff_min=0.02, backoff_max=0.2, write_timeout=1.0
)


@contextlib.contextmanager
def raw_pty() -> Iterator[tuple[int, str]]:
    """A raw pty: the master descriptor (the device's side) and the slave's path."""
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        yield master, os.ttyname(slave)
    finally:
        os.close(master)
        os.close(slave)


def record(profile: str, card: str, position: str | None = None) -> bytes:
    """The bytes a reader with ``profile`` sends for ``card`` (at ``position``)."""
    loaded = load_profile(profile)
    code = loaded.table.code_of(card)
    assert code is not None, card
    fields = {"code": code} if position is None else {"code": code, "position": position}
    return render_record(loaded.profile, loaded.profile.records.card, **fields)


async def next_read(source: CardSource) -> Read:
    """The next card or misread (status lines skipped), within two seconds."""
    async with asyncio.timeout(2):
        while True:
            read = await source.next_read()
            if not isinstance(read, DeviceStatus):
                return read


@contextlib.asynccontextmanager
async def opened(source: CardSource) -> AsyncIterator[CardSource]:
    await source.open()
    try:
        yield source
    finally:
        await source.close()


async def test_a_line_shoe_double_read_after_the_next_cue_is_passed_on_as_the_card() -> None:
    with raw_pty() as (device, path):
        url = f"profile+serial://{path}?profile=line-shoe"
        async with opened(SupervisedCardSource(url, SETTINGS)) as source:
            await source.expect(1, 0, "S0")
            os.write(device, record("line-shoe", "As", "S0"))
            first = await next_read(source)
            assert isinstance(first, CardRead) and (first.value, first.position) == ("As", "S0")

            await source.expect(1, 1, "S1")
            os.write(device, record("line-shoe", "As", "S0"))
            again = await next_read(source)
            assert isinstance(again, CardRead), again
            assert (again.value, again.position) == ("As", "S0")

            os.write(device, record("line-shoe", "Kd", "S0"))
            wrong = await next_read(source)
            assert isinstance(wrong, Misread) and wrong.cause == "position"
            assert "Kd read at position 'S0'" in wrong.detail

            os.write(device, record("line-shoe", "Kd", "S1"))
            right = await next_read(source)
            assert isinstance(right, CardRead) and (right.value, right.position) == ("Kd", "S1")


async def test_a_position_reader_double_read_after_the_next_cue_keeps_its_slot() -> None:
    with raw_pty() as (seat_a, path_a), raw_pty() as (seat_b, path_b):
        bindings = [
            ReaderBinding(name, f"profile+serial://{path}?profile=rfid-ntag", slots, SETTINGS)
            for name, path, slots in (("seat-A", path_a, ("A1",)), ("seat-B", path_b, ("B1",)))
        ]
        async with opened(MultiReaderSource(bindings)) as source:
            await source.expect(1, 0, "A1")
            os.write(seat_a, record("rfid-ntag", "As"))
            first = await next_read(source)
            assert isinstance(first, CardRead) and (first.value, first.position) == ("As", "A1")

            await source.expect(1, 1, "B1")
            os.write(seat_a, record("rfid-ntag", "As"))
            again = await next_read(source)
            assert isinstance(again, CardRead), again
            assert (again.value, again.position) == ("As", "A1")

            os.write(seat_a, record("rfid-ntag", "Kd"))
            wrong = await next_read(source)
            assert isinstance(wrong, Misread) and wrong.cause == "position"
            assert "Kd read from the wrong position" in wrong.detail

            os.write(seat_b, record("rfid-ntag", "Kd"))
            right = await next_read(source)
            assert isinstance(right, CardRead) and (right.value, right.position) == ("Kd", "B1")
