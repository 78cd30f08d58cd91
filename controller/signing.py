"""Signed results: Ed25519 signatures over a canonical JSON form of the message envelope.

A results message is a JSON object (the envelope). Its *canonical form* is the envelope
without its ``signature`` member, serialised as::

    json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

(UTF-8). The controller signs those bytes with the table's Ed25519 private key and adds::

    "signature": {"alg": "Ed25519", "key_id": "<key id>", "value": "<base64 signature>"}

The canonical form covers every member but ``signature``, ``chain_head`` included (the result's
own journal ``seq`` and chain hash), so a signed result also anchors the journal's hash chain
(docs/journal.md, "Anchors").

A consumer proves a result came from the table by checking the signature against the
table's public key with :func:`verify_envelope` (short on purpose, so it can be copied into
a consumer; it only needs ``json``, ``base64`` and ``cryptography``).

Numbers: the canonical form uses Python's JSON number spelling. Money is sent as decimal
*strings* (:mod:`controller.money`), so no float formatting question arises for payouts; an
envelope that carries floats must be verified with a JSON parser that round-trips them the
way Python does (Python, JavaScript and Go all print the shortest round-trip form).

The ``tablectl keygen`` and ``tablectl verify`` sub-commands are
:mod:`controller.cli.signing`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.errors import TablectlError

if TYPE_CHECKING:  # imported where a key is used: `cryptography` costs 9 MiB of RSS
    # (OpenSSL's bindings), which a process that never meets a key (an unsigned table's
    # archive beside it, docs/performance.md "The demo") does not load.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

ALGORITHM = "Ed25519"
"""The only signature algorithm we produce and accept."""

SIGNATURE_FIELD = "signature"
"""The envelope member that carries the signature (left out of the canonical form)."""

PRIVATE_KEY_NAME = "{key_id}.key"
PUBLIC_KEY_NAME = "{key_id}.pub"


class SignatureError(TablectlError):
    """A key that cannot be read or written, or an envelope that cannot be signed."""


def canonical_bytes(envelope: dict[str, Any]) -> bytes:
    """The bytes that are signed: the envelope without ``signature``, canonical JSON, UTF-8.

    Args:
        envelope: The message envelope (a JSON object).

    Raises:
        SignatureError: The envelope holds something JSON cannot represent (or ``NaN``).
    """
    body = {key: value for key, value in envelope.items() if key != SIGNATURE_FIELD}
    try:
        text = json.dumps(
            body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError) as exc:
        raise SignatureError(
            f"envelope cannot be put in canonical JSON: {exc}", keys=sorted(body)
        ) from exc
    return text.encode("utf-8")


class Signer:
    """Signs result envelopes with one Ed25519 key.

    Args:
        private_key: The table's private key.
        key_id: A name for the key, published with every signature so a consumer knows which
            public key to use (e.g. ``tp-01-2026``); rotate keys by changing it.
    """

    def __init__(self, private_key: Ed25519PrivateKey, key_id: str) -> None:
        if not key_id:
            raise SignatureError("a signing key needs a non-empty key id")
        self.private_key = private_key
        self.key_id = key_id

    @classmethod
    def from_file(cls, path: str | Path, key_id: str | None = None) -> Signer:
        """Load a PEM PKCS#8 Ed25519 private key (unencrypted).

        Args:
            path: The ``.key`` file written by :func:`generate_keypair`.
            key_id: The key id; the file name without its suffix if not given.

        Raises:
            SignatureError: The file cannot be read or does not hold an Ed25519 private key.
        """
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        file = Path(path)
        key = _read_pem_key(
            file,
            "signing key",
            "an unencrypted PEM PKCS#8 private key",
            lambda data: serialization.load_pem_private_key(data, password=None),
        )
        if not isinstance(key, Ed25519PrivateKey):
            raise _not_ed25519(file, "signing key", key)
        return cls(key, key_id if key_id is not None else file.stem)

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The matching public key."""
        return self.private_key.public_key()

    def sign(self, envelope: dict[str, Any]) -> dict[str, Any]:
        """A deep copy of ``envelope`` with its ``signature`` member set (any old one replaced).

        Raises:
            SignatureError: The envelope is not JSON-serialisable.
        """
        signed = copy.deepcopy(envelope)
        value = self.private_key.sign(canonical_bytes(signed))
        signed[SIGNATURE_FIELD] = {
            "alg": ALGORITHM,
            "key_id": self.key_id,
            "value": base64.b64encode(value).decode("ascii"),
        }
        return signed


# --- what a consumer needs (copy from here) ----------------------------------------------


