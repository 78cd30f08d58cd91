"""Scan-to-publish latency of a whole table, against the floor of the same work done bare.

    .venv/bin/python bench/scan_to_publish.py [--cards 1020]

The bench plays the scanner: it holds the master side of a real pseudo-terminal and writes a
CARD frame (our wire protocol) whenever the controller cues a slot. The controller runs as a
separate process (``tablectl run --config ...``: serial driver, orchestrator, SQLite journal
with ``synchronous=FULL``, outbox, MQTT QoS 1) against a private Mosquitto. A subscriber in
the bench records when each card's ``card_dealt`` event arrives. Latency = arrival - the
moment the frame was written to the pty.

The floor, in the same run: a bare worker process that reads the same frame from a pty,
commits one SQLite row (WAL, ``synchronous=FULL``) and publishes one QoS 1 message.

Also printed: the controller's peak RSS and CPU seconds per 100 rounds (startup included).
Targets: p99 within 1.5x of the floor's p99; under 80 MB; under 2 CPU seconds per 100 rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
import tty
from collections.abc import Callable
from pathlib import Path

import aiomqtt

# bench/ is first on sys.path when a script here runs, and bench/drivers.py would shadow the
# drivers package: put the repository first.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.cards import Card
from controller.mosquitto import MosquittoProcess
from drivers.codec import (
    AckFrame,
    CardFrame,
    CorruptFrame,
    ExpectFrame,
    Frame,
    FrameDecoder,
    HeartbeatFrame,
    StatusFrame,
    encode,
)

TABLE = "bench"
BETTING_SECONDS = 0.0
DECK = [str(Card(code)) for code in range(52)]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def describe(name: str, latencies: list[float]) -> str:
    ms = [value * 1000 for value in latencies]
    return (
        f"{name:<28} n={len(ms):>5}  p50 {statistics.median(ms):6.3f} ms   "
        f"p99 {percentile(ms, 0.99):6.3f} ms   max {max(ms):7.3f} ms"
    )


def open_pty() -> tuple[int, int, str]:
    """A raw pty: master fd, slave fd and the slave's path.

    The bench keeps the slave open (never reading it) until the run ends: while no process
    has the slave open, Linux reports the master readable with EIO, which the bench takes for
    "the controller went away" (the controller opens the port only after it has started).
    """
    master, slave = os.openpty()
    tty.setraw(master)
    tty.setraw(slave)
    path = os.ttyname(slave)
    return master, slave, path


class BenchDevice:
    """The scanner's side of the pty: frames out, host commands in."""

    def __init__(self, master: int, on_frame: Callable[[Frame], None]) -> None:
        self.master = master
        self.decoder = FrameDecoder()
        self.seq = 0
        self.completed: int | None = None
        self.on_frame = on_frame
        self.started = time.monotonic()
        asyncio.get_running_loop().add_reader(master, self._readable)

    def _readable(self) -> None:
        try:
            data = os.read(self.master, 4096)
        except OSError:  # the controller closed its side
            asyncio.get_running_loop().remove_reader(self.master)
            return
        for item in self.decoder.feed(data):
            if isinstance(item, CorruptFrame):
                continue
            if isinstance(item, AckFrame):
                self.completed = item.acked
            self.on_frame(item)

    def send(self, frame: Frame) -> float:
        data = encode(frame)
        moment = time.perf_counter()
        os.write(self.master, data)
        return moment

    def next_seq(self) -> int:
        self.seq = (self.seq + 1) % 256
        return self.seq

    async def heartbeats(self) -> None:
        while True:
            uptime = int(time.monotonic() - self.started)
            self.send(HeartbeatFrame(uptime_s=uptime, completed=self.completed))
            await asyncio.sleep(0.5)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.master)  # idempotent


