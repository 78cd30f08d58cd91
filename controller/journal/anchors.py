"""Anchors of the hash chain outside the file: chain heads read from a recorded feed.

Every signed result (``round_result``, ``round_voided``) carries ``chain_head``: the ``seq``
and hash of its own journal entry, which covers every entry before it; the retained online
status (the birth, published at every connect) carries the head of the journal at that
moment. A subscriber that keeps those messages keeps the journal's chain heads outside the
journal file, so a journal cut short (its tail deleted) or rewritten is found by
``tablectl journal verify --against-feed FILE`` (:meth:`controller.journal.Journal.verify`).

The feed file (docs/journal.md, "Anchors"): JSON lines, one message a line, as a subscriber
saves them:

* the payload itself (``mosquitto_sub -t 'tables/T/results' -t 'tables/T/status'``);
* ``TOPIC PAYLOAD`` (``mosquitto_sub -v``);
* an object with ``payload`` (``mosquitto_sub -F '%J'``; the payload as a JSON object or as
  its text).

Messages without ``chain_head`` (events, snapshots, the offline status, messages of a
controller older than the anchors) are skipped; blank lines too.

The file is untrusted input (anyone could have recorded it): no content makes
:func:`read_feed` raise anything but :class:`FeedError`, naming the file and the line. This
module sits below :mod:`controller.inbound` (which imports the journal's models), so it reads
with the standard library's decoder and turns its refusals into that error: a value nested
too deeply for the decoder (``RecursionError``, raised before anything is built), a number of
too many digits, a lone surrogate, ``NaN``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.errors import JournalError

HASH_TEXT = re.compile(r"^[0-9a-f]{64}$")
"""A chain hash as published: 64 lower-case hex digits."""

MAX_SEQ = 2**53 - 1
"""The largest ``seq`` an anchor may name (what every JSON reader holds exactly)."""


def _shown(value: Any) -> str:
    """``value`` for an error message, cut short (a feed line may be large)."""
    text = (
        repr(value)
        if isinstance(value, str | int | float | bool | None)
        else "an "
        + ("object" if isinstance(value, dict) else "array" if isinstance(value, list) else "value")
    )
    return text if len(text) <= 80 else text[:77] + "..."


class FeedError(JournalError):
    """A recorded feed that cannot be read, or an anchor in it that is malformed."""


@dataclass(frozen=True, slots=True)
class Anchor:
    """One chain head the feed published.

    Attributes:
        seq: The ``seq`` of the entry (0: the empty journal's genesis).
        hash: That entry's hash in the chain (hex sha256).
        table: The table the message names.
        source: Where it was read (``FILE:LINE``, the message's kind) for the report.
    """

    seq: int
    hash: str
    table: str | None
    source: str


@dataclass(frozen=True, slots=True)
class Feed:
    """The anchors of a recorded feed.

    Attributes:
        path: The file.
        anchors: Every anchor, in file order.
        messages: Messages read (lines that are a message).
    """

    path: str
    anchors: tuple[Anchor, ...]
    messages: int

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables the anchors name."""
        return tuple(sorted({anchor.table for anchor in self.anchors if anchor.table}))


def _payload(line: str) -> Any:
    """The message of one line (a JSON payload, ``TOPIC PAYLOAD``, or a ``payload`` wrapper)."""
    text = line.strip()
    if not text.startswith(("{", "[")):
        _topic, sep, rest = text.partition(" ")
        if not sep:
            raise ValueError("neither a JSON object nor 'TOPIC PAYLOAD'")
        text = rest.strip()
    message = _loads(text)
    if isinstance(message, dict) and "payload" in message and "chain_head" not in message:
        inner = message["payload"]
        message = _loads(inner) if isinstance(inner, str) else inner
    return message


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _loads(text: str) -> Any:
    """One JSON value; every refusal of the decoder as a ``ValueError`` saying what."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("the message nests too deeply to be a feed message") from None


def _anchor(message: dict[str, Any], source: str) -> Anchor | None:
    head = message.get("chain_head")
    if head is None:
        return None
    if not isinstance(head, dict):
        raise ValueError("chain_head is not an object")
    seq, chain = head.get("seq"), head.get("hash")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= MAX_SEQ:
        raise ValueError(f"chain_head.seq must be an integer 0..2**53-1, got {_shown(seq)}")
    if not isinstance(chain, str) or not HASH_TEXT.match(chain):
        raise ValueError(f"chain_head.hash must be 64 hex digits, got {_shown(chain)}")
    table = _text(message.get("table"), "table")
    kind = _text(message.get("kind"), "kind") or _text(message.get("state"), "state")
    return Anchor(seq, chain, table, f"{source} ({kind or 'message'})")


def _text(value: Any, name: str) -> str | None:
    """A string member as it may be printed (at most 200 characters, UTF-8), else ``None``."""
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{name} holds a lone surrogate (\\ud800-\\udfff)") from None
    if len(value) > 200:
        raise ValueError(f"{name} is {len(value)} characters; at most 200")
    return value


def read_feed(path: str | Path) -> Feed:
    """Read the chain heads of a recorded feed file.

    Raises:
        FeedError: The file cannot be read, a line is not a message, or an anchor is
            malformed (the file and line are named).
    """
    where = Path(path)
    try:
        lines = where.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise FeedError(f"cannot read the feed {where}: {exc}", path=str(where)) from exc
    anchors: list[Anchor] = []
    messages = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        source = f"{where.name}:{number}"
        try:
            message = _payload(line)
            if not isinstance(message, dict):
                raise ValueError("the message is not a JSON object")
            anchor = _anchor(message, source)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise FeedError(
                f"feed {where} line {number}: {exc}", path=str(where), line=number
            ) from exc
        messages += 1
        if anchor is not None:
            anchors.append(anchor)
    return Feed(str(where), tuple(anchors), messages)


__all__ = ["HASH_TEXT", "Anchor", "Feed", "FeedError", "read_feed"]
