"""Password hashes of the pit console's users: scrypt (stdlib), one random salt per user.

A stored hash reads ``scrypt$N$r$p$SALT$HASH`` (salt and hash in unpadded URL-safe base64),
so the cost parameters travel with each hash and can be raised later without breaking old
ones. Verification recomputes the hash with the stored parameters and compares in constant
time (:func:`hmac.compare_digest`).

Make a hash for the config file::

    .venv/bin/python -m controller.studio.pit.passwords          # asks twice, prints the hash
    echo -n 'secret' | .venv/bin/python -m controller.studio.pit.passwords --stdin

(the integrator's ``tablectl studio hash-password`` calls :func:`hash_password`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from controller.studio.pit.errors import PasswordHashError

SCHEME = "scrypt"
N = 2**15
"""scrypt's CPU/memory cost (32 MiB with r=8): 0.18 s a check on the 2-core test VM."""
R = 8
P = 1
SALT_BYTES = 16
KEY_BYTES = 32
_MAX_N = 2**20


@dataclass(frozen=True)
class ScryptHash:
    """A stored hash, read.

    Attributes:
        n: CPU/memory cost (a power of two).
        r: Block size.
        p: Parallelism.
        salt: The user's random salt.
        key: The derived key.
    """

    n: int
    r: int
    p: int
    salt: bytes
    key: bytes

    def encode(self) -> str:
        """The ``scrypt$N$r$p$SALT$HASH`` form."""
        return "$".join(
            (SCHEME, str(self.n), str(self.r), str(self.p), _b64(self.salt), _b64(self.key))
        )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _derive(password: str, parameters: ScryptHash, length: int) -> bytes:
    n, r = parameters.n, parameters.r
    return hashlib.scrypt(
        password.encode("utf-8"),
        salt=parameters.salt,
        n=n,
        r=r,
        p=parameters.p,
        maxmem=256 * n * r + 2**20,
        dklen=length,
    )


MIN_PASSWORD_LENGTH = 12
"""The shortest password ``tablectl studio --hash-password`` hashes (a passphrase of a few
words is the easy way to reach it)."""


def check_password_strength(password: str) -> None:
    """Refuse a password too short for a pit console reachable from the studio's network.

    Raises:
        PasswordHashError: Shorter than :data:`MIN_PASSWORD_LENGTH` characters (the message
            says how long it must be, and suggests a passphrase).
    """
    if len(password) < MIN_PASSWORD_LENGTH:
        raise PasswordHashError(
            f"the password has {len(password)} character(s); use at least "
            f"{MIN_PASSWORD_LENGTH} (a passphrase of a few words, e.g. 'copper lamp river "
            "seven', is easy to type and to remember)",
            length=len(password),
            minimum=MIN_PASSWORD_LENGTH,
        )


def hash_password(password: str, *, n: int = N, r: int = R, p: int = P) -> str:
    """A new hash of ``password`` with a fresh random salt.

    Raises:
        PasswordHashError: An empty password, or cost parameters scrypt refuses.
    """
    if not password:
        raise PasswordHashError("a password must not be empty")
    salt = secrets.token_bytes(SALT_BYTES)
    try:
        key = _derive(password, ScryptHash(n, r, p, salt, b""), KEY_BYTES)
    except ValueError as exc:
        raise PasswordHashError(f"scrypt refused the parameters: {exc}", n=n, r=r, p=p) from exc
    return ScryptHash(n, r, p, salt, key).encode()


def parse_hash(stored: str) -> ScryptHash:
    """Read a stored hash.

    Raises:
        PasswordHashError: Not of the form ``scrypt$N$r$p$SALT$HASH`` (naming what is wrong).
    """
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        raise PasswordHashError(
            "a password hash must read scrypt$N$r$p$SALT$HASH (make one with "
            "`python -m controller.studio.pit.passwords`)",
            found=f"{parts[0]}$... with {len(parts)} parts",
        )
    try:
        n, r, p = (int(part) for part in parts[1:4])
        salt, key = _unb64(parts[4]), _unb64(parts[5])
    except (ValueError, binascii.Error) as exc:
        raise PasswordHashError(f"unreadable password hash: {exc}") from exc
    if n < 2 or n & (n - 1) or n > _MAX_N or not 1 <= r <= 64 or not 1 <= p <= 16:
        raise PasswordHashError(
            f"scrypt parameters out of range: N must be a power of two up to {_MAX_N}, "
            "r 1..64, p 1..16",
            n=n,
            r=r,
            p=p,
        )
    if len(salt) < 8 or len(key) < 16:
        raise PasswordHashError("salt or hash too short", salt=len(salt), key=len(key))
    return ScryptHash(n, r, p, salt, key)


def verify_password(password: str, stored: str | ScryptHash) -> bool:
    """Whether ``password`` matches the stored hash (constant-time comparison).

    Raises:
        PasswordHashError: The stored hash cannot be read.
    """
    parsed = parse_hash(stored) if isinstance(stored, str) else stored
    derived = _derive(password, parsed, len(parsed.key))
    return hmac.compare_digest(derived, parsed.key)
