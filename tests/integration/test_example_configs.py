"""Each example config against the shipped broker (issue 21, "Docs that misled the probe").

``config/table-example.toml``, ``studio-example.toml``, ``studio-pit-example.toml`` and
``archive-example.toml`` are loaded by their own loaders; for each connection the program
would open, its user connects (TLS, the port its URL names mapped to the test broker's) to a
real Mosquitto running the shipped ``config/mosquitto/`` (paths and ports replaced, the ACL
unchanged, every ACL user in the password files), subscribes to what the program subscribes
to and must receive a message published there by a user allowed to write it, and publishes
what the program publishes without a refusal. Also: the password recipe and the "Adding a
table" block of ``config/mosquitto/README.md`` give exactly the ACL's users and blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiomqtt
import pytest

from controller.commands import ROUTES
from controller.messages import Topics
from controller.mqtt.ack import publish_checked
from controller.mqtt.client import Client
from controller.mqtt.settings import MqttSettings
from controller.settings import load_settings
from controller.studio.config import load_studio_settings
from controller.studio.pit.floor import FEED_LEAVES
from controller.studio.pit.passwords import hash_password
from controller.studio.pit.settings import load_pit_settings
from controller.studio.view import CHANNELS
from tests.integration._secure_broker import (
    COMMITTED,
    SHIPPED_PASSWORDS,
    SecureBroker,
    TlsFiles,
    acl_users,
    shipped_broker,
)
from tests.support.mosquitto import MISSING, have_mosquitto

CONFIG = COMMITTED.parent
TOKEN = "kq4Yc1n0lDk2Hh8v0V5dRr3xw7tLmZ9a"
LISTENERS = {8883: "roles", 8884: "controllers"}
"""The shipped listeners' ports (mosquitto.conf)."""


@dataclass
class Connection:
    """One connection an example config makes: its user, what it reads and writes."""

    config: str
    what: str
    settings: MqttSettings
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.config} {self.what} (user {self.settings.username})"


def _table_connections() -> list[Connection]:
    settings = load_settings(CONFIG / "table-example.toml")
    mqtt = settings.mqtt
    topics = Topics(prefix=mqtt.topic_prefix, table=settings.table_id)
    replies = [topics.reply(role) + leaf for role in ("betting", "pit") for leaf in ("", "/c-1")]
    status = mqtt.betting_status_topic
    assert status is not None
    return [
        Connection(
            "table-example",
            "outbox",
            mqtt.for_connection("publisher"),
            writes=[
                topics.status,
                topics.round,
                topics.events,
                topics.results,
                topics.secure_events,
                *replies,
            ],
        ),
        Connection(
            "table-example",
            "command router",
            mqtt.for_connection("command"),
            reads=[f"{topics.cmd_root}/#"],
        ),
        Connection(
            "table-example", "status watcher", mqtt.for_connection("status"), reads=[status]
        ),
    ]


def _studio_connections() -> list[Connection]:
    settings = load_studio_settings(
        CONFIG / "studio-example.toml", environ={"TABLECTL_STUDIO_SECURE__TOKEN": TOKEN}
    )
    prefix = settings.mqtt.topic_prefix.strip("/")
    tables = settings.tables or ["+"]
    public = [f"{prefix}/{t}/{leaf}" for t in tables for leaf in CHANNELS if "secure" not in leaf]
    found = [Connection("studio-example", "public feed", settings.mqtt, reads=public)]
    secure = settings.secure_mqtt
    assert secure is not None
    found.append(
        Connection(
            "studio-example",
            "secure-delay feed",
            secure,
            reads=[f"{prefix}/{t}/{leaf}" for t in tables for leaf in CHANNELS],
        )
    )
    return found


