"""Scan-to-publish latency of a whole table, against the floor of the same work done bare.

    .venv/bin/python bench/scan_to_publish.py [--cards 10200] [--burst]

The bench plays the scanner: it holds the master side of a real pseudo-terminal and writes a
CARD frame (our wire protocol) whenever the controller cues a slot. The controller runs as a
separate process (``tablectl run --config ...``: serial driver, orchestrator, SQLite journal
with ``synchronous=FULL``, outbox, MQTT QoS 1) against a private Mosquitto. A subscriber in
the bench records when each card's ``card_dealt`` event arrives. Latency = arrival - the
moment the frame was written to the pty.

The floor, in the same run: a bare worker process that reads the same frame from a pty,
commits one SQLite row (WAL, ``synchronous=FULL``) and publishes one QoS 1 message. Both
processes stay up for the whole run and are measured turn about, card by card, so both see
the same conditions.

Also printed: the controller's peak RSS, and its CPU seconds per 100 rounds while it plays
(from the first cue to the last card; the whole process's, start-up included, beside it).
Targets: p99 within 1.5x of the floor's p99; under 80 MB; under 2 CPU seconds per 100 rounds.

The p99's spread is printed with it: a 95 % bootstrap interval (the spread that comes from the
number of cards; the run says whether it is within +/-5 %) and the p99 of each fifth of the run
(the spread in time, the machine's load changing). 1,020 cards made p99 the 11th slowest card,
which swung 0.73-1.18x run to run; 10,200 (the default) make it the 102nd (docs/performance.md).
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
from tests.support.mosquitto import MosquittoProcess

TABLE = "bench"
BETTING_SECONDS = 0.0
QUIET_SECONDS = 0.005
BURST_BLOCK = 102
"""Cards per turn in a burst (17 rounds)."""
"""Each frame is written after this long without one (a dealer's cards come seconds apart: the
bench measures a card that finds the process done with the previous one, not a burst)."""
DECK = [str(Card(code)) for code in range(52)]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


SEGMENTS = 5
"""The run's cards in this many consecutive parts, each with its own p99 (the spread in time)."""
BOOTSTRAP = 400
"""Resamples for the p99's 95 % interval (the spread from the number of cards)."""
STABLE_SHARE = 0.05
"""p99 counts as stable run to run when its 95 % interval is within +/- 5 % of it."""


def p99_spread(latencies: list[float]) -> tuple[list[float], float, float]:
    """p99 of each consecutive segment, and the 2.5 % and 97.5 % bootstrap bounds of p99."""
    size = len(latencies) // SEGMENTS
    segments = [percentile(latencies[i * size : (i + 1) * size], 0.99) for i in range(SEGMENTS)]
    rng = random.Random(0)
    resampled = sorted(
        percentile(rng.choices(latencies, k=len(latencies)), 0.99) for _ in range(BOOTSTRAP)
    )
    return segments, percentile(resampled, 0.025), percentile(resampled, 0.975)


def ratio_interval(table: list[float], floor: list[float]) -> tuple[float, float]:
    """2.5 % and 97.5 % bootstrap bounds of p99(table) / p99(floor), cards resampled in pairs.

    The two were measured turn about, card by card: card ``i`` of each saw the same moment of
    the machine, so a resample keeps the pairs together.
    """
    rng = random.Random(1)
    pairs = list(zip(table, floor, strict=False))
    ratios = []
    for _ in range(BOOTSTRAP):
        sample = rng.choices(pairs, k=len(pairs))
        ratios.append(
            percentile([t for t, _ in sample], 0.99) / percentile([f for _, f in sample], 0.99)
        )
    ratios.sort()
    return percentile(ratios, 0.025), percentile(ratios, 0.975)


def describe_spread(name: str, latencies: list[float]) -> str:
    """The p99's spread: its bootstrap interval and the p99 of each fifth of the run."""
    p99 = percentile(latencies, 0.99)
    segments, low, high = p99_spread(latencies)
    half = max(p99 - low, high - p99) / p99
    parts = " ".join(f"{value * 1000:.2f}" for value in segments)
    return (
        f"{name:<28} p99 95 % interval {low * 1000:.3f}-{high * 1000:.3f} ms "
        f"(+/-{half * 100:.0f} %); p99 of each fifth: {parts} ms"
    )


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


