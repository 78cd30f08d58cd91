"""Card-source drivers: reads per second, per-read latency and CPU, against the floor.

    .venv/bin/python bench/drivers.py [--count N] [--transports pty,tcp,usb]
        [--profiles line-shoe,...] [--repeat 3] [--readers 3] [--hid pos,kbd] [--hid-count N]
        [--tag-readers mqtt,jsonl] [--pepper 300] [--pcsc 40]

For each transport (a real pty, TCP on loopback, the USB driver on the simulated pyusb
backend) a device thread writes N CARD frames (12 bytes each on the wire), paced at
115,200-baud 8N1 (10 bits a byte: 1.04 ms a frame, at most 960 frames/s) and then unpaced
(as fast as the transport takes them). The driver reads, checks, acknowledges and returns
them. Latency is from the moment the device thread wrote a frame to the moment
``next_read()`` returned it. The floor is the same byte stream read raw from the same kind
of pty, socket or endpoint, counting frames by their delimiters, with no decoding, no ACKs.
CPU is the whole process's CPU time (device thread included) per 1,000 reads; the floor's
CPU is measured the same way, so the difference is the driver's.

Then each shipped device profile (``--profiles``): the device thread writes N records of the
profile on a pty (the same cards, rendered by the profile's ``[records]``), read through
``profile+serial://`` at the same pacing, beside the framed driver on a pty; the ratio of
the p99s is printed (issue #13 asks for at most 1.5): each comparison runs ``--repeat`` times
(the two drivers alternating) and the median ratio is the figure; paced, both drivers get a
read at the same rate (the longer of a record and a frame at 115,200 baud), so both runs
last alike on a machine whose stalls decide the p99.

Then a multi-reader table (``--readers``, 3): ``rfid-ntag`` records written round-robin to
that many readers, each on its own pty, read through one ``MultiReaderSource`` (a supervisor
and a pump task a reader, one queue), beside one reader and the framed driver.

Then the USB HID scanners (``--hid``, ``pos,kbd``): the device thread queues each code's
input reports (HID POS: one 64-byte report; keyboard mode: a key-down and a key-up 8-byte
report a character, Enter included) on the simulated pyusb backend, paced as a full-speed
interrupt endpoint polled every 1 ms (one report a millisecond) and then unpaced, read
through ``hidpos://`` / ``hidkbd://`` (the real pyusb code path, the profile's
``LineDecoder``), beside the framed driver on a pty and on the USB backend. A code's latency
runs from its last report (the code is complete only then: a keyboard-mode code takes 28
reports, 28 ms at this pacing, which no driver can shorten).

Then the JSON tag readers (``--tag-readers``, ``mqtt,jsonl``): an ESP32 reader's messages
(``{"device_id", "seq", "card_uid"}``) published by a paho client from the device thread to
a private Mosquitto and read through ``mqtt-reader://``, or written as JSON lines on a pty
and read through ``jsonl+serial://``; a tag's latency runs from its publish (or write) to
``next_read()`` returning its card, through the reader core and the presence latch (placed
at first sighting here), beside the framed driver on a pty paced alike.

Then the Eccel Pepper C1 (``--pepper``, ``bench/pepper_reader.py``) and a PC/SC reader
(``--pcsc``, ``bench/pcsc_reader.py``: a virtual ACR122U on a private pcscd, through pyscard;
a card's latency runs from the tag's answer to ``FF CA 00 00 00``), each beside the framed
driver paced alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import os
import socket
import statistics
import sys
import threading
import time
import tty
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from drivers.codec import CardFrame, encode
from drivers.hid import KEYBOARD_REPORT_SIZE, POS_REPORT_SIZE, encode_keyboard, encode_pos
from drivers.json_readers import MqttReaderSpec
from drivers.multi_reader import MultiReaderSource, ReaderBinding
from drivers.profile import load_profile, render_record, shipped_profiles
from drivers.reader_json import load_reader_codes
from drivers.source import (
    CardRead,
    CardRemoved,
    DeviceStatus,
    DriverSettings,
    open_card_source,
    parse_url,
)
from simulators.usb import EP_IN, PRODUCT_ID, VENDOR_ID, SimulatedUsbBackend

HID_PROFILE = "barcode-crlf"
MULTI_PROFILE = "rfid-ntag"
REPORT_SECONDS = 0.001
"""A full-speed interrupt IN endpoint with bInterval 1: one report a millisecond."""

BAUD = 115_200
VALUES = [f"{rank}{suit}" for suit in "cdhs" for rank in "23456789TJQKA"]
SETTINGS = DriverSettings(heartbeat_timeout=None, read_timeout=1.0, usb_poll_timeout=0.05)


def frames(count: int) -> list[bytes]:
    return [encode(CardFrame(seq=(i + 1) % 256, value=VALUES[i % 52])) for i in range(count)]


def records(profile: str, count: int) -> list[bytes]:
    """The same cards as :func:`frames`, as one profile's device writes them."""
    loaded = load_profile(profile)
    codes = {card: loaded.table.code_of(card) or "" for card in VALUES}
    template = loaded.profile.records.card
    return [
        render_record(
            loaded.profile,
            template,
            code=codes[VALUES[i % 52]],
            position=loaded.profile.records.sample_position,
        )
        for i in range(count)
    ]