def _pit_connections(tmp: Path) -> list[Connection]:
    text = (CONFIG / "studio-pit-example.toml").read_text()
    text = text.replace('session_secret = "REPLACE"', f'session_secret = "{TOKEN}"')
    stored = hash_password("pw", n=2**10, r=8, p=1)
    text = text.replace("REPLACE: tablectl studio --hash-password", stored)
    filled = tmp / "studio-pit.toml"
    filled.write_text(text)
    settings = load_pit_settings(filled, section="pit")
    mqtt = settings.mqtt
    prefix = mqtt.topic_prefix.rstrip("/")
    tables = settings.tables or ["+"]
    reads = [f"{prefix}/{t}/{leaf}" for t in tables for leaf in FEED_LEAVES]
    if mqtt.betting_status_topic is not None:
        reads.append(mqtt.betting_status_topic)
    reads += [f"{prefix}/{t}/reply/pit/console-1" for t in tables]
    writes = [
        Topics(prefix=prefix, table=t).cmd(route)
        for t in tables
        for route, spec in ROUTES.items()
        if spec.role == "pit"
    ]
    return [Connection("studio-pit-example", "pit console", mqtt, reads=reads, writes=writes)]


def _archive_connections() -> list[Connection]:
    from controller.archive.config import load_archive_settings

    settings = load_archive_settings(CONFIG / "archive-example.toml")
    mqtt = settings.mqtt
    prefix = mqtt.topic_prefix.rstrip("/")
    group = settings.consumer.share_group
    share = f"$share/{group}/" if group else ""
    role = settings.gaps.replay_role
    topics = Topics(prefix=prefix, table="tp-01")
    return [
        Connection(
            "archive-example",
            "consumer",
            mqtt.for_connection("publisher"),
            reads=[f"{share}{prefix}/+/{leaf}" for leaf in ("events", "results", "status")],
        ),
        Connection(
            "archive-example",
            "replay requests",
            mqtt.for_connection("command"),
            reads=[f"{topics.reply(role)}/archive-7"],
            writes=[topics.cmd("replay" if role == "betting" else "pit/replay")],
        ),
    ]


def _concrete(topic_filter: str) -> str:
    """A topic the filter matches (``$share/...`` stripped, ``+`` -> tp-01, ``#`` -> a leaf)."""
    parts = topic_filter.split("/")
    if parts[0] == "$share":
        parts = parts[2:]
    return "/".join({"+": "tp-01", "#": "decision"}.get(part, part) for part in parts)


def _writer(topic: str) -> str:
    """A user of the shipped ACL that may publish ``topic``."""
    if topic == "betting/status":
        return "betting"
    found = re.fullmatch(r"tables/([^/]+)/(.*)", topic)
    assert found, topic
    table, leaf = found.groups()
    if leaf.startswith("cmd/pit/"):
        return "pitboss"
    if leaf.startswith("cmd/"):
        return "betting"
    return f"table-{table}"


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SecureBroker, TlsFiles]]:
    broker, tls = shipped_broker(tmp_path_factory.mktemp("shipped"))
    with broker:
        yield broker, tls


def _client(broker: SecureBroker, tls: TlsFiles, user: str, port: int | None = None) -> Client:
    return Client(
        "127.0.0.1",
        port
        if port is not None
        else (broker.port if user.startswith("table-") else broker.tls_port),
        username=user,
        password=SHIPPED_PASSWORDS[user],
        identifier=f"{user}-{uuid.uuid4().hex[:6]}",
        protocol=aiomqtt.ProtocolVersion.V5,
        tls_context=ssl.create_default_context(cafile=str(tls.ca_cert)),
        timeout=10,
    )


def _listener_problems(connection: Connection) -> list[str]:
    """Whether the connection's user and URLs fit the shipped broker at all."""
    settings = connection.settings
    if settings.username not in SHIPPED_PASSWORDS:
        return [f"{connection}: user {settings.username!r} is not in config/mosquitto/acl"]
    problems = []
    for address in settings.addresses:
        if not address.tls:
            problems.append(f"{connection}: {address.url} is not TLS (the broker listens on TLS)")
        if address.port not in LISTENERS:
            problems.append(f"{connection}: {address.url}: the shipped broker has no such port")
    return problems


