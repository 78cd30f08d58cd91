"""Shared parts of the live-play HIL tests: an ACL broker, role clients, a table in-process.

* :func:`acl_broker`: a real Mosquitto with the committed ACL file (``config/mosquitto/acl``,
  unchanged) and a password file holding every user of it (test passwords).
* :class:`Peer`: an MQTT v5 client with one role's credentials. It subscribes to
  ``tables/<id>/#`` (the broker's ACL decides what it really receives), records every message,
  lets the test await a message, and sends commands the way a betting system or a pit-boss
  console does: a v5 response topic under its own reply tree, correlation data, a PUBACK
  checked for a refusal (:func:`controller.mqtt.ack.publish_checked`), and the same
  ``command_id`` sent again if no answer comes (commands are idempotent per id).
* :func:`table_settings`: a table's settings with the controller's credentials.

Everything the tests await is bounded by a timeout.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.app import run_table
from controller.mqtt.ack import publish_checked
from controller.mqtt.client import Client
from controller.orchestrator import RoundSummary
from controller.settings import TableSettings, load_settings
from simulators.table import Simulation, simulated_scanner
from tests.integration._secure_broker import (
    ROLE_PASSWORDS,
    SecureBroker,
    make_password_file,
)

ACL = Path(__file__).resolve().parents[2] / "config" / "mosquitto" / "acl"
TABLE = "tp-01"
"""A table id the committed ACL knows (user ``table-tp-01``)."""
CONTROLLER_USER = f"table-{TABLE}"
ROLE_OF_USER = {"betting": "betting", "pitboss": "pit", "stream": "betting", "viewer": "betting"}
"""Whose reply tree a user's response topics go under (readers never send commands)."""

_CARD = r"(?:[2-9TJQKA][cdhs]|JK)"
CARD_RUN = re.compile(rf"^{_CARD}+(?:-{_CARD}+)?$")
"""A string made only of card notations: one card, or a setting id (``KsKd-JK7c7h``)."""
_CARD_TOKEN = re.compile(_CARD)


@contextmanager
def acl_broker(directory: Path) -> Iterator[SecureBroker]:
    """A Mosquitto with the committed ACL, passwords for every user, no anonymous access."""
    directory.mkdir(parents=True, exist_ok=True)
    passwd = make_password_file(directory / "passwd", ROLE_PASSWORDS)
    config = (
        "listener {port} 127.0.0.1\n"
        "allow_anonymous false\n"
        f"password_file {passwd}\n"
        f"acl_file {ACL}\n"
        "persistence false\n"
        "set_tcp_nodelay true\n"
        "max_queued_messages 100000\n"
        "log_dest stderr\n"
        "log_type error\n"
        "log_type warning\n"
        "log_type notice\n"
    )
    with SecureBroker(config, directory) as broker:
        yield broker


def table_settings(
    broker: SecureBroker,
    game: str,
    journal: Path,
    device_url: str,
    *,
    game_options: dict[str, Any] | None = None,
    rounds: dict[str, Any] | None = None,
    driver: dict[str, Any] | None = None,
) -> TableSettings:
    """Settings of table ``tp-01`` connecting with the controller's own credential."""
    return load_settings(
        None,
        table_id=TABLE,
        game=game,
        game_options=game_options or {},
        device={"url": device_url, "driver": driver or {}},
        mqtt={
            "urls": [f"mqtt://127.0.0.1:{broker.port}"],
            "username": CONTROLLER_USER,
            "password": ROLE_PASSWORDS[CONTROLLER_USER],
            "reconnect_min_seconds": 0.05,
            "reconnect_max_seconds": 0.5,
        },
        journal={"path": journal},
        rounds={"betting_seconds": 0.3, "pause_seconds": 0, **(rounds or {})},
    )


@dataclass(frozen=True)
class Received:
    """One message a peer received.

    Attributes:
        topic: Where it came.
        body: The decoded JSON (``None`` if it was not JSON).
        raw: The payload bytes.
        retain: Whether it was a retained message.
        correlation: Its v5 correlation data, if any.
    """

    topic: str
    body: Any
    raw: bytes
    retain: bool
    correlation: bytes | None

    @property
    def kind(self) -> str | None:
        """The envelope's kind (``None`` for a non-envelope)."""
        return self.body.get("kind") if isinstance(self.body, dict) else None

    @property
    def data(self) -> dict[str, Any]:
        """The envelope's data (``{}`` for a non-envelope)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("data"), dict):
            return dict(self.body["data"])
        return {}

    @property
    def seq(self) -> int | None:
        """The envelope's seq, if any."""
        value = self.body.get("seq") if isinstance(self.body, dict) else None
        return value if isinstance(value, int) else None


