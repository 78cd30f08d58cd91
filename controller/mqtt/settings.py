"""The broker settings every tablectl MQTT client shares, and what is derived from them.

:class:`MqttSettings` is the ``[mqtt]`` table of a table's config. :func:`tls_context` and
:func:`client_options` turn it into ``aiomqtt.Client`` arguments; :func:`backoff_seconds` is
the one reconnect back-off (:mod:`controller.mqtt.connection` uses it for every client).
"""

from __future__ import annotations

import contextlib
import random
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from controller.broker import BrokerAddress, parse_broker_url
from controller.errors import ConfigError

ConnectionKind = Literal["publisher", "command", "status"]
"""A table controller's MQTT connections: the outbox, the command router, the status watcher."""


class MqttSettings(BaseModel):
    """How the controller talks to its broker(s).

    Attributes:
        urls: ``mqtt://host:port`` (``mqtts://`` for TLS); several are tried in order. Empty
            means "not configured": the caller picks one with :func:`~controller.broker.
            choose_broker` before starting a
            :class:`~controller.publisher.Publisher`.
        protocol: ``"5"`` (default) or ``"3.1.1"``.
        client_id: MQTT client id; ``tablectl-{table_id}`` if not set. Must be stable for a
            persistent session.
        username: Broker user name, if the broker wants one (the publisher's; also the
            command router's and the status watcher's unless they have their own).
        password: Broker password.
        command_username: The command router's user (``<client_id>-cmd``), for brokers that
            bind client ids to users (the shipped config: ``table-<id>-cmd``; see
            docs/security.md, "Client ids"); ``username`` if not set.
        command_password: Its password; ``password`` if not set.
        status_username: The betting-status watcher's user (``<client_id>-status``;
            ``table-<id>-status``); ``username`` if not set.
        status_password: Its password; ``password`` if not set.
        keepalive: MQTT keep-alive in seconds (a dead link is noticed after 1.5 times this).
        session_expiry_seconds: How long the broker keeps our v5 session while we are away
            (``clean_start=False``); v3.1.1 uses ``clean_session=False`` instead.
        connect_timeout: Seconds for TCP connect + CONNACK.
        publish_timeout: Seconds to wait for one PUBACK before giving up on the link.
        stop_timeout: Seconds :meth:`~controller.publisher.Publisher.stop` may take in all.
        topic_prefix: Topic prefix (``tables``).
        reconnect_min_seconds: First back-off delay.
        reconnect_max_seconds: Longest back-off delay.
        takeover_pause_seconds: After a session takeover (another client connected with this
            client id), how long the connection stands down before it tries once more; 0:
            never again until the controller is restarted.
        delayed_after_seconds: An entry published later than this after it happened (or
            journalled while disconnected) carries ``delayed: true``.
        window: Entries published before their acknowledgements are awaited (backlog speed).
        ca_file: PEM file of the CA(s) that signed the broker's certificate (``mqtts://``);
            the system trust store when not set.
        cert_file: PEM client certificate, for brokers that demand one (mutual TLS).
        key_file: Its private key (PEM, unencrypted); the certificate file if not set.
        tls_insecure: Do not check that the broker's certificate names the host of the URL
            (the chain is still verified against ``ca_file``). For tests and labs only.
        betting_status_topic: The retained presence topic of the betting system
            (``{"state": "online"|"offline"}``), watched by
            :class:`controller.commands.StatusWatcher`; ``None`` to not watch it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    urls: list[str] = Field(default_factory=list)
    protocol: Literal["5", "3.1.1"] = "5"
    client_id: str | None = None
    username: str | None = None
    password: SecretStr | None = None
    command_username: str | None = None
    command_password: SecretStr | None = None
    status_username: str | None = None
    status_password: SecretStr | None = None
    keepalive: int = Field(default=15, ge=2, le=65535)
    session_expiry_seconds: int = Field(default=3600, ge=0)
    connect_timeout: float = Field(default=5.0, gt=0)
    publish_timeout: float = Field(default=3.0, gt=0)
    stop_timeout: float = Field(default=3.0, gt=0)
    topic_prefix: str = "tables"
    reconnect_min_seconds: float = Field(default=0.2, gt=0)
    reconnect_max_seconds: float = Field(default=10.0, gt=0)
    takeover_pause_seconds: float = Field(default=300.0, ge=0)
    delayed_after_seconds: float = Field(default=2.0, ge=0)
    window: int = Field(default=100, ge=1, le=10000)
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    tls_insecure: bool = False
    betting_status_topic: str | None = "betting/status"

    @field_validator("betting_status_topic")
    @classmethod
    def _check_status_topic(cls, topic: str | None) -> str | None:
        if topic is not None and (not topic or any(ch in topic for ch in "+#\0")):
            raise ValueError("betting_status_topic must be a topic without wildcards")
        return topic

    @field_validator("urls")
    @classmethod
    def _check_urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            parse_broker_url(url)  # raises ConfigError naming the URL
        return urls

    @model_validator(mode="after")
    def _check_backoff(self) -> MqttSettings:
        if self.reconnect_max_seconds < self.reconnect_min_seconds:
            raise ConfigError(
                "reconnect_max_seconds is below reconnect_min_seconds",
                reconnect_min_seconds=self.reconnect_min_seconds,
                reconnect_max_seconds=self.reconnect_max_seconds,
            )
        return self

    @model_validator(mode="after")
    def _check_tls_files(self) -> MqttSettings:
        if self.key_file is not None and self.cert_file is None:
            raise ConfigError("key_file is set without cert_file", key_file=str(self.key_file))
        return self

    def for_connection(self, kind: ConnectionKind) -> MqttSettings:
        """These settings with the user and password of one of the controller's connections.

        A broker that binds client ids to users (``use_username_as_clientid``) needs one user
        per connection: two connections of one user would take each other's session over.
        Where nothing is set for ``kind``, the shared ``username``/``password`` stay (a broker
        that keeps client ids as sent: ``make run``'s, the tests' plain Mosquitto).

        Args:
            kind: ``publisher``, ``command`` or ``status``.

        Returns:
            A copy whose ``username``/``password`` are the connection's.
        """
        if kind == "command":
            user, password = self.command_username, self.command_password
        elif kind == "status":
            user, password = self.status_username, self.status_password
        else:
            return self
        if user is None and password is None:
            return self
        return self.model_copy(
            update={
                "username": user if user is not None else self.username,
                "password": password if password is not None else self.password,
            }
        )

    def same_link(self, other: MqttSettings) -> bool:
        """Whether ``other`` would open the very same link as this (all but the client id).

        Same brokers, credentials, TLS files, protocol, prefix and timings: one connection
        can then serve both (the studio's feeds, the pit console's floor: docs/studio.md).
        """
        return self.model_dump(exclude={"client_id"}) == other.model_dump(exclude={"client_id"})

    @property
    def addresses(self) -> list[BrokerAddress]:
        """The URLs, read."""
        return [parse_broker_url(url) for url in self.urls]

    @property
    def uses_tls(self) -> bool:
        """Whether any URL is ``mqtts://``."""
        return any(address.tls for address in self.addresses)


