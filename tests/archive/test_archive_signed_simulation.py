"""``tablectl run --simulate --sign``: a simulated table that signs, and the check it prints.

A real run on a Mosquitto of the test's own (the archive beside the table, SQLite): the key
is made once in the journal's folder (``keys/sim-1.key``), the run prints the ``archive
verify`` command line, and that exact command passes (every entry verified under the signed
chain heads, the journal agreeing). A journal entry changed afterwards makes the same
command fail; a result message as sent verifies with ``tablectl verify`` and fails once a
payout in it is changed. A second run keeps the key.
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from pathlib import Path

import pytest

from controller.cli import main
from controller.journal import Journal

pytestmark = pytest.mark.hil

RUN = [
    "run",
    "--simulate",
    "--sign",
    "--no-studio",
    "--seed",
    "7",
    "--betting-seconds",
    "0.2",
    "--pause-seconds",
    "0.1",
    "--deal-delay",
    "0",
]


def _verify_line(err: str) -> list[str]:
    """The ``tablectl archive verify ...`` command the run printed, as arguments."""
    line = next(line for line in err.splitlines() if "tablectl archive verify" in line)
    command = line.strip().split("  (")[0]
    words = shlex.split(command)
    assert words[0] == "tablectl"
    return words[1:]


def test_a_signing_simulated_table_verifies_and_a_tampered_entry_does_not(
    mosquitto, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal_path = tmp_path / "sim-1.sqlite"
    args = [*RUN, "--rounds", "2", "--broker", mosquitto.url, "--journal", str(journal_path)]
    assert main(args) == 0
    err = capsys.readouterr().err
    key, public = tmp_path / "keys" / "sim-1.key", tmp_path / "keys" / "sim-1.pub"
    assert f"results signed with {key} (key id 'sim-1', made now" in err
    assert key.stat().st_mode & 0o777 == 0o600 and public.exists()
    verify = _verify_line(err)
    archive = tmp_path / "archive.sqlite"
    assert verify == [
        "archive",
        "verify",
        "--database",
        f"sqlite:///{archive}",
        "--table",
        "sim-1",
        "--journal",
        str(journal_path),
    ]
    assert f"tablectl verify --public-key {public} MESSAGE_FILE" in err

    # The printed command passes: signed, every entry covered by a signed chain head.
    assert main(verify) == 0
    out = capsys.readouterr().out
    with Journal.open_readonly(journal_path) as journal:
        entries = list(journal.entries())
    assert f"chain: {len(entries)} verified, 0 provisional, 0 unsigned" in out
    assert "problem" not in out
    assert "the journal and the archive agree" in out

    # One result as a subscriber received it verifies with the table's public key...
    with sqlite3.connect(archive) as conn:
        signed = conn.execute(
            "SELECT count(*) FROM events WHERE kind = 'round_result' AND signed = 1"
        ).fetchone()
        (envelope,) = conn.execute(
            "SELECT envelope FROM events WHERE kind = 'round_result' ORDER BY seq LIMIT 1"
        ).fetchone()
    assert signed == (2,)
    message = tmp_path / "result.json"
    message.write_text(envelope)
    assert main(["verify", "--public-key", str(public), str(message)]) == 0
    assert capsys.readouterr().out.startswith("OK: signature valid (key id 'sim-1')")
    # ... and not once a payout in it is changed.
    document = json.loads(envelope)
    line = document["data"]["bets"][0]
    line["payout"] = "1000" if line["payout"] != "1000" else "999"
    message.write_text(json.dumps(document))
    assert main(["verify", "--public-key", str(public), str(message)]) == 1
    assert capsys.readouterr().out.startswith("INVALID: signature (key id 'sim-1') does not")

    # A journal entry rewritten after the fact: the same command fails, naming the entry.
    with sqlite3.connect(journal_path) as db:
        (seq,) = db.execute(
            "SELECT seq FROM entries WHERE kind = 'round_result' ORDER BY seq LIMIT 1"
        ).fetchone()
        db.execute(
            "UPDATE entries SET body = replace(body, '\"win\"', '\"lose\"') WHERE seq = ?", (seq,)
        )
        assert db.total_changes == 1
    assert main(verify) == 1
    out = capsys.readouterr().out
    assert "they DO NOT agree" in out
    assert f"(seq {seq})" in out or f"seq {seq}" in out


def test_a_second_run_keeps_the_key(mosquitto, tmp_path: Path, capsys) -> None:
    journal_path = tmp_path / "sim-1.sqlite"
    base = [*RUN, "--broker", mosquitto.url, "--journal", str(journal_path), "--no-archive"]
    assert main([*base, "--rounds", "1"]) == 0
    key = tmp_path / "keys" / "sim-1.key"
    first = key.read_bytes()
    (tmp_path / "keys" / "sim-1.pub").unlink()  # lost: made again from the private key
    assert main([*base, "--rounds", "2"]) == 0
    err = capsys.readouterr().err
    assert "kept from an earlier run" in err
    assert key.read_bytes() == first
    assert (tmp_path / "keys" / "sim-1.pub").exists()
    # Without an archive, the run prints the one-message check only.
    assert "tablectl archive verify" not in err.split("kept from an earlier run")[1]
    assert "tablectl verify --public-key" in err


def test_a_key_from_the_environment_signs_and_the_archive_checks_it(
    mosquitto, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    from controller.signing import generate_keypair

    private, _public = generate_keypair(tmp_path / "own-keys", "tp-sim")
    monkeypatch.setenv("TABLECTL_SIGNING__KEY_FILE", str(private))
    monkeypatch.setenv("TABLECTL_SIGNING__KEY_ID", "tp-sim")
    journal_path = tmp_path / "sim-1.sqlite"
    args = [a for a in RUN if a != "--sign"]
    assert (
        main([*args, "--rounds", "1", "--broker", mosquitto.url, "--journal", str(journal_path)])
        == 0
    )
    err = capsys.readouterr().err
    assert not (tmp_path / "keys").exists()  # no key made: the environment's is used
    verify = _verify_line(err)
    assert "tablectl verify --public-key" not in err  # its public key is the operator's
    assert main(verify) == 0
    out = capsys.readouterr().out
    assert "0 provisional, 0 unsigned" in out and "the journal and the archive agree" in out