@dataclass
class Result:
    reads: int
    seconds: float
    cpu: float
    latencies: list[float]

    @property
    def p99(self) -> float:
        lat = sorted(self.latencies)
        return lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000

    def line(self, label: str) -> str:
        lat = sorted(self.latencies)
        p50 = statistics.median(lat) * 1000
        p99 = self.p99
        return (
            f"  {label:<16} {self.reads / self.seconds:>9.0f} reads/s   "
            f"p50 {p50:>7.3f} ms   p99 {p99:>7.3f} ms   "
            f"CPU {self.cpu / self.reads * 1000:>6.3f} s/1000 reads"
        )


class Device:
    """Writes the frames from a thread, paced or not, recording when each left.

    ``seconds``: how long one item of ``wire`` takes on the line (default: its bytes at
    115,200 baud 8N1). ``stamp``: when given, an item's time is what it returns once
    ``write`` returned (a HID code whose reports ``write`` paces itself: the time the report
    that completes the code was queued).
    """

    def __init__(
        self,
        write: Callable[[bytes], None],
        wire: list[bytes],
        paced: bool,
        seconds: Callable[[bytes], float] | None = None,
        *,
        stamp: Callable[[], float] | None = None,
    ) -> None:
        self.write = write
        self.wire = wire
        self.paced = paced
        self.seconds = seconds or (lambda data: len(data) * 10 / BAUD)
        self.stamp = stamp
        self.sent_at = [0.0] * len(wire)
        self.thread = threading.Thread(target=self._run, name="bench-device", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        start = time.monotonic()
        due = start
        for index, data in enumerate(self.wire):
            if self.paced:
                due += self.seconds(data)
                while (left := due - time.monotonic()) > 0:
                    time.sleep(left if left > 0.0005 else 0)
            if self.stamp is not None:
                self.write(data)
                self.sent_at[index] = self.stamp()
            else:
                self.sent_at[index] = time.monotonic()
                self.write(data)


# ------------------------------------------------------------------ transports


@dataclass
class Port:
    url: str
    write: Callable[[bytes], None]
    open_raw: Callable[[], contextlib.AbstractAsyncContextManager[asyncio.StreamReader]]
    backend: SimulatedUsbBackend | None = None
    completed: Callable[[], float] | None = None
    """When the item last written was complete (a HID code's completing report)."""


def _drain_forever(read: Callable[[], bytes]) -> None:
    def run() -> None:
        with contextlib.suppress(OSError):
            while read():
                pass

    threading.Thread(target=run, name="bench-drain", daemon=True).start()


@contextlib.asynccontextmanager
async def pty_port() -> AsyncIterator[Port]:
    master, slave = os.openpty()
    tty.setraw(slave)
    path = os.ttyname(slave)
    _drain_forever(lambda: os.read(master, 4096))  # the host's ACKs

    def write(data: bytes) -> None:
        os.write(master, data)

    @contextlib.asynccontextmanager
    async def raw() -> AsyncIterator[asyncio.StreamReader]:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
        )
        try:
            yield reader
        finally:
            transport.close()

    try:
        yield Port(f"serial://{path}", write, raw)
    finally:
        os.close(master)
        os.close(slave)


