"""``tablectl pit resume|void`` and ``tablectl replay``: send a command, print the answer.

Each sub-command connects to the broker (``--config FILE``: URLs, credentials, TLS and the
table id from a table config; or ``--broker URL --table-id ID`` with ``--username``,
``--password``, ``--ca-file``), sends one command, waits (bounded by ``--timeout``) for the
controller's answer and prints it.

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

import argparse
import asyncio
import json
import os
import secrets
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from pydantic import SecretStr

from controller.errors import ConfigError, PublishError, TablectlError
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


def target_from_args(args: argparse.Namespace) -> Target:
    """Broker settings and table id from ``--config`` or ``--broker``/``--table-id``.

    Raises:
        ConfigError: Neither given, or an unusable config.
    """
    overrides: dict[str, Any] = {}
    if args.username is not None:
        overrides["username"] = args.username
    password = (
        args.password if args.password is not None else os.environ.get("TABLECTL_PIT_PASSWORD")
    )
    if password is not None:
        overrides["password"] = SecretStr(password)
    if args.ca_file is not None:
        overrides["ca_file"] = args.ca_file
    if args.protocol is not None:
        overrides["protocol"] = args.protocol
    if args.config is not None:
        from controller.settings import load_settings

        settings = load_settings(args.config)
        mqtt = settings.mqtt
        if args.broker:
            overrides["urls"] = list(args.broker)
        table_id = args.table_id or settings.table_id
        data = mqtt.model_dump()
        data.update(overrides)
        return Target(MqttSettings(**data), table_id)
    if not args.broker or not args.table_id:
        raise ConfigError("give --config FILE, or --broker URL and --table-id ID")
    return Target(MqttSettings(urls=list(args.broker), **overrides), args.table_id)


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


# -- command line ----------------------------------------------------------------------------


def _connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, metavar="FILE", help="a table config (TOML)")
    parser.add_argument(
        "--broker", action="append", metavar="URL", help="broker URL (repeat to fail over)"
    )
    parser.add_argument("--table-id", metavar="ID", help="the table (default: from --config)")
    parser.add_argument("--username", help="broker user name (e.g. pitboss)")
    parser.add_argument(
        "--password",
        help="broker password (prefer the TABLECTL_PIT_PASSWORD environment variable)",
    )
    parser.add_argument("--ca-file", type=Path, metavar="FILE", help="CA of mqtts:// brokers")
    parser.add_argument("--protocol", choices=("5", "3.1.1"), help="MQTT version (default 5)")
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="seconds to wait (default 10)"
    )
    parser.add_argument("--command-id", metavar="ID", help="command id (default: random)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl pit resume``, ``tablectl pit void`` and ``tablectl replay``."""
    pit = subparsers.add_parser(
        "pit",
        help="pit-boss commands to a table (resume, void)",
        description="Send a pit-boss command to a table's controller and print its answer. "
        "Exit 0 accepted, 1 refused, 2 no answer.",
    )
    actions = pit.add_subparsers(dest="pit_command", required=True, metavar="ACTION")
    resume = actions.add_parser("resume", help="continue a halted round")
    _connection_arguments(resume)
    resume.add_argument("--round", metavar="ID", help="the round meant (refused if not current)")
    resume.set_defaults(func=_run_resume)
    void = actions.add_parser("void", help="void the current round (every bet refunded)")
    _connection_arguments(void)
    void.add_argument("--reason", required=True, help="why (journalled and published)")
    void.add_argument("--round", metavar="ID", help="the round meant (refused if not current)")
    void.set_defaults(func=_run_void)

    replay = subparsers.add_parser(
        "replay",
        help="ask a table to re-send its results from a sequence number",
        description="Ask a table's controller to re-send round_result and round_voided "
        "messages with FROM <= seq <= TO on its results topic (flagged replayed). "
        "Exit 0 accepted, 1 refused, 2 no answer.",
    )
    _connection_arguments(replay)
    replay.add_argument("--from-seq", type=int, required=True, metavar="N")
    replay.add_argument("--to-seq", type=int, metavar="M", help="default: up to the last")
    replay.add_argument(
        "--as",
        dest="role",
        choices=("pit", "betting"),
        default="pit",
        help="send as the pit boss (cmd/pit/replay, default) or the betting system (cmd/replay)",
    )
    replay.set_defaults(func=_run_replay)


def _run(args: argparse.Namespace, role: Role, name: str, body: dict[str, Any]) -> int:
    out: TextIO = sys.stdout
    if args.command_id:
        body = {"command_id": args.command_id, **body}
    try:
        target = target_from_args(args)
        outcome = asyncio.run(send_command(target, role, name, body, timeout=args.timeout))
    except TablectlError as exc:
        print(f"tablectl {name}: {exc}", file=sys.stderr)
        return EXIT_NO_ANSWER
    print(outcome.text, file=out if outcome.code == EXIT_ACCEPTED else sys.stderr)
    return outcome.code


def _run_resume(args: argparse.Namespace) -> int:
    return _run(args, "pit", "resume", {"round": args.round})


def _run_void(args: argparse.Namespace) -> int:
    return _run(args, "pit", "void", {"round": args.round, "reason": args.reason})


def _run_replay(args: argparse.Namespace) -> int:
    body = {"round": None, "from_seq": args.from_seq, "to_seq": args.to_seq}
    return _run(args, args.role, "replay", body)


def main(argv: list[str] | None = None) -> int:
    """``python -m controller.pitcli pit void --reason ...`` (until ``tablectl`` wires it)."""
    parser = argparse.ArgumentParser(prog="tablectl")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register(subparsers)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
