"""The written contract: committed AsyncAPI/JSON Schemas match the models, every $ref
resolves, and what messages_for really publishes validates against the documented schemas."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from controller import schema
from controller.cli import schema as schema_cli
from controller.journal import JournalEntry
from controller.messages import DATA_MODELS, PUBLIC_KINDS, RoundSnapshot, Topics, messages_for

TOPICS = Topics(table="tp-1")
JOURNAL_ID = "5eed0000000000000000000000000001"
"""The journal id these tests publish under."""
REGENERATE = "run `.venv/bin/python -m controller.schema --write-docs` and commit the result"

BET = {"outcome": "win", "payout": "1.95"}
SAMPLES: dict[str, dict[str, Any]] = {
    "round_opened": {
        "round_id": "r-1",
        "round_no": 1,
        "game": "texas-holdem",
        "betting_seconds": 15.0,
        "betting_closes_at": "2026-01-01T00:00:15.000000Z",
        "slots": ["P1", "B1"],
    },
    "betting_closed": {},
    "card_dealt": {"slot": "P1", "hand": "P", "index": 0, "card": "As", "face": "hidden"},
    "rescan_requested": {"slot": "P1", "cause": "crc", "detail": "bad crc", "attempt": 1},
    "card_refused": {"slot": "B1", "card": "As", "reason": "duplicate of P1"},
    "pit_alert": {"slot": "B1", "reason": "3 misreads in a row at B1: pit boss needed"},
    "decision_open": {
        "window": "w-1",
        "kind": "player_action",
        "seat": "1",
        "seconds": 10.0,
        "options": ["fold", "call"],
        "info": {"to_call": "2"},
        "closes_at": "2026-01-01T00:00:25.000000Z",
    },
    "decision_applied": {
        "window": "w-1",
        "decision": {"action": "call"},
        "default": False,
        "command_id": "c-1",
    },
    "cards_revealed": {"hand": "P", "cards": ["As"]},
    "table_info": {"kind": "equity", "data": {"P": "0.61"}, "secure": True},
    "round_halted": {"reason": "pit boss called"},
    "round_resumed": {"by": "pit (M. Okonkwo)"},
    "command_received": {
        "command_id": "c-1",
        "role": "betting",
        "name": "decision",
        "round": "r-1",
        "data": {"window": "w-1", "decision": {"action": "call"}},
    },
    "command_answered": {
        "command_id": "c-1",
        "role": "betting",
        "name": "decision",
        "accepted": True,
        "reason": "",
        "data": {},
        "response_topic": "tables/tp-1/reply/betting/bs",
        "correlation_data": "AAE=",
    },
    "round_result": {
        "game": "texas-holdem",
        "round_no": 1,
        "cards": {"P": ["As", "Kd"]},
        "winner": "P",
        "hands": {"P": {"category": "high-card", "description": "Ace high"}},
        "bets": [
            {"bet": "P", **BET},
            {"bet": "ante", "path": "stayed", "default": True, **BET},
            {"bet": "main", "setting": "KsKd-JK7c7h", "outcome": "lose", "payout": "0"},
            {"bet": "player", "position": "P2", "outcome": "refund", "payout": "1"},
        ],
        "details": {},
    },
    "round_voided": {"reason": "stopped", "bets": {"P": {"outcome": "refund", "payout": "1"}}},
    "device_status": {"device": "serial:///dev/ttyUSB0", "state": "connected", "detail": None},
    "table_status": {"state": "publish_refused", "detail": "0x87 on tables/tp-1/results"},
    "betting_opened": {
        "betting_seconds": 15.0,
        "betting_closes_at": "2026-01-01T00:00:40.000000Z",
    },
}
TABLE_LEVEL = {"device_status", "table_status", "command_received", "command_answered"}


def entries() -> list[JournalEntry]:
    out = []
    for seq, (kind, body) in enumerate(SAMPLES.items(), start=1):
        out.append(
            JournalEntry(
                seq=seq,
                session=1,
                round_id=None if kind in TABLE_LEVEL else "r-1",
                kind=kind,
                happened_at=datetime(2026, 1, 1, tzinfo=UTC),
                body=body,
            )
        )
    return out


def test_every_kind_has_a_model_and_a_sample() -> None:
    assert set(DATA_MODELS) == set(PUBLIC_KINDS)
    assert set(SAMPLES) == set(PUBLIC_KINDS)


def test_published_messages_validate_against_the_documented_schemas() -> None:
    models = schema.payload_models()
    snapshot = RoundSnapshot()
    seen: set[str] = set()
    for entry in entries():
        snapshot = snapshot.apply(entry)
        for message in messages_for(
            entry, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=snapshot
        ):
            payload = json.loads(message.payload)
            leaf = message.topic.removeprefix(f"{TOPICS.base}/")
            stem = {
                "events": f"event-{entry.kind.replace('_', '-')}",
                "results": f"event-{entry.kind.replace('_', '-')}",
                "secure/events": f"secure-{entry.kind.replace('_', '-')}",
                "round": "round-snapshot",
            }.get(leaf, "answer" if leaf.startswith("reply/") else "?")
            assert stem in models, (message.topic, entry.kind)
            models[stem].model_validate(payload)
            seen.add(stem)
    assert seen == {
        stem for stem in models if not stem.startswith(("command-", "status", "betting-"))
    }


def test_schemas_reject_what_the_contract_forbids() -> None:
    models = schema.payload_models()
    good = json.loads(
        messages_for(
            entries()[15], TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot()
        )[0].payload
    )
    assert good["kind"] == "round_voided"
    models["event-round-voided"].model_validate(good)
    bad = json.loads(json.dumps(good))
    bad["data"]["bets"]["P"]["payout"] = "1.0e0"  # money is an exact decimal string
    with pytest.raises(ValidationError, match="payout"):
        models["event-round-voided"].model_validate(bad)
    wrong_kind = {**good, "kind": "round_result"}
    with pytest.raises(ValidationError, match="kind"):
        models["event-round-voided"].model_validate(wrong_kind)
    with pytest.raises(ValidationError, match="window"):
        models["command-decision"].model_validate({"command_id": "x", "decision": {}})


def _document(stem: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((schema.SCHEMAS_DIR / f"{stem}.json").read_text())
    return document


def _json_schema(stem: str) -> Draft202012Validator:
    return Draft202012Validator(_document(stem), format_checker=Draft202012Validator.FORMAT_CHECKER)


def test_committed_schemas_require_the_version_and_check_times() -> None:
    """Issue #16 item 4: schema_version is required; every time is a checked date-time."""
    message = json.loads(
        messages_for(
            entries()[0], TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot()
        )[0].payload
    )
    assert message["kind"] == "round_opened"
    validator = _json_schema("event-round-opened")
    assert not list(validator.iter_errors(message))
    unversioned = {key: value for key, value in message.items() if key != "schema_version"}
    assert "'schema_version' is a required property" in [
        error.message for error in validator.iter_errors(unversioned)
    ]
    old = {**message, "schema_version": "1"}
    assert list(validator.iter_errors(old)), "a version 1 message must not pass version 2"
    for where in ("at", "betting_closes_at"):
        bad = json.loads(json.dumps(message))
        if where == "at":
            bad["at"] = "yesterday"
        else:
            bad["data"]["betting_closes_at"] = "2026-13-01T00:00:00Z"
        errors = [error.message for error in validator.iter_errors(bad)]
        assert any("date-time" in text for text in errors), (where, errors)
    status = _document("status")
    assert "schema_version" in status["required"]
    decision = _document("event-decision-open")["$defs"]["DecisionOpenData"]
    assert decision["properties"]["closes_at"]["format"] == "date-time"
    snapshot = _document("round-snapshot")["$defs"]["RoundSnapshotData"]
    assert snapshot["properties"]["betting_closes_at"]["format"] == "date-time"


