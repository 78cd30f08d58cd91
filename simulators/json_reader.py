"""Simulated JSON tag readers: ESP32/RC522 readers publishing to a broker, or on a pty.

:class:`JsonReaderSimulator` is one or several readers and the dealer in front of them (the
scanner simulator's :class:`~simulators.dealer.SimulatedDealer`). A card the dealer puts on a
reader lies in its field, and the reader reports it again and again (every ``repeat``
seconds, a message each with the next ``seq``) until it is taken away:

* one reader for every slot (a scan pad): the card is taken away when the next one is put
  down;
* one reader a hand (``readers``: a seat antenna): the cards stay until the next round's
  first cue (the dealer collects the table).

Messages are the rfid-poker shape, ``{"device_id": ..., "seq": ..., "card_uid": ...}``, on the
reader's topic (:meth:`JsonReaderSimulator.serve_mqtt`, aiomqtt, QoS 0 as an ESP32's
PubSubClient) or as JSON lines on a pty (:meth:`JsonReaderSimulator.serve_pty`). Cues come
back as JSON on each reader's ``cmd`` topic, or as JSON lines from the host.

Faults (:class:`ReaderFaults`, with the plan's misreads and unplugs): a tag of another deck put
down first (the rescan brings the right card), hostile payloads published before a card,
a reader restarting (its ``seq`` back to 0), repeats lost (a brief drop, shorter than the
latch's removal time).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from controller.cards import Deck
from drivers.codec import CardFrame, ExpectFrame, Frame, MisreadFrame, RejectFrame, RescanFrame
from drivers.profile import CodeTable
from simulators.dealer import SimulatedDealer
from simulators.errors import SimulatorConfigError, SimulatorError
from simulators.faults import FaultInjector, FaultPlan, Outgoing, SimulatorStats
from simulators.pty_port import PtyPort, open_pty, point_link

__all__ = ["HOSTILE_PAYLOADS", "JsonReaderSimulator", "ReaderFaults", "ReaderStats"]

_log = structlog.get_logger(__name__)

HOSTILE_PAYLOADS: tuple[bytes, ...] = (
    b"\xff\xfe\x00garbage",
    b"[" * 5000 + b"]" * 5000,
    b'{"device_id": "x", "seq": 1, "card_uid": "' + b"A" * 5000 + b'"}',
    b'{"device_id": "x", "seq": 1e999, "card_uid": null}',
    b'{"device_id": ["x"], "seq": 1, "card_uid": null}',
    b'{"device_id": "x", "seq": 1, "card_uid": "not hex!"}',
    b"null",
    b'"04A2B3C4D5E6F7"',
)
"""What a hostile or broken publisher puts on a reader topic (each refused by the table)."""


@dataclass(frozen=True, slots=True)
class ReaderFaults:
    """What goes wrong with the readers (beside the plan's misreads and unplugs).

    Attributes:
        unknown_tag_rate: Chance a card's first placement is a tag of another deck (the dealer
            picked up the wrong card; the rescan puts the right one down).
        hostile_rate: Chance a hostile payload is published before a card's first placement.
        restart_at: Card indices (0-based) at which the reader restarts (its ``seq`` back to 0).
        drop_rate: Chance a repeat is not sent (a brief drop).
        seed: Seed of the draws.
    """

    unknown_tag_rate: float = 0.0
    hostile_rate: float = 0.0
    restart_at: frozenset[int] = frozenset()
    drop_rate: float = 0.0
    seed: int = 0


@dataclass
class ReaderStats:
    """What the readers did.

    Attributes:
        messages: Tag messages published (repeats included).
        unknown_tags: Tags of another deck put down.
        hostile: Hostile payloads published.
        restarts: Reader restarts.
        dropped: Repeats not sent.
        cues: Cues the readers received.
        reconnects: Times the readers reconnected to the broker after losing it.
        wifi_drops: Times a reader's WiFi was lost (:meth:`JsonReaderSimulator.wifi_down`).
    """

    messages: int = 0
    unknown_tags: int = 0
    hostile: int = 0
    restarts: int = 0
    dropped: int = 0
    cues: int = 0
    reconnects: int = 0
    wifi_drops: int = 0


@dataclass
class _Reader:
    name: str
    slots: tuple[str, ...]
    field: list[str] = field(default_factory=list)
    seq: int = 0
    topic: str = ""
    cmd_topic: str = ""
    offline: bool = False


class JsonReaderSimulator:
    """Simulated JSON tag readers and their dealer.

    Args:
        table: The deck's code table (each card's tag).
        readers: Reader name -> the slots it reads; ``None``: one reader (``pad_name``) for
            every slot, a scan pad.
        cards: Values dealt as written, in order (else a shuffled ``deck`` with ``seed``).
        deck: The deck to deal when no script is given.
        seed: The shuffle seed.
        faults: The plan's faults (misreads, unplugs).
        reader_faults: The readers' own faults.
        deal_delay: Seconds between a cue and the card put down.
        repeat: Seconds between two reports of a tag lying in a field.
        collect: Seconds the dealer takes to collect the last round's cards at the next
            round's first cue, before dealing (longer than the latch's removal time: a card of
            the last round dealt again at once would still count as lying there).
        pad_name: The scan pad's name (its ``device_id`` and its topic's last level)
            when ``readers`` is ``None``.

    Attributes:
        drawn: Every card put down, once, in order.
        rejected: Cards put aside after a reject.
        stats: The dealer's counters.
        reader_stats: The readers' counters.
    """

    def __init__(
        self,
        table: CodeTable,
        *,
        readers: Mapping[str, Sequence[str]] | None = None,
        cards: Sequence[str] | None = None,
        deck: Deck | None = None,
        seed: int = 0,
        faults: FaultPlan | None = None,
        reader_faults: ReaderFaults | None = None,
        deal_delay: float = 0.05,
        repeat: float = 0.05,
        collect: float = 0.0,
        pad_name: str = "reader-1",
    ) -> None:
        self.table = table
        self.faults = faults if faults is not None else FaultPlan()
        self.reader_faults = reader_faults if reader_faults is not None else ReaderFaults()
        pieces = [str(piece) for piece in deck] if deck is not None and cards is None else []
        for card in [*(cards or ()), *pieces]:
            if table.code_of(card) is None:
                raise SimulatorConfigError(
                    "a card to deal has no tag in the code table", card=card, table=table.name
                )
        self.pad = readers is None
        bindings = readers if readers is not None else {pad_name: ()}
        self._readers = {name: _Reader(name, tuple(slots)) for name, slots in bindings.items()}
        self.repeat = repeat
        self.collect = collect
        self.stats = SimulatorStats()
        self.reader_stats = ReaderStats()
        self.drawn: list[str] = []
        self.rejected: list[str] = []
        self._rng = random.Random(f"{self.reader_faults.seed}:readers")
        self._dealer = SimulatedDealer(
            deck=deck if deck is not None else Deck.standard(),
            seed=None if cards is not None else seed,
            script=cards,
            deal_delay=deal_delay,
            interval=None,
            positions=True,
            faults=FaultInjector(self.faults, self.stats),
            stats=self.stats,
            send=self._send,
            unplug=self._pull_cable,
            silence=lambda seconds: None,
            drawn=self.drawn,
            rejected=self.rejected,
        )
        self._round: int | None = None
        self._cued_slot: str | None = None
        self._scanned: set[str] = set()
        self._foreign: dict[str, str] = {}
        self._cards_put = 0
        self._publish: Any = None
        self._client: Any = None
        self._port: PtyPort | None = None
        self._link: Path | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def reader_names(self) -> list[str]:
        """The readers' names."""
        return list(self._readers)

    # ------------------------------------------------------------------ the dealer's side

    def _reader_for(self, slot: str | None) -> _Reader:
        if self.pad or slot is None:
            return next(iter(self._readers.values()))
        for reader in self._readers.values():
            if slot in reader.slots:
                return reader
        raise SimulatorError("no simulated reader reads this slot", slot=slot)

    def _send(self, frame: Frame, out: Outgoing | None) -> None:
        if isinstance(frame, CardFrame):
            self._put_down(frame.value, self._reader_for(frame.position))
        elif isinstance(frame, MisreadFrame):
            self._emit(self._reader_for(self._cued_slot), {"error": "read"})

    def _put_down(self, card: str, reader: _Reader) -> None:
        faults, rng = self.reader_faults, self._rng
        first = card not in self._scanned
        self._scanned.add(card)
        if first:
            if faults.hostile_rate and rng.random() < faults.hostile_rate:
                self.reader_stats.hostile += 1
                self._raw(reader, HOSTILE_PAYLOADS[rng.randrange(len(HOSTILE_PAYLOADS))])
            if self._cards_put in faults.restart_at:
                self.reader_stats.restarts += 1
                reader.seq = 0
            self._cards_put += 1
        copy = max(0, self.drawn.count(card) - 1)
        uid = self.table.code_of(card, copy)
        assert uid is not None
        foreign = self._foreign.pop(card, None)
        if foreign in reader.field:
            reader.field.remove(foreign)  # the wrong card taken back
        if first and faults.unknown_tag_rate and rng.random() < faults.unknown_tag_rate:
            self.reader_stats.unknown_tags += 1
            uid = self._foreign[card] = self._unknown(uid)
        if self.pad:
            reader.field[:] = []
        if uid not in reader.field:
            reader.field.append(uid)
        self._report(reader, uid)

    def _unknown(self, uid: str) -> str:
        for digit in "0123456789ABCDEF":
            candidate = uid[:-1] + digit
            if self.table.card_of(candidate) is None:
                return candidate
        raise SimulatorError("no unknown tag of the same shape", uid=uid)

    def _on_cue(self, body: Any) -> None:
        if not isinstance(body, dict):
            return
        cue, slot = body.get("cue"), str(body.get("slot", ""))
        self.reader_stats.cues += 1
        if cue == "expect":
            round_no, index = int(body.get("round", 1)), int(body.get("slot_index", 0))
            expect = ExpectFrame(round_no=round_no, slot_index=index, slot_name=slot)
            new_round = self._round is not None and round_no != self._round
            self._round, self._cued_slot = round_no, slot
            if new_round:
                for reader in self._readers.values():
                    reader.field[:] = []  # the dealer collects the last round's cards
                if self.collect:
                    self._spawn(self._cue_later(expect, self.collect))
                    return
            self._dealer.cue(expect)
        elif cue == "rescan":
            self._dealer.cue(RescanFrame(slot_name=slot, reason=""))
        elif cue == "reject":
            self._dealer.cue(RejectFrame(slot_name=slot, reason=""))

    async def _cue_later(self, expect: ExpectFrame, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._dealer.cue(expect)

    def _pull_cable(self, seconds: float) -> None:
        """A pty reader's cable is pulled (an MQTT reader's WiFi is not simulated)."""
        if self._link is None:
            return
        self.stats.unplugs += 1
        port, self._port = self._port, None
        self._spawn(self._unplug(port, seconds))

    async def _unplug(self, port: PtyPort | None, seconds: float) -> None:
        assert self._link is not None
        with contextlib.suppress(FileNotFoundError):
            self._link.unlink()
        if port is not None:
            await port.close()
        await asyncio.sleep(seconds)
        self._port = await open_pty(self._host_lines)
        point_link(self._link, self._port.path)

    # ------------------------------------------------------------------ the readers' side

    def _report(self, reader: _Reader, uid: str) -> None:
        self.reader_stats.messages += 1
        reader.seq += 1
        self._emit(reader, {"card_uid": uid}, count=False)

    def _emit(self, reader: _Reader, body: dict[str, Any], *, count: bool = True) -> None:
        if count:
            reader.seq += 1
        message = {"device_id": reader.name, "seq": reader.seq, **body}
        self._raw(reader, json.dumps(message, separators=(",", ":")).encode())

    def _raw(self, reader: _Reader, payload: bytes) -> None:
        if reader.offline:
            self.stats.dropped_bytes += len(payload)
        elif self._publish is not None:
            self._publish(reader, payload)

    async def wifi_down(self, name: str, seconds: float) -> None:
        """A reader's WiFi is lost for ``seconds``.

        It publishes nothing, and its status topic says ``offline`` (what the broker publishes
        from its Last Will) until it is back (``online``). Its tags stay in its field.
        """
        reader = self._readers[name]
        status = f"{reader.topic}/status"
        self.reader_stats.wifi_drops += 1
        reader.offline = True
        self._publish_status(status, b"offline")
        await asyncio.sleep(seconds)
        reader.offline = False
        self._publish_status(status, b"online")

    def _publish_status(self, topic: str, payload: bytes) -> None:
        client = self._client
        if client is not None:
            self._spawn(client.publish(topic, payload, qos=1, retain=True))

    async def _repeats(self) -> None:
        """Every ``repeat`` seconds, each reader reports each tag in its field."""
        while True:
            await asyncio.sleep(self.repeat)
            for reader in self._readers.values():
                for uid in list(reader.field):
                    if self.reader_faults.drop_rate and (
                        self._rng.random() < self.reader_faults.drop_rate
                    ):
                        self.reader_stats.dropped += 1
                        reader.seq += 1
                        continue
                    self._report(reader, uid)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @contextlib.asynccontextmanager
    async def _running(self) -> AsyncIterator[None]:
        self._dealer.start()
        self._spawn(self._dealer.run())
        self._spawn(self._repeats())
        try:
            yield
        finally:
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            failures = [
                r
                for r in results
                if isinstance(r, Exception) and not isinstance(r, asyncio.CancelledError)
            ]
            if failures:
                raise SimulatorError("a reader simulator task failed", error=repr(failures[0]))

    # ------------------------------------------------------------------ MQTT

    @contextlib.asynccontextmanager
    async def serve_mqtt(
        self, host: str, port: int, prefix: str, *, seconds: float = 5.0
    ) -> AsyncIterator[dict[str, tuple[str, str]]]:
        """Publish to a broker; yields each reader's ``(topic, cmd topic)``.

        A reader's topic is ``PREFIX/NAME``, its cue topic ``PREFIX/NAME/cmd``, its status
        ``PREFIX/NAME/status`` (``online``, retained, at every connection); ``seconds``
        bounds every call to the broker. The readers connect before this yields, and
        reconnect (every 0.1 s) when the broker goes away, as an ESP32's firmware does; what
        they would publish meanwhile is dropped (``stats.dropped_bytes``).
        """
        for reader in self._readers.values():
            reader.topic = f"{prefix}/{reader.name}"
            reader.cmd_topic = f"{prefix}/{reader.name}/cmd"
        connected = asyncio.Event()
        self._publish = self._dropped
        self._spawn(self._mqtt_session(host, port, seconds, connected))
        try:
            async with asyncio.timeout(seconds):
                await connected.wait()
            async with self._running():
                _log.info("json_readers_serving", broker=f"{host}:{port}", prefix=prefix)
                try:
                    yield {r.name: (r.topic, r.cmd_topic) for r in self._readers.values()}
                finally:
                    await self._clear_statuses(seconds)
        finally:
            self._publish = None
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _clear_statuses(self, seconds: float) -> None:
        """Delete the readers' retained statuses (a simulation leaves nothing on a broker)."""
        client = self._client
        if client is None:
            return
        for reader in self._readers.values():
            with contextlib.suppress(Exception):
                async with asyncio.timeout(seconds):
                    await client.publish(f"{reader.topic}/status", b"", qos=1, retain=True)

    def _dropped(self, reader: _Reader, payload: bytes) -> None:
        self.stats.dropped_bytes += len(payload)

    async def _mqtt_session(
        self, host: str, port: int, seconds: float, connected: asyncio.Event
    ) -> None:
        """The readers' connection: connect, subscribe to the cues, reconnect when lost."""
        import aiomqtt

        while True:
            client = aiomqtt.Client(host, port, timeout=seconds, keepalive=5)
            try:
                async with asyncio.timeout(seconds):
                    await client.__aenter__()
                    for reader in self._readers.values():
                        await client.subscribe(reader.cmd_topic, qos=1, timeout=seconds)
            except (aiomqtt.MqttError, OSError, TimeoutError):
                await asyncio.sleep(0.1)
                continue

            def publish(reader: _Reader, payload: bytes, client: aiomqtt.Client = client) -> None:
                self._spawn(self._publish_one(client, reader.topic, payload, seconds))

            self._publish, self._client = publish, client
            for reader in self._readers.values():
                word = b"offline" if reader.offline else b"online"
                self._publish_status(f"{reader.topic}/status", word)
            connected.set()
            try:
                async for message in client.messages:
                    payload = message.payload
                    if isinstance(payload, bytes | bytearray):
                        with contextlib.suppress(ValueError):
                            self._on_cue(json.loads(payload))
            except aiomqtt.MqttError:
                self.reader_stats.reconnects += 1
            finally:
                if self._publish is publish:
                    self._publish, self._client = self._dropped, None
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(seconds):
                        await client.__aexit__(None, None, None)
            await asyncio.sleep(0.1)

    async def _publish_one(self, client: Any, topic: str, payload: bytes, seconds: float) -> None:
        try:
            await client.publish(topic, payload, qos=0, timeout=seconds)
        except Exception:  # the broker went away: an ESP32 drops it too
            self.stats.dropped_bytes += len(payload)

    # ------------------------------------------------------------------ pty

    @contextlib.asynccontextmanager
    async def serve_pty(self) -> AsyncIterator[str]:
        """One reader writing JSON lines on a pty behind a symbolic link; yields the link."""
        if len(self._readers) != 1:
            raise SimulatorConfigError("a pty serves one reader", readers=len(self._readers))
        tmpdir = tempfile.mkdtemp(prefix="tablectl-jsonl-sim-")
        self._link = Path(tmpdir) / "reader"

        def publish(reader: _Reader, payload: bytes) -> None:
            port = self._port
            transport = port.write_transport if port is not None else None
            line = payload.replace(b"\n", b" ") + b"\n"
            if transport is None or transport.is_closing():
                self.stats.dropped_bytes += len(line)
                return
            transport.write(line)

        self._publish = publish
        try:
            self._port = await open_pty(self._host_lines)
            point_link(self._link, self._port.path)
            async with self._running():
                yield str(self._link)
        finally:
            self._publish = None
            if self._port is not None:
                await self._port.close()
                self._port = None
            with contextlib.suppress(OSError):
                self._link.unlink()
                os.rmdir(tmpdir)

    async def _host_lines(self, reader: asyncio.StreamReader) -> None:
        buffer = b""
        while True:
            data = await reader.read(4096)
            if not data:
                return
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                with contextlib.suppress(ValueError):
                    self._on_cue(json.loads(line))