@contextlib.asynccontextmanager
async def tcp_port() -> AsyncIterator[Port]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    current: dict[str, socket.socket] = {}
    accepted = threading.Event()

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            current["conn"] = conn
            _drain_forever(functools.partial(conn.recv, 4096))
            accepted.set()

    threading.Thread(target=accept, name="bench-accept", daemon=True).start()

    def write(data: bytes) -> None:
        accepted.wait(5)
        current["conn"].sendall(data)

    @contextlib.asynccontextmanager
    async def raw() -> AsyncIterator[asyncio.StreamReader]:
        accepted.clear()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            yield reader
        finally:
            writer.close()

    try:
        yield Port(f"socket://127.0.0.1:{port}", write, raw)
    finally:
        server.close()
        with contextlib.suppress(KeyError, OSError):
            current["conn"].close()


@contextlib.asynccontextmanager
async def usb_port() -> AsyncIterator[Port]:
    backend = SimulatedUsbBackend()
    backend.on_host_bytes = lambda data: None  # the host's ACKs

    @contextlib.asynccontextmanager
    async def raw() -> AsyncIterator[asyncio.StreamReader]:
        import usb.core
        import usb.util

        device = usb.core.find(idVendor=VENDOR_ID, idProduct=PRODUCT_ID, backend=backend)
        device.set_configuration()
        usb.util.claim_interface(device, 0)
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        stop = threading.Event()

        def pump() -> None:
            while not stop.is_set():
                try:
                    data = bytes(device.read(EP_IN, 4096, 50))
                except usb.core.USBTimeoutError:
                    continue
                loop.call_soon_threadsafe(reader.feed_data, data)

        thread = threading.Thread(target=pump, name="bench-usb-raw", daemon=True)
        thread.start()
        try:
            yield reader
        finally:
            stop.set()
            thread.join(1)
            usb.util.dispose_resources(device)

    yield Port(f"usb://{VENDOR_ID:04x}:{PRODUCT_ID:04x}", backend.device_write, raw, backend)


PORTS = {"pty": pty_port, "tcp": tcp_port, "usb": usb_port}


def hid_codes(kind: str, count: int) -> list[bytes]:
    """The same cards as :func:`frames`, as a HID scanner's input reports (one item a code)."""
    loaded = load_profile(HID_PROFILE)
    out = []
    for index in range(count):
        code = loaded.table.code_of(VALUES[index % 52]) or ""
        reports = encode_pos(code.encode()) if kind == "pos" else encode_keyboard(code)
        out.append(b"".join(reports))
    return out


