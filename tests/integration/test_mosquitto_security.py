"""The committed broker security config, on a real Mosquitto.

* ACL roles (config/mosquitto/acl, used unchanged): each role can do what it needs and
  nothing else. A refused publish is proved by a permitted subscriber that does NOT receive
  it, followed by a positive control message that it does receive (so the test can fail):
  the refused publish was acknowledged before the control was sent, and the broker handles
  messages in order, so had it been delivered it would have arrived first.
* ``publish_checked`` (controller/mqtt/ack.py): the v5 PUBACK reason code surfaces.
* TLS (config/mosquitto/mosquitto.conf, with only its paths and port replaced): a client
  with the CA connects; a plain client or one trusting another CA does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import shutil
import ssl
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from paho.mqtt.reasoncodes import ReasonCode

from controller.app import run_table
from controller.errors import PublishError
from controller.journal import Journal
from controller.mqtt.ack import PublishRefused, publish_checked
from controller.mqtt.client import Client
from controller.mqtt.connection import TAKEOVER_LOSSES
from controller.settings import TableSettings, load_settings
from simulators.table import Simulation, simulated_scanner
from tests.integration._secure_broker import (
    CONTROLLER_LISTENER_PASSWORDS,
    ROLE_PASSWORDS,
    SHIPPED_PASSWORDS,
    SecureBroker,
    TlsFiles,
    acl_users,
    make_password_file,
    make_tls,
    shipped_broker,
)
from tests.support.mosquitto import MISSING as MOSQUITTO_MISSING
from tests.support.mosquitto import have_mosquitto

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason=MOSQUITTO_MISSING)

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config" / "mosquitto"
ACL = CONFIG_DIR / "acl"
V5 = aiomqtt.ProtocolVersion.V5
V311 = aiomqtt.ProtocolVersion.V311
PUBLIC = ("status", "round", "events", "results")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    directory = tmp_path_factory.mktemp("acl-broker")
    passwd = make_password_file(directory / "passwd", ROLE_PASSWORDS)
    config = (
        "listener {port} 127.0.0.1\n"
        "allow_anonymous false\n"
        f"password_file {passwd}\n"
        f"acl_file {ACL}\n"
        "persistence false\n"
        "log_dest stderr\n"
        "log_type all\n"
    )
    with SecureBroker(config, directory) as running:
        yield running


@asynccontextmanager
async def connect(
    broker: SecureBroker,
    user: str | None,
    *,
    protocol: aiomqtt.ProtocolVersion = V5,
    password: str | None = None,
) -> AsyncIterator[Client]:
    client = Client(
        "127.0.0.1",
        broker.port,
        username=user,
        password=password if password is not None else ROLE_PASSWORDS.get(user or ""),
        identifier=f"{user}-{uuid.uuid4().hex[:8]}",
        protocol=protocol,
        timeout=10,
    )
    async with client:
        yield client


async def received_until(client: Client, marker: bytes) -> list[tuple[str, bytes]]:
    """Messages received up to and including the one whose payload is ``marker``."""
    got: list[tuple[str, bytes]] = []
    async with asyncio.timeout(10):
        async for message in client.messages:
            payload = message.payload
            assert isinstance(payload, bytes)
            got.append((str(message.topic), payload))
            if payload == marker:
                return got
    raise AssertionError("unreachable")


def marker() -> bytes:
    return f"control-{uuid.uuid4().hex}".encode()


# --- reading ----------------------------------------------------------------------------------


@pytest.mark.parametrize("user", ["betting", "pitboss", "viewer"])
async def test_public_roles_read_public_topics_but_never_secure(
    broker: SecureBroker, user: str
) -> None:
    async with connect(broker, user) as reader, connect(broker, "table-tp-01") as table:
        await reader.subscribe("tables/#", qos=1)
        await reader.subscribe("tables/+/secure/#", qos=1)
        await table.publish("tables/tp-01/secure/events", b"hidden-1", qos=1)
        await table.publish("tables/tp-01/secure/cards/A1", b"hidden-2", qos=1)
        for name in PUBLIC[:-1]:
            await table.publish(f"tables/tp-01/{name}", name.encode(), qos=1)
        control = marker()
        await table.publish("tables/tp-01/results", control, qos=1)
        got = await received_until(reader, control)
    topics = {topic for topic, _ in got}
    assert topics == {f"tables/tp-01/{name}" for name in PUBLIC}
    assert not any(b"hidden" in payload for _, payload in got)


async def test_stream_production_reads_secure(broker: SecureBroker) -> None:
    async with connect(broker, "stream") as stream, connect(broker, "table-tp-02") as table:
        await stream.subscribe("tables/#", qos=1)
        await table.publish("tables/tp-02/events", b"public", qos=1)
        control = marker()
        await table.publish("tables/tp-02/secure/events", control, qos=1)
        got = await received_until(stream, control)
    assert got == [("tables/tp-02/events", b"public"), ("tables/tp-02/secure/events", control)]


async def test_controller_cannot_read_another_table(broker: SecureBroker) -> None:
    async with (
        connect(broker, "table-tp-01") as table_a,
        connect(broker, "table-tp-02") as table_b,
        connect(broker, "betting") as betting,
    ):
        await table_a.subscribe("#", qos=1)
        await table_a.subscribe("tables/tp-02/#", qos=1)
        await table_b.publish("tables/tp-02/events", b"b-event", qos=1)
        await table_b.publish("tables/tp-02/secure/events", b"b-secret", qos=1)
        await betting.publish("tables/tp-02/cmd/decision", b"b-decision", qos=1)
        control = marker()
        await betting.publish("tables/tp-01/cmd/decision", control, qos=1)
        got = await received_until(table_a, control)
    assert got == [("tables/tp-01/cmd/decision", control)]


async def test_replies_reach_only_their_role(broker: SecureBroker) -> None:
    async with (
        connect(broker, "table-tp-01") as table,
        connect(broker, "betting") as betting,
        connect(broker, "pitboss") as pit,
    ):
        await betting.subscribe("tables/#", qos=1)
        await pit.subscribe("tables/#", qos=1)
        await table.publish("tables/tp-01/reply/betting/r1", b"for-betting", qos=1)
        await table.publish("tables/tp-01/reply/pit/r2", b"for-pit", qos=1)
        control = marker()
        await table.publish("tables/tp-01/events", control, qos=1)
        got_betting = await received_until(betting, control)
        got_pit = await received_until(pit, control)
    assert [p for _, p in got_betting] == [b"for-betting", control]
    assert [p for _, p in got_pit] == [b"for-pit", control]


# --- writing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [V5, V311], ids=["v5", "v3.1.1"])
async def test_betting_publishes_decisions_only(
    broker: SecureBroker, protocol: aiomqtt.ProtocolVersion
) -> None:
    forbidden = [
        "tables/tp-01/events",
        "tables/tp-01/results",
        "tables/tp-01/status",
        "tables/tp-01/round",
        "tables/tp-01/secure/events",
        "tables/tp-01/cmd/pit/void",
        "tables/tp-01/cmd/void",
        "tables/tp-01/reply/betting/r1",
    ]
    async with (
        connect(broker, "table-tp-01") as table,
        connect(broker, "betting", protocol=protocol) as betting,
    ):
        await table.subscribe("tables/tp-01/#", qos=1)
        for topic in forbidden:
            await betting.publish(topic, b"forged", qos=1)  # returns normally: see mqtt/ack.py
        control = marker()
        await betting.publish("tables/tp-01/cmd/decision", control, qos=1)
        got = await received_until(table, control)
    assert got == [("tables/tp-01/cmd/decision", control)]


async def test_pitboss_publishes_pit_commands_only(broker: SecureBroker) -> None:
    async with connect(broker, "table-tp-01") as table, connect(broker, "pitboss") as pit:
        await table.subscribe("tables/tp-01/#", qos=1)
        await pit.publish("tables/tp-01/cmd/decision", b"forged", qos=1)
        await pit.publish("tables/tp-01/events", b"forged", qos=1)
        await pit.publish("tables/tp-01/cmd/pit/void", b"void", qos=1)
        control = marker()
        await pit.publish("tables/tp-01/cmd/pit/resume", control, qos=1)
        got = await received_until(table, control)
    assert got == [("tables/tp-01/cmd/pit/void", b"void"), ("tables/tp-01/cmd/pit/resume", control)]


@pytest.mark.parametrize("user", ["stream", "viewer"])
async def test_readers_cannot_publish(broker: SecureBroker, user: str) -> None:
    async with connect(broker, "table-tp-01") as table, connect(broker, user) as reader:
        await table.subscribe("tables/tp-01/#", qos=1)
        for topic in ("events", "secure/events", "cmd/decision", "cmd/pit/void"):
            await reader.publish(f"tables/tp-01/{topic}", b"forged", qos=1)
        control = marker()
        await table.publish("tables/tp-01/events", control, qos=1)
        got = await received_until(table, control)
    assert got == [("tables/tp-01/events", control)]


async def test_controller_cannot_publish_under_another_table(broker: SecureBroker) -> None:
    async with (
        connect(broker, "table-tp-01") as table_a,
        connect(broker, "table-tp-02") as table_b,
        connect(broker, "stream") as stream,
        connect(broker, "betting") as betting,
    ):
        await stream.subscribe("tables/#", qos=1)
        await table_b.subscribe("tables/tp-02/#", qos=1)
        for topic in ("events", "results", "status", "secure/events", "cmd/decision"):
            await table_a.publish(f"tables/tp-02/{topic}", b"forged", qos=1)
        await table_a.publish("elsewhere/x", b"forged", qos=1)
        control_stream = marker()
        await table_a.publish("tables/tp-01/events", control_stream, qos=1)
        control_b = marker()
        await betting.publish("tables/tp-02/cmd/decision", control_b, qos=1)
        got_stream = await received_until(stream, control_stream)
        got_b = await received_until(table_b, control_b)
    assert got_stream == [("tables/tp-01/events", control_stream)]
    assert got_b == [("tables/tp-02/cmd/decision", control_b)]


# --- who may connect --------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [V5, V311], ids=["v5", "v3.1.1"])
@pytest.mark.parametrize(
    ("user", "password"),
    [(None, None), ("betting", "wrong"), ("nobody", "pw-betting")],
    ids=["anonymous", "wrong-password", "unknown-user"],
)
async def test_connect_refused(
    broker: SecureBroker,
    protocol: aiomqtt.ProtocolVersion,
    user: str | None,
    password: str | None,
) -> None:
    with pytest.raises(aiomqtt.MqttCodeError) as caught:
        async with connect(broker, user, password=password or "", protocol=protocol):
            pass
    # Mosquitto 2.0 answers every refusal with 0x87 Not authorized (v3.1.1: return code 5,
    # which paho reports as the same v5 reason code).
    rc = caught.value.rc
    assert (rc.value if isinstance(rc, ReasonCode) else rc) == 0x87


# --- publish_checked: the PUBACK reason code --------------------------------------------------


async def test_publish_checked_raises_on_acl_refusal(broker: SecureBroker) -> None:
    async with connect(broker, "table-tp-01") as table, connect(broker, "betting") as betting:
        await table.subscribe("tables/tp-01/#", qos=1)
        with pytest.raises(PublishRefused) as caught:
            await publish_checked(betting, "tables/tp-01/events", b"forged", timeout=10)
        assert caught.value.reason_code == 0x87
        assert caught.value.topic == "tables/tp-01/events"
        assert "Not authorized" in str(caught.value)
        # Permitted: returns normally, and the message arrives.
        control = marker()
        await publish_checked(betting, "tables/tp-01/cmd/decision", control, timeout=10)
        # aiomqtt's own publish still works after the hook was installed.
        await betting.publish("tables/tp-01/cmd/decision", b"plain", qos=1)
        with pytest.raises(PublishRefused):
            await publish_checked(betting, "tables/tp-01/cmd/pit/void", b"forged", timeout=10)
        last = marker()
        await publish_checked(betting, "tables/tp-01/cmd/decision", last, timeout=10)
        got = await received_until(table, last)
    assert [p for _, p in got] == [control, b"plain", last]


async def test_publish_checked_many_in_flight(broker: SecureBroker) -> None:
    async with connect(broker, "betting") as betting:
        topics = [
            "tables/tp-01/cmd/decision" if index % 2 else "tables/tp-01/events"
            for index in range(40)
        ]
        results = await asyncio.gather(
            *(publish_checked(betting, topic, b"x", timeout=10) for topic in topics),
            return_exceptions=True,
        )
    for topic, result in zip(topics, results, strict=True):
        if topic.endswith("/events"):
            assert isinstance(result, PublishRefused), topic
        else:
            assert result is None, (topic, result)


async def test_publish_checked_cannot_see_v311_refusals(broker: SecureBroker) -> None:
    """Documented limit: v3.1.1 has no reason code; the broker drops the message silently."""
    async with (
        connect(broker, "table-tp-01") as table,
        connect(broker, "betting", protocol=V311) as betting,
    ):
        await table.subscribe("tables/tp-01/#", qos=1)
        await publish_checked(betting, "tables/tp-01/events", b"forged", timeout=10)
        control = marker()
        await publish_checked(betting, "tables/tp-01/cmd/decision", control, timeout=10)
        got = await received_until(table, control)
    assert got == [("tables/tp-01/cmd/decision", control)]


async def test_publish_checked_wants_qos_1(broker: SecureBroker) -> None:
    async with connect(broker, "betting") as betting:
        for qos in (0, 2):
            with pytest.raises(PublishError, match="QoS 1 only"):
                await publish_checked(betting, "tables/tp-01/cmd/decision", b"x", qos=qos)


# --- TLS, with the committed production mosquitto.conf ---------------------------------------


TABLE_USERS = CONTROLLER_LISTENER_PASSWORDS
"""Users of the controllers' listener (8884): the tables' connections and the archive's."""


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SecureBroker, TlsFiles]]:
    running, tls = shipped_broker(tmp_path_factory.mktemp("tls-broker"))
    with running:
        yield running, tls


