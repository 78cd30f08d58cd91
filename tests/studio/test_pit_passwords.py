"""Password hashes of the pit console's users (scrypt, one salt per hash).

The sign-in throttle is tested in ``test_pit_login.py``.
"""

from __future__ import annotations

import pytest

from controller.studio.pit.errors import PasswordHashError
from controller.studio.pit.passwords import hash_password, parse_hash, verify_password

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


def test_tablectl_studio_hash_password_prints_a_hash_of_stdin():
    import subprocess
    import sys
    from pathlib import Path

    tablectl = Path(sys.executable).with_name("tablectl")
    done = subprocess.run(
        [str(tablectl), "studio", "--hash-password", "--stdin"],
        input="s3cret\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert verify_password("s3cret", done.stdout.strip())
    empty = subprocess.run(
        [str(tablectl), "studio", "--hash-password", "--stdin"],
        input="\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert empty.returncode == 1 and "must not be empty" in empty.stderr