@contextlib.asynccontextmanager
async def hid_port(kind: str, paced: bool) -> AsyncIterator[Port]:
    """A simulated HID scanner; paced, a code's reports come one a millisecond."""
    backend = SimulatedUsbBackend(hid="pos" if kind == "pos" else "kbd")
    size = POS_REPORT_SIZE if kind == "pos" else KEYBOARD_REPORT_SIZE

    # The report that completes a code: HID POS's last; a keyboard's Enter (then its release).
    last = 1 if kind == "pos" else 2
    completed = [0.0]

    def write(data: bytes) -> None:
        reports = [data[start : start + size] for start in range(0, len(data), size)]
        for index, report in enumerate(reports):
            if paced and index and index <= len(reports) - last:
                due = time.monotonic() + REPORT_SECONDS
                while (left := due - time.monotonic()) > 0:
                    time.sleep(left if left > 0.0005 else 0)
            if index == len(reports) - last:
                completed[0] = time.monotonic()
            backend.device_report(report)

    @contextlib.asynccontextmanager
    async def raw() -> AsyncIterator[asyncio.StreamReader]:
        raise NotImplementedError  # the framed rows are the comparison here
        yield asyncio.StreamReader()

    url = f"hid{kind}://{VENDOR_ID:04x}:{backend.product_id:04x}?profile={HID_PROFILE}"
    yield Port(url, write, raw, backend, lambda: completed[0])


def _constant(value: float, data: bytes) -> float:
    return value


async def hid_rows(kinds: list[str], count: int, wire: list[bytes], repeat: int) -> None:
    """Each HID mode beside the framed driver on a pty and on USB, paced alike.

    Paced, the framed frames come as often as the codes (a code's reports, 1 ms each), so the
    runs last alike; each comparison runs ``repeat`` times and the median ratio is the figure.
    """
    for kind in kinds:
        codes = hid_codes(kind, count)
        reports = len(codes[0]) // (POS_REPORT_SIZE if kind == "pos" else KEYBOARD_REPORT_SIZE)
        # A code's first report comes 1 ms after the last code's; its time is its last.
        every = functools.partial(_constant, reports * REPORT_SECONDS)
        for paced in (True, False):
            runs = []
            for _ in range(repeat):
                async with hid_port(kind, paced) as port:
                    driver = await through_driver(
                        port, codes, paced, seconds=lambda data: REPORT_SECONDS,
                        stamp=port.completed,
                    )  # fmt: skip
                async with pty_port() as port:
                    framed = await through_driver(port, wire, paced, seconds=every)
                async with usb_port() as port:
                    framed_usb = await through_driver(port, wire, paced, seconds=every)
                runs.append((driver, framed, framed_usb))
            ratios = [driver.p99 / framed.p99 for driver, framed, _ in runs]
            driver, framed, framed_usb = runs[ratios.index(statistics.median_low(ratios))]
            pace = f"paced: {reports} report(s) a code, 1 ms each" if paced else "unpaced"
            print(f"HID {kind} scanner ({HID_PROFILE}), simulated pyusb backend, {pace}:")
            print(driver.line(f"hid{kind} driver"))
            print(framed.line("framed (pty)"))
            print(framed_usb.line("framed (usb)"))
            shown = ", ".join(f"{ratio:.2f}" for ratio in ratios)
            print(
                f"  p99 ratio hid/framed pty: {statistics.median(ratios):.2f} median of "
                f"{repeat} (runs: {shown}) (limit 1.5); hid/framed usb (that run): "
                f"{driver.p99 / framed_usb.p99:.2f}"
            )


# ------------------------------------------------------------------ runs


async def through_driver(
    port: Port,
    wire: list[bytes],
    paced: bool,
    url: str | None = None,
    *,
    seconds: Callable[[bytes], float] | None = None,
    stamp: Callable[[], float] | None = None,
) -> Result:
    source = open_card_source(url or port.url, SETTINGS, usb_backend=port.backend)
    await source.open()
    await asyncio.sleep(0.05)
    device = Device(port.write, wire, paced, seconds, stamp=stamp)
    arrived = []
    cpu0, t0 = time.process_time(), time.monotonic()
    device.start()
    try:
        for index in range(len(wire)):
            read = await source.next_read()
            arrived.append(time.monotonic())
            assert isinstance(read, CardRead), read
            assert read.value == VALUES[index % 52], read
    finally:
        await source.close()
    elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    device.thread.join(5)  # the last stamps are written after their reads may have come
    latencies = [at - sent for at, sent in zip(arrived, device.sent_at, strict=True)]
    return Result(len(wire), elapsed, cpu, latencies)