class NoAnswer(AssertionError):
    """A command got no answer in time."""


class Peer:
    """A role's MQTT client (v5) that records everything it receives under the table.

    Run :meth:`run` as a task; await :attr:`ready` before the table starts.

    Args:
        broker: The ACL broker.
        user: The MQTT user (``betting``, ``stream``, ``pitboss``, ``table-tp-01``...).
        table: The table id.
    """

    def __init__(self, broker: SecureBroker, user: str, table: str = TABLE) -> None:
        self.broker = broker
        self.user = user
        self.table = table
        self.base = f"tables/{table}"
        self.messages: list[Received] = []
        self.ready = asyncio.Event()
        self._arrived = asyncio.Event()
        self._client: Client | None = None
        role = ROLE_OF_USER.get(user, "betting")
        self.reply_topic = f"{self.base}/reply/{role}/{user}-{uuid.uuid4().hex[:8]}"

    async def run(self) -> None:
        """Connect, subscribe to the table's tree, record until cancelled."""
        client = Client(
            "127.0.0.1",
            self.broker.port,
            username=self.user,
            password=ROLE_PASSWORDS[self.user],
            identifier=f"{self.user}-{uuid.uuid4().hex[:8]}",
            protocol=aiomqtt.ProtocolVersion.V5,
            timeout=10,
        )
        async with client:
            await client.subscribe(f"{self.base}/#", qos=1)
            self._client = client
            self.ready.set()
            async for message in client.messages:
                raw = message.payload if isinstance(message.payload, bytes) else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                correlation = getattr(message.properties, "CorrelationData", None)
                self.messages.append(
                    Received(str(message.topic), body, raw, bool(message.retain), correlation)
                )
                self._arrived.set()

    # -- reading -------------------------------------------------------------------------------

    def on(self, suffix: str) -> list[Received]:
        """Messages received on ``tables/<id>/<suffix>``."""
        topic = f"{self.base}/{suffix}"
        return [m for m in self.messages if m.topic == topic]

    def events(self, kind: str | None = None) -> list[Received]:
        """Envelopes received on ``events`` (of one kind)."""
        return [m for m in self.on("events") if kind is None or m.kind == kind]

    async def wait_for(
        self, predicate: Callable[[Received], bool], *, after: int = 0, seconds: float = 15.0
    ) -> tuple[int, Received]:
        """The first message from index ``after`` on that satisfies ``predicate``.

        Returns:
            Its index in :attr:`messages` and the message.

        Raises:
            TimeoutError: None came within ``seconds``.
        """
        index = after
        async with asyncio.timeout(seconds):
            while True:
                while index < len(self.messages):
                    message = self.messages[index]
                    index += 1
                    if predicate(message):
                        return index - 1, message
                self._arrived.clear()
                await self._arrived.wait()

    async def wait_event(
        self,
        kind: str,
        *,
        after: int = 0,
        where: Callable[[dict[str, Any]], bool] | None = None,
        seconds: float = 15.0,
    ) -> tuple[int, Received]:
        """The next ``events`` envelope of ``kind`` (whose data satisfies ``where``)."""
        topic = f"{self.base}/events"
        return await self.wait_for(
            lambda m: m.topic == topic and m.kind == kind and (where is None or where(m.data)),
            after=after,
            seconds=seconds,
        )

    # -- sending -------------------------------------------------------------------------------

    async def publish(self, suffix: str, payload: bytes) -> None:
        """Publish (QoS 1, v5 PUBACK checked) on ``tables/<id>/<suffix>``.

        Raises:
            PublishRefused: The broker refused it (ACL).
        """
        assert self._client is not None, "await ready first"
        await publish_checked(self._client, f"{self.base}/{suffix}", payload, 1, timeout=5)

    async def command(
        self,
        suffix: str,
        body: dict[str, Any] | bytes,
        *,
        seconds: float = 10.0,
        resend_after: float = 2.0,
    ) -> dict[str, Any]:
        """Send a command on ``cmd/<suffix>`` and return the ``command_answered`` data.

        The command carries this peer's response topic and fresh correlation data; the answer
        is the message on the response topic with that correlation data. When none comes
        within ``resend_after`` seconds the same bytes are sent again (same ``command_id``:
        idempotent), as a real sender does after a lost message.

        Raises:
            PublishRefused: The broker refused the publish (ACL).
            NoAnswer: No answer within ``seconds``.
        """
        assert self._client is not None, "await ready first"
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        correlation = secrets.token_bytes(12)
        properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        properties.ResponseTopic = self.reply_topic
        properties.CorrelationData = correlation
        start = len(self.messages)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while loop.time() < deadline:
            await publish_checked(
                self._client,
                f"{self.base}/cmd/{suffix}",
                payload,
                1,
                properties=properties,
                timeout=5,
            )
            wait = min(resend_after, deadline - loop.time())
            try:
                _, answer = await self.wait_for(
                    lambda m: m.topic == self.reply_topic and m.correlation == correlation,
                    after=start,
                    seconds=max(wait, 0.01),
                )
            except TimeoutError:
                continue
            assert answer.kind == "command_answered", answer.body
            return answer.data
        raise NoAnswer(f"no answer to {suffix} {payload[:200]!r} within {seconds} s")