async def _write_problems(connection: Connection, client: Client) -> list[str]:
    problems = []
    for topic in connection.writes:
        try:
            await publish_checked(client, topic, b"{}", timeout=10)
        except Exception as exc:
            problems.append(f"{connection}: may not publish {topic}: {exc}")
    return problems


async def _read_problems(
    connection: Connection, client: Client, broker: SecureBroker, tls: TlsFiles
) -> list[str]:
    for topic_filter in connection.reads:
        await client.subscribe(topic_filter, qos=1)
    expected = {}
    for topic_filter in connection.reads:
        topic = _concrete(topic_filter)
        marker = f"m-{uuid.uuid4().hex}".encode()
        expected[marker] = topic_filter
        async with _client(broker, tls, _writer(topic)) as writer:
            await publish_checked(writer, topic, marker, timeout=10)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5):
            async for message in client.messages:
                expected.pop(bytes(message.payload), None)
                if not expected:
                    break
    return [f"{connection}: receives nothing on {f}" for f in expected.values()]


async def _check(connection: Connection, broker: SecureBroker, tls: TlsFiles) -> list[str]:
    """What the shipped broker refuses this connection (empty: everything works)."""
    problems = _listener_problems(connection)
    if problems:
        return problems
    settings = connection.settings
    assert settings.username is not None
    listener = settings.addresses[0].port
    port = {8883: broker.tls_port, 8884: broker.port}[listener]
    try:
        async with _client(broker, tls, settings.username, port) as client:
            problems += await _write_problems(connection, client)
            if connection.reads:
                problems += await _read_problems(connection, client, broker, tls)
    except aiomqtt.MqttCodeError as exc:
        problems.append(f"{connection}: refused on the {LISTENERS[listener]}' listener: {exc}")
    return problems


@pytest.mark.skipif(not have_mosquitto(), reason=MISSING)
@pytest.mark.parametrize("example", ["table", "studio", "studio-pit", "archive"])
async def test_each_example_config_works_with_the_shipped_broker(
    shipped: tuple[SecureBroker, TlsFiles], example: str, tmp_path: Path
) -> None:
    broker, tls = shipped
    connections = {
        "table": _table_connections,
        "studio": _studio_connections,
        "studio-pit": lambda: _pit_connections(tmp_path),
        "archive": _archive_connections,
    }[example]()
    users = [c.settings.username for c in connections]
    assert len(set(users)) == len(users), f"two connections share a user: {users}"
    problems: list[str] = []
    for connection in connections:
        problems += await _check(connection, broker, tls)
    assert not problems, "\n".join(problems)


def _readme() -> str:
    return (COMMITTED / "README.md").read_text()


def test_the_password_recipe_creates_exactly_the_acl_users() -> None:
    recipe = [
        line.split("#")[0].split()[-1]
        for line in _readme().splitlines()
        if line.startswith("sudo mosquitto_passwd") and " -D " not in line
    ]
    assert sorted(set(recipe)) == sorted(acl_users())


def _acl_blocks(text: str) -> dict[str, list[str]]:
    blocks: dict[str, list[str]] = {}
    user = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("user "):
            user = line.split(None, 1)[1]
            blocks[user] = []
        elif line.startswith("topic ") and user is not None:
            blocks[user].append(line)
    return blocks


def test_adding_a_table_gives_the_acl_blocks_of_a_shipped_table() -> None:
    """The README's "Adding a table" block, for tp-01, is the ACL's tp-01 blocks (all three)."""
    section = _readme().split("### Adding a table", 1)[1].split("\n## ", 1)[0]
    fenced = re.findall(r"```\n(.*?)```", section, flags=re.S)
    block = next(f for f in fenced if "user table-<id>" in f)
    added = _acl_blocks(block.replace("<id>", "tp-01"))
    shipped = _acl_blocks((COMMITTED / "acl").read_text())
    assert added == {user: shipped[user] for user in added}
    assert sorted(added) == ["table-tp-01", "table-tp-01-cmd", "table-tp-01-status"]
    assert "topic read betting/status" in added["table-tp-01-cmd"]