async def floor(port: Port, wire: list[bytes], paced: bool) -> Result:
    async with port.open_raw() as reader:
        await asyncio.sleep(0.05)
        device = Device(port.write, wire, paced)
        latencies: list[float] = []
        zeros = 0
        cpu0, t0 = time.process_time(), time.monotonic()
        device.start()
        while len(latencies) < len(wire):
            data = await reader.read(65536)
            now = time.monotonic()
            zeros += data.count(0)
            while len(latencies) < zeros // 2:  # each frame: a leading and a trailing 0x00
                latencies.append(now - device.sent_at[len(latencies)])
        return Result(len(wire), time.monotonic() - t0, time.process_time() - cpu0, latencies)


async def profile_rows(profile: str, wire: list[bytes], count: int, repeat: int) -> None:
    """One profile beside the framed driver on a pty, ``repeat`` times each, alternating.

    The p99 of a few seconds of reads on a shared machine is a handful of the slowest reads,
    which another process's burst decides; the two drivers alternate and the median of the
    runs' ratios is the figure (each run's is printed).
    """
    lines = records(profile, count)
    # Paced, both come at the rate of the longer of a record and a frame at 115,200 baud, so
    # the two runs last alike (a longer run meets more of the machine's stalls).
    gap = max(len(lines[0]), len(wire[0])) * 10 / BAUD
    for paced in (True, False):
        runs: list[tuple[Result, Result]] = []
        for _ in range(repeat):
            async with pty_port() as port:
                framed = await through_driver(port, wire, paced, seconds=lambda data: gap)
            async with pty_port() as port:
                url = f"profile+serial://{port.url.removeprefix('serial://')}?profile={profile}"
                driver = await through_driver(
                    port, lines, paced, url=f"{url}&baud={BAUD}", seconds=lambda data: gap
                )
            runs.append((driver, framed))
        ratios = [driver.p99 / framed.p99 for driver, framed in runs]
        driver, framed = runs[ratios.index(statistics.median_low(ratios))]
        print(
            f"profile {profile} on a pty, {'paced 115200' if paced else 'unpaced'} "
            f"({len(lines[0])}-byte records; the run of the median ratio):"
        )
        print(driver.line("profile driver"))
        print(framed.line("framed driver"))
        shown = ", ".join(f"{ratio:.2f}" for ratio in ratios)
        print(
            f"  p99 ratio profile/framed: {statistics.median(ratios):.2f} median of {repeat} "
            f"(runs: {shown}) (limit 1.5)"
        )


async def through_readers(count: int, lines: list[bytes], paced: bool, gap: float) -> Result:
    """``lines`` written round-robin to ``count`` readers, each on its own pty, read through
    one :class:`~drivers.multi_reader.MultiReaderSource` (a supervisor and a pump a reader)."""
    async with contextlib.AsyncExitStack() as stack:
        ports = [await stack.enter_async_context(pty_port()) for _ in range(count)]
        readers = [
            ReaderBinding(
                f"reader-{index}",
                f"profile+serial://{port.url.removeprefix('serial://')}"
                f"?profile={MULTI_PROFILE}&baud={BAUD}",
                (f"S{index}",),
                SETTINGS,
            )
            for index, port in enumerate(ports)
        ]
        source = MultiReaderSource(readers)
        await source.open()
        for _ in readers:  # each reader's "connected"
            assert isinstance(await source.next_read(), DeviceStatus)
        written = [0]

        def write(data: bytes) -> None:
            ports[written[0] % count].write(data)
            written[0] += 1

        device = Device(write, lines, paced, lambda data: gap)
        arrived: dict[int, float] = {}
        cpu0, t0 = time.process_time(), time.monotonic()
        device.start()
        try:
            for _ in range(len(lines)):
                read = await source.next_read()
                now = time.monotonic()
                assert isinstance(read, CardRead), read
                arrived[_item_of(read, count)] = now
        finally:
            await source.close()
        elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
        device.thread.join(5)
    assert sorted(arrived) == list(range(len(lines)))  # every record once
    latencies = [arrived[item] - sent for item, sent in enumerate(device.sent_at)]
    return Result(len(lines), elapsed, cpu, latencies)