def strings_in(value: Any) -> Iterator[str]:
    """Every string (keys included) anywhere in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


def cards_named(value: Any) -> set[str]:
    """Card notations a JSON value names: strings that are one card or a run of cards."""
    found: set[str] = set()
    for text in strings_in(value):
        if CARD_RUN.match(text):
            found.update(_CARD_TOKEN.findall(text))
    return found


def leaks(messages: list[Received], hidden: set[str], before_seq: int | None) -> list[str]:
    """Hidden card values named by any message published before ``before_seq``.

    A message without a ``seq`` (status) counts as before. ``before_seq=None``: every
    message counts.
    """
    found: list[str] = []
    for message in messages:
        seq = message.seq
        if before_seq is not None and seq is not None and seq >= before_seq:
            continue
        named = cards_named(message.body) & hidden
        if named:
            found.append(f"{message.topic} seq={seq} kind={message.kind}: {sorted(named)}")
    return found


@dataclass
class Live:
    """A running table and the peers watching it.

    Attributes:
        peers: The role clients, by user name.
        table: The task running :func:`controller.app.run_table`.
    """

    peers: dict[str, Peer]
    table: asyncio.Task[list[RoundSummary]]

    def __getitem__(self, user: str) -> Peer:
        return self.peers[user]

    async def finished(self, seconds: float = 20.0) -> list[RoundSummary]:
        """The table's summaries once ``run_table`` returns (bounded by ``seconds``)."""
        async with asyncio.timeout(seconds):
            return await asyncio.shield(self.table)


@asynccontextmanager
async def live_table(
    broker: SecureBroker,
    game: str,
    sim: Simulation,
    journal: Path,
    *,
    rounds: int = 1,
    users: Sequence[str] = ("betting", "stream"),
    game_options: dict[str, Any] | None = None,
    round_settings: dict[str, Any] | None = None,
    driver: dict[str, Any] | None = None,
) -> AsyncIterator[Live]:
    """Peers connected and subscribed first, then the table on the simulator's pty.

    Everything runs in one TaskGroup (named tasks); on the way out the table is stopped if it
    is still running and the peers are cancelled.
    """
    async with asyncio.TaskGroup() as group:
        peers = {user: Peer(broker, user) for user in users}
        peer_tasks = [
            group.create_task(peer.run(), name=f"peer-{user}") for user, peer in peers.items()
        ]
        async with asyncio.timeout(10):
            for peer in peers.values():
                await peer.ready.wait()
        try:
            async with simulated_scanner(game, sim) as url:
                settings = table_settings(
                    broker,
                    game,
                    journal,
                    url,
                    game_options=game_options,
                    rounds=round_settings,
                    driver=driver,
                )
                table = group.create_task(run_table(settings, rounds=rounds), name=f"table-{game}")
                try:
                    yield Live(peers, table)
                finally:
                    if not table.done():
                        table.cancel()
                    async with asyncio.timeout(15):
                        await asyncio.wait({table})
        finally:
            for task in peer_tasks:
                task.cancel()
