"""The floor: every table's view, fed by the tables' MQTT topics, followed by the pages.

* :class:`Floor` keeps a :class:`~controller.studio.view.TableView` per table and hands each
  change to the pages following that table (:class:`Mailbox`: full views, so a slow page
  skips to the newest instead of falling behind).
* :class:`Feed` is one broker connection (:class:`controller.mqtt.connection.Connector`: the
  URLs, credentials, TLS, bounded connect and back-off every tablectl client shares) that
  subscribes to ``{prefix}/+/round``, ``status``, ``events``, ``results`` (and, on the secure
  role's connection only, ``secure/events``) and hands every message to a sink.
* :class:`DelayLine` holds messages back by the secure delay before they reach the
  secure-delay floor: nothing is applied (so nothing can be sent) before its time, and a
  round's secrets (hole cards, secure equities) not before the round has ended.

A table gets a view only when the studio serves it (``tables`` in ``studio.toml``) or has
heard a well-formed message of it on the broker (read through :mod:`controller.inbound`): a
page asking for a made-up table creates nothing.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import itertools
import json
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from controller.inbound import (
    Rejection,
    RejectionLog,
    parse_envelope,
    parse_snapshot,
    parse_status,
)
from controller.messages import RESULT_KINDS
from controller.mqtt.connection import Connector
from controller.mqtt.receive import take_until_stopped
from controller.mqtt.settings import MqttSettings
from controller.studio.view import CHANNELS, Channel, TableView, parse_topic

if TYPE_CHECKING:
    from controller.broker import BrokerAddress
    from controller.mqtt.client import Client as MqttClient

log = structlog.get_logger("studio")

Sink = Callable[[str, bytes], None]
"""Where a feed hands each message: ``(topic, payload)``."""

MAILBOX_SIZE = 64
"""Updates a page may have waiting; past it the oldest are dropped (each carries the full view)."""

MAX_TABLES = 500
"""Tables a floor keeps a view of at most (heard on the broker or served)."""

MAX_HELD_SECRETS = 20_000
"""Round secrets the delay line holds at most (past it the oldest are dropped, not shown)."""

_KEEP_ENDED_ROUNDS = 64
"""Ended rounds remembered per table (a late secret of one is not held again)."""


def encode(message: dict[str, Any]) -> str:
    """A message to the pages as compact JSON text."""
    return json.dumps(message, separators=(",", ":"))


class Mailbox:
    """The updates waiting for one page (each a full view: dropping old ones loses nothing).

    Attributes:
        dropped: Updates dropped because the page was slow.
    """

    def __init__(self, size: int = MAILBOX_SIZE) -> None:
        self._items: collections.deque[str] = collections.deque(maxlen=size)
        self._ready = asyncio.Event()
        self.dropped = 0

    def put(self, message: str) -> None:
        """Add an update, as sent (JSON text); the oldest is dropped when full."""
        if len(self._items) == self._items.maxlen:
            self.dropped += 1
        self._items.append(message)
        self._ready.set()

    async def get(self) -> str:
        """The next update (waits for one)."""
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()


class Floor:
    """Every table's view, and the pages following each table.

    Args:
        prefix: The tables' topic prefix.
        shows: Whether a table id is one of the studio's.
        secure: Whether its views read ``secure/events`` (the secure-delay floor).
        name: ``public`` or ``secure-delay``, in logs and in what the pages get.

    Attributes:
        views: The views by table id.
        feed_up: Whether the floor's broker connection is up.
        feed_changed_at: When it last went up or down (epoch seconds).
        before_follow: Called before a page starts to follow a table (``None``: nothing).
    """

    def __init__(
        self,
        prefix: str,
        shows: Callable[[str], bool],
        *,
        secure: bool = False,
        name: str,
        max_tables: int = MAX_TABLES,
        rejections: RejectionLog | None = None,
    ) -> None:
        self.prefix = prefix
        self.shows = shows
        self.secure = secure
        self.name = name
        self.max_tables = max_tables
        self.rejections = rejections or RejectionLog(reader=f"studio-{name}")
        self.views: dict[str, TableView] = {}
        self.feed_up = False
        self.feed_changed_at = time.time()
        self._pages: dict[str, set[Mailbox]] = collections.defaultdict(set)
        self._full_logged = False
        self.before_follow: Callable[[], None] | None = None

    def view(self, table: str) -> TableView:
        """The view of ``table`` (an empty one until its first message)."""
        view = self.views.get(table)
        if view is None:
            view = TableView(table, secure=self.secure, rejections=self.rejections)
            self.views[table] = view
        return view

    def heard(self, table: str) -> bool:
        """Whether ``table`` has a view here (served, or heard on the broker)."""
        return table in self.views

    def handle(self, topic: str, payload: bytes) -> None:
        """Apply one message to its table's view and tell the table's pages."""
        found = parse_topic(topic, self.prefix)
        if found is None:
            return
        table, channel = found
        if not self.shows(table) or (channel == "secure" and not self.secure):
            return
        view = self.views.get(table)
        if view is None:
            if not self._first_heard(table, channel, topic, payload):
                return
            view = self.view(table)
        if view.apply(channel, topic, payload):
            self._tell(table, view)

    def _first_heard(self, table: str, channel: Channel, topic: str, payload: bytes) -> bool:
        """Whether a table's first message makes it one of the floor's (well-formed, room)."""
        parsed: object
        if channel == "status":
            parsed = parse_status(payload, table=table)
        elif channel == "round":
            parsed = parse_snapshot(payload, table=table)
        else:
            parsed = parse_envelope(payload, table=table, secure=channel == "secure")
        if isinstance(parsed, Rejection):
            self.rejections.record(parsed.at(topic, table))
            return False
        if len(self.views) >= self.max_tables:
            if not self._full_logged:
                log.warning(
                    "studio floor full: a new table's messages are ignored",
                    floor=self.name,
                    table=table[:80],
                    max_tables=self.max_tables,
                )
                self._full_logged = True
            return False
        return True

    def set_feed(self, up: bool) -> None:
        """The broker connection went up or down: every page is told."""
        if up == self.feed_up:
            return
        self.feed_up = up
        self.feed_changed_at = time.time()
        for table in list(self._pages):
            self._tell(table, self.view(table))

    def message(self, table: str) -> dict[str, Any]:
        """What a page of ``table`` gets: the view, the feed's state, the server's clock."""
        return {
            "type": "state",
            "mode": self.name,
            "feed": {"up": self.feed_up, "since": self.feed_changed_at},
            "server_time": time.time(),
            "view": self.view(table).to_wire(),
        }

    def follow(self, table: str) -> Mailbox:
        """A mailbox for a new page of ``table``, holding the current state first.

        :attr:`before_follow` is called first (the secure-delay line hands on what is due:
        :meth:`DelayLine.catch_up`).
        """
        if self.before_follow is not None:
            self.before_follow()
        box = Mailbox()
        box.put(encode(self.message(table)))
        self._pages[table].add(box)
        return box

    def leave(self, table: str, box: Mailbox) -> None:
        """The page of ``box`` is gone."""
        pages = self._pages.get(table)
        if pages is not None:
            pages.discard(box)
            if not pages:
                del self._pages[table]

    def pages(self) -> int:
        """How many pages follow a table of this floor."""
        return sum(len(boxes) for boxes in self._pages.values())

    def watched(self) -> bool:
        """Whether any page follows a table of this floor."""
        return bool(self._pages)

    def _tell(self, table: str, view: TableView) -> None:
        boxes = self._pages.get(table)
        if boxes:
            text = encode(self.message(table))  # once, for every page of the table
            for box in boxes:
                box.put(text)


IDLE_HOLD = 256
"""Messages an unwatched secure-delay line holds before what is due goes on (a few minutes of
one table's messages; at most a few hundred KB)."""


def _always() -> bool:
    return True


class DelayLine:
    """Holds messages back by ``delay`` seconds, and a round's secrets until it ends.

    Every message is handed on ``delay`` seconds after its arrival (the stream's video
    delay), in time order. A ``secure/events`` entry of a round (a hidden card's value, a
    secure ``table_info`` such as Hold'em's win probabilities, a withheld refusal or
    command: everything the public feed withheld) is held longer when its round is still
    being played: until the round's ``round_result`` or ``round_voided`` has arrived (or its
    table's retained snapshot says the round is over, or the table has moved on to another
    round), or the delay has passed, whichever is later. A hand's hole cards therefore never
    reach a secure-delay overlay while its decisions are open, however long they take.

    Payloads are read only through :mod:`controller.inbound`: a ``secure/events`` message
    that does not parse is dropped (never handed on early), counted and logged once.

    Args:
        delay: Seconds each message is held.
        sink: Where a message goes once its time has come.
        prefix: The tables' topic prefix (to tell a message's table and topic).
        clock: Monotonic seconds.
        rejections: Where unreadable secure messages are counted (one is made if not given).
        max_held: Round secrets held at most (a round that never ends cannot fill memory);
            past it the oldest are dropped (not shown).
        batch_seconds: When the line's head falls due, how much longer it waits so that what
            falls due meanwhile goes on with it (a table's event and its snapshot come a few
            ms apart): one wake-up for the burst instead of one each. Nothing goes on before
            its time; a message goes on at most this late. 0: each at its own time.
        watched: Whether anyone reads what the line hands on (the secure-delay floor has a
            page open). While nobody does, the line does not wake at each message's time:
            what is due waits until a page comes (:meth:`catch_up`, called before the page
            reads the floor) or until more than ``idle_hold`` messages are held, then goes
            on together, in order. ``None``: always watched.
        idle_hold: Messages held at most while unwatched before what is due goes on.
    """

    def __init__(
        self,
        delay: float,
        sink: Sink,
        *,
        prefix: str = "tables",
        clock: Callable[[], float] = time.monotonic,
        rejections: RejectionLog | None = None,
        max_held: int = MAX_HELD_SECRETS,
        batch_seconds: float = 0.0,
        watched: Callable[[], bool] | None = None,
        idle_hold: int = IDLE_HOLD,
    ) -> None:
        self.delay = delay
        self.batch_seconds = batch_seconds
        self.watched = watched or _always
        self.idle_hold = idle_hold
        self.sink = sink
        self.prefix = prefix
        self.clock = clock
        self.rejections = rejections or RejectionLog(reader="studio-secure-delay")
        self.max_held = max_held
        self.dropped = 0
        self._due: list[tuple[float, int, str, bytes]] = []  # a heap: (due, arrival no., ...)
        self._order = itertools.count()
        self._rounds: dict[tuple[str, str], list[tuple[float, int, str, bytes]]] = {}
        self._secrets = 0
        self._ended: dict[str, collections.deque[str]] = {}
        self._wake = asyncio.Event()

    def hold(self, topic: str, payload: bytes) -> None:
        """Take a message; it is handed on ``delay`` seconds from now, or later (see above)."""
        due = self.clock() + self.delay
        item = (due, next(self._order), topic, payload)
        found = parse_topic(topic, self.prefix)
        if found is None:
            self._schedule(item)
            return
        table, channel = found
        if channel == "secure":
            self._hold_secret(table, topic, item)
            return
        self._follow(table, channel, payload)
        self._schedule(item)

    def held(self) -> int:
        """Messages waiting (round secrets included)."""
        return len(self._due) + self._secrets

    def secrets(self) -> int:
        """Round secrets waiting for their round to end."""
        return self._secrets

    def catch_up(self) -> None:
        """Hand on at once everything due by now; the line then looks again at its head.

        For a page about to read the floor: it sees what is due, however long the line has
        slept unwatched.
        """
        self._hand_on(self.clock())
        self._wake.set()

    async def run(self) -> None:
        """Hand each message on at its time, forever (cancel to stop)."""
        while True:
            while not self._due or not self.watched():
                self._wake.clear()
                await self._wake.wait()
            now = self.clock()
            wait = self._due[0][0] - now
            if wait > 0:
                # A message held meanwhile that is due sooner (a round's secret released to
                # go on at once) wakes the line early; the head is looked at again.
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait + self.batch_seconds):
                        await self._wake.wait()
                continue
            self._hand_on(now)

    # -- inside -------------------------------------------------------------------------------

    def _hand_on(self, now: float) -> None:
        while self._due and self._due[0][0] <= now:  # everything due by now, in order
            _, _, topic, payload = heapq.heappop(self._due)
            self.sink(topic, payload)

    def _schedule(self, item: tuple[float, int, str, bytes]) -> None:
        heapq.heappush(self._due, item)
        if not self.watched():
            # Nobody reads the floor: no wake-up at each message's time. Past the bound,
            # what is due goes on now, together (the line's memory stays bounded).
            if len(self._due) > self.idle_hold:
                self._hand_on(self.clock())
            return
        if self._due[0] is item:
            # Only a new head changes when the line must wake: a message held behind it (the
            # usual case, each due ``delay`` after the one before) leaves the line asleep
            # instead of waking it to wait again for the same head.
            self._wake.set()

    def _hold_secret(self, table: str, topic: str, item: tuple[float, int, str, bytes]) -> None:
        envelope = parse_envelope(item[3], table=table, secure=True)
        if isinstance(envelope, Rejection):
            self.rejections.record(envelope.at(topic, table))
            return
        round_id = envelope.round
        if round_id is None or round_id in self._ended.get(table, ()):
            self._schedule(item)  # no round to wait for, or its round is over
            return
        if self._secrets >= self.max_held:
            self._drop_oldest_secret()
        self._rounds.setdefault((table, round_id), []).append(item)
        self._secrets += 1

    def _follow(self, table: str, channel: str, payload: bytes) -> None:
        """Note from a public message whether a round of ``table`` ended or another began.

        A round ends with its ``round_result`` or ``round_voided`` (a replayed one of an
        earlier round ends nothing that is held), or when the retained snapshot shows it
        settled or voided. The table has moved on when a ``round_opened`` or the retained
        snapshot names another round: what is held for earlier rounds goes on then.
        """
        if channel == "round":
            snapshot = parse_snapshot(payload, table=table)
            if isinstance(snapshot, Rejection):
                return  # the floor's view rejects (and logs) it too
            envelope, data = snapshot
            current, ended = envelope.round, data.state in ("settled", "voided")
        elif channel in ("events", "results"):
            parsed = parse_envelope(payload, table=table)
            if isinstance(parsed, Rejection):
                return
            if parsed.kind in RESULT_KINDS and parsed.round is not None:
                self._end(table, parsed.round)
            if parsed.kind != "round_opened":
                return
            current, ended = parsed.round, False
        else:
            return
        if current is None:
            return
        for key in [key for key in self._rounds if key[0] == table and key[1] != current]:
            self._release(key)
        if ended:
            self._end(table, current)

    def _end(self, table: str, round_id: str) -> None:
        ended = self._ended.setdefault(table, collections.deque(maxlen=_KEEP_ENDED_ROUNDS))
        if round_id not in ended:
            ended.append(round_id)
        self._release((table, round_id))

    def _release(self, key: tuple[str, str]) -> None:
        items = self._rounds.pop(key, [])
        self._secrets -= len(items)
        now = self.clock()
        for due, order, topic, payload in items:
            self._schedule((max(due, now), order, topic, payload))

    def _drop_oldest_secret(self) -> None:
        key = min(self._rounds, key=lambda k: self._rounds[k][0][1])
        items = self._rounds[key]
        items.pop(0)
        if not items:
            del self._rounds[key]
        self._secrets -= 1
        self.dropped += 1
        log.warning("secure-delay: a round secret dropped (too many held)", table=key[0])