class ControllerUnderTest:
    """The controller as a separate process, fed cards on a pty when it cues them."""

    def __init__(self, broker: MosquittoProcess, workdir: Path, cards: int) -> None:
        self.broker = broker
        self.workdir = workdir
        self.rounds = -(-cards // 6)
        self.latencies: list[float] = []
        self.expects: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self.arrivals: dict[tuple[int, int], asyncio.Future[float]] = {}
        self.process: asyncio.subprocess.Process | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.cpu_at_first_cue: float | None = None
        self.cpu_at_last_card = 0.0

    def _arrival(self, key: tuple[int, int]) -> asyncio.Future[float]:
        if key not in self.arrivals:
            self.arrivals[key] = asyncio.get_running_loop().create_future()
        return self.arrivals[key]

    def _on_frame(self, frame: Frame) -> None:
        if isinstance(frame, ExpectFrame):
            self.expects.put_nowait((frame.round_no, frame.slot_index))

    async def start(self) -> None:
        self.master, self.slave, path = open_pty()
        self.device = BenchDevice(self.master, self._on_frame)
        config = self.workdir / "bench.toml"
        config.write_text(
            f'table_id = "{TABLE}"\n'
            f'[device]\nurl = "serial://{path}"\n'
            f'[mqtt]\nurls = ["{self.broker.url}"]\n'
            f"[rounds]\nbetting_seconds = {BETTING_SECONDS}\npause_seconds = 0\n"
            f'[journal]\npath = "{self.workdir / "journal.sqlite"}"\n'
            '[logging]\nlevel = "WARNING"\nformat = "json"\n'
        )
        ready = asyncio.Event()

        async def subscribe() -> None:
            broker = self.broker
            async with aiomqtt.Client(broker.host, broker.port, identifier="bench-sub") as client:
                await client.subscribe(f"tables/{TABLE}/events", qos=1)
                ready.set()
                async for message in client.messages:
                    moment = time.perf_counter()
                    body = json.loads(message.payload)
                    if body.get("kind") == "card_dealt":
                        round_no = int(str(body["round"]).rsplit("-", 1)[1])
                        future = self._arrival((round_no, int(body["data"]["index"])))
                        if not future.done():
                            future.set_result(moment)

        self.tasks.append(asyncio.create_task(subscribe(), name="bench-subscriber"))
        await ready.wait()
        self.tasks.append(asyncio.create_task(self.device.heartbeats(), name="bench-heartbeats"))
        self.device.send(StatusFrame(seq=0, state="boot", detail="bench"))
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "controller.cli",
            "run",
            "--config",
            str(config),
            "--rounds",
            str(self.rounds),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )

    def cpu_seconds(self) -> float:
        """The controller's CPU seconds so far (user + system, from ``/proc``)."""
        assert self.process is not None
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def play(self, cards: int, *, warm_up: int = 0) -> None:
        """Deal ``cards`` cards, each when the controller cues it; time all but the first
        ``warm_up`` of them."""
        for dealt in range(cards):
            round_no, slot_index = await asyncio.wait_for(self.expects.get(), 30)
            if self.cpu_at_first_cue is None:  # start-up is over: the first slot is cued
                self.cpu_at_first_cue = self.cpu_seconds()
            await asyncio.sleep(QUIET_SECONDS)
            deck = random.Random(round_no).sample(DECK, 6)
            written = self.device.send(
                CardFrame(seq=self.device.next_seq(), value=deck[slot_index])
            )
            received = await asyncio.wait_for(self._arrival((round_no, slot_index)), 30)
            if dealt >= warm_up:
                self.latencies.append(received - written)
        self.cpu_at_last_card = self.cpu_seconds()

    async def finish(self) -> dict[str, float]:
        """Wait for the controller to exit; its peak RSS and CPU seconds."""
        assert self.process is not None
        try:
            _, err = await asyncio.wait_for(self.process.communicate(), 60)
            if self.process.returncode != 0:
                raise SystemExit(f"controller failed ({self.process.returncode}):\n{err.decode()}")
        finally:
            await self.close()
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # before the floor worker exits
        return {
            "rss_mb": usage.ru_maxrss / 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "user_s": usage.ru_utime,
            "sys_s": usage.ru_stime,
        }

    async def close(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()
        if hasattr(self, "device"):
            self.device.close()
            os.close(self.master)
            os.close(self.slave)
            del self.device


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


class Floor:
    """The floor worker as a separate process, fed the same frames on its own pty."""

    def __init__(self, broker: MosquittoProcess, workdir: Path) -> None:
        self.broker = broker
        self.workdir = workdir
        self.latencies: list[float] = []
        self.arrivals: asyncio.Queue[tuple[int, float]] = asyncio.Queue()
        self.sent = 0
        self.worker: asyncio.subprocess.Process | None = None
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.master, self.slave, path = open_pty()
        ready_byte: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            try:
                with_data = os.read(self.master, 64)
            except OSError:  # the worker closed its side
                loop.remove_reader(self.master)
                return
            if with_data and not ready_byte.done():
                ready_byte.set_result(None)

        loop.add_reader(self.master, readable)
        ready = asyncio.Event()

        async def subscribe() -> None:
            broker = self.broker
            async with aiomqtt.Client(broker.host, broker.port, identifier="bench-floor-sub") as c:
                await c.subscribe("bench/floor", qos=1)
                ready.set()
                async for message in c.messages:
                    moment = time.perf_counter()
                    index = json.loads(message.payload)["index"]
                    self.arrivals.put_nowait((index, moment))

        self.tasks.append(asyncio.create_task(subscribe(), name="floor-subscriber"))
        await ready.wait()
        self.worker = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--floor-worker",
            path,
            self.broker.url,
            str(self.workdir / "floor.sqlite"),
        )
        await asyncio.wait_for(ready_byte, 30)

    async def play(self, cards: int, *, warm_up: int = 0) -> None:
        """Send ``cards`` frames, one at a time; time all but the first ``warm_up``."""
        for sent in range(cards):
            await asyncio.sleep(QUIET_SECONDS)
            self.sent += 1
            frame = encode(CardFrame(seq=self.sent % 256, value=DECK[self.sent % 52]))
            written = time.perf_counter()
            os.write(self.master, frame)
            got, received = await asyncio.wait_for(self.arrivals.get(), 30)
            assert got == self.sent
            if sent >= warm_up:
                self.latencies.append(received - written)

    async def close(self) -> None:
        if self.worker is not None and self.worker.returncode is None:
            self.worker.kill()
            await self.worker.wait()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if hasattr(self, "master"):
            asyncio.get_running_loop().remove_reader(self.master)
            os.close(self.master)
            os.close(self.slave)
            del self.master