def test_result_bets_are_settlement_lines() -> None:
    validator = _json_schema("event-round-result")
    result = next(e for e in entries() if e.kind == "round_result")
    message = json.loads(
        messages_for(result, TOPICS, journal=JOURNAL_ID, delayed=False, snapshot=RoundSnapshot())[
            0
        ].payload
    )
    assert not list(validator.iter_errors(message))
    nested = json.loads(json.dumps(message))
    nested["data"]["bets"] = {"stayed": {"ante": BET}}  # the version 1 shape of three games
    assert list(validator.iter_errors(nested))
    no_bet = json.loads(json.dumps(message))
    del no_bet["data"]["bets"][0]["bet"]
    assert any("'bet' is a required" in e.message for e in validator.iter_errors(no_bet))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def _resolve(document: dict[str, Any], ref: str) -> Any:
    node: Any = document
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def test_asyncapi_document_is_whole() -> None:
    document = schema.asyncapi()
    assert document["asyncapi"] == "3.0.0"
    for ref in _refs(document):
        assert ref.startswith("#/"), ref
        _resolve(document, ref)  # KeyError names a dangling reference
    addresses = {channel["address"] for channel in document["channels"].values()}
    for suffix in ("decision", "replay", "pit/resume", "pit/void", "pit/replay"):
        assert f"tables/{{table}}/cmd/{suffix}" in addresses
    for leaf in ("status", "round", "events", "results", "secure/events", "reply/betting"):
        assert f"tables/{{table}}/{leaf}" in addresses
    assert "betting/status" in addresses
    actions = {op["action"] for op in document["operations"].values()}
    assert actions == {"send", "receive"}


def test_committed_documents_match_the_models(tmp_path: Path) -> None:
    schema.write_docs(tmp_path)
    committed = schema.ROOT / "docs"
    expected = (tmp_path / "docs" / "asyncapi.yaml").read_text()
    assert (committed / "asyncapi.yaml").exists(), f"docs/asyncapi.yaml is missing: {REGENERATE}"
    assert (committed / "asyncapi.yaml").read_text() == expected, (
        f"docs/asyncapi.yaml differs from the models: {REGENERATE}"
    )
    fresh = {p.name: p.read_text() for p in (tmp_path / "docs" / "schemas").glob("*.json")}
    old = {p.name: p.read_text() for p in (committed / "schemas").glob("*.json")}
    assert sorted(old) == sorted(fresh), f"docs/schemas/ has other files: {REGENERATE}"
    changed = sorted(name for name in fresh if fresh[name] != old[name])
    assert not changed, f"docs/schemas/{changed} differ from the models: {REGENERATE}"
    # The YAML is JSON after its comment header: any YAML 1.2 parser reads it.
    json.loads("".join(line for line in expected.splitlines(True) if not line.startswith("#")))


def test_schema_cli_writes_json_schemas(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert schema_cli.main(["--json-schemas", str(tmp_path / "out"), "--asyncapi"]) == 0
    printed = capsys.readouterr().out
    assert printed == schema.asyncapi_text()
    assert (tmp_path / "out" / "event-card-dealt.json").exists()