def _item_of(read: CardRead, readers: int) -> int:
    """Which record a read is: readers keep their own order (``device_seq`` counts a
    reader's records), not one another's; reader r's k-th record is item r + k·readers."""
    value = VALUES.index(read.value)
    for reader in range(readers):
        item = reader + read.device_seq * readers
        if item % 52 == value:
            return item
    raise AssertionError(f"no reader wrote {read!r} as its record {read.device_seq}")


async def multi_rows(count: int, reads: int, wire: list[bytes], repeat: int) -> None:
    """A multi-reader table of ``count`` RFID readers beside one reader and the framed driver."""
    lines = records(MULTI_PROFILE, reads)
    gap = max(len(lines[0]), len(wire[0])) * 10 / BAUD
    every = functools.partial(_constant, gap)
    for paced in (True, False):
        runs = []
        for _ in range(repeat):
            multi = await through_readers(count, lines, paced, gap)
            async with pty_port() as port:
                url = f"profile+serial://{port.url.removeprefix('serial://')}"
                one = await through_driver(
                    port, lines, paced, url=f"{url}?profile={MULTI_PROFILE}&baud={BAUD}",
                    seconds=every,
                )  # fmt: skip
            async with pty_port() as port:
                framed = await through_driver(port, wire, paced, seconds=every)
            runs.append((multi, one, framed))
        ratios = [multi.p99 / framed.p99 for multi, _, framed in runs]
        multi, one, framed = runs[ratios.index(statistics.median_low(ratios))]
        print(
            f"{count} {MULTI_PROFILE} readers on {count} ptys (MultiReaderSource), "
            f"{'paced' if paced else 'unpaced'}, records round-robin:"
        )
        print(multi.line("multi-reader"))
        print(one.line("one reader"))
        print(framed.line("framed driver"))
        shown = ", ".join(f"{ratio:.2f}" for ratio in ratios)
        print(
            f"  p99 ratio multi/framed: {statistics.median(ratios):.2f} median of {repeat} "
            f"(runs: {shown}) (limit 1.5)"
        )


# ------------------------------------------------------------------ JSON tag readers

TAG_LATCH = "place_after_ms=0&remove_after_ms=5"
"""The tag readers' latch in the benchmark: a card placed at its first sighting (the latency
is the pipeline's, not the stable time a profile adds on purpose) and removed 5 ms after it
(so the latch holds a few tags, as a table's does, not thousands). Each lap of the 52 cards
comes from another reader id (the latch keys a tag by its reader), so every message is a new
placement however a stall of the machine bunches them (the same tag again within the removal
time would be a repeat, rightly not read twice)."""


def tag_messages(count: int) -> list[bytes]:
    """The same cards as :func:`frames`, as an ESP32 reader publishes them (one JSON a read)."""
    table = load_reader_codes(None)
    return [
        json.dumps(
            {
                "device_id": f"bench-{i // 52}",
                "seq": i % 52,
                "card_uid": table.code_of(VALUES[i % 52]),
            },
            separators=(",", ":"),
        ).encode()
        for i in range(count)
    ]


async def through_tags(
    url: str, write: Callable[[bytes], None], wire: list[bytes], gap: float
) -> Result:
    """Tag messages written paced (a message every ``gap`` s) from a thread, latency from its
    write to ``next_read()`` returning its card; the removals in between are skipped."""
    source = open_card_source(url, SETTINGS)
    await source.open()
    await asyncio.sleep(0.05)
    device = Device(write, wire, True, lambda data: gap)
    arrived: list[float] = []
    cpu0, t0 = time.process_time(), time.monotonic()
    device.start()
    try:
        while len(arrived) < len(wire):
            read = await source.next_read()
            if isinstance(read, CardRemoved):
                continue
            arrived.append(time.monotonic())
            assert isinstance(read, CardRead), read
            assert read.value == VALUES[(len(arrived) - 1) % 52], read
    finally:
        await source.close()
    elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    device.thread.join(5)
    latencies = [at - sent for at, sent in zip(arrived, device.sent_at, strict=True)]
    return Result(len(wire), elapsed, cpu, latencies)


