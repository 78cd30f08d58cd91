"""What the archive makes of one MQTT message: an entry to store, a status, or a rejection.

Pure (no I/O): :func:`classify` reads a topic and a payload and answers with an
:class:`Entry`, a :class:`Status` or a :class:`Rejected` that names the reason. Nothing it is
given can make it raise: a malformed message, an unknown ``schema_version``, an unknown table,
a bad signature are all rejections (docs/archive.md, "What is rejected"). Every payload is
bounded first by the shared parse's checks (:func:`controller.inbound.check_payload`: size,
nesting depth, UTF-8; then :func:`controller.inbound.check_value` on what the archive's exact
decoder parsed: integer ranges, string lengths, NaN), so no payload can make the decoder recurse
or a ``seq`` overflow a database column. :func:`classify_batch` with a
:class:`controller.inbound.SeqGuard` also rejects a ``seq`` beyond what the table could have
sent (``seq_ahead``).

Speed (docs/archive.md, "Speed"): the canonical JSON of the digest and of a signature check
(the standard library's bytes) is written by orjson when the payload holds no float (both
spell everything else alike), a signature is checked without re-parsing the envelope, and
:func:`classify_batch` classifies a payload that arrives twice in a batch (a result on
``events`` and on ``results``) once.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from controller.inbound import (
    BOUNDS,
    Bounds,
    Rejection,
    SeqGuard,
    check_payload,
    check_value,
    validate,
)
from controller.messages import ChainHead, StatusMessage
from controller.signing import ALGORITHM, SIGNATURE_FIELD, why_invalid

if TYPE_CHECKING:  # `cryptography` is loaded only when a table has a key (controller/signing.py)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

SCHEMA_VERSIONS = frozenset({"2", "3"})
"""The contract versions this archive reads (docs/mqtt.md, "Changelog"): 3, and 2 for what a
table published before it had a journal identity (its entries keep their plain chain)."""
JOURNAL_TEXT = re.compile("[0-9a-f]{32}")
"""A journal id (schema version 3: every envelope and status carries one)."""


def chain_id(table: str, journal: str | None = None) -> str:
    """The archive's name of a table's journal: its *chain* (docs/archive.md, "Journals").

    ``table`` for the first journal the archive met for the table (and for version 2
    entries, which name none), ``table/journal`` for each journal after it: ``/`` is never in
    a table id (one MQTT topic level), so a chain id never names another table.
    """
    return table if not journal else f"{table}/{journal}"


def table_of(chain: str) -> str:
    """The table id of a chain id (:func:`chain_id`)."""
    return chain.partition("/")[0]


def journal_of(chain: str) -> str:
    """The journal id a chain id names (``""``: the table's first journal, or version 2)."""
    return chain.partition("/")[2]


SIGNED_KINDS = frozenset({"round_result", "round_voided"})
"""The kinds a signing table signs."""
ENTRY_TOPICS = frozenset({"events", "results"})
"""The per-table topics whose messages are journal entries."""
TOPICS = ENTRY_TOPICS | {"status"}
"""The per-table topics the archive reads."""


@dataclass(slots=True)
class Entry:
    """A journal entry as published, accepted.

    Not to be changed once made; not frozen only because a frozen dataclass's ``__init__``
    costs a tenth of a classification.

    Attributes:
        topic: Where it came from.
        table: The table id; once the consumer placed it in its journal's chain, the chain
            id (:func:`chain_id`), under which the stores keep it.
        session: The run that journalled it.
        seq: Its journal ``seq``.
        at: When it happened.
        round_id: Its round (``None`` for table-level entries).
        kind: The entry kind.
        data: Its ``data``.
        delayed: As published.
        replayed: As published.
        signed: It carried a signature that verified.
        envelope: The whole envelope.
        digest: sha256 over (round, kind, at, data): every copy of the entry agrees on it.
        raw: The payload's bytes when they are UTF-8 (the store keeps that text as the
            envelope, the message's own spelling); ``b""`` otherwise (the store re-dumps
            ``envelope``).
        link: Its ``link`` (``(prev, hash)``: its place in the table's hash chain), if sent.
        head: A signed result's chain head hash (its ``link.hash``): the stores walk the chain
            down from it, marking what it covers verified (docs/archive.md, "Provisional").
        unsigned: From a table the config allows to publish unsigned (nothing to verify).
    """

    topic: str
    table: str
    session: int
    seq: int
    at: datetime
    round_id: str | None
    kind: str
    data: dict[str, Any]
    delayed: bool
    replayed: bool
    signed: bool
    envelope: dict[str, Any]
    digest: str
    raw: bytes = b""
    link: tuple[str, str] | None = None
    head: str | None = None
    unsigned: bool = False
    journal: str = ""


@dataclass(frozen=True, slots=True)
class Status:
    """A table's status message (birth, Last Will, clean stop).

    ``table`` is the table id, then (placed by the consumer) its journal's chain id;
    ``journal`` the journal id it names (``""``: version 2).
    """

    table: str
    state: str
    session: int | None
    chain_head: tuple[int, str] | None
    envelope: dict[str, Any]
    journal: str = ""


@dataclass(frozen=True, slots=True)
class Rejected:
    """A message that is not stored as valid.

    Attributes:
        topic: Where it came from.
        table: The table id from the topic, if any.
        seq: Its ``seq`` if it could be read.
        category: The shared parse's code where its bounds refused the payload
            (``too_large``, ``too_deep``, ``not_utf8``, ``not_json``, ``not_object``,
            ``out_of_range``), ``seq_ahead`` (:class:`controller.inbound.SeqGuard`), else
            ``malformed``, ``schema_version``, ``unknown_table``, ``signature`` (and the
            stores' ``conflict``, ``store_error``).
        reason: What was wrong, in a sentence naming the field.
        payload: The bytes as received (the first ``max_bytes`` of a ``too_large`` one).
    """

    topic: str
    table: str | None
    seq: int | None
    category: str
    reason: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class TableKeys:
    """Who the archive accepts: the known tables and their public keys.

    Attributes:
        tables: Table id → its public key, or ``None`` for a table that does not sign.
        prefix: The topic prefix (``tables``; may have several levels).
        unsigned: The tables without a key that may publish unsigned (the archive config's
            ``unsigned = true``); a keyless table not in it is refused (``unsigned``).
            ``None``: every keyless table may (the archive beside its own table).
        verifiers: Table id → the same key for libsodium (PyNaCl), which checks an Ed25519
            signature in about half the time OpenSSL takes (docs/archive.md, "Speed").
    """

    tables: dict[str, Ed25519PublicKey | None]
    prefix: str = "tables"
    unsigned: frozenset[str] | None = None
    verifiers: dict[str, VerifyKey] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not any(key is not None for key in self.tables.values()):
            object.__setattr__(self, "verifiers", {})
            return
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        verifiers = {
            table: VerifyKey(key.public_bytes(Encoding.Raw, PublicFormat.Raw))
            for table, key in self.tables.items()
            if key is not None
        }
        object.__setattr__(self, "verifiers", verifiers)


class _FloatWatch(threading.local):
    """Whether the payload being parsed (in this thread) held a float, NaN or Infinity."""

    seen = False


_WATCH = _FloatWatch()


def _float(text: str) -> float:
    _WATCH.seen = True
    return float(text)


_DECODER = json.JSONDecoder(parse_float=_float, parse_constant=_float)
"""The standard library's parser (its values exactly), noting any float on the way."""

_DIGITS = bytes(0x31 if 0x30 <= byte <= 0x39 else 0x30 for byte in range(256))
"""A byte table: a digit becomes ``1``, anything else ``0`` (runs of digits, found in C)."""
_WIDE_RUN = b"1" * len(str(BOUNDS.max_int))
"""As many digits in a row as the largest integer within the bounds: a shorter integer is
within them, so only a payload with such a run (an integer, or digits in a hash) is walked."""


def loads(payload: bytes) -> tuple[Any, bool, bool]:
    """Parse a payload: ``(value, utf8, plain)``, the values :func:`json.loads` gives.

    ``utf8``: the payload is UTF-8 text (the store keeps that text as the envelope).
    ``plain``: and it holds no float, NaN or Infinity, so :func:`canonical_json` may take
    orjson's spelling (the same bytes then). What the fast path refuses (a BOM, UTF-16,
    not JSON) goes to :func:`json.loads`, so what is accepted and its errors are unchanged.

    Raises:
        ValueError: Not JSON (``json.JSONDecodeError``, or ``UnicodeDecodeError``).
    """
    try:
        text = payload.decode("utf-8")
        _WATCH.seen = False
        value = _DECODER.decode(text)
    except ValueError:
        return json.loads(payload), False, False
    return value, True, not _WATCH.seen


def canonical_json(value: Any, plain: bool = False) -> bytes:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``, UTF-8.

    The standard library's bytes (archived digests and the tables' signatures are made from
    them). With ``plain`` (no float in ``value``: :func:`loads`) orjson writes them, several
    times faster: without floats both spell every JSON value alike (a hypothesis test in
    ``tests/unit/test_archive_ingest.py`` holds them equal); what orjson cannot write (an
    integer beyond 64 bits, a lone surrogate) goes to :func:`json.dumps`.

    Raises:
        TypeError, ValueError: Not JSON-able.
        UnicodeEncodeError: A lone surrogate in a string.
    """
    if plain:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            pass
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def entry_digest(
    round_id: str | None,
    kind: str,
    at: str,
    data: Any,
    *,
    plain: bool = False,
    link: str | None = None,
) -> str:
    """sha256 of an entry's content (not its delivery flags or signature).

    ``plain``: no float in it (:func:`canonical_json`). ``link``: its ``link.hash`` when sent
    (every copy of an entry carries the same; a copy placed elsewhere in the chain is another
    entry: a ``conflict``, not a ``duplicate``). Without one the digest is as before links.

    Raises:
        UnicodeEncodeError: A lone surrogate in a string.
    """
    doc = {"round": round_id, "kind": kind, "at": at, "data": data}
    if link is not None:
        doc["link"] = link
    return hashlib.sha256(canonical_json(doc, plain)).hexdigest()


@functools.lru_cache(maxsize=4096)
def _split_topic(topic: str, prefix: str) -> tuple[str, str] | None:
    head = prefix.rstrip("/") + "/"
    if not topic.startswith(head):
        return None
    rest = topic[len(head) :].split("/")
    if len(rest) != 2:
        return None
    return rest[0], rest[1]


def classify(topic: str, payload: bytes, keys: TableKeys) -> Entry | Status | Rejected:
    """What ``payload`` received on ``topic`` is (never raises).

    Args:
        topic: The MQTT topic.
        payload: The message's bytes.
        keys: The known tables and their public keys.
    """
    parts = _split_topic(topic, keys.prefix)
    table = parts[0] if parts else None

    def reject(category: str, reason: str, seq: int | None = None) -> Rejected:
        return Rejected(topic, table, seq, category, reason, payload)

    if parts is None or parts[1] not in TOPICS:
        return reject(
            "malformed", f"topic {topic[:200]!r} is not {keys.prefix}/TABLE/events|results|status"
        )
    read = _read(payload)
    if isinstance(read, Rejection):
        kept = payload[: BOUNDS.max_bytes] if read.code == "too_large" else payload
        return Rejected(topic, table, None, read.code, read.reason, kept)
    envelope, utf8, plain = read
    version = envelope.get("schema_version")
    if not isinstance(version, str) or version not in SCHEMA_VERSIONS:  # a list: unhashable
        return reject(
            "schema_version",
            f"schema_version {version!r} is not one this archive reads ({sorted(SCHEMA_VERSIONS)})",
        )
    if table not in keys.tables:
        return reject("unknown_table", f"table {table!r} is not in the archive's config")
    if keys.tables[table] is None and keys.unsigned is not None and table not in keys.unsigned:
        return reject(
            "unsigned",
            f"table {table!r} has no public_key and is not allowed unsigned in the archive's "
            f"config ([tables.{table}] unsigned = true): nothing it sends can be verified",
            envelope.get("seq") if type(envelope.get("seq")) is int else None,
        )
    wrong = _header_error(version, envelope, table)
    if wrong is not None:
        return reject("malformed", wrong)
    if parts[1] == "status":
        return _status(envelope, table, reject)
    try:
        return _entry(
            topic,
            table,
            envelope,
            reject,
            key=keys.tables[table],
            verifier=keys.verifiers.get(table),
            raw=payload if utf8 else b"",
            plain=plain,
        )
    except UnicodeEncodeError as exc:
        return reject("malformed", f"a string is not valid Unicode ({exc.reason})")


def _header_error(version: str, envelope: dict[str, Any], table: str) -> str | None:
    """Why the ``table`` (the topic's) or the ``journal`` (a version 3 message's) is wrong."""
    if envelope.get("table") != table:
        return f"field 'table' is {envelope.get('table')!r}, the topic says {table!r}"
    journal = envelope.get("journal")
    if version == "2" or (isinstance(journal, str) and JOURNAL_TEXT.fullmatch(journal)):
        return None
    return f"field 'journal' is {journal!r:.60}, not a journal id (32 hex digits)"


def _needs_walk(payload: bytes, bounds: Bounds) -> bool:
    """Whether the parsed payload may hold a value beyond ``bounds`` (else it cannot).

    No string is longer than the payload, no container has more members than its commas plus
    one, no integer with fewer digits than the largest allowed is beyond it, and a lone
    surrogate needs a ``u`` escape after a backslash (the payload is strict UTF-8): only a
    payload past one of these (or with a float, NaN or Infinity) is walked by
    :func:`controller.inbound.check_value`.
    """
    return (
        _WATCH.seen
        or _WIDE_RUN in payload.translate(_DIGITS)
        or len(payload) > bounds.max_string
        or payload.count(b",") >= bounds.max_items
        or b"\\u" in payload
    )


def _read(payload: bytes) -> tuple[dict[str, Any], bool, bool] | Rejection:
    """The payload's object, bounded (:func:`loads`' ``utf8`` and ``plain``), or why not."""
    early = check_payload(payload)
    if early is not None:
        return early
    try:
        envelope, utf8, plain = loads(payload)
    except ValueError as exc:  # UnicodeDecodeError too (check_payload passed UTF-8 only)
        return Rejection("not_json", f"payload is not JSON: {str(exc)[:120]}")
    if _needs_walk(payload, BOUNDS):
        wrong = check_value(envelope)
        if wrong is not None:
            return wrong
    if not isinstance(envelope, dict):
        what = "list" if isinstance(envelope, list) else type(envelope).__name__
        return Rejection("not_object", f"payload is a JSON {what}, not an object")
    return envelope, utf8, plain


def classify_batch(
    messages: Sequence[tuple[str, bytes]],
    keys: TableKeys,
    seen: dict[bytes, Entry] | None = None,
    *,
    guard: SeqGuard | None = None,
    now: float = 0.0,
) -> list[Entry | Status | Rejected]:
    """:func:`classify` of each ``(topic, payload)``, in order.

    A payload that came before in the batch on another entry topic of the same table (a
    result: on ``events`` and on ``results``, the same bytes) is not parsed, digested and
    verified again: it is the first copy's entry with its own topic.

    Args:
        messages: The batch.
        keys: The known tables and their public keys.
        seen: The entries met so far, by payload (a batch classified in parts passes one).
        guard: What each table could have sent: an online status anchors it, an entry whose
            ``seq`` is beyond it is rejected (``seq_ahead``), never archived.
        now: Wall-clock seconds, for ``guard``.
    """
    out: list[Entry | Status | Rejected] = []
    seen = {} if seen is None else seen
    for topic, payload in messages:
        known = seen.get(payload)
        if known is not None and _same_table_entry_topic(topic, known, keys.prefix):
            out.append(dataclasses.replace(known, topic=topic))
            continue
        found = classify(topic, payload, keys)
        if guard is not None:
            found = _guarded(found, guard, now, topic, payload)
        if isinstance(found, Entry):
            seen[payload] = found
        out.append(found)
    return out


def _guarded(
    found: Entry | Status | Rejected, guard: SeqGuard, now: float, topic: str, payload: bytes
) -> Entry | Status | Rejected:
    """``found`` past ``guard``: a status anchors it, an entry beyond it is rejected.

    A status whose chain head the table could not have reached is rejected too
    (:meth:`controller.inbound.SeqGuard.on_status`): a forged one must not move the guard.
    """
    if isinstance(found, Status):
        status = validate(StatusMessage, found.envelope, "status")
        birth = _version_2_birth(found) if isinstance(status, Rejection) else status
        refused = None if birth is None else guard.on_status(birth, now)
        if refused is None:
            return found
        return Rejected(topic, found.table, refused.seq, "seq_ahead", refused.reason, payload)
    if not isinstance(found, Entry):
        return found
    ahead = guard.admit(found.table, found.seq, now)
    if ahead is None:
        return found
    return Rejected(
        found.topic,
        found.table,
        found.seq,
        "seq_ahead",
        ahead.reason,
        found.raw or canonical_json(found.envelope),
    )


def _version_2_birth(found: Status) -> StatusMessage | None:
    """A version 2 online status (no journal id) as the guard reads a birth, if it is one.

    Its chain head anchors the guard as a version 3 birth's does (its journal reads as ``""``:
    the table's first version 3 birth is then another journal, held to the same limit).
    """
    if found.state != "online" or found.chain_head is None:
        return None
    seq, digest = found.chain_head
    return StatusMessage.model_construct(
        state="online",
        table=found.table,
        session=found.session or 0,
        journal="",
        game=str(found.envelope.get("game", "")),
        version=str(found.envelope.get("version", "")),
        at=None,
        chain_head=ChainHead(seq=seq, hash=digest),
    )


def _same_table_entry_topic(topic: str, known: Entry, prefix: str) -> bool:
    parts = _split_topic(topic, prefix)
    return parts is not None and parts[0] == known.table and parts[1] in ENTRY_TOPICS


def _status(
    envelope: dict[str, Any], table: str, reject: Callable[..., Rejected]
) -> Status | Rejected:
    state = envelope.get("state")
    if not isinstance(state, str):
        return reject("malformed", "field 'state' is missing or not a string")
    session = envelope.get("session")
    head = envelope.get("chain_head")
    chain: tuple[int, str] | None = None
    if (
        isinstance(head, dict)
        and isinstance(head.get("seq"), int)
        and isinstance(head.get("hash"), str)
    ):
        chain = (head["seq"], head["hash"])
    journal = envelope.get("journal")
    return Status(
        table,
        state,
        session if isinstance(session, int) else None,
        chain,
        envelope,
        journal if isinstance(journal, str) else "",
    )


def _field_error(envelope: dict[str, Any]) -> str | None:
    # Every well-formed entry passes here first (JSON gives exactly these types; a bool is
    # not an int for this purpose); anything else takes the checks below, for the reason.
    get = envelope.get
    seq, round_id = get("seq"), get("round")
    if (
        type(seq) is int
        and seq >= 1
        and type(get("session")) is int
        and type(get("kind")) is str
        and type(get("at")) is str
        and type(get("data")) is dict
        and (round_id is None or type(round_id) is str)
    ):
        return None
    for name, kinds in (("seq", int), ("session", int), ("kind", str), ("at", str), ("data", dict)):
        value = envelope.get(name)
        if not isinstance(value, kinds) or isinstance(value, bool):
            return f"field {name!r} is missing or not a {kinds.__name__} (got {value!r:.60})"
    if envelope["seq"] < 1:
        return f"field 'seq' is {envelope['seq']}, must be >= 1"
    round_id = envelope.get("round")
    if round_id is not None and not isinstance(round_id, str):
        return f"field 'round' is {round_id!r:.60}, not a string or null"
    return None


def _entry(
    topic: str,
    table: str,
    envelope: dict[str, Any],
    reject: Callable[..., Rejected],
    *,
    key: Ed25519PublicKey | None,
    verifier: VerifyKey | None,
    raw: bytes = b"",
    plain: bool = False,
) -> Entry | Rejected:
    problem = _field_error(envelope)
    seq = envelope.get("seq") if isinstance(envelope.get("seq"), int) else None
    if problem is not None:
        return reject("malformed", problem, seq)
    try:
        at = datetime.fromisoformat(envelope["at"])
    except ValueError:
        return reject(
            "malformed", f"field 'at' is not an ISO-8601 time: {envelope['at']!r:.60}", seq
        )
    if at.tzinfo is None:
        return reject("malformed", f"field 'at' has no time zone: {envelope['at']!r:.60}", seq)
    kind: str = envelope["kind"]
    signed = False
    if key is not None and (kind in SIGNED_KINDS or "signature" in envelope):
        fast = verifier is not None and _verifies(envelope, verifier, plain)
        why = "" if fast else why_invalid(envelope, key)
        if why:
            return reject("signature", f"{kind} seq {seq}: {why}", seq)
        signed = True
    link = _link(envelope.get("link"))
    if isinstance(link, str):
        return reject("malformed", link, seq)
    head = _head(envelope, seq) if signed else None
    if head is not None and link is not None and link[1] != head:
        return reject("malformed", f"{kind} seq {seq}: link.hash is not its chain_head.hash", seq)
    return Entry(
        topic=topic,
        table=table,
        session=envelope["session"],
        seq=envelope["seq"],
        at=at,
        round_id=envelope.get("round"),
        kind=kind,
        data=envelope["data"],
        delayed=envelope.get("delayed") is True,
        replayed=envelope.get("replayed") is True,
        signed=signed,
        envelope=envelope,
        digest=entry_digest(
            envelope.get("round"),
            kind,
            envelope["at"],
            envelope["data"],
            plain=plain,
            link=None if link is None else link[1],
        ),
        raw=raw,
        link=link,
        head=head,
        unsigned=key is None,
        journal=envelope.get("journal") or "",
    )


_HEX64 = re.compile("[0-9a-f]{64}")


def _hex64(value: Any) -> bool:
    return isinstance(value, str) and _HEX64.fullmatch(value) is not None


def _link(value: Any) -> tuple[str, str] | str | None:
    """An envelope's ``link`` as ``(prev, hash)``; ``None`` if absent; why not, if malformed."""
    if value is None:
        return None
    if isinstance(value, dict) and _hex64(value.get("prev")) and _hex64(value.get("hash")):
        return value["prev"], value["hash"]
    return 'field \'link\' is not {"prev": 64 hex, "hash": 64 hex}'


