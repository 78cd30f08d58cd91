"""The one MQTT connection module (controller/mqtt/connection.py) against a real Mosquitto.

URL failover (a URL down at start, a broker lost mid-run), the back-off (grows, capped, starts
over after a connection that was up) and the connect timeout (a listener that never answers
CONNACK).
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from controller.aio import first_completed
from controller.broker import BrokerAddress
from controller.mqtt.connection import Connector
from controller.mqtt.settings import MqttSettings, backoff_seconds

if TYPE_CHECKING:
    import aiomqtt

    from controller.mqtt.client import Client as MqttClient


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def settings_for(urls: list[str], **extra: Any) -> MqttSettings:
    values: dict[str, Any] = {
        "urls": urls,
        "protocol": "5",
        "reconnect_min_seconds": 0.05,
        "reconnect_max_seconds": 0.3,
        "publish_timeout": 1.0,
        "connect_timeout": 2.0,
    }
    values.update(extra)
    return MqttSettings(**values)


class Recorder:
    """A connector whose back-offs are recorded (the delays are still waited)."""

    def __init__(self, settings: MqttSettings) -> None:
        self.connector = Connector(
            settings,
            client_id=f"conn-{uuid.uuid4().hex[:8]}",
            name="test",
            logger="tests.paho",
        )
        self.failures: list[int] = []
        self.delays: list[float] = []
        self.served: list[str] = []
        self.stop = asyncio.Event()
        self.up = asyncio.Event()
        backoff = self.connector.backoff

        def recorded(failures: int) -> float:
            delay = backoff(failures)
            self.failures.append(failures)
            self.delays.append(delay)
            return delay

        self.connector.backoff = recorded  # type: ignore[method-assign]

    async def serve(self, client: MqttClient, address: BrokerAddress) -> None:
        """Stay connected until stopped (return) or until the link drops (raise)."""

        async def read() -> None:
            async for _message in client.messages:
                pass

        self.served.append(address.url)
        self.up.set()
        try:
            done = await first_completed(read(), self.stop.wait())
            for future in done:
                if not future.cancelled() and future.exception() is not None:
                    raise future.exception()  # type: ignore[misc]
        finally:
            self.up.clear()

    async def run(self) -> None:
        await self.connector.run(self.serve, stop=self.stop)


async def test_fails_over_past_a_url_that_is_down(mosquitto_session: Any) -> None:
    dead = f"mqtt://127.0.0.1:{free_port()}"
    recorder = Recorder(settings_for([dead, mosquitto_session.url]))
    async with asyncio.timeout(20), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run())
        await recorder.up.wait()
        assert recorder.served == [mosquitto_session.url]
        assert recorder.connector.current_url == mosquitto_session.url
        assert recorder.connector.connections == 1
        assert recorder.failures == []  # the first round of URLs succeeded: no back-off
        recorder.stop.set()
        await task
    assert recorder.connector.current_url is None


async def test_a_lost_broker_fails_over_to_the_next_url(
    mosquitto: Any, mosquitto_session: Any
) -> None:
    recorder = Recorder(settings_for([mosquitto.url, mosquitto_session.url], keepalive=2))
    async with asyncio.timeout(30), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run())
        await recorder.up.wait()
        assert recorder.served == [mosquitto.url]
        mosquitto.stop()
        while len(recorder.served) < 2 or not recorder.up.is_set():
            await asyncio.sleep(0.02)
        # Lost: back off once (the connection was up), start over from the first URL (down),
        # then the second.
        assert recorder.served == [mosquitto.url, mosquitto_session.url]
        assert recorder.failures[0] == 1
        assert recorder.connector.connections == 2
        recorder.stop.set()
        await task


async def test_backoff_grows_while_every_url_is_down_and_is_capped() -> None:
    dead = [f"mqtt://127.0.0.1:{free_port()}", f"mqtt://127.0.0.1:{free_port()}"]
    settings = settings_for(dead, reconnect_min_seconds=0.01, reconnect_max_seconds=0.04)
    recorder = Recorder(settings)
    async with asyncio.timeout(20), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run())
        while len(recorder.failures) < 6:
            await asyncio.sleep(0.01)
        recorder.stop.set()
        await task
    assert recorder.served == []
    assert recorder.connector.connections == 0
    # One more failure per round of URLs; each delay within its (growing, capped) ceiling.
    assert recorder.failures[:6] == [1, 2, 3, 4, 5, 6]
    for failures, delay in zip(recorder.failures, recorder.delays, strict=True):
        ceiling = min(0.04, 0.01 * 2 ** (failures - 1))
        assert 0.01 <= delay <= ceiling


def test_backoff_formula_grows_then_stays_under_the_cap() -> None:
    settings = settings_for(["mqtt://127.0.0.1:1883"], reconnect_max_seconds=10.0)
    rng = random.Random(7)
    highest = {
        failures: max(backoff_seconds(settings, failures, rng) for _ in range(200))
        for failures in (1, 3, 6, 10, 40, 1000)
    }
    assert highest[1] <= 0.05
    assert 0.1 < highest[3] <= 0.2
    assert 1.0 < highest[6] <= 1.6
    assert 5.0 < highest[10] <= 10.0
    assert 5.0 < highest[40] <= 10.0
    assert 5.0 < highest[1000] <= 10.0


async def test_connect_timeout_bounds_a_broker_that_never_answers(mosquitto_session: Any) -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # read nothing, answer nothing (no CONNACK)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    silent_url = f"mqtt://127.0.0.1:{port}"
    try:
        settings = settings_for([silent_url, mosquitto_session.url], connect_timeout=0.5)
        connector = Connector(settings, client_id="conn-timeout", name="test", logger="tests")
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            async with connector.connect(settings.addresses[0]):
                pytest.fail("connected to a listener that never sent CONNACK")
        elapsed = time.monotonic() - started
        assert accepted, "the client did reach the silent listener"
        assert 0.4 <= elapsed < 2.0
        assert connector.connections == 0

        # In the loop: the silent URL costs one connect timeout, then the next URL is used.
        recorder = Recorder(settings)
        started = time.monotonic()
        async with asyncio.timeout(20), asyncio.TaskGroup() as group:
            task = group.create_task(recorder.run())
            await recorder.up.wait()
            elapsed = time.monotonic() - started
            recorder.stop.set()
            await task
        assert recorder.served == [mosquitto_session.url]
        assert 0.4 <= elapsed < 3.0
    finally:
        for writer in accepted:
            writer.close()
        server.close()
        await server.wait_closed()


async def _rogue(url: str, client_id: str, stop: asyncio.Event) -> int:
    """Connect as ``client_id`` again and again (evicting its owner) until ``stop``."""
    import aiomqtt

    from controller.broker import parse_broker_url

    address = parse_broker_url(url)
    connects = 0
    while not stop.is_set():
        try:
            async with aiomqtt.Client(
                address.host,
                address.port,
                identifier=client_id,
                protocol=aiomqtt.ProtocolVersion.V5,
                timeout=2.0,
            ) as client:
                connects += 1

                async def read(client: aiomqtt.Client = client) -> None:
                    async for _message in client.messages:
                        pass

                await first_completed(read(), stop.wait())
        except aiomqtt.MqttError:
            pass
        await asyncio.sleep(0.05)
    return connects


@pytest.mark.parametrize("pause", [0.0, 1.5])
async def test_a_taken_over_session_stands_down_then_tries_again(
    mosquitto_session: Any, pause: float
) -> None:
    """Another client with our id: the connector stops fighting, alerts, and comes back.

    Mosquitto 2.0 evicts the older connection whenever the same client id connects. Without
    the takeover rule the connector and the rogue evict each other every back-off for ever;
    with it, the connector stands down (one alert), and after ``takeover_pause_seconds``
    tries once more: it is up again once the rogue has gone. A pause of 0 stands down for good.
    """
    recorder = Recorder(settings_for([mosquitto_session.url], takeover_pause_seconds=pause))
    takeovers: list[float] = []
    loop = asyncio.get_running_loop()
    recorder.connector._on_takeover = lambda address: takeovers.append(loop.time())
    rogue_stop = asyncio.Event()
    async with asyncio.timeout(40), asyncio.TaskGroup() as group:
        task = group.create_task(recorder.run())
        await recorder.up.wait()
        rogue = group.create_task(
            _rogue(mosquitto_session.url, recorder.connector.client_id, rogue_stop)
        )
        while not takeovers:
            await asyncio.sleep(0.02)
        assert recorder.connector.taken_over
        connections = recorder.connector.connections
        # Standing down: the rogue keeps the session, nobody is evicted any more.
        await asyncio.sleep(min(pause, 1.0) if pause else 1.0)
        assert recorder.connector.connections == connections
        assert len(takeovers) == 1
        rogue_stop.set()
        assert await rogue >= 2
        if pause == 0:
            await task  # run() ended: stood down until restarted
            assert recorder.connector.connections == connections
        else:
            while recorder.connector.connections == connections or not recorder.up.is_set():
                await asyncio.sleep(0.02)
            assert loop.time() - takeovers[0] >= pause
            assert not recorder.connector.taken_over
            assert len(takeovers) == 1
            recorder.stop.set()
            await task
