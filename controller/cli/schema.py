"""``tablectl schema``: print the MQTT contract (AsyncAPI 3.0) or write its JSON Schemas.

The documents are built by :mod:`controller.schema` from the models in
:mod:`controller.messages`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``tablectl schema``."""
    parser = subparsers.add_parser(
        "schema",
        help="print the MQTT contract (AsyncAPI 3.0) or write its JSON Schemas",
        description="Print the AsyncAPI 3.0 document of the MQTT contract (default), and/or "
        "write one JSON Schema per payload into DIR.",
    )
    parser.add_argument("--asyncapi", action="store_true", help="print the AsyncAPI document")
    parser.add_argument("--json-schemas", type=Path, metavar="DIR", help="write JSON Schemas")
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="regenerate docs/asyncapi.yaml and docs/schemas/ in the source tree",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from controller.schema import (
        ASYNCAPI_PATH,
        SCHEMAS_DIR,
        asyncapi_text,
        write_docs,
        write_schemas,
    )

    if args.write_docs:
        write_docs()
        print(f"wrote {ASYNCAPI_PATH} and {SCHEMAS_DIR}/", file=sys.stderr)
    if args.json_schemas is not None:
        paths = write_schemas(args.json_schemas)
        print(f"wrote {len(paths)} schemas into {args.json_schemas}", file=sys.stderr)
    if args.asyncapi or not (args.json_schemas or args.write_docs):
        sys.stdout.write(asyncapi_text())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``tablectl schema`` alone: ``python -m controller.schema [--asyncapi] ...``."""
    parser = argparse.ArgumentParser(prog="tablectl")
    subparsers = parser.add_subparsers(dest="command", required=True)
    register(subparsers)
    args = parser.parse_args(["schema", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