def _head(envelope: dict[str, Any], seq: int | None) -> str | None:
    """A signed result's own chain head hash (``chain_head.seq`` is its ``seq``), if any."""
    head = envelope.get("chain_head")
    if isinstance(head, dict) and head.get("seq") == seq and _hex64(head.get("hash")):
        return str(head["hash"])
    return None


def _verifies(envelope: dict[str, Any], key: VerifyKey, plain: bool) -> bool:
    """:func:`controller.signing.verify_envelope` without its re-parsing and copying.

    Checked by libsodium (the same Ed25519, RFC 8032, and stricter about encodings than
    OpenSSL). ``False``: :func:`controller.signing.why_invalid` decides, with the tables' own
    verifier (OpenSSL, through ``cryptography``), and says why (the slow path, rare): what is
    accepted stays exactly what the tables' verifier accepts.
    """
    signature = envelope.get(SIGNATURE_FIELD)
    if not isinstance(signature, dict) or signature.get("alg") != ALGORITHM:
        return False
    value = signature.get("value")
    if not isinstance(value, str):
        return False
    body = {k: v for k, v in envelope.items() if k != SIGNATURE_FIELD}
    try:
        key.verify(canonical_json(body, plain), base64.b64decode(value, validate=True))
    except (BadSignatureError, ValueError, TypeError, binascii.Error):  # UnicodeEncodeError too
        return False
    return True
