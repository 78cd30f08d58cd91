"""One hardened parse for every reader of a table's MQTT messages.

Every process that reads what tables, the betting system or the pit publish (``tablectl
watch``, the studio's views and pit console, the archive, the command router, the
betting-status watchers, the simulated betting system) turns a payload into a typed message
here, or into a :class:`Rejection` with a reason. Nothing here raises on any byte string: a
payload is bounded before it is parsed (size, nesting depth, then every string's length, every
integer's range, every container's size, UTF-8 only, no NaN or Infinity, no lone surrogate),
and only then validated as the typed models the JSON Schemas are generated from
(:mod:`controller.messages`). A reader logs and counts each rejection once
(:class:`RejectionLog`) and goes on.

:class:`SeqGuard` answers the one question a single message cannot: whether a ``seq`` is
within what the table could have sent. A table's online status says where its journal was
when it connected (``chain_head.seq``) and when (``at``); it cannot have sent more than
:attr:`Bounds.max_entries_per_second` entries a second since then. A ``seq`` beyond that is a
rejection, never the reader's new watermark (docs/security.md, "Hostile input").

Pure but for :class:`RejectionLog` (a logger and counters) and the times passed in.

**One parse per message per process.** :func:`parse_envelope`, :func:`parse_snapshot` and
:func:`parse_status` (and :func:`parse_shared_object`, the JSON object they read) are pure
functions of their arguments, so the last few results are kept (:data:`SHARED_PARSES`,
``bytes`` payloads of at most :data:`SHARED_MAX_BYTES`): readers in one process that get the
same message (``make run``'s demo: the studio's public floor, its delay line, its
secure-delay floor, the pit console and ``--show``) parse and validate it once and share the
result. The results are therefore **read-only** (the envelope and status are frozen
models; nothing may change a snapshot's data in place). Bounded: a flood of distinct payloads
only turns the cache over (docs/performance.md, "The demo").
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeGuard, TypeVar

import structlog
from pydantic import BaseModel, ValidationError

from controller.errors import TablectlError
from controller.messages import (
    DATA_MODELS,
    PUBLIC_DATA_MODELS,
    ROUND_SNAPSHOT_KIND,
    Envelope,
    RoundSnapshotData,
    StatusMessage,
)

SCHEMA_VERSIONS = frozenset({"3"})
"""The envelope versions the readers of this release accept.

