"""The floor: every table's view, fed by the tables' MQTT topics, followed by the pages.

* :class:`Floor` keeps a :class:`~controller.studio.view.TableView` per table and hands each
  change to the pages following that table (:class:`Mailbox`: full views, so a slow page
  skips to the newest instead of falling behind).
* :class:`Feed` is one broker connection (:class:`controller.mqtt.connection.Connector`: the
  URLs, credentials, TLS, bounded connect and back-off every tablectl client shares) that
  subscribes to ``{prefix}/+/round``, ``status``, ``events``, ``results`` (and, on the secure
  role's connection only, ``secure/events``) and hands every message to a sink.
* :class:`DelayLine` holds messages back by the secure delay before they reach the
  secure-delay floor: nothing is applied (so nothing can be sent) before its time.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from controller.mqtt.connection import Connector
from controller.mqtt.settings import MqttSettings
from controller.studio.view import CHANNELS, TableView, parse_topic

if TYPE_CHECKING:
    import aiomqtt

    from controller.broker import BrokerAddress

log = structlog.get_logger("studio")

Sink = Callable[[str, bytes], None]
"""Where a feed hands each message: ``(topic, payload)``."""

MAILBOX_SIZE = 64
"""Updates a page may have waiting; past it the oldest are dropped (each carries the full view)."""


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
    """

    def __init__(
        self, prefix: str, shows: Callable[[str], bool], *, secure: bool = False, name: str
    ) -> None:
        self.prefix = prefix
        self.shows = shows
        self.secure = secure
        self.name = name
        self.views: dict[str, TableView] = {}
        self.feed_up = False
        self.feed_changed_at = time.time()
        self._pages: dict[str, set[Mailbox]] = collections.defaultdict(set)

    def view(self, table: str) -> TableView:
        """The view of ``table`` (an empty one until its first message)."""
        view = self.views.get(table)
        if view is None:
            view = self.views[table] = TableView(table, secure=self.secure)
        return view

    def handle(self, topic: str, payload: bytes) -> None:
        """Apply one message to its table's view and tell the table's pages."""
        found = parse_topic(topic, self.prefix)
        if found is None:
            return
        table, channel = found
        if not self.shows(table) or (channel == "secure" and not self.secure):
            return
        view = self.view(table)
        if view.apply(channel, topic, payload):
            self._tell(table, view)

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
        """A mailbox for a new page of ``table``, holding the current state first."""
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

    def _tell(self, table: str, view: TableView) -> None:
        boxes = self._pages.get(table)
        if boxes:
            text = encode(self.message(table))  # once, for every page of the table
            for box in boxes:
                box.put(text)


class DelayLine:
    """Holds messages back by ``delay`` seconds, then hands them on, in arrival order.

    Args:
        delay: Seconds each message is held.
        sink: Where a message goes once its time has come.
        clock: Monotonic seconds.
    """

    def __init__(
        self, delay: float, sink: Sink, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.delay = delay
        self.sink = sink
        self.clock = clock
        self._held: collections.deque[tuple[float, str, bytes]] = collections.deque()
        self._wake = asyncio.Event()

    def hold(self, topic: str, payload: bytes) -> None:
        """Take a message; it is handed on ``delay`` seconds from now."""
        self._held.append((self.clock() + self.delay, topic, payload))
        self._wake.set()

    def held(self) -> int:
        """Messages waiting."""
        return len(self._held)

    async def run(self) -> None:
        """Hand each message on at its time, forever (cancel to stop)."""
        while True:
            while not self._held:
                self._wake.clear()
                await self._wake.wait()
            due, topic, payload = self._held[0]
            wait = due - self.clock()
            if wait > 0:
                # A message held meanwhile wakes the line early; the head is looked at again.
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await self._wake.wait()
                continue
            self._held.popleft()
            self.sink(topic, payload)


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

        async def serve(client: aiomqtt.Client, address: BrokerAddress) -> None:
            await self._serve(client, address, stop)

        await self.connector.run(serve, stop=stop)

    async def _serve(
        self, client: aiomqtt.Client, address: BrokerAddress, stop: asyncio.Event
    ) -> None:
        async with asyncio.timeout(self.settings.connect_timeout):
            for topic in self.topics():
                await client.subscribe(topic, qos=1)
        log.info("studio feed subscribed", connection=self.connector.name, url=address.url)
        self.on_link(True)
        try:
            await _until_stopped(client, self._take, stop)
        finally:
            self.on_link(False)

    def _take(self, message: Any) -> None:
        self.messages += 1
        payload = message.payload
        data = payload if isinstance(payload, bytes) else str(payload).encode()
        self.sink(str(message.topic), data)


async def _until_stopped(
    client: aiomqtt.Client, take: Callable[[Any], None], stop: asyncio.Event
) -> None:
    """Hand every message to ``take`` until ``stop`` is set (returns) or the link fails."""
    stopper = asyncio.ensure_future(stop.wait())
    getter: asyncio.Future[Any] | None = None
    try:
        iterator = client.messages.__aiter__()
        while True:
            getter = asyncio.ensure_future(iterator.__anext__())
            done, _ = await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                return
            take(getter.result())
    finally:
        for pending in (stopper, getter):
            if pending is not None and not pending.done():
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending
