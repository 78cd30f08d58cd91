"""The JSON tag readers' codec: one bounded parse of a reader's message, and the reader core.

An MQTT-attached reader (an ESP32 or M5Stack with an RC522 or PN532) publishes one JSON object
a tag read, again and again while the tag lies on its antenna; a USB-serial reader writes the
same object as one line. The shape is the open rfid-poker project's::

    {"device_id": "seat-3", "seq": 2, "card_uid": "04A2B3C4D5E6F7"}

with two optional members of ours: ``"antenna"`` (a reader with several antennas: a number
or a short name) and ``"error"`` (a no-read: ``{"device_id": ..., "seq": ..., "error":
"collision"}``); ``"card_uid": null`` says the field is empty now. Other members are ignored
(a firmware may add its RSSI or version).

:func:`parse_message` reads any byte string without raising: the payload is bounded before
it is parsed (size, nesting depth by a byte scan, UTF-8), parsed by the standard library's
decoder refusing ``NaN``/``Infinity``, then each member is checked (types, lengths, a UID of
4, 7 or 10 bytes in hexadecimal). A refusal is a :class:`Rejection` naming what was wrong.

:class:`ReaderCore` is the rest of a reader, pure (no I/O, the time passed in): a message's
``seq`` per reader (a repeat dropped, a reader that went back counted as restarted), the
presence latch (:mod:`drivers.presence`: repeats are one placement, a brief drop no removal),
the code table (an unknown tag is ``Misread("unknown_code")``, never a guess), and the
rejections as :class:`~drivers.source.DeviceStatus` reads, bounded against a flood (the
first of each kind, then one a :data:`REJECTION_INTERVAL` with how many were left out).
Both drivers (:mod:`drivers.mqtt_reader`, :mod:`drivers.jsonl_source`) are this core behind a
transport.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import structlog

from drivers.json_readers import DEFAULT_PROFILE
from drivers.presence import FieldEmpty, Placed, PresenceLatch, PresenceTimes, Removed, TagSeen
from drivers.profile import PROFILES_PACKAGE, CodeTable, ProfileError
from drivers.reader_profile import load_reader_profile
from drivers.source import CardRead, CardRemoved, DeviceStatus, Misread, Read

__all__ = [
    "MAX_DEPTH",
    "MAX_MESSAGE",
    "REJECTION_INTERVAL",
    "ReaderCore",
    "ReaderMessage",
    "ReaderStats",
    "Rejection",
    "load_reader_codes",
    "load_reader_setup",
    "parse_message",
]

MAX_MESSAGE = 1024
"""Bytes one reader message may have (a tag read is about 70)."""

MAX_DEPTH = 4
"""Nesting of arrays and objects a message may have (a tag read is a flat object: 1)."""

MAX_READERS = 64
"""Readers one source follows the ``seq`` of (more on one topic is a rejection)."""

REJECTION_INTERVAL = 10.0
"""Seconds between two statuses of the same kind of rejection (the rest are counted)."""

_UID = re.compile(r"[0-9A-F]{8}|[0-9A-F]{14}|[0-9A-F]{20}")
_SEPARATORS = str.maketrans("", "", ": -")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_MAX_INT = 2**53 - 1
_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class ReaderMessage:
    """One reader message, checked.

    Attributes:
        device_id: The reader's id (a number is taken as its decimal text).
        seq: The reader's message counter, ``None`` when it sends none.
        uid: The tag's UID in upper-case hexadecimal, ``None`` when the message says the field
            is empty or reports an error.
        antenna: The antenna (``None``: the reader has one).
        error: A no-read word (``"collision"``, ``"read"``...), else ``None``.
    """

    device_id: str
    seq: int | None
    uid: str | None
    antenna: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Rejection:
    """A message not taken, and why.

    Attributes:
        code: A short word (``too_large``, ``too_deep``, ``not_utf8``, ``not_json``,
            ``not_object``, ``invalid``, ``too_many_readers``), a metric label.
        reason: What was wrong and where.
    """

    code: str
    reason: str


class _Refused(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.rejection = Rejection(code, reason)


def _depth(payload: bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` outside strings (a byte scan, no recursion)."""
    depth = deepest = 0
    for byte in _STRING.sub(b"", payload):
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


def _constant(name: str) -> Any:
    raise _Refused("not_json", f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_constant)


def _text(body: dict[str, Any], name: str, most: int, *, number: bool = False) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if number and isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= _MAX_INT:
            raise _Refused("invalid", f"member {name!r} is a number out of range")
        return str(value)
    if not isinstance(value, str):
        raise _Refused("invalid", f"member {name!r} is a {_kind(value)}, not a string")
    if not 1 <= len(value) <= most or not value.isprintable():
        raise _Refused(
            "invalid", f"member {name!r} is not 1-{most} printable characters: {value[:40]!r}"
        )
    return value


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "string" if isinstance(value, str) else "null"


