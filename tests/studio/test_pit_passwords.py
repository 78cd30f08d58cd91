"""Password hashes of the pit console's users (scrypt, one salt per hash).

The sign-in throttle is tested in ``test_pit_login.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from controller.studio.pit.errors import PasswordHashError
from controller.studio.pit.passwords import (
    MIN_PASSWORD_LENGTH,
    check_password_strength,
    hash_password,
    parse_hash,
    verify_password,
)

FAST = {"n": 2**10, "r": 8, "p": 1}
"""A cheap cost for tests (the default is 2**15)."""


def test_a_hash_verifies_its_password_only():
    stored = hash_password("correct horse", **FAST)
    assert stored.startswith("scrypt$1024$8$1$")
    assert verify_password("correct horse", stored)
    assert not verify_password("correct hors", stored)
    assert not verify_password("", stored)


def test_each_hash_has_its_own_salt():
    first, second = hash_password("same", **FAST), hash_password("same", **FAST)
    assert first != second
    assert parse_hash(first).salt != parse_hash(second).salt
    assert verify_password("same", first) and verify_password("same", second)


def test_the_default_cost_is_stored_with_the_hash():
    parsed = parse_hash(hash_password("x"))
    assert (parsed.n, parsed.r, parsed.p) == (2**15, 8, 1)


@pytest.mark.parametrize(
    ("stored", "says"),
    [
        ("plaintext", "scrypt$N$r$p$SALT$HASH"),
        ("bcrypt$1$2$3$4$5", "scrypt$N$r$p$SALT$HASH"),
        ("scrypt$x$8$1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA", "unreadable"),
        ("scrypt$1000$8$1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA", "power of two"),
        ("scrypt$1024$8$1$AA$AAAAAAAAAAAAAAAAAAAAAA", "too short"),
    ],
)
def test_an_unreadable_hash_is_refused_saying_why(stored, says):
    with pytest.raises(PasswordHashError, match=says.replace("$", r"\$")):
        verify_password("x", stored)


def test_an_empty_password_cannot_be_hashed():
    with pytest.raises(PasswordHashError, match="empty"):
        hash_password("")


def _hash_password_command(*options: str, stdin: str | None) -> subprocess.CompletedProcess[str]:
    tablectl = Path(sys.executable).with_name("tablectl")
    return subprocess.run(
        [str(tablectl), "studio", "--hash-password", *options],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_tablectl_studio_hash_password_prints_a_hash_of_stdin():
    done = _hash_password_command("--stdin", stdin="copper lamp river\n")
    assert done.returncode == 0, done.stderr
    assert verify_password("copper lamp river", done.stdout.strip())
    empty = _hash_password_command("--stdin", stdin="\n")
    assert empty.returncode == 1 and "has 0 character(s)" in empty.stderr


def test_a_short_password_is_refused_with_the_rule():
    """Issue 25: a one-character password was hashed; 12 characters are the least."""
    short = _hash_password_command("--stdin", stdin="a\n")
    assert short.returncode == 1
    assert short.stdout == ""
    assert f"use at least {MIN_PASSWORD_LENGTH}" in short.stderr and "passphrase" in short.stderr
    with pytest.raises(PasswordHashError, match="at least 12"):
        check_password_strength("s3cret")
    check_password_strength("x" * MIN_PASSWORD_LENGTH)


def test_hash_password_without_a_terminal_says_to_use_stdin():
    """Issue 25: ``--hash-password </dev/null`` ended in an EOFError traceback."""
    done = _hash_password_command(stdin=None)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "EOFError" not in done.stderr
    assert "--hash-password --stdin" in done.stderr
