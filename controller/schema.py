"""The MQTT contract as documents: an AsyncAPI 3.0 description and JSON Schemas.

Generated from the pydantic models of :mod:`controller.messages` (envelope, status, the
``data`` of every entry kind, the round snapshot) and :mod:`controller.commands` (commands,
the betting system's presence), so the documents cannot drift from the code: the committed
``docs/asyncapi.yaml`` and ``docs/schemas/*.json`` are checked against a fresh generation by
``tests/unit/test_schema.py``. Regenerate them with::

    .venv/bin/python -m controller.schema --write-docs

The YAML is JSON (indented), which every YAML 1.2 parser reads: no YAML library is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, create_model
from pydantic.json_schema import models_json_schema

from controller import __version__
from controller.commands import (
    AckCommand,
    BettingStatusMessage,
    DecisionCommand,
    DeckCheckCommand,
    EnterCardCommand,
    ReplayCommand,
    ResumeCommand,
    VoidCommand,
)
from controller.messages import (
    DATA_MODELS,
    PUBLIC_DATA_MODELS,
    RESULT_KINDS,
    ROUND_SNAPSHOT_KIND,
    SCHEMA_VERSION,
    Envelope,
    RoundSnapshotData,
    StatusMessage,
)

ROOT = Path(__file__).resolve().parents[1]
ASYNCAPI_PATH = ROOT / "docs" / "asyncapi.yaml"
SCHEMAS_DIR = ROOT / "docs" / "schemas"

SECURE_KINDS = (
    "card_dealt",
    "card_refused",
    "table_info",
    "command_received",
    "round_voided",
    "round_halted",
    "round_resumed",
    "pit_alert",
)
"""Kinds whose full form can appear on ``secure/events`` (the last four: their reasons and
operator, where the public view carries a fixed phrase)."""


def _camel(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("_"))


def _envelope_model(name: str, kind: str, data: type[BaseModel], doc: str) -> type[BaseModel]:
    model: type[BaseModel] = create_model(
        name,
        __base__=Envelope,
        __doc__=doc,
        kind=(Literal[kind], ...),  # type: ignore[arg-type]
        data=(data, ...),
    )
    return model


def payload_models() -> dict[str, type[BaseModel]]:
    """Every payload of the contract: file stem -> model (stable order)."""
    models: dict[str, type[BaseModel]] = {"status": StatusMessage}
    models["round-snapshot"] = _envelope_model(
        "RoundSnapshotMessage",
        ROUND_SNAPSHOT_KIND,
        RoundSnapshotData,
        "The retained round snapshot (`round` topic).",
    )
    for kind, data in PUBLIC_DATA_MODELS.items():
        models[f"event-{kind.replace('_', '-')}"] = _envelope_model(
            f"{_camel(kind)}Event",
            kind,
            data,
            f"`{kind}` as published on `events`"
            + (" and `results`" if kind in RESULT_KINDS else "")
            + ".",
        )
    for kind in SECURE_KINDS:
        models[f"secure-{kind.replace('_', '-')}"] = _envelope_model(
            f"{_camel(kind)}Secure",
            kind,
            DATA_MODELS[kind],
            f"`{kind}` in full, on `secure/events` (stream production only).",
        )
    models["answer"] = _envelope_model(
        "CommandAnswer",
        "command_answered",
        DATA_MODELS["command_answered"],
        "The answer to a command, on its response topic or `reply/{role}`.",
    )
    models["command-decision"] = DecisionCommand
    models["command-replay"] = ReplayCommand
    models["command-resume"] = ResumeCommand
    models["command-void"] = VoidCommand
    models["command-ack"] = AckCommand
    models["command-enter-card"] = EnterCardCommand
    models["command-deck-check"] = DeckCheckCommand
    models["betting-status"] = BettingStatusMessage
    return models


def json_schemas() -> dict[str, dict[str, Any]]:
    """One self-contained JSON Schema (draft 2020-12) per payload: file stem -> schema."""
    out: dict[str, dict[str, Any]] = {}
    for stem, model in payload_models().items():
        schema = model.model_json_schema(mode="serialization")
        out[stem] = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://tablectl.example/schemas/v{SCHEMA_VERSION}/{stem}.json",
            **schema,
        }
    return out


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"#/{kind}/{name}"}


def asyncapi() -> dict[str, Any]:
    """The AsyncAPI 3.0 document of the contract."""
    models = payload_models()
    _keys, definitions = models_json_schema(
        [(model, "serialization") for model in models.values()],
        ref_template="#/components/schemas/{model}",
    )
    schemas: dict[str, Any] = definitions.get("$defs", {})
    messages: dict[str, Any] = {}
    for stem, model in models.items():
        messages[_camel(stem.replace("-", "_"))] = {
            "name": model.__name__,
            "title": model.__name__,
            "summary": (model.__doc__ or "").strip().splitlines()[0],
            "contentType": "application/json",
            "payload": _ref("components/schemas", model.__name__),
        }

    def msg(stem: str) -> dict[str, str]:
        return _ref("components/messages", _camel(stem.replace("-", "_")))

    table = {"table": {"description": "the table id (one topic level)"}}
    event_stems = [stem for stem in models if stem.startswith("event-")]
    result_stems = [f"event-{kind.replace('_', '-')}" for kind in sorted(RESULT_KINDS)]
    secure_stems = [stem for stem in models if stem.startswith("secure-")]
    channels: dict[str, Any] = {
        "status": {
            "address": "tables/{table}/status",
            "description": "Retained. Birth (online) after every connect, clean stop or the "
            "Last Will (offline, at: null).",
            "parameters": table,
            "messages": {"status": msg("status")},
        },
        "round": {
            "address": "tables/{table}/round",
            "description": "Retained snapshot of the current round (public cards only).",
            "parameters": table,
            "messages": {"roundSnapshot": msg("round-snapshot")},
        },
        "events": {
            "address": "tables/{table}/events",
            "description": "The public view of every journal entry, in seq order (gap-free).",
            "parameters": table,
            "messages": {_camel(s.replace("-", "_")): msg(s) for s in event_stems},
        },
        "results": {
            "address": "tables/{table}/results",
            "description": "round_result and round_voided (signed when the table has a key); "
            "also replays (replayed: true, original seq).",
            "parameters": table,
            "messages": {_camel(s.replace("-", "_")): msg(s) for s in result_stems},
        },
        "secureEvents": {
            "address": "tables/{table}/secure/events",
            "description": "Full entries that had something withheld from events (hidden "
            "cards, secure table info, received commands, the pit's words and name in voids, "
            "halts, resumes and pit alerts). Stream production only.",
            "parameters": table,
            "messages": {_camel(s.replace("-", "_")): msg(s) for s in secure_stems},
        },
    }
    commands = {
        "cmdDecision": ("decision", "betting", "command-decision"),
        "cmdReplay": ("replay", "betting", "command-replay"),
        "cmdPitResume": ("pit/resume", "pit", "command-resume"),
        "cmdPitVoid": ("pit/void", "pit", "command-void"),
        "cmdPitReplay": ("pit/replay", "pit", "command-replay"),
        "cmdPitAck": ("pit/ack", "pit", "command-ack"),
        "cmdPitEnterCard": ("pit/enter-card", "pit", "command-enter-card"),
        "cmdPitDeckCheck": ("pit/deck-check", "pit", "command-deck-check"),
    }
    for role in ("betting", "pit"):
        channels[f"reply{role.capitalize()}"] = {
            "address": f"tables/{{table}}/reply/{role}",
            "description": f"Answers to the {role} role's commands sent without an MQTT v5 "
            "response topic (match on data.command_id).",
            "parameters": table,
            "messages": {"answer": msg("answer")},
        }
        channels[f"response{role.capitalize()}"] = {
            "address": f"tables/{{table}}/reply/{role}/{{client}}",
            "description": f"An MQTT v5 response topic chosen by a {role} client (must be "
            "under this tree, else the command is refused); the answer carries the "
            "command's correlation data.",
            "parameters": {**table, "client": {"description": "chosen by the sender"}},
            "messages": {"answer": msg("answer")},
        }
    for channel, (suffix, role, stem) in commands.items():
        channels[channel] = {
            "address": f"tables/{{table}}/cmd/{suffix}",
            "description": f"Commands of the {role} role (the ACL ties the topic to the "
            "credential).",
            "parameters": table,
            "messages": {_camel(stem.replace("-", "_")): msg(stem)},
        }
    channels["bettingStatus"] = {
        "address": "betting/status",
        "description": "Retained presence of the betting system (its Last Will says "
        "offline); configurable (mqtt.betting_status_topic).",
        "messages": {"bettingStatus": msg("betting-status")},
    }

    def channel_messages(name: str) -> list[dict[str, str]]:
        return [{"$ref": f"#/channels/{name}/messages/{key}"} for key in channels[name]["messages"]]

    operations: dict[str, Any] = {}
    for name in ("status", "round", "events", "results", "secureEvents"):
        operations[f"publish{name[0].upper()}{name[1:]}"] = {
            "action": "send",
            "channel": _ref("channels", name),
            "messages": channel_messages(name),
        }
    for channel, (_suffix, role, _stem) in commands.items():
        operations[f"receive{channel[0].upper()}{channel[1:]}"] = {
            "action": "receive",
            "channel": _ref("channels", channel),
            "messages": channel_messages(channel),
            "reply": {
                "channel": _ref("channels", f"reply{role.capitalize()}"),
                "messages": channel_messages(f"reply{role.capitalize()}"),
                "address": {
                    "description": "the command's MQTT v5 response topic (see "
                    f"response{role.capitalize()}) when given, else reply/{role}",
                    "location": "$message.header#/responseTopic",
                },
            },
        }
    operations["receiveBettingStatus"] = {
        "action": "receive",
        "channel": _ref("channels", "bettingStatus"),
        "messages": channel_messages("bettingStatus"),
    }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "tablectl table controller",
            "version": f"{SCHEMA_VERSION}.0.0",
            "description": "What a live-dealer table controller publishes over MQTT and the "
            f"commands it accepts (schema_version {SCHEMA_VERSION}, tablectl {__version__}). "
            "Prose: docs/mqtt.md. Every message is QoS 1. Topics are shown with the default "
            "prefix 'tables'.",
        },
        "defaultContentType": "application/json",
        "servers": {
            "studio": {
                "host": "mqtt.studio.example:8883",
                "protocol": "mqtts",
                "protocolVersion": "5.0",
                "description": "TLS, one user name and password per client, role ACLs "
                "(docs/security.md).",
            }
        },
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": schemas},
    }


def render(document: dict[str, Any]) -> str:
    """Indented JSON, sorted nowhere (the order is the code's), with a final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def asyncapi_text() -> str:
    """``docs/asyncapi.yaml`` as it should be (JSON is YAML)."""
    header = (
        "# Generated by `python -m controller.schema --write-docs` from controller/messages.py\n"
        "# and controller/commands.py. Do not edit by hand. (JSON is valid YAML 1.2.)\n"
    )
    return header + render(asyncapi())


def write_schemas(directory: Path) -> list[Path]:
    """Write every JSON Schema into ``directory`` (removing stale ``*.json``)."""
    directory.mkdir(parents=True, exist_ok=True)
    wanted = json_schemas()
    for stale in directory.glob("*.json"):
        if stale.stem not in wanted:
            stale.unlink()
    paths = []
    for stem, schema in wanted.items():
        path = directory / f"{stem}.json"
        path.write_text(render(schema), encoding="utf-8")
        paths.append(path)
    return paths


def write_docs(root: Path = ROOT) -> None:
    """Regenerate ``docs/asyncapi.yaml`` and ``docs/schemas/`` under ``root``."""
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "docs" / "asyncapi.yaml").write_text(asyncapi_text(), encoding="utf-8")
    write_schemas(root / "docs" / "schemas")


if __name__ == "__main__":
    # ``python -m controller.schema [--asyncapi] [--json-schemas DIR] [--write-docs]``, the
    # command the generated documents' header names, is ``tablectl schema``. This block runs
    # only as ``__main__`` (no cycle at run time); the import-graph check ignores this edge.
    from controller.cli.schema import main

    raise SystemExit(main())