FEED_QOS = 0
"""The QoS the studio's feed subscribes at (docs/studio.md, "Delivery").

The feed is a clean session: what a lost link misses it misses at any QoS, and the retained
snapshot and the fold's gap handling repair a view either way. On a live link the broker
hands QoS 0 messages on in order, as it does QoS 1 ones, without a PUBACK from the studio
for each (a send, and a wake-up of the broker, for every message the studio reads)."""


class Feed:
    """One broker connection that subscribes to the tables' topics and hands each message on.

    Args:
        settings: The connection's settings (URLs, credentials, TLS, timeouts, prefix).
        sink: Where each message goes.
        on_link: Called with ``True`` once subscribed, ``False`` when the link is lost.
        secure: Also subscribe to ``{prefix}/+/secure/events`` (the secure role's connection).
        tables: Subscribe to these tables only (empty: ``+``, every table).
        name: The connection's name in logs.

    Attributes:
        connector: The shared connection life-cycle.
        messages: Messages received.
    """

    def __init__(
        self,
        settings: MqttSettings,
        sink: Sink,
        *,
        on_link: Callable[[bool], None],
        secure: bool = False,
        tables: list[str] | None = None,
        name: str = "studio-feed",
    ) -> None:
        client_id = settings.client_id or f"tablectl-studio-{uuid.uuid4().hex[:10]}"
        self.settings = settings
        self.sink = sink
        self.on_link = on_link
        self.secure = secure
        self.tables = list(tables or [])
        self.messages = 0
        self.connector = Connector(
            settings, client_id=client_id, name=name, logger=f"tablectl.{name}", log=log
        )

    def topics(self) -> list[str]:
        """The subscriptions (``+`` for every table, or one per listed table)."""
        prefix = self.settings.topic_prefix.strip("/")
        tables = self.tables or ["+"]
        leaves = [leaf for leaf in CHANNELS if self.secure or leaf != "secure/events"]
        return [
            "/".join(part for part in (prefix, table, leaf) if part)
            for table in tables
            for leaf in leaves
        ]

    async def run(self, stop: asyncio.Event) -> None:
        """Connect, subscribe and hand messages on until ``stop`` is set, reconnecting."""

        async def serve(client: MqttClient, address: BrokerAddress) -> None:
            await self._serve(client, address, stop)

        await self.connector.run(serve, stop=stop)

    async def _serve(self, client: MqttClient, address: BrokerAddress, stop: asyncio.Event) -> None:
        async with asyncio.timeout(self.settings.connect_timeout):
            for topic in self.topics():
                await client.subscribe(topic, qos=FEED_QOS)
        log.info("studio feed subscribed", connection=self.connector.name, url=address.url)
        self.on_link(True)
        try:
            await take_until_stopped(client, self._take, stop)
        finally:
            self.on_link(False)

    def _take(self, message: Any) -> None:
        self.messages += 1
        payload = message.payload
        data = payload if isinstance(payload, bytes) else str(payload).encode()
        self.sink(str(message.topic), data)