@contextlib.asynccontextmanager
async def mqtt_reader_port() -> AsyncIterator[tuple[str, Callable[[bytes], None]]]:
    """A private Mosquitto and a paho client publishing as an ESP32 reader (QoS 0)."""
    import tempfile

    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from tests.support.mosquitto import MosquittoProcess

    with tempfile.TemporaryDirectory() as work, MosquittoProcess(Path(work)) as broker:
        client = mqtt.Client(CallbackAPIVersion.VERSION2)
        connected = threading.Event()
        client.on_connect = lambda *args: connected.set()
        client.connect(broker.host, broker.port)
        client.loop_start()
        if not connected.wait(5):
            raise RuntimeError("the bench's reader could not connect to its Mosquitto")
        topic = "bench/readers/seat-1"

        def publish(data: bytes) -> None:
            client.publish(topic, data, qos=0)

        try:
            yield f"mqtt-reader://{broker.host}:{broker.port}/{topic}?{TAG_LATCH}", publish
        finally:
            client.loop_stop()
            client.disconnect()


async def tag_reader_rows(kinds: list[str], count: int, wire: list[bytes], repeat: int) -> None:
    """The JSON tag readers (``mqtt``: through a private Mosquitto; ``jsonl``: JSON lines on a
    pty) beside the framed driver on a pty, paced alike (a read every frame time), ``repeat``
    times alternating; the median p99 ratio is the figure. Paced only: an unpaced burst of
    the same 52 tags is, to a latch, repeats of tags already placed."""
    messages = tag_messages(count)
    gap = len(wire[0]) * 10 / BAUD
    for kind in kinds:
        runs: list[tuple[Result, Result]] = []
        floors: list[Result] = []
        for _ in range(repeat):
            async with pty_port() as port:
                framed = await through_driver(port, wire, True, seconds=lambda data: gap)
            if kind == "mqtt":
                async with mqtt_reader_port() as (url, write):
                    driver = await through_tags(url, write, messages, gap)
                async with mqtt_reader_port() as (url, write):
                    floors.append(await mqtt_floor(url, write, messages, gap))
            else:
                async with pty_port() as port:
                    path = port.url.removeprefix("serial://")
                    url = f"jsonl+serial://{path}?{TAG_LATCH}&baud={BAUD}"
                    driver = await through_tags(
                        url, functools.partial(_line, port.write), messages, gap
                    )
            runs.append((driver, framed))
        ratios = [driver.p99 / framed.p99 for driver, framed in runs]
        driver, framed = runs[ratios.index(statistics.median_low(ratios))]
        where = "through Mosquitto" if kind == "mqtt" else "JSON lines on a pty"
        print(
            f"tag reader {kind} ({where}), paced: a read every {gap * 1000:.3f} ms "
            f"({len(messages[0])}-byte messages; the run of the median ratio):"
        )
        print(driver.line(f"{kind} reader"))
        print(framed.line("framed driver"))
        if floors:
            hop = floors[ratios.index(statistics.median_low(ratios))]
            print(hop.line("broker hop (raw)"))
            hops = ", ".join(f"{f.p99:.2f}" for f in floors)
            print(f"  p99 of the broker hop alone, each run (ms): {hops}")
        shown = ", ".join(f"{ratio:.2f}" for ratio in ratios)
        print(
            f"  p99 ratio {kind}/framed: {statistics.median(ratios):.2f} median of {repeat} "
            f"(runs: {shown}) (limit 1.5)"
        )


