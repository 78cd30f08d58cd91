"""The serial card-source driver against a hand-driven device on a real pty (and TCP)."""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import os
import socket
import time
import tty
from collections.abc import AsyncIterator

import pytest

from drivers.codec import (
    AckFrame,
    BeepFrame,
    CardFrame,
    CorruptFrame,
    ExpectFrame,
    Frame,
    FrameDecoder,
    HeartbeatFrame,
    LedColor,
    LedFrame,
    MisreadFrame,
    RejectFrame,
    RescanFrame,
    ResetFrame,
    StatusFrame,
    cobs_encode,
    encode,
    encode_raw,
    wrap,
)
from drivers.errors import (
    ConnectionLost,
    DriverError,
    HeartbeatLost,
    TransportError,
    UnsupportedUrl,
)
from drivers.serial_source import SerialCardSource
from drivers.source import (
    CardRead,
    CardSource,
    DeviceStatus,
    DriverSettings,
    Misread,
    PortSpec,
    open_card_source,
    parse_url,
)

FAST = DriverSettings(read_timeout=0.05, heartbeat_timeout=None, open_timeout=5)


class RawDevice:
    """The device end of a pty, driven byte by byte by the test."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        self.decoder = FrameDecoder()
        self.pending: list[Frame] = []

    def send(self, *frames: Frame) -> None:
        os.write(self.master, b"".join(encode(frame) for frame in frames))

    def send_bytes(self, data: bytes) -> None:
        os.write(self.master, data)

    async def receive(self) -> Frame:
        """The next host frame (corrupt ones fail the test)."""
        loop = asyncio.get_running_loop()
        while not self.pending:
            ready = asyncio.Event()
            loop.add_reader(self.master, ready.set)
            try:
                await ready.wait()
            finally:
                loop.remove_reader(self.master)
            for item in self.decoder.feed(os.read(self.master, 4096)):
                assert not isinstance(item, CorruptFrame), item
                self.pending.append(item)
        return self.pending.pop(0)

    def close(self) -> None:
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)


@pytest.fixture
async def device() -> AsyncIterator[RawDevice]:
    dev = RawDevice()
    try:
        yield dev
    finally:
        dev.close()


@contextlib.asynccontextmanager
async def opened(url: str, settings: DriverSettings = FAST) -> AsyncIterator[SerialCardSource]:
    source = open_card_source(url, settings)
    assert isinstance(source, SerialCardSource)
    assert isinstance(source, CardSource)
    await source.open()
    try:
        yield source
    finally:
        await source.close()


# ---------------------------------------------------------------- URLs


def _port(url: str, default_baud: int = 115200) -> PortSpec:
    spec = parse_url(url, default_baud)
    assert isinstance(spec, PortSpec), spec
    return spec


def test_url_parsing() -> None:
    spec = _port("serial:///dev/ttyUSB0?baud=9600")
    assert (spec.kind, spec.port_url, spec.baud) == ("serial", "/dev/ttyUSB0", 9600)
    assert _port("/dev/ttyACM1", 57600).baud == 57600
    assert _port("serial:///dev/ttyS0").baud == 115200
    tcp = _port("socket://127.0.0.1:7000")
    assert (tcp.kind, tcp.port_url, tcp.device) == (
        "socket",
        "socket://127.0.0.1:7000",
        "127.0.0.1:7000",
    )
    assert _port("socket://[::1]:7000").port_url == "socket://[::1]:7000"


@pytest.mark.parametrize(
    "url",
    [
        "loop://",
        "usb://1234",
        "usb://12345:1",
        "usb://zz12:0001",
        "usb://1234:5678/x",
        "usb://1234:5678?iface=1",
        "usb://1234:5678?serial=",
        "rfc2217://host:1",
        "ttyUSB0",
        "serial://dev/ttyUSB0",
        "serial:///dev/ttyUSB0?baud=fast",
        "serial:///dev/ttyUSB0?parity=E",
        "socket://host",
        "socket://host:notaport",
        "socket://host:7000/path",
    ],
)
def test_unsupported_urls(url: str) -> None:
    with pytest.raises(UnsupportedUrl) as info:
        open_card_source(url)
    assert info.value.url == url
    assert url in str(info.value)


def test_settings_validate() -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        DriverSettings(read_timeout=0)
    assert DriverSettings().baud == 115200


# ---------------------------------------------------------------- reads


async def test_card_is_read_and_acknowledged(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(f"serial://{device.path}") as source:
        before = time.monotonic()
        device.send(CardFrame(seq=5, value="As", position="A1"))
        read = await source.next_read()
        assert isinstance(read, CardRead)
        assert (read.value, read.position, read.device_seq) == ("As", "A1", 5)
        assert before <= read.at <= time.monotonic()
        ack = await device.receive()
        assert isinstance(ack, AckFrame)
        assert ack.acked == 5


async def test_repeat_is_dropped_but_acknowledged_again(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(device.path) as source:
        device.send(CardFrame(seq=5, value="As"))
        assert isinstance(await source.next_read(), CardRead)
        device.send(CardFrame(seq=5, value="As"), CardFrame(seq=6, value="Kd"))
        read = await source.next_read()
        assert isinstance(read, CardRead)
        assert read.value == "Kd"
        acks = [await device.receive() for _ in range(3)]
        assert [ack.acked for ack in acks if isinstance(ack, AckFrame)] == [5, 5, 6]
        assert source.stats.duplicates == 1


async def test_gap_is_a_misread_then_the_frame(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(device.path) as source:
        device.send(CardFrame(seq=254, value="As"), CardFrame(seq=2, value="Kd"))
        assert isinstance(await source.next_read(), CardRead)
        gap = await source.next_read()
        assert isinstance(gap, Misread)
        assert gap.cause == "gap"
        assert gap.device_seq == 1
        assert "3 device frame(s), seq 255-1" in gap.detail
        read = await source.next_read()
        assert isinstance(read, CardRead)
        assert read.value == "Kd"
        assert read.device_seq == 2
        assert (source.stats.gaps, source.stats.lost_frames) == (1, 3)


async def test_heartbeat_reveals_a_frame_the_device_gave_up(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(device.path) as source:
        device.send(CardFrame(seq=10, value="As"))
        assert isinstance(await source.next_read(), CardRead)
        # Frame 11 never arrives; the device says it is done with it.
        device.send(HeartbeatFrame(uptime_s=3, completed=10), HeartbeatFrame(completed=11))
        gap = await source.next_read()
        assert isinstance(gap, Misread)
        assert gap.cause == "gap"
        assert gap.device_seq == 11
        # A heartbeat written before our ACK arrived (behind us) means nothing.
        device.send(HeartbeatFrame(completed=10), CardFrame(seq=12, value="Kd"))
        read = await source.next_read()
        assert isinstance(read, CardRead)
        assert read.value == "Kd"
        assert source.stats.gaps == 1
        assert source.last_heartbeat_at is not None
        assert source.device_uptime_s == 0


async def test_boot_status_restarts_the_sequence(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(device.path) as source:
        device.send(CardFrame(seq=40, value="As"), StatusFrame(seq=0, state="boot", detail="v1"))
        device.send(CardFrame(seq=1, value="Kd"))
        reads = [await source.next_read() for _ in range(3)]
        assert isinstance(reads[1], DeviceStatus)
        assert reads[1].state == "boot"
        assert [type(read) for read in reads] == [CardRead, DeviceStatus, CardRead]
        assert source.stats.gaps == 0


async def test_heartbeats_are_not_reads_and_not_acked(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(device.path) as source:
        assert source.last_heartbeat_at is None
        device.send(HeartbeatFrame(uptime_s=7), MisreadFrame(seq=3, cause=1, text="dirty"))
        read = await source.next_read()
        assert isinstance(read, Misread)
        assert (read.cause, read.detail, read.device_seq) == ("device", "unreadable: dirty", 3)
        assert source.last_heartbeat_at is not None
        assert source.device_uptime_s == 7
        ack = await device.receive()
        assert isinstance(ack, AckFrame)
        assert ack.acked == 3
        assert source.stats.acks_sent == 1


async def test_corrupt_frames_and_garbage(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(device.path) as source:
        raw = bytearray(encode_raw(CardFrame(seq=1, value="As")))
        raw[5] ^= 0x01
        device.send_bytes(b"\x13\x37garbage" + wrap(bytes(raw)))
        crc = await source.next_read()
        assert isinstance(crc, Misread)
        assert crc.cause == "crc"
        assert crc.device_seq is None
        short = b"\x02\x01\x01"  # shorter than any frame: garbage
        device.send_bytes(wrap(short))
        body = b"\x07\x01\x01\x00"  # version 7
        device.send_bytes(wrap(body + b"\x00\x01"))  # with a wrong CRC: crc
        device.send_bytes(wrap(body + binascii.crc_hqx(body, 0xFFFF).to_bytes(2, "big")))
        device.send(ExpectFrame(round_no=1, slot_index=0, slot_name="A1"))  # an echo
        causes = [await source.next_read() for _ in range(3)]
        assert [read.cause for read in causes if isinstance(read, Misread)] == [
            "crc",
            "malformed",
            "malformed",
        ]
        assert "version" in causes[1].detail  # type: ignore[union-attr]
        assert "echo" in causes[2].detail  # type: ignore[union-attr]
        device.send(CardFrame(seq=1, value="As"))
        read = await source.next_read()
        assert isinstance(read, CardRead)
        assert read.value == "As"
        assert source.garbage_bytes == len(b"\x13\x37garbage") + len(cobs_encode(short))


async def test_commands_reach_the_device(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(device.path) as source:
        await source.expect(3, 1, "B1")
        await source.request_rescan("B1", "misread")
        await source.reject("", "betting is open")
        await source.led(LedColor.GREEN, blink=True, duration_ms=250)
        await source.beep(2, 80)
        await source.reset()
        got = [await device.receive() for _ in range(6)]
        assert got == [
            ExpectFrame(seq=0, round_no=3, slot_index=1, slot_name="B1"),
            RescanFrame(seq=1, slot_name="B1", reason="misread"),
            RejectFrame(seq=2, slot_name="", reason="betting is open"),
            LedFrame(seq=3, color=LedColor.GREEN, blink=True, duration_ms=250),
            BeepFrame(seq=4, count=2, duration_ms=80),
            ResetFrame(seq=5),
        ]
        assert source.stats.commands_sent == 6


# ---------------------------------------------------------------- failures and lifecycle


async def test_heartbeat_timeout(device: RawDevice) -> None:
    settings = DriverSettings(read_timeout=0.05, heartbeat_timeout=0.3)
    async with asyncio.timeout(10), opened(device.path, settings) as source:
        device.send(HeartbeatFrame(uptime_s=1))
        device.send(CardFrame(seq=0, value="As"))
        assert isinstance(await source.next_read(), CardRead)
        with pytest.raises(HeartbeatLost) as info:
            await source.next_read()
        assert info.value.url == device.path
        assert "heartbeat_timeout=0.3s" in str(info.value)


async def test_device_gone_raises_after_pending_reads(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(device.path) as source:
        device.send(CardFrame(seq=0, value="As"))
        await device.receive()  # the ACK: the card was handled
        device.close()
        read = await source.next_read()
        assert isinstance(read, CardRead)
        with pytest.raises(ConnectionLost) as info:
            await source.next_read()
        assert info.value.device == device.path
        with pytest.raises(ConnectionLost):
            await source.next_read()  # stays failed until closed
    with pytest.raises(TransportError, match="not open"):
        await source.next_read()


async def test_close_and_reopen(device: RawDevice) -> None:
    async with asyncio.timeout(10):
        source = open_card_source(f"serial://{device.path}", FAST)
        with pytest.raises(TransportError, match="not open"):
            await source.expect(1, 0, "A1")
        for round_trip in range(3):
            await source.open()
            with pytest.raises(TransportError, match="already open"):
                await source.open()
            device.send(CardFrame(seq=round_trip, value="As"))
            read = await source.next_read()
            assert isinstance(read, CardRead)
            assert read.device_seq == round_trip
            await source.close()
            await source.close()  # twice is fine


async def test_open_failures(tmp_path: object) -> None:
    async with asyncio.timeout(10):
        with pytest.raises(TransportError) as info:
            await open_card_source("serial:///dev/does-not-exist-42", FAST).open()
        assert info.value.device == "/dev/does-not-exist-42"
        assert info.value.detail
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with pytest.raises(TransportError):
            await open_card_source(f"socket://127.0.0.1:{port}", FAST).open()


async def test_pty_is_exclusive(device: RawDevice) -> None:
    async with asyncio.timeout(10), opened(device.path):
        with pytest.raises(TransportError):
            await open_card_source(device.path, FAST).open()


async def test_tcp_device(device: RawDevice) -> None:
    del device
    received: list[bytes] = []
    connected = asyncio.Event()
    writers: list[asyncio.StreamWriter] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        connected.set()
        writer.write(encode(CardFrame(seq=9, value="wd")))
        received.append(await reader.read(100))
        writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with asyncio.timeout(10), opened(f"socket://127.0.0.1:{port}") as source:
            read = await source.next_read()
            assert isinstance(read, CardRead)
            assert read.value == "wd"
            with pytest.raises(ConnectionLost, match="end of file"):
                await source.next_read()
        assert FrameDecoder().feed(received[0]) == [AckFrame(seq=0, acked=9)]
    finally:
        server.close()
        await server.wait_closed()


def test_errors_carry_context() -> None:
    error = DriverError("boom", url="u", device="d", detail="x", seq=3)
    assert str(error) == "boom (url='u', device='d', detail='x', seq=3)"
    assert error.context == {"seq": 3}


async def test_unread_reads_survive_close(device: RawDevice) -> None:
    async with asyncio.timeout(10):
        source = open_card_source(device.path, FAST)
        await source.open()
        device.send(CardFrame(seq=0, value="As"), CardFrame(seq=1, value="Kd"))
        await device.receive()
        await device.receive()  # both ACKed: both queued
        await source.close()
        read = await source.next_read()
        assert isinstance(read, CardRead)
        assert read.value == "As"
        read = await source.next_read()
        assert isinstance(read, CardRead)
        assert read.value == "Kd"
        with pytest.raises(TransportError, match="not open"):
            await source.next_read()
