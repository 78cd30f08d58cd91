"""Signed results: Ed25519 over canonical JSON, key files, and the verify/keygen commands."""

from __future__ import annotations

import argparse
import base64
import copy
import json
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cli.signing import register
from controller.signing import (
    SignatureError,
    Signer,
    canonical_bytes,
    generate_keypair,
    load_public_key,
    verify_envelope,
    why_invalid,
)

KEY = Ed25519PrivateKey.generate()
SIGNER = Signer(KEY, "tp-01-test")


def result_envelope(seq: int = 42) -> dict[str, Any]:
    return {
        "schema": 1,
        "table": "tp-01",
        "round": "tp-01-000123",
        "seq": seq,
        "session": 7,
        "time": "2026-11-22T02:15:00.123456Z",
        "delayed": False,
        "type": "result",
        "payload": {
            "winner": "A",
            "hands": {"A": ["As", "Kd", "Qh"], "B": ["2c", "7d", "9s"]},
            "payouts": [
                {"bet": "main_a", "outcome": "win", "odds": "0.98:1", "pays": "0.98"},
                {"bet": "pair_plus_a", "outcome": "straight", "odds": "6:1", "pays": "6"},
            ],
            "note": "Königstisch ♠",
        },
    }


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a leaf of a JSON value."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in paths(item, (*prefix, key))]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in paths(item, (*prefix, index))]
    return [prefix]


def changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x" if value else "x"
    if value is None:
        return 0
    raise AssertionError(value)


def mutate(envelope: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    out = copy.deepcopy(envelope)
    target: Any = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = changed(target[path[-1]])
    return out


def test_sign_then_verify() -> None:
    signed = SIGNER.sign(result_envelope())
    assert signed["signature"]["alg"] == "Ed25519"
    assert signed["signature"]["key_id"] == "tp-01-test"
    assert len(base64.b64decode(signed["signature"]["value"])) == 64
    assert verify_envelope(signed, SIGNER.public_key)
    # As received on the wire, bytes and text.
    wire = json.dumps(signed)
    assert verify_envelope(wire, SIGNER.public_key)
    assert verify_envelope(wire.encode(), SIGNER.public_key)
    assert why_invalid(wire, SIGNER.public_key) == ""


def test_sign_does_not_touch_the_input_and_replaces_an_old_signature() -> None:
    envelope = result_envelope()
    before = copy.deepcopy(envelope)
    signed = SIGNER.sign(envelope)
    assert envelope == before
    other = Signer(Ed25519PrivateKey.generate(), "other")
    resigned = other.sign(signed)
    assert verify_envelope(resigned, other.public_key)
    assert not verify_envelope(resigned, SIGNER.public_key)


def test_signature_is_over_the_documented_canonical_form() -> None:
    envelope = result_envelope()
    signed = SIGNER.sign(envelope)
    expected = json.dumps(
        envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()
    assert canonical_bytes(signed) == expected
    SIGNER.public_key.verify(base64.b64decode(signed["signature"]["value"]), expected)


@pytest.mark.parametrize("path", paths(result_envelope()), ids=lambda p: ".".join(map(str, p)))
def test_any_change_to_any_field_fails(path: tuple[Any, ...]) -> None:
    signed = SIGNER.sign(result_envelope())
    assert verify_envelope(signed, SIGNER.public_key)
    tampered = mutate(signed, path)
    assert not verify_envelope(tampered, SIGNER.public_key)
    assert "does not match" in why_invalid(tampered, SIGNER.public_key)


def test_added_or_removed_members_fail() -> None:
    signed = SIGNER.sign(result_envelope())
    added = copy.deepcopy(signed)
    added["payload"]["payouts"].append({"bet": "main_b", "pays": "1"})
    assert not verify_envelope(added, SIGNER.public_key)
    removed = copy.deepcopy(signed)
    del removed["payload"]["payouts"][1]
    assert not verify_envelope(removed, SIGNER.public_key)
    extra_top = copy.deepcopy(signed)
    extra_top["delayed_by"] = 3
    assert not verify_envelope(extra_top, SIGNER.public_key)
    swapped = copy.deepcopy(signed)
    swapped["payload"]["payouts"].reverse()
    assert not verify_envelope(swapped, SIGNER.public_key)


def test_wrong_key_fails() -> None:
    signed = SIGNER.sign(result_envelope())
    stranger = Ed25519PrivateKey.generate().public_key()
    assert not verify_envelope(signed, stranger)
    assert "another key" in why_invalid(signed, stranger)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (json.dumps(result_envelope()).encode(), "no signature"),
        (json.dumps({**result_envelope(), "signature": "abc"}).encode(), "not an object"),
        (
            json.dumps({**result_envelope(), "signature": {"alg": "RS256", "value": "AA=="}}),
            "algorithm",
        ),
        (
            json.dumps({**result_envelope(), "signature": {"alg": "Ed25519", "value": "!!"}}),
            "not base64",
        ),
        (
            json.dumps({**result_envelope(), "signature": {"alg": "Ed25519", "value": "AAAA"}}),
            "64",
        ),
    ],
)
def test_malformed_messages_are_invalid_with_a_reason(message: bytes | str, reason: str) -> None:
    assert not verify_envelope(message, SIGNER.public_key)
    assert reason in why_invalid(message, SIGNER.public_key)


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.text(max_size=8),
)
json_value = st.recursive(
    json_leaf,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=12,
)