def _object(payload: bytes) -> dict[str, Any]:
    """The payload as a JSON object, bounded before the parse."""
    if len(payload) > MAX_MESSAGE:
        raise _Refused("too_large", f"message is {len(payload)} bytes; at most {MAX_MESSAGE}")
    if payload.count(b"[") + payload.count(b"{") > MAX_DEPTH:
        depth = _depth(payload)
        if depth > MAX_DEPTH:
            raise _Refused("too_deep", f"message nests {depth} levels; at most {MAX_DEPTH}")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused("not_utf8", f"message is not UTF-8 (byte {exc.start})") from None
    try:
        body = _DECODER.decode(text)
    except _Refused:
        raise
    except (ValueError, RecursionError) as exc:
        raise _Refused("not_json", f"message is not JSON: {str(exc)[:100]}") from None
    if not isinstance(body, dict):
        raise _Refused("not_object", f"message is a JSON {_kind(body)}, not an object")
    return body


def _message(payload: bytes) -> ReaderMessage:
    body = _object(payload)
    device_id = _text(body, "device_id", 64, number=True)
    if device_id is None:
        raise _Refused("invalid", "member 'device_id' is missing")
    seq = body.get("seq")
    if seq is not None and (
        isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= _MAX_INT
    ):
        raise _Refused("invalid", f"member 'seq' is not a whole number from 0: {str(seq)[:40]}")
    antenna = _text(body, "antenna", 16, number=True)
    error = _text(body, "error", 32)
    if "card_uid" not in body and error is None:
        raise _Refused("invalid", "member 'card_uid' is missing (null: the field is empty)")
    raw = body.get("card_uid")
    if raw is None:
        return ReaderMessage(device_id, seq, None, antenna, error)
    if not isinstance(raw, str) or len(raw) > 40:
        shown = _kind(raw) if not isinstance(raw, str) else f"{len(raw)} characters"
        raise _Refused("invalid", f"member 'card_uid' is not a UID: {shown}")
    uid = raw.translate(_SEPARATORS).upper()
    if not _UID.fullmatch(uid):
        raise _Refused(
            "invalid",
            f"member 'card_uid' {raw!r} is not a 4-, 7- or 10-byte UID in hexadecimal",
        )
    return ReaderMessage(device_id, seq, uid, antenna, error)


def parse_message(payload: bytes | bytearray | memoryview) -> ReaderMessage | Rejection:
    """One reader message, or why it is refused. Never raises, whatever the bytes."""
    try:
        return _message(bytes(payload))
    except _Refused as exc:
        return exc.rejection


def _codes_path(codes: str) -> str:
    given = Path(codes)
    if given.is_absolute() or given.exists():
        return codes
    return str(resources.files(PROFILES_PACKAGE).joinpath(codes))


def load_reader_setup(
    profile: str = DEFAULT_PROFILE,
    codes: str | None = None,
    place_after_ms: int | None = None,
    remove_after_ms: int | None = None,
) -> tuple[CodeTable, PresenceTimes]:
    """The code table and latch times of a JSON reader: its reader profile's, as overridden.

    Args:
        profile: A reader profile (``drivers/profiles/readers/``) of the ``mqtt-json`` family,
            by name or ``.toml`` path.
        codes: A code table replacing the profile's; a relative path is taken from the
            working directory, else from the shipped profiles' folder
            (``codes/rfid-demo-tiles.toml``).
        place_after_ms: The URL's stable time, replacing the profile's.
        remove_after_ms: The URL's absence time, replacing the profile's.

    Raises:
        ProfileError: The profile or the table cannot be used, or the profile is another
            family's (the file, the field, the reason).
    """
    loaded = load_reader_profile(profile, _codes_path(codes) if codes is not None else None)
    if loaded.profile.family != DEFAULT_PROFILE:
        raise ProfileError(
            "the reader profile is not a JSON reader's",
            file=str(loaded.path),
            field="family",
            detail=f"family {loaded.profile.family!r}; a JSON reader's is {DEFAULT_PROFILE!r}",
        )
    presence = loaded.profile.presence
    place = presence.place_after_ms if place_after_ms is None else place_after_ms
    remove = presence.remove_after_ms if remove_after_ms is None else remove_after_ms
    return loaded.table, PresenceTimes.from_ms(place, remove, repeats=True)