def tls_client(
    broker: SecureBroker,
    context: ssl.SSLContext | None,
    user: str = "betting",
    timeout: float = 10,
    *,
    identifier: str | None = None,
    port: int | None = None,
) -> Client:
    """A v5 client; table users go to the controllers' listener unless ``port`` says."""
    if port is None:
        port = broker.port if user in TABLE_USERS else broker.tls_port
    return Client(
        "127.0.0.1",
        port,
        username=user,
        password=SHIPPED_PASSWORDS[user],
        identifier=identifier or f"{user}-{uuid.uuid4().hex[:8]}",
        protocol=V5,
        tls_context=context,
        timeout=timeout,
    )


async def test_tls_with_the_ca_connects_and_acls_apply(
    tls_broker: tuple[SecureBroker, TlsFiles],
) -> None:
    broker, tls = tls_broker
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    async with (
        tls_client(broker, context, "table-tp-01") as table,
        tls_client(broker, context, "betting") as betting,
    ):
        await betting.subscribe("tables/#", qos=1)
        await table.publish("tables/tp-01/secure/events", b"hidden", qos=1)
        control = marker()
        await table.publish("tables/tp-01/events", control, qos=1)
        got = await received_until(betting, control)
        with pytest.raises(PublishRefused):
            await publish_checked(betting, "tables/tp-01/results", b"forged", timeout=10)
    assert got == [("tables/tp-01/events", control)]


