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
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    from controller.mqtt.ack import PublishRefused, publish_checked

    settings = target.mqtt
    topics = Topics(prefix=settings.topic_prefix, table=target.table_id)
    command = {"command_id": f"{name}-{uuid.uuid4().hex[:12]}", **body}
    command_id = str(command["command_id"])
    topic = topics.cmd(f"pit/{name}" if role == "pit" else name)
    v5 = settings.protocol == "5"
    reply_topic = f"{topics.reply(role)}/{uuid.uuid4().hex[:12]}" if v5 else topics.reply(role)
    correlation = secrets.token_bytes(16)
    context = tls_context(settings) if settings.uses_tls else None
    payload = json.dumps(command, separators=(",", ":")).encode("utf-8")
    errors: list[str] = []
    try:
        async with asyncio.timeout(timeout):
            for address in settings.addresses:
                client = aiomqtt.Client(
                    address.host,
                    address.port,
                    identifier=f"tablectl-{role}-cli-{uuid.uuid4().hex[:10]}",
                    protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311,
                    **client_options(settings, address, context),
                )
                try:
                    async with client:
                        await client.subscribe(reply_topic, qos=1)
                        if v5:
                            properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
                            properties.ResponseTopic = reply_topic
                            properties.CorrelationData = correlation
                            await publish_checked(
                                client,
                                topic,
                                payload,
                                1,
                                properties=properties,
                                timeout=settings.publish_timeout,
                            )
                        else:
                            await client.publish(topic, payload, qos=1)
                        return await _await_answer(client, command_id, correlation if v5 else None)
                except PublishRefused as exc:
                    return Outcome(
                        EXIT_REFUSED,
                        f"REFUSED by the broker: {exc.reason} (reason code "
                        f"0x{exc.reason_code:02X}) publishing to {topic}: is this credential "
                        f"allowed to send {name}?",
                    )
                except (aiomqtt.MqttError, OSError, PublishError) as exc:
                    errors.append(f"{address.url}: {exc}")
    except TimeoutError:
        return Outcome(
            EXIT_NO_ANSWER,
            f"NO ANSWER within {timeout} s to {name} {command_id} on {topic} "
            "(is the table's controller running and connected?)",
        )
    return Outcome(EXIT_NO_ANSWER, "NO CONNECTION: " + "; ".join(errors))


async def _await_answer(client: Any, command_id: str, correlation: bytes | None) -> Outcome:
    async for message in client.messages:
        if correlation is not None:
            got = getattr(message.properties, "CorrelationData", None)
            if got is not None and got != correlation:
                continue
        try:
            envelope = json.loads(message.payload)
        except (ValueError, TypeError):
            continue
        data = envelope.get("data") if isinstance(envelope, dict) else None
        if not isinstance(data, dict) or data.get("command_id") != command_id:
            continue
        return _outcome(envelope, data)
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