Version 2 is refused (once per message, ``schema_version``): it carries no journal identity,
so a reader could not tell a replaced journal's ``seq`` from the old one's (issue 22). The
archive reads version 2 too (:data:`controller.archive.ingest.SCHEMA_VERSIONS`).
"""

Code = Literal[
    "too_large",
    "too_deep",
    "not_utf8",
    "not_json",
    "not_object",
    "out_of_range",
    "schema_version",
    "invalid",
    "wrong_table",
    "seq_ahead",
    "other_journal",
]
"""Why a message was rejected, as a short code (a metric label; the reason says more)."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What any message read from MQTT may hold (far above what a table sends).

    Attributes:
        max_bytes: The payload's size.
        max_depth: Nesting of arrays and objects (a table's deepest message is about 6).
        max_string: Characters in one string (keys too).
        max_items: Members of one array or object.
        max_int: The largest integer magnitude (2**53 - 1: exact in every JSON reader).
        max_entries_per_second: What a table could publish at most, for :class:`SeqGuard`.
        seq_slack: Entries a table may be ahead of what its rate allows (bursts, clock skew).
    """

    max_bytes: int = 256 * 1024
    max_depth: int = 24
    max_string: int = 16 * 1024
    max_items: int = 10_000
    max_int: int = 2**53 - 1
    max_entries_per_second: float = 100.0
    seq_slack: int = 1_000


BOUNDS = Bounds()
"""The bounds every reader uses unless it is given others."""


class InboundError(TablectlError):
    """A message that cannot be read (carried as a :class:`Rejection`, never raised out)."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """A message a reader did not take, and why.

    Attributes:
        code: The short code (:data:`Code`).
        reason: A sentence: what was wrong and where.
        topic: Where it came (empty when the reader did not say).
        table: The table it names, if known.
        seq: Its ``seq``, if it had a readable one.
    """

    code: Code
    reason: str
    topic: str = ""
    table: str | None = None
    seq: int | None = None

    def at(self, topic: str, table: str | None = None) -> Rejection:
        """The same rejection, placed on ``topic`` (and ``table``)."""
        return Rejection(self.code, self.reason, topic, table or self.table, self.seq)


class _Reject(Exception):
    """Internal control flow of the parse; never escapes this module."""

    def __init__(self, code: Code, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


# -- bytes -> JSON value -------------------------------------------------------------------

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_SURROGATE = re.compile("[\ud800-\udfff]")


def nesting_depth(payload: bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` outside strings (no parse, no recursion)."""
    brackets = _STRING.sub(b"", payload).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    return max(0, *itertools.accumulate(_STEP[byte] for byte in brackets))


def _reject_constant(name: str) -> Any:
    raise _Reject("out_of_range", f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
"""The standard library's decoder (made once), refusing ``NaN`` and ``Infinity``."""


def _load(payload: bytes | bytearray | memoryview | str, bounds: Bounds) -> Any:
    raw = payload.encode("utf-8", "surrogatepass") if isinstance(payload, str) else bytes(payload)
    early = check_payload(raw, bounds=bounds)
    if early is not None:
        raise _Reject(early.code, early.reason)
    text = raw.decode("utf-8")
    try:
        value = _DECODER.decode(text)
    except _Reject:
        raise
    except (ValueError, RecursionError) as exc:  # RecursionError: cannot at this depth; kept
        raise _Reject("not_json", f"payload is not JSON: {str(exc)[:120]}") from None
    _check_values(value, bounds)
    return value


def check_payload(
    payload: bytes | bytearray | memoryview, *, bounds: Bounds = BOUNDS
) -> Rejection | None:
    """What is checked before any parser sees ``payload``: its size, nesting depth and UTF-8.

    ``None`` when within ``bounds``. For a reader that parses with a decoder of its own (the
    archive keeps the standard library's exact values for its digests): bounded here first, a
    payload cannot make that decoder recurse deeply; :func:`check_value` then bounds what it
    parsed. A payload with no more ``[`` and ``{`` bytes than ``max_depth`` cannot nest deeper,
    so only one with more is scanned (:func:`nesting_depth`). Never raises.
    """
    raw = bytes(payload)
    if len(raw) > bounds.max_bytes:
        return Rejection("too_large", f"payload is {len(raw)} bytes; at most {bounds.max_bytes}")
    if raw.count(b"[") + raw.count(b"{") > bounds.max_depth:
        depth = nesting_depth(raw)
        if depth > bounds.max_depth:
            return Rejection(
                "too_deep", f"payload nests {depth} levels; at most {bounds.max_depth}"
            )
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejection("not_utf8", f"payload is not UTF-8 (byte {exc.start})")
    return None


def check_value(value: Any, *, bounds: Bounds = BOUNDS) -> Rejection | None:
    """Every string, number and container of a parsed ``value`` within ``bounds``, or why not.

    What :func:`parse_json` checks after its parse (string lengths, lone surrogates, integer
    and number ranges, NaN and Infinity, container sizes), for a reader that parsed ``value``
    itself after :func:`check_payload`. Iterative; never raises.
    """
    try:
        _check_values(value, bounds)
    except _Reject as exc:
        return Rejection(exc.code, exc.reason)
    return None


def _check_values(value: Any, bounds: Bounds) -> None:
    """Every string, number and container of ``value`` within ``bounds`` (iteratively)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _check_string(item, bounds)
        elif isinstance(item, dict):
            if len(item) > bounds.max_items:
                raise _Reject("too_large", f"an object has {len(item)} members")
            for key in item:
                _check_string(key, bounds)
            stack.extend(item.values())
        elif isinstance(item, list):
            if len(item) > bounds.max_items:
                raise _Reject("too_large", f"an array has {len(item)} items")
            stack.extend(item)
        elif not isinstance(item, bool) and isinstance(item, int | float):
            _check_number(item, bounds)


def _check_number(number: float, bounds: Bounds) -> None:
    if isinstance(number, int):
        if abs(number) > bounds.max_int:
            raise _Reject("out_of_range", f"integer {_short(number)} is beyond ±2**53-1")
    elif not math.isfinite(number) or abs(number) > bounds.max_int:
        raise _Reject("out_of_range", f"number {number!r} is out of range")


def _check_string(text: str, bounds: Bounds) -> None:
    if len(text) > bounds.max_string:
        raise _Reject("too_large", f"a string of {len(text)} characters")
    if not text.isascii() and _SURROGATE.search(text):
        raise _Reject("not_utf8", "a string holds a lone surrogate (\\ud800-\\udfff)")


def _short(number: int) -> str:
    digits = len(str(abs(number))) if number.bit_length() < 13000 else 4000
    return str(number) if digits <= 24 else f"of {digits} digits"


def parse_json(
    payload: bytes | bytearray | memoryview | str, *, bounds: Bounds = BOUNDS
) -> Any | Rejection:
    """Any JSON value within ``bounds``, or the rejection saying why not (never raises)."""
    try:
        return _load(payload, bounds)
    except _Reject as exc:
        return Rejection(exc.code, exc.reason)


def parse_object(
    payload: bytes | bytearray | memoryview | str, *, bounds: Bounds = BOUNDS
) -> dict[str, Any] | Rejection:
    """A JSON object within ``bounds``, or the rejection saying why not (never raises)."""
    value = parse_json(payload, bounds=bounds)
    if isinstance(value, Rejection | dict):
        return value
    return Rejection("not_object", f"payload is a JSON {_json_type(value)}, not an object")


SHARED_PARSES = 32
"""Parse results kept per kind (object, envelope, snapshot, status): the latest distinct ones."""

SHARED_MAX_BYTES = 16 * 1024
"""The largest payload whose parse is kept (a table's messages are under 4 KB): the payloads
the four caches hold stay under 2 MiB whatever is sent."""


def _shared(payload: object) -> TypeGuard[bytes]:
    return type(payload) is bytes and len(payload) <= SHARED_MAX_BYTES


def parse_shared_object(
    payload: bytes | bytearray | memoryview | str, *, bounds: Bounds = BOUNDS
) -> Mapping[str, Any] | Rejection:
    """:func:`parse_object`, shared by the readers of the same payload in one process.

    What :func:`parse_envelope`, :func:`parse_snapshot` and :func:`parse_status` read before
    their validation: a reader that wants the message's JSON object as received (the pit
    console keeps it, what a signature covers) after one of them gets it without a second
    parse. Read-only (see the module notes). Never raises.
    """
    if _shared(payload):
        return _shared_object(payload, bounds)
    return parse_object(payload, bounds=bounds)


@functools.lru_cache(maxsize=SHARED_PARSES)
def _shared_object(payload: bytes, bounds: Bounds) -> dict[str, Any] | Rejection:
    return parse_object(payload, bounds=bounds)


def _json_type(value: Any) -> str:
    names: dict[type, str] = {list: "array", str: "string", int: "number", float: "number"}
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return names.get(type(value), type(value).__name__)


# -- JSON object -> typed message -----------------------------------------------------------

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], body: Mapping[str, Any], what: str) -> M | Rejection:
    """``body`` as ``model``, or a rejection naming the first wrong field (never raises)."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        return Rejection("invalid", f"{what}: {describe_validation(exc)}")
    except (ValueError, TypeError, RecursionError) as exc:  # a validator's own refusal
        return Rejection("invalid", f"{what}: {str(exc)[:200]}")


def describe_validation(exc: ValidationError) -> str:
    """The first error of ``exc`` as ``field 'a.b': message`` (and how many more)."""
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "invalid"
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "(the object)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"field '{where}': {first.get('msg', 'invalid')}{more}"


def _version(body: Mapping[str, Any]) -> Rejection | None:
    version = body.get("schema_version")
    if isinstance(version, str) and version in SCHEMA_VERSIONS:  # a list or object: unhashable
        return None
    shown = repr(version) if isinstance(version, str | int | None) else _json_type(version)
    return Rejection(
        "schema_version",
        f"schema_version {shown[:40]} is not one this reader knows "
        f"({', '.join(sorted(SCHEMA_VERSIONS))})",
    )


def _table(found: str, table: str | None) -> Rejection | None:
    if table is None or found == table:
        return None
    return Rejection("wrong_table", f"field 'table' is {found[:80]!r}, the topic says {table!r}")


def _versioned(
    payload: bytes | bytearray | memoryview | str, model: type[M], what: str, bounds: Bounds
) -> M | Rejection:
    """A JSON object of a known ``schema_version`` as ``model``, or why not."""
    body = parse_shared_object(payload, bounds=bounds)
    if isinstance(body, Rejection):
        return body
    wrong = _version(body)
    if wrong is not None:
        return wrong
    return validate(model, body, what)


def parse_envelope(
    payload: bytes | bytearray | memoryview | str,
    *,
    table: str | None = None,
    secure: bool = False,
    bounds: Bounds = BOUNDS,
) -> Envelope | Rejection:
    """A journalled message (``events``, ``results``, ``secure/events``), typed, or why not.

    The envelope is validated as :class:`~controller.messages.Envelope` and its ``data`` as the
    kind's model (the public one, or the full one on ``secure``): a kind this release does not
    know keeps its (bounded) data unchecked, as consumers must ignore what they do not know.
    The result may be shared with another reader of the same payload: read-only.

    Args:
        payload: The message's bytes.
        table: The table the topic names (the envelope's must be the same), if known.
        secure: Read with the full data models (``secure/events``).
        bounds: The bounds.
    """
    if _shared(payload):
        return _shared_envelope(payload, table, secure, bounds)
    return _parse_envelope(payload, table=table, secure=secure, bounds=bounds)


@functools.lru_cache(maxsize=SHARED_PARSES)
def _shared_envelope(
    payload: bytes, table: str | None, secure: bool, bounds: Bounds
) -> Envelope | Rejection:
    return _parse_envelope(payload, table=table, secure=secure, bounds=bounds)


def _parse_envelope(
    payload: bytes | bytearray | memoryview | str,
    *,
    table: str | None = None,
    secure: bool = False,
    bounds: Bounds = BOUNDS,
) -> Envelope | Rejection:
    """:func:`parse_envelope`'s parse itself (every call parses)."""
    envelope = _versioned(payload, Envelope, "envelope", bounds)
    if isinstance(envelope, Rejection):
        return envelope
    wrong = _table(envelope.table, table)
    if wrong is None and envelope.seq > bounds.max_int:
        wrong = Rejection("out_of_range", f"seq {envelope.seq} is beyond ±2**53-1")
    if wrong is not None:
        return Rejection(wrong.code, wrong.reason, table=envelope.table, seq=envelope.seq)
    model = (DATA_MODELS if secure else PUBLIC_DATA_MODELS).get(envelope.kind)
    if model is not None:
        data = validate(model, envelope.data, f"{envelope.kind} data")
        if isinstance(data, Rejection):
            return Rejection(data.code, data.reason, table=envelope.table, seq=envelope.seq)
    return envelope


def parse_snapshot(
    payload: bytes | bytearray | memoryview | str,
    *,
    table: str | None = None,
    bounds: Bounds = BOUNDS,
) -> tuple[Envelope, RoundSnapshotData] | Rejection:
    """The retained ``round`` message (envelope and snapshot), or why not.

    The result may be shared with another reader of the same payload: read-only.
    """
    if _shared(payload):
        return _shared_snapshot(payload, table, bounds)
    return _parse_snapshot(payload, table=table, bounds=bounds)


@functools.lru_cache(maxsize=SHARED_PARSES)
def _shared_snapshot(
    payload: bytes, table: str | None, bounds: Bounds
) -> tuple[Envelope, RoundSnapshotData] | Rejection:
    return _parse_snapshot(payload, table=table, bounds=bounds)


def _parse_snapshot(
    payload: bytes | bytearray | memoryview | str,
    *,
    table: str | None = None,
    bounds: Bounds = BOUNDS,
) -> tuple[Envelope, RoundSnapshotData] | Rejection:
    envelope = _parse_envelope(payload, table=table, bounds=bounds)
    if isinstance(envelope, Rejection):
        return envelope
    if envelope.kind != ROUND_SNAPSHOT_KIND:
        return Rejection(
            "invalid",
            f"kind {envelope.kind[:40]!r} on the round topic (expected {ROUND_SNAPSHOT_KIND})",
            table=envelope.table,
            seq=envelope.seq,
        )
    data = validate(RoundSnapshotData, envelope.data, "round_snapshot data")
    if isinstance(data, Rejection):
        return Rejection(data.code, data.reason, table=envelope.table, seq=envelope.seq)
    if data.last_seq > bounds.max_int:
        return Rejection("out_of_range", "last_seq is beyond ±2**53-1", table=envelope.table)
    return envelope, data


def parse_status(
    payload: bytes | bytearray | memoryview | str,
    *,
    table: str | None = None,
    bounds: Bounds = BOUNDS,
) -> StatusMessage | Rejection:
    """The retained ``status`` message (birth, stop, Last Will), or why not (read-only)."""
    if _shared(payload):
        return _shared_status(payload, table, bounds)
    return _parse_status(payload, table=table, bounds=bounds)


@functools.lru_cache(maxsize=SHARED_PARSES)
def _shared_status(payload: bytes, table: str | None, bounds: Bounds) -> StatusMessage | Rejection:
    return _parse_status(payload, table=table, bounds=bounds)


def _parse_status(
    payload: bytes | bytearray | memoryview | str,
    *,
    table: str | None = None,
    bounds: Bounds = BOUNDS,
) -> StatusMessage | Rejection:
    status = _versioned(payload, StatusMessage, "status", bounds)
    if isinstance(status, Rejection):
        return status
    wrong = _table(status.table, table)
    if wrong is not None:
        return wrong
    return status


class BettingStatus(BaseModel):
    """The betting system's retained presence (``betting/status``).

    Attributes:
        state: ``online`` or ``offline``.
    """

    state: Literal["online", "offline"]


def parse_betting_status(
    payload: bytes | bytearray | memoryview | str, *, bounds: Bounds = BOUNDS
) -> BettingStatus | Rejection:
    """The betting system's presence, or why not."""
    body = parse_object(payload, bounds=bounds)
    if isinstance(body, Rejection):
        return body
    return validate(BettingStatus, body, "betting status")


# -- what a table could have sent ---------------------------------------------------------


@dataclass(slots=True)
class _Anchor:
    seq: int
    at: float


@dataclass(slots=True)
class SeqGuard:
    """Whether a table's ``seq`` is within what it could have sent (one guard per reader).

    A table's online status anchors it: ``chain_head.seq`` when it connected, at ``at``; until
    a reader has seen one, the first ``seq`` it reads. A ``seq`` is possible up to
    ``seq_slack`` past the anchor, plus what the table's maximum rate allows since; each
    possible ``seq`` above the anchor moves it there. A status is held to the same limit
    (:meth:`on_status`), so a forged one cannot carry the guard away either.

    Attributes:
        bounds: The rate and slack.
    """

    bounds: Bounds = BOUNDS
    _anchors: dict[str, _Anchor] = field(default_factory=dict)
    _journals: dict[str, str] = field(default_factory=dict)

    def limit(self, table: str, now: float) -> int | None:
        """The highest ``seq`` table ``table`` could have sent by ``now`` (``None``: unknown)."""
        anchor = self._anchors.get(table)
        if anchor is None:
            return None
        grown = self.bounds.max_entries_per_second * max(0.0, now - anchor.at)
        return anchor.seq + self.bounds.seq_slack + int(grown)

    def on_status(self, status: StatusMessage, now: float) -> Rejection | None:
        """Anchor ``status.table`` at an online status's chain head, or say why not.

        The chain head of a status from the journal the guard follows (the same ``journal``
        id) may not be beyond :meth:`limit` (a forged status must not carry the guard away);
        below the anchor it leaves the anchor where it is (an older birth, retained). Another
        ``journal`` id is a new journal (issue 22; its ``session`` says nothing: a new file
        counts from 1 again, or from anything): its head is held to the same :meth:`limit`
        (a forged birth of another journal cannot carry the guard away either), and within it
        the new journal anchors the guard afresh, lower too (its ``seq`` starts over). A
        forged birth of another journal at a low head holds the real journal back only until
        the rate times the time since allows its ``seq`` again.
        """
        if status.state != "online" or status.chain_head is None:
            return None
        table, head = status.table, status.chain_head.seq
        at = min(_epoch(status.at, now), now)
        anchor, journal = self._anchors.get(table), self._journals.get(table)
        if anchor is None or journal is None:
            # Nothing yet, or only a seq read before any status (nothing to judge that seq
            # by): the status anchors.
            self._anchors[table], self._journals[table] = _Anchor(head, at), status.journal
            return None
        if status.journal != journal:
            limit = self.limit(table, now)
            if limit is not None and head > limit:
                return Rejection(
                    "seq_ahead",
                    f"status of journal {status.journal[:8]} (a new journal: the last was "
                    f"{journal[:8]}) already at seq {head}, beyond what table {table!r} could "
                    f"have sent (at most {limit} by now): not taken as its position",
                    table=table,
                    seq=head,
                )
            self._anchors[table], self._journals[table] = _Anchor(head, at), status.journal
            return None
        limit = self.limit(table, now)
        if limit is not None and head > limit:
            return Rejection(
                "seq_ahead",
                f"status chain head {head} is beyond what table {table!r} could have sent "
                f"(at most {limit} by now): not taken as its position",
                table=table,
                seq=head,
            )
        if head >= anchor.seq:
            anchor.seq, anchor.at = head, max(at, anchor.at) if head == anchor.seq else at
        return None

    def journal(self, table: str) -> str | None:
        """The journal id of ``table`` the guard follows (``None``: no online status yet)."""
        return self._journals.get(table)

    def admit(self, table: str, seq: int, now: float) -> Rejection | None:
        """``None`` when ``seq`` is possible (it then anchors a table not anchored yet)."""
        limit = self.limit(table, now)
        if limit is None:
            self._anchors[table] = _Anchor(seq, now)
            return None
        if seq > limit:
            return Rejection(
                "seq_ahead",
                f"seq {seq} is beyond what table {table!r} could have sent (at most {limit} "
                "by now): not taken as its new position",
                table=table,
                seq=seq,
            )
        anchor = self._anchors[table]
        if seq > anchor.seq:
            anchor.seq, anchor.at = seq, now
        return None

    def forget(self, table: str) -> None:
        """Drop ``table``'s anchor (a new journal: its ``seq`` starts over)."""
        self._anchors.pop(table, None)
        self._journals.pop(table, None)


def _epoch(moment: datetime | None, default: float) -> float:
    if moment is None:
        return default
    try:
        return moment.timestamp()
    except (ValueError, OverflowError, OSError):  # a naive time at year 1 (local time)
        return default


# -- the one log and count of rejections --------------------------------------------------


@dataclass(slots=True)
class RejectionLog:
    """Logs each rejection once and counts it (by code), so a flood cannot fill a disk.

    Every rejection is counted (:attr:`counts`, and ``on_reject`` for a reader's metrics); the
    first ``burst`` in each ``window_seconds`` are logged one line each, the rest summed up in
    one line when the window ends.

    Attributes:
        reader: Who read it (``studio``, ``archive``, ``watch``...), in each line.
        counts: Rejections by code since start.
        on_reject: Called with each rejection (a metrics counter).
        burst: Lines a window.
        window_seconds: The window.
        clock: Monotonic seconds.
    """

    reader: str
    counts: Counter[str] = field(default_factory=Counter)
    on_reject: Callable[[Rejection], None] | None = None
    burst: int = 20
    window_seconds: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _log: Any = None
    _window_start: float = 0.0
    _logged: int = 0
    _suppressed: int = 0

    def __post_init__(self) -> None:
        self._log = structlog.get_logger("tablectl.inbound").bind(reader=self.reader)
        self._window_start = self.clock()

    @property
    def total(self) -> int:
        """Rejections since start."""
        return sum(self.counts.values())

    def record(self, rejection: Rejection) -> None:
        """Count ``rejection`` and log it (once; summed up past the burst)."""
        self.counts[rejection.code] += 1
        if self.on_reject is not None:
            self.on_reject(rejection)
        now = self.clock()
        if now - self._window_start >= self.window_seconds:
            if self._suppressed:
                self._log.warning(
                    "messages rejected (not logged one by one)", count=self._suppressed
                )
            self._window_start, self._logged, self._suppressed = now, 0, 0
        if self._logged >= self.burst:
            self._suppressed += 1
            return
        self._logged += 1
        self._log.warning(
            "message rejected",
            code=rejection.code,
            reason=rejection.reason,
            topic=rejection.topic[:200],
            table=(rejection.table or "")[:80] or None,
            seq=rejection.seq,
        )