async def mqtt_floor(
    url: str, write: Callable[[bytes], None], wire: list[bytes], gap: float
) -> Result:
    """The broker hop alone: the same messages read raw by an aiomqtt subscriber."""
    import aiomqtt

    spec = parse_url(url)
    assert isinstance(spec, MqttReaderSpec)
    async with aiomqtt.Client(spec.host, spec.port) as client:
        await client.subscribe(spec.topic, qos=1)
        await asyncio.sleep(0.05)
        device = Device(write, wire, True, lambda data: gap)
        arrived: list[float] = []
        cpu0, t0 = time.process_time(), time.monotonic()
        device.start()
        async for _message in client.messages:
            arrived.append(time.monotonic())
            if len(arrived) == len(wire):
                break
        elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    device.thread.join(5)
    latencies = [at - sent for at, sent in zip(arrived, device.sent_at, strict=True)]
    return Result(len(wire), elapsed, cpu, latencies)


def _line(write: Callable[[bytes], None], data: bytes) -> None:
    write(data + b"\n")


async def main() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000, help="reads per run (default 3000)")
    parser.add_argument("--transports", default="pty,tcp,usb")
    parser.add_argument(
        "--profiles", default=",".join(shipped_profiles()), help="device profiles ('' for none)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each profile comparison (default 3)"
    )
    parser.add_argument("--hid", default="pos,kbd", help="HID scanner modes ('' for none)")
    parser.add_argument(
        "--tag-readers", default="mqtt,jsonl", help="JSON tag readers: mqtt, jsonl ('' for none)"
    )
    parser.add_argument(
        "--readers", type=int, default=3, help="readers of the multi-reader row (0: none)"
    )
    parser.add_argument(
        "--pepper", type=int, default=300, help="cards of the Pepper C1 row (0: none)"
    )
    parser.add_argument(
        "--pcsc",
        type=int,
        default=40,
        help="cards of the PC/SC row, through a private pcscd (0: none; needs pcscd and "
        "vsmartcard-vpcd)",
    )
    parser.add_argument(
        "--hid-count",
        type=int,
        default=500,
        help="codes per HID run (default 500: a keyboard-mode code takes 28 ms paced)",
    )
    args = parser.parse_args()
    wire = frames(args.count)
    frame_ms = len(wire[0]) * 10 / BAUD * 1000
    print(
        f"{args.count} CARD frames of {len(wire[0])} bytes; paced = 115,200 baud 8N1 "
        f"({frame_ms:.3f} ms a frame, ceiling {1000 / frame_ms:.0f} reads/s)"
    )
    for name in filter(None, args.transports.split(",")):
        for paced in (True, False):
            async with PORTS[name]() as port:
                driver = await through_driver(port, wire, paced)
            async with PORTS[name]() as port:
                raw = await floor(port, wire, paced)
            print(f"{name} {'paced 115200' if paced else 'unpaced'}:")
            print(driver.line("driver"))
            print(raw.line("floor (raw)"))
    for profile in filter(None, args.profiles.split(",")):
        await profile_rows(profile, wire, args.count, args.repeat)
    if args.readers:
        await multi_rows(args.readers, args.count, wire, args.repeat)
    hid_wire = frames(args.hid_count)
    await hid_rows(list(filter(None, args.hid.split(","))), args.hid_count, hid_wire, args.repeat)
    tag_kinds = list(filter(None, args.tag_readers.split(",")))
    await tag_reader_rows(tag_kinds, args.count, wire, args.repeat)
    if args.pepper:
        from bench.pepper_reader import GAP, pepper_rows

        await pepper_rows(args.pepper, GAP, args.repeat)
    if args.pcsc:
        from bench.pcsc_reader import pcsc_rows

        await pcsc_rows(args.pcsc, args.repeat)


if __name__ == "__main__":
    asyncio.run(main())
