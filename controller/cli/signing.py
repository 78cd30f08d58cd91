"""``tablectl verify`` and ``tablectl keygen``: check a signed results message, make a key pair.

The signing itself is :mod:`controller.signing`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl verify`` and ``tablectl keygen``."""
    verify = subparsers.add_parser(
        "verify",
        help="check the Ed25519 signature of a results message",
        description="Check a signed results message (a JSON object with a 'signature' "
        "member) against a table's public key. Exit 0 if valid, 1 if not (with the reason).",
    )
    verify.add_argument(
        "--public-key", required=True, type=Path, metavar="FILE", help="PEM public key"
    )
    verify.add_argument(
        "message",
        nargs="?",
        default="-",
        metavar="MESSAGE_FILE",
        help="the message as received (default '-': standard input)",
    )
    verify.set_defaults(func=_verify_command)

    keygen = subparsers.add_parser(
        "keygen",
        help="create an Ed25519 key pair for signing results",
        description="Write KEY_ID.key (private, mode 0600) and KEY_ID.pub into DIR.",
    )
    keygen.add_argument("--out", required=True, type=Path, metavar="DIR", help="directory")
    keygen.add_argument(
        "--key-id",
        default="tablectl",
        metavar="ID",
        help="key id, published with each signature (default 'tablectl')",
    )
    keygen.set_defaults(func=_keygen_command)


def _verify_command(args: argparse.Namespace) -> int:
    from controller.signing import SIGNATURE_FIELD, SignatureError, load_public_key, why_invalid

    public_key = load_public_key(args.public_key)
    if args.message == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            data = Path(args.message).read_bytes()
        except OSError as exc:
            raise SignatureError(
                f"cannot read message {args.message}: {exc.strerror or exc}", path=args.message
            ) from exc
    reason = why_invalid(data, public_key)
    if reason:
        print(f"INVALID: {reason}")
        return 1
    key_id = json.loads(data)[SIGNATURE_FIELD].get("key_id")
    print(f"OK: signature valid (key id {key_id!r})")
    return 0


def _keygen_command(args: argparse.Namespace) -> int:
    from controller.signing import generate_keypair

    private_path, public_path = generate_keypair(args.out, args.key_id)
    print(f"private key: {private_path} (keep it secret, mode 0600)")
    print(f"public key:  {public_path} (give it to consumers)")
    return 0
