"""Broker helpers: URL parsing, a real CONNECT/CONNACK probe, an embedded demo broker.

The embedded broker (amqtt 0.12, in-process) exists so ``make run`` works on a machine
without Mosquitto. It speaks MQTT 3.1.1 only and, with anonymous access, queues nothing for
offline clients: fine for a demo, never for delivery guarantees.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

import structlog

from controller.errors import ConfigError, PublishError

log = structlog.get_logger(__name__)

Protocol = Literal["5", "3.1.1"]
"""The MQTT protocol versions we speak."""

DEFAULT_LOCAL_URL = "mqtt://127.0.0.1:1883"
"""Where ``choose_broker`` looks for a local Mosquitto."""

_DEFAULT_PORTS = {"mqtt": 1883, "tcp": 1883, "mqtts": 8883, "ssl": 8883}


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """A broker URL, read.

    Attributes:
        host: Host name or address.
        port: TCP port.
        tls: Whether to use TLS (``mqtts://``).
        url: The URL as given.
    """

    host: str
    port: int
    tls: bool
    url: str


def parse_broker_url(url: str) -> BrokerAddress:
    """Read ``mqtt://HOST[:PORT]`` (1883) or ``mqtts://HOST[:PORT]`` (8883).

    ``memory://NAME`` is the in-process broker of the fast test tier
    (:mod:`controller.mqtt.memory`), never a table's.

    Raises:
        ConfigError: Another scheme, no host, a bad port, or a path/credentials in the URL.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"broker URL {url!r} is malformed: {exc}", url=url) from exc
    scheme = parts.scheme.lower()
    if scheme == "memory" and parts.hostname and parts.path in ("", "/") and not parts.query:
        # The in-process broker of the fast test tier (controller/mqtt/memory.py).
        return BrokerAddress(host=parts.hostname, port=0, tls=False, url=url)
    if scheme not in _DEFAULT_PORTS:
        raise ConfigError(
            f"broker URL {url!r} must start with mqtt:// or mqtts://", url=url, scheme=scheme
        )
    if not parts.hostname:
        raise ConfigError(f"broker URL {url!r} has no host", url=url)
    if parts.username or parts.password:
        raise ConfigError(
            f"broker URL {url!r} must not carry credentials; use username/password settings",
            url=url,
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"broker URL {url!r} must not have a path or query", url=url)
    return BrokerAddress(
        host=parts.hostname,
        port=port if port is not None else _DEFAULT_PORTS[scheme],
        tls=scheme in ("mqtts", "ssl"),
        url=url,
    )


async def broker_answers(
    host: str,
    port: int,
    timeout: float = 2.0,  # noqa: ASYNC109 (the interface the lead codes against)
    *,
    protocol: Protocol = "3.1.1",
) -> bool:
    """Whether an MQTT broker accepts a connection there (CONNECT answered by CONNACK).

    Args:
        host: Broker host.
        port: Broker port.
        timeout: Seconds for the whole attempt.
        protocol: The protocol to try (3.1.1 is accepted by every broker we use).

    Returns:
        ``True`` only if a CONNACK accepting the connection arrived in time.
    """
    import aiomqtt

    version = aiomqtt.ProtocolVersion.V5 if protocol == "5" else aiomqtt.ProtocolVersion.V311
    client = aiomqtt.Client(
        host,
        port,
        identifier=f"tablectl-probe-{uuid.uuid4().hex[:12]}",
        protocol=version,
        timeout=timeout,
        keepalive=max(5, int(timeout) + 1),
        logger=_quiet_logger("tablectl.broker.probe"),
    )
    try:
        async with asyncio.timeout(timeout):
            async with client:
                return True
    except (TimeoutError, OSError, aiomqtt.MqttError):
        return False


def _quiet_logger(name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.setLevel(logging.CRITICAL)
    logger.propagate = False
    return logger


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (another process may take it before you)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


_AMQTT_LOGGERS = ("amqtt", "transitions")


class EmbeddedBroker:
    """An in-process amqtt broker on loopback (MQTT 3.1.1, anonymous): for demos only.

    Use as ``async with EmbeddedBroker() as broker: ... broker.url``, or call
    :meth:`start` and :meth:`stop`.

    Attributes:
        host: The address it listens on.
        port: Its port (a free one if 0 was given; known after :meth:`start`).
    """

    protocol: Protocol = "3.1.1"

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, quiet: bool = True) -> None:
        self.host = host
        self.port = port
        self._quiet = quiet
        self._broker: Any = None

    @property
    def url(self) -> str:
        """``mqtt://host:port``."""
        return f"mqtt://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the broker is started."""
        return self._broker is not None

    async def start(self) -> None:
        """Start listening.

        Raises:
            PublishError: amqtt could not start (port taken, ...).
        """
        if self._broker is not None:
            return
        if self._quiet:
            for name in _AMQTT_LOGGERS:
                logging.getLogger(name).setLevel(logging.ERROR)
        from amqtt.broker import Broker

        port = self.port or free_port(self.host)
        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{port}"}},
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True},
            },
        }
        broker = Broker(config)
        try:
            await broker.start()
        except Exception as exc:
            raise PublishError(
                f"embedded broker could not start: {exc}", host=self.host, port=port
            ) from exc
        self._broker = broker
        self.port = port
        log.info("embedded broker started", url=self.url)

    async def stop(self) -> None:
        """Shut the broker down (idempotent)."""
        broker, self._broker = self._broker, None
        if broker is None:
            return
        with contextlib.suppress(Exception):
            await broker.shutdown()
        log.info("embedded broker stopped", url=self.url)

    async def __aenter__(self) -> EmbeddedBroker:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def choose_broker(
    configured_urls: list[str] | tuple[str, ...] | None,
    *,
    protocol: Protocol = "5",
    local_url: str = DEFAULT_LOCAL_URL,
    probe_timeout: float = 1.0,
) -> tuple[list[str], EmbeddedBroker | None, Protocol]:
    """Decide which broker to use.

    Configured URLs are used as they are (with ``protocol``). With none configured: a broker
    answering at ``local_url`` (Mosquitto at 127.0.0.1:1883) if there is one, otherwise a
    started :class:`EmbeddedBroker`, and then the protocol is 3.1.1.

    Returns:
        The URLs, the embedded broker the caller must stop (or ``None``), the protocol.

    Raises:
        ConfigError: A configured URL cannot be read.
        PublishError: The embedded broker could not start.
    """
    if configured_urls:
        urls = list(configured_urls)
        for url in urls:
            parse_broker_url(url)
        return urls, None, protocol
    local = parse_broker_url(local_url)
    if await broker_answers(local.host, local.port, probe_timeout):
        log.info("using the local broker", url=local_url)
        return [local_url], None, protocol
    embedded = EmbeddedBroker()
    await embedded.start()
    log.info("no local broker answered; using an embedded one", url=embedded.url)
    return [embedded.url], embedded, "3.1.1"