async def main(cards: int, burst: bool) -> int:
    """Measure the floor and the controller taking turns.

    Both processes are up for the whole run, and each waits for its next frame while the other
    is measured, so both see the same conditions (the machine's speed changes during a run)
    instead of whichever ran second taking all of it. By default they take turns card by card,
    each frame written after :data:`QUIET_SECONDS` without one. A burst takes turns by blocks
    of :data:`BURST_BLOCK` cards sent back to back; the first card of each block, which finds
    the process cold after the other's block, is a warm-up and not counted (for both).
    """
    rounds = -(-cards // 6)
    with tempfile.TemporaryDirectory(prefix="tablectl-bench-") as tmp:
        workdir = Path(tmp)
        with MosquittoProcess(workdir / "broker") as broker:
            table = ControllerUnderTest(broker, workdir, rounds * 6)
            floor = Floor(broker, workdir)
            try:
                await floor.start()
                await table.start()
                if burst:
                    for first in range(0, rounds * 6, BURST_BLOCK):
                        block = min(BURST_BLOCK, rounds * 6 - first)
                        await floor.play(block, warm_up=1)
                        await table.play(block, warm_up=1)
                else:
                    for _ in range(rounds * 6):  # turn about, card by card
                        await floor.play(1)
                        await table.play(1)
                usage = await table.finish()
            finally:
                await table.close()
                await floor.close()
    how = (
        f"turns of {BURST_BLOCK} cards back to back (the first of each not counted)"
        if burst
        else f"turn about, card by card, each written after {QUIET_SECONDS * 1000:g} ms quiet"
    )
    print(
        f"scan → subscriber latency, {len(table.latencies)} cards "
        f"({rounds} Teen Patti rounds, betting window {BETTING_SECONDS:g} s), "
        f"journal synchronous=FULL, QoS 1; floor and tablectl: {how}"
    )
    print(describe("floor (read+commit+publish)", floor.latencies))
    print(describe("tablectl", table.latencies))
    ratio = percentile(table.latencies, 0.99) / percentile(floor.latencies, 0.99)
    print(f"p99 ratio tablectl/floor: {ratio:.2f}x   (target <= 1.5x)")
    for name, latencies in (("floor", floor.latencies), ("tablectl", table.latencies)):
        print(describe_spread(name, latencies))
    floor_parts, _, _ = p99_spread(floor.latencies)
    table_parts, _, _ = p99_spread(table.latencies)
    low, high = ratio_interval(table.latencies, floor.latencies)
    half = max(ratio - low, high - ratio) / ratio
    print(
        f"p99 ratio 95 % interval {low:.2f}-{high:.2f}x (+/-{half * 100:.0f} %); of each fifth: "
        f"{' '.join(f'{t / f:.2f}' for t, f in zip(table_parts, floor_parts, strict=True))}x; "
        f"stable to +/-{STABLE_SHARE * 100:.0f} %: "
        f"{'yes' if half <= STABLE_SHARE else 'NO (more --cards, or a quieter machine)'}"
    )
    per_100 = usage["cpu_s"] / rounds * 100
    assert table.cpu_at_first_cue is not None
    playing = table.cpu_at_last_card - table.cpu_at_first_cue
    print(f"controller peak RSS: {usage['rss_mb']:.1f} MB   (target < 80 MB)")
    print(
        f"controller CPU while playing: {playing:.2f} s from the first cue to the last card "
        f"= {playing / rounds * 100:.2f} s per 100 rounds   (target < 2 s)"
    )
    print(
        f"controller CPU, whole process: {usage['cpu_s']:.2f} s = {per_100:.2f} s per 100 "
        f"rounds (start-up {table.cpu_at_first_cue:.2f} s: imports, journal, broker "
        f"connection; user {usage['user_s']:.2f} s, system {usage['sys_s']:.2f} s)"
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--floor-worker":
        asyncio.run(floor_worker(sys.argv[2], sys.argv[3], sys.argv[4]))
        raise SystemExit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cards",
        type=int,
        default=10_200,
        help="cards to measure (default 10,200: p99 is the 102nd slowest, within +/-5 %% "
        "on a quiet machine)",
    )
    parser.add_argument(
        "--betting-seconds",
        type=float,
        default=0.0,
        help="betting window between rounds (default 0: the first card of a round then "
        "races the publication of the previous result and the new round; a real table "
        "has seconds there)",
    )
    parser.add_argument(
        "--quiet-ms",
        type=float,
        default=5.0,
        help="time without a frame before each frame is written (default 5 ms: a card finds "
        "the process done with the previous one, as at a table)",
    )
    parser.add_argument(
        "--burst",
        action="store_true",
        help=f"send blocks of {BURST_BLOCK} cards back to back instead (each card races the "
        "processing of the one before)",
    )
    options = parser.parse_args()
    BETTING_SECONDS = options.betting_seconds
    QUIET_SECONDS = 0.0 if options.burst else options.quiet_ms / 1000
    raise SystemExit(asyncio.run(main(options.cards, options.burst)))