def reorder(value: Any, rng: st.DataObject) -> Any:
    """The same JSON value with every object's keys in a shuffled insertion order."""
    if isinstance(value, dict):
        keys = rng.draw(st.permutations(list(value)))
        return {key: reorder(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [reorder(item, rng) for item in value]
    return value


@settings(deadline=None, max_examples=60)
@given(
    body=st.dictionaries(st.text(max_size=6), json_value, min_size=1, max_size=5), data=st.data()
)
def test_canonicalisation_ignores_key_order(body: dict[str, Any], data: st.DataObject) -> None:
    body.pop("signature", None)
    signed = SIGNER.sign(body)
    shuffled = reorder(signed, data)
    assert canonical_bytes(shuffled) == canonical_bytes(signed)
    assert verify_envelope(shuffled, SIGNER.public_key)
    # Through the wire with a different key order too.
    assert verify_envelope(json.dumps(shuffled, ensure_ascii=True), SIGNER.public_key)


@settings(deadline=None, max_examples=40)
@given(seq=st.integers(min_value=0, max_value=2**53), data=st.data())
def test_any_leaf_change_fails_property(seq: int, data: st.DataObject) -> None:
    signed = SIGNER.sign(result_envelope(seq))
    path = data.draw(st.sampled_from(paths(result_envelope(seq))))
    assert not verify_envelope(mutate(signed, path), SIGNER.public_key)


def test_non_json_envelope_cannot_be_signed() -> None:
    with pytest.raises(SignatureError, match="canonical JSON"):
        SIGNER.sign({"when": object()})
    with pytest.raises(SignatureError, match="canonical JSON"):
        SIGNER.sign({"x": float("nan")})


def test_generate_keypair_files_and_modes(tmp_path: Path) -> None:
    private_path, public_path = generate_keypair(tmp_path / "keys", "tp-01-2026")
    assert private_path.name == "tp-01-2026.key"
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    assert b"BEGIN PRIVATE KEY" in private_path.read_bytes()
    signer = Signer.from_file(private_path)
    assert signer.key_id == "tp-01-2026"
    signed = signer.sign(result_envelope())
    assert verify_envelope(signed, load_public_key(public_path))
    assert not verify_envelope(signed, SIGNER.public_key)
    with pytest.raises(SignatureError, match="already exists"):
        generate_keypair(tmp_path / "keys", "tp-01-2026")
    with pytest.raises(SignatureError, match="file name"):
        generate_keypair(tmp_path, "../evil")


def test_key_loading_errors(tmp_path: Path) -> None:
    with pytest.raises(SignatureError, match="cannot read") as caught:
        Signer.from_file(tmp_path / "missing.key")
    assert caught.value.context["path"].endswith("missing.key")
    junk = tmp_path / "junk.pem"
    junk.write_text("hello")
    with pytest.raises(SignatureError, match="not an unencrypted PEM"):
        Signer.from_file(junk)
    with pytest.raises(SignatureError, match="not a PEM public key"):
        load_public_key(junk)
    private_path, public_path = generate_keypair(tmp_path, "k")
    with pytest.raises(SignatureError, match="not a PEM public key"):
        load_public_key(private_path)
    with pytest.raises(SignatureError):
        Signer.from_file(public_path)


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tablectl")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_cli_keygen_and_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["keygen", "--out", str(tmp_path), "--key-id", "tp-02"]) == 0
    signer = Signer.from_file(tmp_path / "tp-02.key")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(signer.sign(result_envelope())), encoding="utf-8")
    assert run_cli(["verify", "--public-key", str(tmp_path / "tp-02.pub"), str(good)]) == 0
    assert "OK" in capsys.readouterr().out

    bad = tmp_path / "bad.json"
    tampered = signer.sign(result_envelope())
    tampered["payload"]["payouts"][0]["pays"] = "9.98"
    bad.write_text(json.dumps(tampered), encoding="utf-8")
    assert run_cli(["verify", "--public-key", str(tmp_path / "tp-02.pub"), str(bad)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("INVALID:")
    assert "does not match" in out


def test_cli_verify_reads_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io
    import sys

    generate_keypair(tmp_path, "k")
    signer = Signer.from_file(tmp_path / "k.key")
    data = json.dumps(signer.sign(result_envelope())).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert run_cli(["verify", "--public-key", str(tmp_path / "k.pub"), "-"]) == 0
    assert "key id 'k'" in capsys.readouterr().out