async def measure_controller(broker: MosquittoProcess, workdir: Path, cards: int) -> dict:
    rounds = -(-cards // 6)
    master, slave, path = open_pty()
    expects: asyncio.Queue[tuple[int, int]] = asyncio.Queue()

    def on_frame(frame: Frame) -> None:
        if isinstance(frame, ExpectFrame):
            expects.put_nowait((frame.round_no, frame.slot_index))

    device = BenchDevice(master, on_frame)
    config = workdir / "bench.toml"
    config.write_text(
        f'table_id = "{TABLE}"\n'
        f'[device]\nurl = "serial://{path}"\n'
        f'[mqtt]\nurls = ["{broker.url}"]\n'
        f"[rounds]\nbetting_seconds = {BETTING_SECONDS}\npause_seconds = 0\n"
        f'[journal]\npath = "{workdir / "journal.sqlite"}"\n'
        '[logging]\nlevel = "WARNING"\nformat = "json"\n'
    )
    arrivals: dict[tuple[int, int], asyncio.Future[float]] = {}
    loop = asyncio.get_running_loop()

    def arrival(key: tuple[int, int]) -> asyncio.Future[float]:
        if key not in arrivals:
            arrivals[key] = loop.create_future()
        return arrivals[key]

    ready = asyncio.Event()

    async def subscribe() -> None:
        async with aiomqtt.Client(broker.host, broker.port, identifier="bench-sub") as client:
            await client.subscribe(f"tables/{TABLE}/events", qos=1)
            ready.set()
            async for message in client.messages:
                moment = time.perf_counter()
                body = json.loads(message.payload)  # type: ignore[arg-type]
                if body.get("kind") == "card_dealt":
                    round_no = int(str(body["round"]).rsplit("-", 1)[1])
                    future = arrival((round_no, int(body["data"]["index"])))
                    if not future.done():
                        future.set_result(moment)

    subscriber = asyncio.create_task(subscribe(), name="bench-subscriber")
    await ready.wait()
    beats = asyncio.create_task(device.heartbeats(), name="bench-heartbeats")
    device.send(StatusFrame(seq=0, state="boot", detail="bench"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "controller.cli",
        "run",
        "--config",
        str(config),
        "--rounds",
        str(rounds),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    latencies: list[float] = []
    try:
        for _ in range(rounds * 6):
            round_no, slot_index = await asyncio.wait_for(expects.get(), 30)
            deck = random.Random(round_no).sample(DECK, 6)
            written = device.send(CardFrame(seq=device.next_seq(), value=deck[slot_index]))
            received = await asyncio.wait_for(arrival((round_no, slot_index)), 30)
            latencies.append(received - written)
        _, err = await asyncio.wait_for(process.communicate(), 60)
        if process.returncode != 0:
            raise SystemExit(f"controller failed ({process.returncode}):\n{err.decode()}")
    finally:
        if process.returncode is None:
            process.kill()
        beats.cancel()
        subscriber.cancel()
        await asyncio.gather(beats, subscriber, return_exceptions=True)
        device.close()
        os.close(master)
        os.close(slave)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "latencies": latencies,
        "rounds": rounds,
        "rss_mb": usage.ru_maxrss / 1024,
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


async def floor_worker(pty_path: str, broker_url: str, db_path: str) -> None:
    """The bare path: read the frame, commit one row, publish one QoS 1 message."""
    host, port = broker_url.removeprefix("mqtt://").split(":")
    fd = os.open(pty_path, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS entries (seq INTEGER PRIMARY KEY, body TEXT)")
    decoder = FrameDecoder()
    frames: asyncio.Queue[CardFrame] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    def readable() -> None:
        for item in decoder.feed(os.read(fd, 4096)):
            if isinstance(item, CardFrame):
                frames.put_nowait(item)

    loop.add_reader(fd, readable)
    async with aiomqtt.Client(host, int(port), identifier="bench-floor") as client:
        os.write(fd, b"R")  # ready
        seq = 0
        while True:
            frame = await frames.get()
            seq += 1
            body = json.dumps({"card": frame.value, "index": seq})
            db.execute("BEGIN")
            db.execute("INSERT INTO entries VALUES (?, ?)", (seq, body))
            db.execute("COMMIT")
            await client.publish("bench/floor", body, qos=1)


async def measure_floor(broker: MosquittoProcess, workdir: Path, cards: int) -> list[float]:
    master, slave, path = open_pty()
    loop = asyncio.get_running_loop()
    ready_byte: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        try:
            with_data = os.read(master, 64)
        except OSError:  # the worker closed its side
            loop.remove_reader(master)
            return
        if with_data and not ready_byte.done():
            ready_byte.set_result(None)

    loop.add_reader(master, readable)
    arrivals: asyncio.Queue[tuple[int, float]] = asyncio.Queue()
    ready = asyncio.Event()

    async def subscribe() -> None:
        async with aiomqtt.Client(broker.host, broker.port, identifier="bench-floor-sub") as c:
            await c.subscribe("bench/floor", qos=1)
            ready.set()
            async for message in c.messages:
                moment = time.perf_counter()
                arrivals.put_nowait((json.loads(message.payload)["index"], moment))  # type: ignore[arg-type]

    subscriber = asyncio.create_task(subscribe(), name="floor-subscriber")
    await ready.wait()
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--floor-worker",
        path,
        broker.url,
        str(workdir / "floor.sqlite"),
    )
    latencies: list[float] = []
    try:
        await asyncio.wait_for(ready_byte, 30)
        for index in range(1, cards + 1):
            frame = encode(CardFrame(seq=index % 256, value=DECK[index % 52]))
            written = time.perf_counter()
            os.write(master, frame)
            got, received = await asyncio.wait_for(arrivals.get(), 30)
            assert got == index
            latencies.append(received - written)
    finally:
        worker.kill()
        await worker.wait()
        subscriber.cancel()
        await asyncio.gather(subscriber, return_exceptions=True)
        loop.remove_reader(master)
        os.close(master)
        os.close(slave)
    return latencies


async def main(cards: int) -> int:
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
        workdir = Path(tmp)
        with MosquittoProcess(workdir / "broker") as broker:
            table = await measure_controller(broker, workdir, cards)
            floor = await measure_floor(broker, workdir, cards)
    print(
        f"scan → subscriber latency, {len(table['latencies'])} cards "
        f"({table['rounds']} Teen Patti rounds, betting window {BETTING_SECONDS:g} s), "
        "journal synchronous=FULL, QoS 1"
    )
    print(describe("floor (read+commit+publish)", floor))
    print(describe("tablectl", table["latencies"]))
    floor_p99 = percentile(floor, 0.99)
    ratio = percentile(table["latencies"], 0.99) / floor_p99
    print(f"p99 ratio tablectl/floor: {ratio:.2f}x   (target <= 1.5x)")
    per_100 = table["cpu_s"] / table["rounds"] * 100
    print(f"controller peak RSS: {table['rss_mb']:.1f} MB   (target < 80 MB)")
    print(
        f"controller CPU: {table['cpu_s']:.2f} s for {table['rounds']} rounds = "
        f"{per_100:.2f} s per 100 rounds, startup included   (target < 2 s)"
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--floor-worker":
        asyncio.run(floor_worker(sys.argv[2], sys.argv[3], sys.argv[4]))
        raise SystemExit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=1020, help="cards to measure (>= 1000)")
    parser.add_argument(
        "--betting-seconds",
        type=float,
        default=0.0,
        help="betting window between rounds (default 0: the first card of a round then "
        "races the publication of the previous result and the new round; a real table "
        "has seconds there)",
    )
    options = parser.parse_args()
    BETTING_SECONDS = options.betting_seconds
    raise SystemExit(asyncio.run(main(options.cards)))