def verify_envelope(envelope: dict[str, Any] | bytes | str, public_key: Ed25519PublicKey) -> bool:
    """Whether a signed envelope is intact and was signed by ``public_key``'s owner.

    Self-contained so a consumer can copy it (imports: ``base64``, ``json``,
    ``cryptography``). It never raises for a bad message: anything malformed is ``False``.

    Args:
        envelope: The message as received (bytes or text of the JSON object) or parsed.
        public_key: The table's Ed25519 public key (see :func:`load_public_key`).
    """
    from cryptography.exceptions import InvalidSignature

    try:
        if isinstance(envelope, bytes | str):
            envelope = json.loads(envelope)
        if not isinstance(envelope, dict):
            return False
        signature = envelope.get("signature")
        if not isinstance(signature, dict) or signature.get("alg") != "Ed25519":
            return False
        value = base64.b64decode(signature["value"], validate=True)
        body = {k: v for k, v in envelope.items() if k != "signature"}
        canonical = json.dumps(
            body, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")
        public_key.verify(value, canonical)
    except (InvalidSignature, ValueError, TypeError, KeyError, binascii.Error):
        return False
    except RecursionError:  # nested deeper than the json module reads: no message of ours
        return False
    return True


# --- end of the consumer's part ----------------------------------------------------------


def why_invalid(envelope: dict[str, Any] | bytes | str, public_key: Ed25519PublicKey) -> str:
    """A short reason why :func:`verify_envelope` says ``False`` (``""`` if it is valid)."""
    try:
        parsed = json.loads(envelope) if isinstance(envelope, bytes | str) else envelope
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # Recursion: nested deeply
        return f"not JSON: {exc}"
    if not isinstance(parsed, dict):
        return f"not a JSON object but {type(parsed).__name__}"
    signature = parsed.get(SIGNATURE_FIELD)
    if signature is None:
        return "no signature member"
    if not isinstance(signature, dict):
        return "signature member is not an object"
    if signature.get("alg") != ALGORITHM:
        return f"signature algorithm is {signature.get('alg')!r}, expected {ALGORITHM!r}"
    value = signature.get("value")
    if not isinstance(value, str):
        return "signature has no value string"
    try:
        raw = base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        return "signature value is not base64"
    if len(raw) != 64:
        return f"signature value is {len(raw)} bytes, an Ed25519 signature is 64"
    if verify_envelope(parsed, public_key):
        return ""
    return (
        f"signature (key id {signature.get('key_id')!r}) does not match the message "
        "and this public key: the message was changed or signed with another key"
    )


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    """Load a PEM (SubjectPublicKeyInfo) Ed25519 public key.

    Raises:
        SignatureError: The file cannot be read or does not hold an Ed25519 public key.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    file = Path(path)
    key = _read_pem_key(file, "public key", "a PEM public key", serialization.load_pem_public_key)
    if not isinstance(key, Ed25519PublicKey):
        raise _not_ed25519(file, "public key", key)
    return key


def _read_pem_key(file: Path, what: str, form: str, load: Callable[[bytes], object]) -> object:
    """Read a PEM key file and load the key it holds (of any type).

    Args:
        file: The key file.
        what: What the key is, for the errors (``signing key``, ``public key``).
        form: The form the file must be in, for the errors.
        load: The PEM loader (``cryptography``'s).

    Raises:
        SignatureError: The file cannot be read or is not of that form.
    """
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise SignatureError(
            f"cannot read {what} {file}: {exc.strerror or exc}", path=str(file)
        ) from exc
    try:
        return load(data)
    except (ValueError, TypeError) as exc:
        raise SignatureError(f"{what} {file} is not {form}: {exc}", path=str(file)) from exc


def _not_ed25519(file: Path, what: str, key: object) -> SignatureError:
    """The error for a key file that holds a key of another kind than Ed25519."""
    return SignatureError(
        f"{what} {file} is a {type(key).__name__}, not an Ed25519 key", path=str(file)
    )


def generate_keypair(directory: str | Path, key_id: str) -> tuple[Path, Path]:
    """Write a new Ed25519 key pair: ``<dir>/<key_id>.key`` (0600) and ``<key_id>.pub``.

    Args:
        directory: Where to write (created if missing, mode 0700).
        key_id: The key id; also the file names' stem.

    Returns:
        The private and public key paths.

    Raises:
        SignatureError: A bad key id, an existing key file (never overwritten), or a
            write error.
    """
    if not key_id or "/" in key_id or key_id.startswith(".") or "\x00" in key_id:
        raise SignatureError(f"key id {key_id!r} cannot be a file name", key_id=key_id)
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    folder = Path(directory)
    private_path = folder / PRIVATE_KEY_NAME.format(key_id=key_id)
    public_path = folder / PUBLIC_KEY_NAME.format(key_id=key_id)
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        # O_EXCL: never overwrite a key; the mode is set at creation, never world-readable.
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(private_pem)
        os.chmod(private_path, 0o600)  # in case the umask was odd
        fd = os.open(public_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(public_pem)
    except FileExistsError as exc:
        raise SignatureError(
            f"key file {exc.filename} already exists; refusing to overwrite a key",
            path=str(exc.filename),
            key_id=key_id,
        ) from exc
    except OSError as exc:
        raise SignatureError(
            f"cannot write key pair {key_id!r} in {folder}: {exc.strerror or exc}",
            path=str(folder),
            key_id=key_id,
        ) from exc
    return private_path, public_path