async def test_tls_anonymous_refused(tls_broker: tuple[SecureBroker, TlsFiles]) -> None:
    broker, tls = tls_broker
    client = Client(
        "127.0.0.1",
        broker.tls_port,
        identifier=f"anon-{uuid.uuid4().hex[:8]}",
        protocol=V5,
        tls_context=ssl.create_default_context(cafile=str(tls.ca_cert)),
        timeout=10,
    )
    with pytest.raises(aiomqtt.MqttCodeError):
        async with client:
            pass


async def test_tls_port_refuses_plain_mqtt(tls_broker: tuple[SecureBroker, TlsFiles]) -> None:
    broker, _ = tls_broker
    # The broker waits for a TLS ClientHello and never answers the plain CONNECT.
    with pytest.raises(aiomqtt.MqttError):
        async with tls_client(broker, None, timeout=1.5):
            pass


async def test_tls_with_another_ca_fails(
    tls_broker: tuple[SecureBroker, TlsFiles], tmp_path: Path
) -> None:
    broker, _ = tls_broker
    stranger = make_tls(tmp_path / "other", ca_name="some other CA")
    context = ssl.create_default_context(cafile=str(stranger.ca_cert))
    with pytest.raises(aiomqtt.MqttError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify"):
        async with tls_client(broker, context):
            pass


# --- client ids bound to credentials (issue #16 item 2; issue #12 item 12) --------------------


LEGACY_IDS = [
    f"tablectl-{table}{suffix}"
    for table in ("tp-01", "tp-02")
    for suffix in ("", "-cmd", "-status")
] + ["tablectl-archive-1", "tablectl-archive-2", "tablectl-archive"]
"""The client ids the controllers and archives sent before ids were bound (still sent)."""


class _Session:
    """One user's long-lived connection, watched: did the broker drop it?"""

    def __init__(self, broker: SecureBroker, context: ssl.SSLContext, user: str) -> None:
        self.user = user
        self.dropped: str | None = None
        legacy = {
            f"table-{t}{s}": f"tablectl-{t}{s}"
            for t in ("tp-01", "tp-02")
            for s in ("", "-cmd", "-status")
        }
        # Sent as the real clients send it; the broker replaces it by the user name.
        self.client = tls_client(broker, context, user, identifier=legacy.get(user))
        self._stack = contextlib.AsyncExitStack()
        self._reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await self._stack.enter_async_context(self.client)
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for _message in self.client.messages:
                pass
        except aiomqtt.MqttError as exc:
            self.dropped = f"{type(exc).__name__}: {exc}"

    async def alive(self) -> bool:
        """Whether the connection is still the one opened (a SUBACK round trip)."""
        if self.dropped is not None or self._reader is None or self._reader.done():
            return False
        try:
            await self.client.subscribe(f"probe/{self.user}", qos=1, timeout=5)
        except aiomqtt.MqttError as exc:
            self.dropped = f"{type(exc).__name__}: {exc}"
            return False
        return self.dropped is None

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        await self._stack.aclose()
        self._stack = contextlib.AsyncExitStack()


async def test_no_credential_can_take_another_clients_session(
    tls_broker: tuple[SecureBroker, TlsFiles],
) -> None:
    """EVERY credential of the shipped config against EVERY client's id, on both listeners.

    Each user of the ACL holds a connection (the tables' three with the ids their
    controllers send, ``tablectl-tp-01``, ``-cmd``, ``-status``). Then each user in turn
    connects with each of those ids, each user name and each archive id, on the controllers'
    listener and on the roles' listener: it is refused on the listener whose password file
    does not hold it, and accepted on the other under its own user name, and no other
    user's connection is dropped. (A user's own connection is closed while it attacks:
    taking one's own session is allowed.) Last, the tables' connections still do their work.
    """
    broker, tls = tls_broker
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    users = acl_users()
    assert sorted(users) == sorted(SHIPPED_PASSWORDS), "the test's users are the ACL's"
    targets = LEGACY_IDS + users
    listeners = {"controllers": broker.port, "roles": broker.tls_port}
    sessions = {user: _Session(broker, context, user) for user in users}
    outcomes: dict[tuple[str, str], set[str]] = {}
    async with asyncio.timeout(240):
        for session in sessions.values():
            await session.open()
        try:
            for attacker in users:
                await sessions[attacker].close()
                for listener, port in listeners.items():
                    for target in targets:
                        try:
                            async with tls_client(
                                broker, context, attacker, identifier=target, port=port
                            ):
                                outcome = "accepted"
                        except aiomqtt.MqttCodeError:
                            outcome = "refused"
                        outcomes.setdefault((attacker, listener), set()).add(outcome)
                sessions[attacker] = _Session(broker, context, attacker)
                await sessions[attacker].open()
                dropped = {
                    user: session.dropped
                    for user, session in sessions.items()
                    if user != attacker and not await session.alive()
                }
                assert not dropped, f"{attacker} took over {dropped}"
        finally:
            for session in sessions.values():
                await session.close()
    for user in users:
        on_controllers = user in CONTROLLER_LISTENER_PASSWORDS
        expected = {
            "controllers": {"accepted"} if on_controllers else {"refused"},
            "roles": {"refused"} if on_controllers else {"accepted"},
        }
        for listener in listeners:
            assert outcomes[(user, listener)] == expected[listener], (user, listener)


def _readme_command(program: str) -> list[str]:
    """The ``program`` command line of config/mosquitto/README.md's client check, as written."""
    text = (CONFIG_DIR / "README.md").read_text()
    lines = [line for line in text.splitlines() if line.startswith(f"{program} ")]
    assert len(lines) == 1, f"README.md should show one {program} check: {lines}"
    return shlex.split(lines[0])


async def test_the_readme_client_check_runs_on_the_shipped_config(
    tls_broker: tuple[SecureBroker, TlsFiles],
) -> None:
    """Issue #16 item 3: the documented mosquitto_sub check, with only host, port, CA and
    password filled in, is accepted and shows a table's status; without its ``-i`` it is not."""
    broker, tls = tls_broker
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    async with tls_client(broker, context, "table-tp-01") as table:
        await publish_checked(
            table, "tables/tp-01/status", b'{"state":"online"}', retain=True, timeout=5
        )
    filled = {
        "mqtt.studio.example": "127.0.0.1",
        "8883": str(broker.tls_port),
        "ca.crt": str(tls.ca_cert),
        "...": ROLE_PASSWORDS["viewer"],
    }
    command = [filled.get(arg, arg) for arg in _readme_command("mosquitto_sub")]
    assert command[0] == "mosquitto_sub" and "-i" in command
    command[0] = shutil.which("mosquitto_sub") or "/usr/bin/mosquitto_sub"
    once = ["-C", "1", "-W", "10"]  # stop after the retained status (the check is interactive)
    done = await asyncio.to_thread(
        subprocess.run, [*command, *once], capture_output=True, text=True, timeout=20
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('tables/tp-01/status {"state":"online"}'), done.stdout
    at = command.index("-i")
    without_id = command[:at] + command[at + 2 :]
    refused = await asyncio.to_thread(
        subprocess.run, [*without_id, *once], capture_output=True, text=True, timeout=20
    )
    assert refused.returncode != 0, refused.stdout
    async with tls_client(broker, context, "table-tp-01") as table:  # clear the retained status
        await publish_checked(table, "tables/tp-01/status", b"", retain=True, timeout=5)


async def _record(
    reader: Client, seconds: float, into: list[tuple[float, str, dict[str, Any]]]
) -> None:
    loop = asyncio.get_running_loop()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            async for message in reader.messages:
                assert isinstance(message.payload, bytes)
                if message.payload and not message.retain:
                    into.append((loop.time(), str(message.topic), json.loads(message.payload)))


async def test_a_second_controller_is_a_takeover_not_a_fight(
    tls_broker: tuple[SecureBroker, TlsFiles], tmp_path: Path
) -> None:
    """Two controllers of tp-01 with the same credential and client id (issue #12 item 12).

    Mosquitto 2.0 closes the older connection whenever the other connects. The controller
    that detects the takeover (:mod:`controller.mqtt.connection`) stops reconnecting and
    journals a pit alert; the other keeps its session and keeps publishing. Without the
    detection both reconnect and evict each other about every back-off, for ever.
    """
    broker, tls = tls_broker
    context = ssl.create_default_context(cafile=str(tls.ca_cert))

    def settings(game: str, journal: Path, url: str) -> TableSettings:
        return load_settings(
            None,
            table_id="tp-01",
            game=game,
            game_options={"decision_seconds": 0.2} if game == "three-card-mulligan" else {},
            device={"url": url},
            mqtt={
                "urls": [f"mqtts://127.0.0.1:{broker.port}"],
                "username": "table-tp-01",
                "password": ROLE_PASSWORDS["table-tp-01"],
                "command_username": "table-tp-01-cmd",
                "command_password": SHIPPED_PASSWORDS["table-tp-01-cmd"],
                "status_username": "table-tp-01-status",
                "status_password": SHIPPED_PASSWORDS["table-tp-01-status"],
                "ca_file": tls.ca_cert,
                "reconnect_min_seconds": 0.05,
                "reconnect_max_seconds": 0.3,
            },
            journal={"path": journal},
            rounds={"betting_seconds": 0.3, "pause_seconds": 0.1},
        )

    journals = {
        "teen-patti-20-20": tmp_path / "a.sqlite",
        "three-card-mulligan": tmp_path / "b.sqlite",
    }
    seen: list[tuple[float, str, dict[str, Any]]] = []
    async with tls_client(broker, context, "stream") as reader:
        await reader.subscribe("tables/tp-01/status", qos=1)
        await reader.subscribe("tables/tp-01/events", qos=1)
        sim = Simulation(seed=3, deal_delay=0.05)
        async with (
            simulated_scanner("teen-patti-20-20", sim) as first_url,
            simulated_scanner("three-card-mulligan", sim) as second_url,
        ):
            tasks = [
                asyncio.create_task(
                    run_table(settings("teen-patti-20-20", journals["teen-patti-20-20"], first_url))
                )
            ]
            try:
                await _record(reader, 2.0, seen)
                tasks.append(
                    asyncio.create_task(
                        run_table(
                            settings(
                                "three-card-mulligan", journals["three-card-mulligan"], second_url
                            )
                        )
                    )
                )
                await _record(reader, 8.0, seen)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    births = [(at, body["game"]) for at, topic, body in seen if body.get("state") == "online"]
    counts = {game: sum(1 for _, g in births if g == game) for game in journals}
    assert all(1 <= count <= TAKEOVER_LOSSES + 1 for count in counts.values()), births
    last_birth = max(at for at, _ in births)
    tail = [body for at, topic, body in seen if at > last_birth + 1.0 and topic.endswith("/events")]
    timeline = [
        (round(at - last_birth, 2), b.get("kind") or b.get("state"), b.get("game"))
        for at, _, b in seen
        if b.get("kind") not in ("card_dealt", "device_status")
    ]
    assert tail, "\n".join(map(str, timeline))
    alerts: dict[str, list[Any]] = {}
    for game, path in journals.items():
        journal = Journal.open_readonly(path)
        try:
            alerts[game] = [
                e.body["reason"]
                for e in journal.entries()
                if e.kind == "pit_alert"
                and "session taken over" in str(e.body.get("reason"))
                # the outbox's (the command routers fight too; either may stand down)
                and "this table's client id" in str(e.body.get("reason"))
            ]
        finally:
            journal.close()
    stopped = [game for game, found in alerts.items() if found]
    assert len(stopped) == 1, alerts  # one side stood down, not both, not neither
    winner = next(game for game in journals if game not in stopped)
    round_games = {
        body["data"].get("game")
        for at, _, body in seen
        if at > last_birth and body.get("kind") == "round_opened"
    }
    assert round_games <= {winner}, (round_games, winner)


async def test_publish_checked_times_out_without_puback(tmp_path: Path) -> None:
    """A real broker frozen with SIGSTOP never acknowledges: PublishError after the timeout."""
    import signal

    config = "listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
    with SecureBroker(config, tmp_path) as frozen:
        assert frozen.process is not None
        client = Client("127.0.0.1", frozen.port, protocol=V5, timeout=10)
        async with client:
            await publish_checked(client, "t/ok", b"x", timeout=10)
            frozen.process.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(PublishError, match="no PUBACK") as caught:
                    await publish_checked(client, "t/late", b"x", timeout=0.5)
                assert not isinstance(caught.value, PublishRefused)
            finally:
                frozen.process.send_signal(signal.SIGCONT)
            # The broker is back: the next checked publish goes through.
            await publish_checked(client, "t/ok", b"y", timeout=10)


# --- commands, replies and the betting system's presence (ACL) --------------------------------


async def test_replay_commands_and_bare_reply_topics(broker: SecureBroker) -> None:
    async with (
        connect(broker, "table-tp-01") as table,
        connect(broker, "betting") as betting,
        connect(broker, "pitboss") as pit,
    ):
        await table.subscribe("tables/tp-01/cmd/#", qos=1)
        await betting.subscribe("tables/tp-01/reply/#", qos=1)
        await pit.subscribe("tables/tp-01/reply/#", qos=1)
        await betting.publish("tables/tp-01/cmd/replay", b"betting-replay", qos=1)
        with pytest.raises(PublishRefused):  # the pit boss replays on cmd/pit/replay
            await publish_checked(pit, "tables/tp-01/cmd/replay", b"forged", timeout=10)
        with pytest.raises(PublishRefused):  # betting cannot send pit commands
            await publish_checked(betting, "tables/tp-01/cmd/pit/replay", b"forged", timeout=10)
        control = marker()
        await pit.publish("tables/tp-01/cmd/pit/replay", control, qos=1)
        got = await received_until(table, control)
        assert got == [
            ("tables/tp-01/cmd/replay", b"betting-replay"),
            ("tables/tp-01/cmd/pit/replay", control),
        ]
        # Answers without a response topic go to the bare reply/<role> topic.
        await table.publish("tables/tp-01/reply/pit", b"for-pit", qos=1)
        control = marker()
        await table.publish("tables/tp-01/reply/betting", control, qos=1)
        got_betting = await received_until(betting, control)
        control_pit = marker()
        await table.publish("tables/tp-01/reply/pit/cli-7", control_pit, qos=1)
        got_pit = await received_until(pit, control_pit)
    assert [p for _, p in got_betting] == [control]
    assert [p for _, p in got_pit] == [b"for-pit", control_pit]


async def test_betting_presence_topic(broker: SecureBroker) -> None:
    async with (
        connect(broker, "table-tp-01") as table,
        connect(broker, "pitboss") as pit,
        connect(broker, "betting") as betting,
        connect(broker, "viewer") as viewer,
    ):
        await table.subscribe("betting/status", qos=1)
        await pit.subscribe("betting/status", qos=1)
        for forger in (table, pit, viewer):
            with pytest.raises(PublishRefused):
                await publish_checked(forger, "betting/status", b'{"state":"offline"}', timeout=10)
        control = marker()
        await publish_checked(betting, "betting/status", control, timeout=10)
        assert await received_until(table, control) == [("betting/status", control)]
        assert await received_until(pit, control) == [("betting/status", control)]


# --- the outbox notices refused publishes (MQTT v5) --------------------------------------------


def _publisher_settings(port: int, user: str) -> Any:
    from pydantic import SecretStr

    from controller.mqtt.settings import MqttSettings

    return MqttSettings(
        urls=[f"mqtt://127.0.0.1:{port}"],
        username=user,
        password=SecretStr(ROLE_PASSWORDS[user]),
        reconnect_min_seconds=0.05,
        reconnect_max_seconds=0.4,
        publish_timeout=3.0,
    )


async def test_publisher_detects_a_credential_publishing_outside_its_table(
    broker: SecureBroker, journal: Any, make_publisher: Any
) -> None:
    """table-tp-01's credential configured for table tp-02: every publish is refused (0x87);
    the refusal is reported once, nothing is marked delivered, and it keeps retrying."""
    from structlog.testing import capture_logs

    journal.append("table_status", {"state": "ready"})
    refusals: list[tuple[PublishRefused, Any]] = []
    with capture_logs() as logs:
        async with (
            asyncio.timeout(20),
            make_publisher(
                _publisher_settings(broker.port, "table-tp-01"),
                "tp-02",
                journal,
                version="t",
                on_refused=lambda exc, entry: refusals.append((exc, entry)),
            ) as publisher,
        ):
            while publisher.connections < 3:
                await asyncio.sleep(0.05)
    assert len(refusals) == 1  # reported once, not at every retry
    refusal, entry = refusals[0]
    assert entry is None  # the birth was the first publish
    assert (refusal.topic, refusal.reason_code) == ("tables/tp-02/status", 0x87)
    assert publisher.refused is not None
    assert not publisher.connected.is_set()
    assert journal.undelivered_count() == 1
    errors = [e for e in logs if e["log_level"] == "error"]
    assert errors and errors[0]["reason_code"] == 0x87
    assert errors[0]["topic"] == "tables/tp-02/status"


async def test_refused_entry_is_held_until_the_acl_allows_it(
    tmp_path: Path, journal: Any, make_publisher: Any
) -> None:
    """An ACL that forgets results: the result entry stays undelivered (and what follows),
    reported once with its seq; after the ACL is fixed and reloaded (SIGHUP) it goes out."""
    import signal

    acl = tmp_path / "acl"
    acl.write_text(
        "user table-tp-01\n"
        "topic readwrite tables/tp-01/status\n"
        "topic readwrite tables/tp-01/events\n"
        "topic readwrite tables/tp-01/round\n"
        "topic readwrite tables/tp-01/secure/#\n"
    )
    passwd = make_password_file(tmp_path / "passwd", ROLE_PASSWORDS)
    config = (
        "listener {port} 127.0.0.1\nallow_anonymous false\n"
        f"password_file {passwd}\nacl_file {acl}\npersistence false\n"
    )
    refusals: list[tuple[PublishRefused, Any]] = []
    with SecureBroker(config, tmp_path / "broker") as running:
        async with (
            asyncio.timeout(30),
            make_publisher(
                _publisher_settings(running.port, "table-tp-01"),
                "tp-01",
                journal,
                version="t",
                on_refused=lambda exc, entry: refusals.append((exc, entry)),
                connect_within=5,
            ) as publisher,
        ):
            journal.append("round_opened", {"round_no": 1, "game": "g"}, round_id="r-1")
            journal.append(
                "round_voided",
                {"reason": "x", "bets": {"A": {"outcome": "refund", "payout": "1"}}},
                round_id="r-1",
            )
            journal.append("table_status", {"state": "after"})
            while not refusals:
                await asyncio.sleep(0.02)
            assert not await publisher.flush(0.5)
            assert [e.seq for e in journal.undelivered()] == [2, 3]
            assert publisher.refused is not None
            assert publisher.refused.topic == "tables/tp-01/results"
            # Fix the ACL, reload the broker: the outbox flows again on its next attempt.
            acl.write_text(acl.read_text() + "topic readwrite tables/tp-01/results\n")
            assert running.process is not None
            running.process.send_signal(signal.SIGHUP)
            assert await publisher.flush(10)
            assert publisher.refused is None
    assert len(refusals) == 1
    refusal, entry = refusals[0]
    assert entry is not None and entry.seq == 2
    assert refusal.reason_code == 0x87
    assert journal.undelivered_count() == 0
