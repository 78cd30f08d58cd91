"""``tablectl pit resume|void`` and ``tablectl replay``: send a command, print the answer.

Each sub-command connects to the broker (``--config FILE``: URLs, credentials, TLS and the
table id from a table config; or ``--broker URL --table-id ID`` with ``--username``,
``--password``, ``--ca-file``), sends one command, waits (bounded by ``--timeout``) for the
controller's answer and prints it. This module is the client (:func:`resolve_target`,
:func:`send_command`); the command line is :mod:`controller.cli.pit`.

* MQTT v5 (default): the command carries a response topic of its own under
  ``{prefix}/{table}/reply/{role}/`` and random correlation data; the answer is the message on
  that topic with the same correlation data. A publish the broker refuses (ACL) is reported
  at once.
* MQTT 3.1.1: the answer is the message on ``{prefix}/{table}/reply/{role}`` whose
  ``command_id`` is ours.

Exit status: 0 accepted, 1 refused (by the controller or the broker; the reason is printed),
2 no answer in time (or no connection).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from controller.errors import ConfigError, PublishError
from controller.inbound import Rejection, RejectionLog, parse_object
from controller.messages import Role, Topics
from controller.mqtt.settings import MqttSettings, client_options, tls_context

EXIT_ACCEPTED = 0
EXIT_REFUSED = 1
EXIT_NO_ANSWER = 2


@dataclass(frozen=True)
class Target:
    """Where to send: broker settings and table.

    Attributes:
        mqtt: Broker settings (URLs, credentials, TLS, protocol, prefix).
        table_id: The table.
    """

    mqtt: MqttSettings
    table_id: str


@dataclass(frozen=True)
class Outcome:
    """What became of a command.

    Attributes:
        code: The exit status (0 accepted, 1 refused, 2 no answer).
        text: The line(s) to print.
        answer: The answer's envelope, if one came.
    """

    code: int
    text: str
    answer: dict[str, Any] | None = None


def resolve_target(
    *,
    config: Path | None = None,
    brokers: Sequence[str] | None = None,
    table_id: str | None = None,
    username: str | None = None,
    password: str | None = None,
    ca_file: Path | None = None,
    protocol: str | None = None,
) -> Target:
    """Broker settings and table id from a table config, or from broker URLs and a table id.

    Args:
        config: A table config (TOML): its broker URLs, credentials, TLS and table id.
        brokers: Broker URLs (over the config's, if both are given).
        table_id: The table (over the config's).
        username: Broker user name (over the config's).
        password: Broker password (over the config's).
        ca_file: CA of ``mqtts://`` brokers (over the config's).
        protocol: MQTT version, ``"5"`` or ``"3.1.1"`` (over the config's).

    Raises:
        ConfigError: Neither a config nor brokers and a table id, or an unusable config.
    """
    overrides: dict[str, Any] = {}
    if username is not None:
        overrides["username"] = username
    if password is not None:
        overrides["password"] = SecretStr(password)
    if ca_file is not None:
        overrides["ca_file"] = ca_file
    if protocol is not None:
        overrides["protocol"] = protocol
    if config is not None:
        from controller.settings import load_settings

        settings = load_settings(config)
        mqtt = settings.mqtt
        if brokers:
            overrides["urls"] = list(brokers)
        data = mqtt.model_dump()
        data.update(overrides)
        return Target(MqttSettings(**data), table_id or settings.table_id)
    if not brokers or not table_id:
        raise ConfigError("give --config FILE, or --broker URL and --table-id ID")
    return Target(MqttSettings(urls=list(brokers), **overrides), table_id)


@dataclass(frozen=True)
class PreparedCommand:
    """One command ready to publish, and what identifies its answer.

    Built by :func:`prepare_command`; sent by :func:`publish_command` on a connected client;
    its answer recognised by :func:`match_answer`. ``tablectl pit`` and the studio's pit
    console (:mod:`controller.studio.pit`) share these three, so both send the same bytes
    and read answers the same way.

    Attributes:
        command_id: The command's id (the table answers a repeated id with its first answer).
        role: ``pit`` or ``betting``.
        name: ``resume``, ``void``, ``replay`` or ``decision``.
        topic: Where it is published (``{prefix}/{table}/cmd/...``).
        payload: The JSON body.
        reply_topic: Where the answer comes: the v5 response topic, or ``reply/{role}``.
        correlation: The v5 correlation data (``None`` with MQTT 3.1.1).
    """

    command_id: str
    role: Role
    name: str
    topic: str
    payload: bytes
    reply_topic: str
    correlation: bytes | None


def prepare_command(
    topics: Topics,
    role: Role,
    name: str,
    body: dict[str, Any],
    *,
    v5: bool,
    reply_leaf: str | None = None,
) -> PreparedCommand:
    """The command's topic, bytes, reply topic and correlation data (pure but for randomness).

    Args:
        topics: The table's topics.
        role: ``pit`` (``cmd/pit/...``) or ``betting`` (``cmd/...``).
        name: ``resume``, ``void``, ``replay`` or ``decision``.
        body: The command's fields; ``command_id`` is added when missing.
        v5: MQTT 5: a response topic of its own and correlation data.
        reply_leaf: The response topic's last level (v5); random when not given.
    """
    command = {"command_id": f"{name}-{uuid.uuid4().hex[:12]}", **body}
    leaf = reply_leaf if reply_leaf is not None else uuid.uuid4().hex[:12]
    return PreparedCommand(
        command_id=str(command["command_id"]),
        role=role,
        name=name,
        topic=topics.cmd(f"pit/{name}" if role == "pit" else name),
        payload=json.dumps(command, separators=(",", ":")).encode("utf-8"),
        reply_topic=f"{topics.reply(role)}/{leaf}" if v5 else topics.reply(role),
        correlation=secrets.token_bytes(16) if v5 else None,
    )


async def publish_command(client: Any, prepared: PreparedCommand, *, timeout: float) -> None:  # noqa: ASYNC109 (one PUBACK's bound, from the settings)
    """Publish a prepared command (QoS 1) on a connected :class:`~controller.mqtt.client.Client`.

    With MQTT 5 the publish carries the response topic and correlation data, and a PUBACK
    that refuses it (ACL) raises.

    Raises:
        PublishRefused: The broker refused the publish (v5 only).
        PublishError: No PUBACK within ``timeout``.
        aiomqtt.MqttError: The link failed.
    """
    if prepared.correlation is None:
        await client.publish(prepared.topic, prepared.payload, qos=1)
        return
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    from controller.mqtt.ack import publish_checked

    properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    properties.ResponseTopic = prepared.reply_topic
    properties.CorrelationData = prepared.correlation
    await publish_checked(
        client, prepared.topic, prepared.payload, 1, properties=properties, timeout=timeout
    )


def match_answer(
    prepared: PreparedCommand,
    payload: bytes | bytearray | str,
    correlation: bytes | None,
    *,
    rejections: RejectionLog | None = None,
) -> Outcome | None:
    """The outcome if a message received on the reply topic is this command's answer.

    The payload is read through the shared bounded parse (:func:`controller.inbound.
    parse_object`): no payload makes this raise.

    Args:
        prepared: The command sent.
        payload: The received message's body.
        correlation: Its v5 correlation data, if it carried any.
        rejections: Where a payload that is no JSON object (within the bounds) is logged and
            counted, if given.

    Returns:
        The outcome (accepted or refused, with the reason), or ``None`` when the message
        answers another command (or is not an answer).
    """
    if prepared.correlation is not None and correlation not in (None, prepared.correlation):
        return None
    envelope = parse_object(payload if isinstance(payload, bytes | bytearray | str) else b"")
    if isinstance(envelope, Rejection):
        if rejections is not None:
            rejections.record(envelope.at(prepared.reply_topic))
        return None
    data = envelope.get("data")
    if not isinstance(data, dict) or data.get("command_id") != prepared.command_id:
        return None
    return _outcome(envelope, data)


def refused_by_broker(prepared: PreparedCommand, exc: Any) -> Outcome:
    """The outcome of a publish the broker refused (``exc``: a ``PublishRefused``)."""
    return Outcome(
        EXIT_REFUSED,
        f"REFUSED by the broker: {exc.reason} (reason code "
        f"0x{exc.reason_code:02X}) publishing to {prepared.topic}: is this credential "
        f"allowed to send {prepared.name}?",
    )


def no_answer(prepared: PreparedCommand, timeout: float) -> Outcome:
    """The outcome of a command that got no answer within ``timeout`` seconds."""
    return Outcome(
        EXIT_NO_ANSWER,
        f"NO ANSWER within {timeout:g} s to {prepared.name} {prepared.command_id} on "
        f"{prepared.topic} (is the table's controller running and connected?)",
    )


async def send_command(
    target: Target,
    role: Role,
    name: str,
    body: dict[str, Any],
    *,
    timeout: float,  # noqa: ASYNC109 (the whole exchange's bound, from --timeout)
) -> Outcome:
    """Send one command and wait for its answer.

    Args:
        target: Broker and table.
        role: ``pit`` (``cmd/pit/...``) or ``betting`` (``cmd/...``).
        name: ``resume``, ``void``, ``replay`` or ``decision``.
        body: The command's fields; ``command_id`` is added when missing.
        timeout: Seconds for connecting, sending and the answer together.
    """
    import aiomqtt

    from controller.mqtt.ack import PublishRefused
    from controller.mqtt.client import Client

    settings = target.mqtt
    topics = Topics(prefix=settings.topic_prefix, table=target.table_id)
    v5 = settings.protocol == "5"
    prepared = prepare_command(topics, role, name, body, v5=v5)
    context = tls_context(settings) if settings.uses_tls else None
    errors: list[str] = []
    try:
        async with asyncio.timeout(timeout):
            for address in settings.addresses:
                client = Client(
                    address.host,
                    address.port,
                    identifier=f"tablectl-{role}-cli-{uuid.uuid4().hex[:10]}",
                    protocol=settings.protocol,
                    connect_timeout=settings.connect_timeout,
                    **client_options(settings, address, context),
                )
                try:
                    async with client:
                        await client.subscribe(prepared.reply_topic, qos=1)
                        await publish_command(client, prepared, timeout=settings.publish_timeout)
                        return await _await_answer(client, prepared)
                except PublishRefused as exc:
                    return refused_by_broker(prepared, exc)
                except (aiomqtt.MqttError, OSError, PublishError) as exc:
                    errors.append(f"{address.url}: {exc}")
    except TimeoutError:
        return no_answer(prepared, timeout)
    return Outcome(EXIT_NO_ANSWER, "NO CONNECTION: " + "; ".join(errors))


async def _await_answer(client: Any, prepared: PreparedCommand) -> Outcome:
    rejections = RejectionLog(reader="pitcli")
    async for message in client.messages:
        got = getattr(message.properties, "CorrelationData", None)
        outcome = match_answer(prepared, message.payload, got, rejections=rejections)
        if outcome is not None:
            return outcome
    raise PublishError("the connection closed before an answer came")


def _outcome(envelope: dict[str, Any], data: dict[str, Any]) -> Outcome:
    extra = data.get("data") or {}
    details = f"\n{json.dumps(extra, sort_keys=True)}" if extra else ""
    again = " (repeated command: first answer)" if data.get("duplicate") else ""
    if data.get("accepted"):
        note = f": {data['reason']}" if data.get("reason") else ""
        text = f"ACCEPTED {data.get('name')} {data.get('command_id')}{again}{note}{details}"
        return Outcome(EXIT_ACCEPTED, text, envelope)
    text = f"REFUSED {data.get('name')} {data.get('command_id')}{again}: {data.get('reason')}"
    return Outcome(EXIT_REFUSED, text + details, envelope)
