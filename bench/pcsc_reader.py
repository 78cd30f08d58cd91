"""PC/SC reader (``pcsc://``) through the real pcscd: from the tag read to the card.

    .venv/bin/python bench/pcsc_reader.py [--count 40] [--repeat 3]

(``bench/drivers.py --pcsc N`` runs the same row after the others; ``--pcsc 0`` skips it.)

A private pcscd (``simulators/pcscd.py``: the Debian pcscd, socket-activated, with
vsmartcard-vpcd) serves a virtual ACR122U; our virtual tag (``simulators/vpcd.py``) runs in
a thread of its own with its own event loop, as a card in a reader's field would. The driver
reads it as it reads a real reader: pyscard, libpcsclite, pcscd's status change events, a
connect and ``FF CA 00 00 00``.

A card's latency runs from **the tag read**: the moment the virtual tag answered
``FF CA 00 00 00`` with its UID, to ``next_read()`` returning its card (the answer through
vpcd, pcscd and libpcsclite, the driver's worker thread, the latch, the queue): what the
framed row measures from its device's write. The time from the tag put down to that answer
is pcscd's own field poll (every 400 ms for vpcd, as for a polled USB reader), printed apart
("put down -> card"). Each card is lifted after its read and the next put down once pcscd
has seen it go (a PC/SC reader holds one tag). The framed driver runs on a pty at the same
pace, ``--repeat`` times alternating; the median of the p99 ratios is the figure (issue 24
asks for at most 1.5).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import logging
import statistics
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.drivers import VALUES, Result, frames, pty_port, through_driver
from drivers.reader_profile import load_reader_profile
from drivers.source import CardRead, CardRemoved, DriverSettings, open_card_source
from simulators.pcscd import PrivatePcscd, pcscd_binary
from simulators.vpcd import VirtualCard, VirtualTag

SETTINGS = DriverSettings(heartbeat_timeout=None, read_timeout=1.0)


class _Field:
    """The virtual tag's side in a thread of its own, with its own event loop."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.card: VirtualCard | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, name="bench-pcsc-tag", daemon=True)

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.card = VirtualCard("127.0.0.1", self.port)
        self._ready.set()
        await self._stop.wait()
        await self.card.remove()

    def __enter__(self) -> _Field:
        self.thread.start()
        if not self._ready.wait(5):
            raise RuntimeError("the tag's thread did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.loop is not None
        assert self._stop is not None
        self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(5)

    def place(self, uid: bytes) -> VirtualTag:
        assert self.loop is not None
        assert self.card is not None
        return asyncio.run_coroutine_threadsafe(self.card.place(uid), self.loop).result(5)

    def lift(self) -> None:
        assert self.loop is not None
        assert self.card is not None
        asyncio.run_coroutine_threadsafe(self.card.remove(), self.loop).result(5)


async def through_pcsc(daemon: PrivatePcscd, count: int) -> tuple[Result, list[float], float]:
    """``count`` cards through ``pcsc://``; (latency from the tag read, from the tag put
    down, and the mean seconds a card took: the pace the framed row is given)."""
    table = load_reader_profile("pcsc-uid").table
    slot = daemon.slot("ACS ACR122U")
    url = f"pcsc://?reader={quote(slot.name)}&pcscd={quote(str(daemon.socket_path))}"
    source = open_card_source(url, SETTINGS)
    await source.open()
    latencies: list[float] = []
    placed: list[float] = []
    with _Field(slot.port) as field:
        cpu0, t0 = time.process_time(), time.monotonic()
        try:
            for index in range(count):
                value = VALUES[index % 52]
                code = table.code_of(value)
                assert code is not None
                put_at = time.monotonic()
                tag = await asyncio.to_thread(field.place, bytes.fromhex(code))
                while True:
                    read = await source.next_read()
                    if not isinstance(read, CardRemoved):
                        break
                arrived = time.monotonic()
                assert isinstance(read, CardRead), read
                assert read.value == value, read
                assert tag.last_uid_read_at is not None
                latencies.append(arrived - tag.last_uid_read_at)
                placed.append(arrived - put_at)
                await asyncio.to_thread(field.lift)
                while not isinstance(await source.next_read(), CardRemoved):
                    pass  # the next card goes down once this one is gone
        finally:
            await source.close()
        elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    return Result(count, elapsed, cpu, latencies), placed, elapsed / count


def _constant(value: float, data: bytes) -> float:
    return value


async def pcsc_rows(count: int, repeat: int) -> None:
    """The PC/SC row beside the framed driver on a pty, paced alike, ``repeat`` times."""
    if pcscd_binary() is None:
        print(
            "PC/SC reader: skipped (pcscd or vsmartcard-vpcd is not installed; make test "
            "installs them)"
        )
        return
    runs: list[tuple[Result, Result, list[float]]] = []
    daemon = PrivatePcscd("ACS ACR122U")
    await daemon.start()
    try:
        for _ in range(repeat):
            pcsc, placed, pace = await through_pcsc(daemon, count)
            async with pty_port() as port:
                framed = await through_driver(
                    port, frames(count), True, seconds=functools.partial(_constant, pace)
                )
            runs.append((pcsc, framed, placed))
    finally:
        await daemon.close()
    ratios = [pcsc.p99 / framed.p99 for pcsc, framed, _ in runs]
    pcsc, framed, placed = runs[ratios.index(statistics.median_low(ratios))]
    print(
        "PC/SC reader (pcsc:// through a private pcscd with vsmartcard-vpcd, a card at a time, "
        "lifted after its read) (the run of the median ratio):"
    )
    print(pcsc.line("pcsc (tag read)"))
    print(framed.line("framed driver"))
    ordered = sorted(placed)
    print(
        f"  put down -> card: p50 {statistics.median(ordered) * 1000:.3f} ms, "
        f"p99 {ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000:.3f} ms "
        "(pcscd's field poll included)"
    )
    shown = ", ".join(f"{ratio:.2f}" for ratio in ratios)
    print(
        f"  p99 ratio pcsc/framed: {statistics.median(ratios):.2f} median of {repeat} "
        f"(runs: {shown}) (limit 1.5)"
    )


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40, help="cards per run (default 40)")
    parser.add_argument("--repeat", type=int, default=3, help="runs, alternating (3)")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        await pcsc_rows(args.count, args.repeat)


if __name__ == "__main__":
    asyncio.run(main())