def load_reader_codes(codes: str | None = None, profile: str = DEFAULT_PROFILE) -> CodeTable:
    """The code table a JSON reader reads with (``codes``, else its profile's).

    Raises:
        ProfileError: The file, the field and the reason.
    """
    return load_reader_setup(profile, codes)[0]


@dataclass
class ReaderStats:
    """What a reader core saw.

    Attributes:
        messages: Messages read (taken or not).
        rejected: Refused messages by code.
        duplicates: Messages whose ``seq`` repeated the reader's last (dropped).
        restarts: Readers whose ``seq`` went back (taken: the reader restarted).
        gaps: Messages missing by ``seq`` (a QoS 0 publish lost; the repeats make up for it).
        other_devices: Messages of a reader the URL does not take (``device=``).
        retained: Retained messages ignored (an old read the broker kept).
        placed: Tags that became placed.
        removed: Placed tags that left.
    """

    messages: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    restarts: int = 0
    gaps: int = 0
    other_devices: int = 0
    retained: int = 0
    placed: int = 0
    removed: int = 0


class ReaderCore:
    """A JSON tag reader without its transport: messages and the clock in, reads out.

    Args:
        table: The code table (``None``: enrolment, a read's value is the UID itself).
        times: The presence latch's times.
        device_id: Take only this reader's messages (``None``: every reader's).
        name: The source, in the statuses' details and the log.
    """

    def __init__(
        self,
        table: CodeTable | None,
        times: PresenceTimes,
        *,
        device_id: str | None = None,
        name: str = "",
    ) -> None:
        self.table = table
        self.latch = PresenceLatch(times)
        self.device_id = device_id
        self.name = name
        self.stats = ReaderStats()
        self._seq: dict[str, int] = {}
        self._reads = 0
        self._said: dict[str, float] = {}
        self._unsaid: Counter[str] = Counter()
        self._held: list[Read] = []
        self._offset = 0.0
        self._down_at: float | None = None
        self._reader_down_at: float | None = None

    def message(self, payload: bytes, at: float, *, retained: bool = False) -> list[Read]:
        """The reads one message (and the time it came) gives, in order."""
        self.stats.messages += 1
        if retained:
            self.stats.retained += 1
            return self._refuse(
                Rejection("retained", "a retained message is an old read, not a tag here now"),
                at,
            )
        parsed = parse_message(payload)
        if isinstance(parsed, Rejection):
            return self._refuse(parsed, at)
        if self.device_id is not None and parsed.device_id != self.device_id:
            self.stats.other_devices += 1
            return self.due(at)
        reads = self._sequence(parsed, at)
        if reads is None:
            held, self._held = self._held, []
            return [*self.due(at), *held]
        if parsed.error is not None:
            reads += self.due(at)
            reads.append(
                Misread(
                    "device",
                    f"reader {parsed.device_id!r} could not read: {parsed.error}",
                    parsed.seq,
                    at,
                )
            )
            return reads
        antenna = self._antenna(parsed)
        seen = self._latch_time(at)
        if parsed.uid is None:
            return reads + self._events(self.latch.feed(FieldEmpty(antenna, seen)))
        return reads + self._events(self.latch.feed(TagSeen(parsed.uid, antenna, seen)))

    def due(self, now: float) -> list[Read]:
        """What the latch decided by ``now`` (placements, removals)."""
        return self._events(self.latch.due(self._latch_time(now)))

    def next_deadline(self) -> float | None:
        """When :meth:`due` has something next (``time.monotonic()``)."""
        deadline = self.latch.next_deadline()
        if deadline is None or self._down_at is not None:
            return None  # the latch's time stands still while the link is down
        return deadline + self._offset

    def _latch_time(self, at: float) -> float:
        """The latch's time: the real time less the outages (frozen during one)."""
        return (self._down_at if self._down_at is not None else at) - self._offset

    def reader_status(self, payload: bytes, at: float) -> list[Read]:
        """The reader's own word on its status topic: ``online`` or ``offline``.

        ``offline`` (its Last Will: the broker lost it, its WiFi is down) is the reader's link
        lost: ``DeviceStatus("lost")`` and the latch's time stops (its cards are not removed
        by its silence); ``online`` again: ``DeviceStatus("recovered")`` and
        ``Misread("away")`` (a card put down and lifted meanwhile was never seen: the table
        asks for it again). Only changes are said; another word is a rejection.
        """
        word = bytes(payload[:16]).strip().lower()
        if word not in (b"online", b"offline"):
            shown = bytes(payload[:40])
            return self._refuse(
                Rejection("invalid", f"a reader status is 'online' or 'offline', not {shown!r}"),
                at,
            )
        online = word == b"online"
        if online == (self._reader_down_at is None):
            return []
        if not online:
            self._reader_down_at = at
            reads = self.due(at)
            self.link_lost(at)
            return [*reads, DeviceStatus("lost", "the reader says it is offline", at)]
        away = at - self._reader_down_at if self._reader_down_at is not None else 0.0
        self._reader_down_at = None
        self.link_back(at)
        detail = f"the reader is online again after {away:.2f}s"
        return [
            DeviceStatus("recovered", detail, at),
            Misread(
                "away",
                f"the reader was offline {away:.2f}s: a card put down and lifted meanwhile "
                "was never seen; scan the card again",
                None,
                at,
            ),
        ]

    def link_lost(self, at: float) -> None:
        """The link went down at ``at`` (the broker or the port): nothing is seen from now."""
        if self._down_at is None:
            self._down_at = at

    def link_back(self, now: float) -> None:
        """The link came back at ``now``: the time it was down does not count as absence.

        While the link was down nothing could be seen, so a tag's silence then says nothing:
        the latch runs on the link's time (the real time less every outage), so a placed tag
        is removed only after ``remove_after`` of silence on a working link (else a broker
        outage would remove, and fold, every card on the table).
        """
        if self._down_at is not None:
            self._offset += max(0.0, now - self._down_at)
            self._down_at = None

    def _antenna(self, message: ReaderMessage) -> str | None:
        """The latch's antenna: the reader's own (``device=``), else the reader and antenna."""
        if self.device_id is not None:
            return message.antenna
        if message.antenna is None:
            return message.device_id
        return f"{message.device_id}/{message.antenna}"

    def _sequence(self, message: ReaderMessage, at: float) -> list[Read] | None:
        """The ``seq`` book: ``None`` drops the message; else the statuses to say first."""
        if message.seq is None:
            return []
        last = self._seq.get(message.device_id)
        if last is None and len(self._seq) >= MAX_READERS:
            self.stats.rejected["too_many_readers"] += 1
            self._held = self._say(
                "rejected",
                "too_many_readers",
                f"too_many_readers: reader {message.device_id!r} would be one more than "
                f"{MAX_READERS} on this source (give each its own topic or device=)",
                at,
            )
            return None
        self._seq[message.device_id] = message.seq
        if last is None:
            return []
        if message.seq == last:
            self.stats.duplicates += 1
            _log.debug("reader_repeat_dropped", source=self.name, reader=message.device_id)
            return None
        if message.seq < last:
            self.stats.restarts += 1
            return self._say(
                "restarted",
                "seq_back",
                f"reader {message.device_id!r}: seq went back from {last} to {message.seq} "
                "(the reader restarted?); its reads are taken from here",
                at,
            )
        if message.seq > last + 1:
            self.stats.gaps += message.seq - last - 1
        return []

    def _events(self, events: list[Placed | Removed]) -> list[Read]:
        reads: list[Read] = []
        for event in events:
            if isinstance(event, Placed):
                self.stats.placed += 1
                reads.append(self._placed(event))
            else:
                self.stats.removed += 1
                card = self.table.card_of(event.uid) if self.table is not None else event.uid
                if card is not None:
                    reads.append(CardRemoved(card, None, event.at + self._offset))
        return reads

    def _placed(self, event: Placed) -> Read:
        seq = self._reads
        self._reads += 1
        if self.table is None:
            return CardRead(event.uid, None, seq, event.at + self._offset)
        card = self.table.card_of(event.uid)
        if card is None:
            return Misread(
                "unknown_code",
                f"tag {event.uid} is not in code table {self.table.name!r} (a tag of another "
                "deck, or not enrolled)",
                seq,
                event.at + self._offset,
            )
        return CardRead(card, None, seq, event.at + self._offset)

    def _refuse(self, rejection: Rejection, at: float) -> list[Read]:
        self.stats.rejected[rejection.code] += 1
        return [
            *self.due(at),
            *self._say("rejected", rejection.code, f"{rejection.code}: {rejection.reason}", at),
        ]

    def _say(self, state: str, code: str, detail: str, at: float) -> list[Read]:
        """A status, at most one a :data:`REJECTION_INTERVAL` per code (the rest counted)."""
        last = self._said.get(code)
        if last is not None and at - last < REJECTION_INTERVAL:
            self._unsaid[code] += 1
            _log.debug("reader_status_bounded", source=self.name, code=code, detail=detail)
            return []
        self._said[code] = at
        left_out = self._unsaid.pop(code, 0)
        if left_out:
            detail += f" ({left_out} more of this kind in the last {REJECTION_INTERVAL:g} s)"
        _log.warning("reader_message_" + state, source=self.name, code=code, detail=detail)
        return [DeviceStatus(f"reader_{state}", detail, at)]