@contextlib.contextmanager
def _usable(what: str, field: str, file: Path | None) -> Iterator[None]:
    """Turn a TLS file that cannot be read or used into a :class:`ConfigError` naming it.

    Raises:
        ConfigError: The block failed with an ``OSError`` or ``ssl.SSLError``.
    """
    try:
        yield
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"{what} cannot be used: {exc}", field=field, file=str(file)) from exc


def tls_context(settings: MqttSettings) -> ssl.SSLContext:
    """The TLS context for ``mqtts://`` URLs: verify the broker, optionally present a cert.

    Built once, when the client is created, so a missing or unreadable file stops the
    controller at start with the file named (not at the first connect).

    Raises:
        ConfigError: A CA, certificate or key file that cannot be read or used.
    """
    with _usable(f"mqtt.ca_file {settings.ca_file}", "mqtt.ca_file", settings.ca_file):
        context = ssl.create_default_context(
            cafile=str(settings.ca_file) if settings.ca_file is not None else None
        )
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if settings.cert_file is not None:
        key = settings.key_file if settings.key_file is not None else settings.cert_file
        with _usable(
            f"mqtt.cert_file {settings.cert_file} / key_file {key}",
            "mqtt.cert_file",
            settings.cert_file,
        ):
            context.load_cert_chain(str(settings.cert_file), str(key))
    if settings.tls_insecure:
        context.check_hostname = False
    return context


def client_options(
    settings: MqttSettings, address: BrokerAddress, context: ssl.SSLContext | None
) -> dict[str, Any]:
    """``aiomqtt.Client`` keyword arguments every tablectl client shares.

    User name and password (the secret is unwrapped only here, never logged), TLS for
    ``mqtts://``, timeouts, keep-alive and ``TCP_NODELAY``.
    """
    password = settings.password.get_secret_value() if settings.password else None
    return {
        "username": settings.username,
        "password": password,
        "timeout": settings.publish_timeout,
        "keepalive": settings.keepalive,
        "tls_context": context if address.tls else None,
        # Small packets must not wait for Nagle (a QoS 1 stream is many small packets).
        "socket_options": ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
    }


def backoff_seconds(settings: MqttSettings, failures: int, rng: random.Random) -> float:
    """The jittered back-off after ``failures`` rounds of failed attempts (1, 2, ...)."""
    ceiling = min(
        settings.reconnect_max_seconds,
        settings.reconnect_min_seconds * 2 ** min(max(failures, 1) - 1, 30),
    )
    return rng.uniform(settings.reconnect_min_seconds, ceiling)
