"""Device profiles: a line-oriented reader described as data, and its pure line codec.

A profile (TOML, ``drivers/profiles/*.toml`` or any file a config names) says how a serial
card reader speaks: the record terminator, a regular expression with named groups (``code``,
optional ``position``, ``status``, ``checksum`` and ``payload``, what the checksum covers),
the checksum kind, the status words that mean "could not read", the commands the device
understands (cue / rescan / reject, as text templates) and the code table (device code →
card notation), inline or in a named data file. ``docs/drivers.md`` ("Device profiles")
shows how to write one.

:class:`LineDecoder` is the profile's codec: bytes in, reads out, no I/O and no clock (the
caller gives the arrival time). A record is never guessed: a line that does not match, a
bad checksum or a code the table does not know comes out as a :class:`~drivers.source.Misread`
naming the reason.
"""

from __future__ import annotations

import binascii
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from drivers.errors import DriverError
from drivers.source import CardRead, DeviceStatus, Misread, Read

__all__ = [
    "CHECKSUMS",
    "CodeTable",
    "DeviceProfile",
    "LineDecoder",
    "ProfileError",
    "checksum",
    "load_code_table",
    "load_grammar",
    "load_profile",
    "render_record",
    "shipped_profiles",
]

MAX_LINE = 256
"""Bytes a record may have; a longer run without a terminator is noise (a misread)."""


class ProfileError(DriverError, ValueError):
    """A device profile or code table that cannot be used (the file, the field, the reason)."""


# ---------------------------------------------------------------------- checksums


def _reflect(value: int, width: int) -> int:
    out = 0
    for _ in range(width):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


def _crc16(poly: int, init: int, reflected: bool, xorout: int) -> Callable[[bytes], int]:
    """A CRC-16 of the Rocksoft model (refin = refout = ``reflected``), table-driven."""
    table: list[int] = []
    for byte in range(256):
        if reflected:
            crc = byte
            rpoly = _reflect(poly, 16)
            for _ in range(8):
                crc = (crc >> 1) ^ rpoly if crc & 1 else crc >> 1
        else:
            crc = byte << 8
            for _ in range(8):
                crc = ((crc << 1) ^ poly) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
        table.append(crc)

    def compute(data: bytes) -> int:
        crc = init
        for byte in data:
            if reflected:
                crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
            else:
                crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ byte) & 0xFF]
        return crc ^ xorout

    return compute


def _xor8(data: bytes) -> int:
    out = 0
    for byte in data:
        out ^= byte
    return out


CHECKSUMS: dict[str, tuple[int, Callable[[bytes], int]]] = {
    "xor8": (2, _xor8),
    "sum8": (2, lambda data: sum(data) % 256),
    "crc16-ccitt-false": (4, lambda data: binascii.crc_hqx(data, 0xFFFF)),
    "crc16-xmodem": (4, lambda data: binascii.crc_hqx(data, 0)),
    "crc16-arc": (4, _crc16(0x8005, 0x0000, True, 0x0000)),
    "crc16-modbus": (4, _crc16(0x8005, 0xFFFF, True, 0x0000)),
    "crc16-kermit": (4, _crc16(0x1021, 0x0000, True, 0x0000)),
}
"""Checksum kinds: name → (hex digits on the wire, function of the covered bytes)."""

ChecksumKind = Literal[
    "xor8", "sum8", "crc16-ccitt-false", "crc16-xmodem", "crc16-arc", "crc16-modbus", "crc16-kermit"
]


def checksum(kind: str, data: bytes) -> str:
    """The checksum of ``data`` as the device writes it (upper-case hexadecimal)."""
    digits, function = CHECKSUMS[kind]
    return f"{function(data):0{digits}X}"


# ---------------------------------------------------------------------- models

_TERMINATORS = {"CR": b"\r", "LF": b"\n", "CRLF": b"\r\n"}
_PLACEHOLDERS = re.compile(r"\{([a-z_]+)\}")
_COMMAND_FIELDS = frozenset({"round", "slot_index", "slot", "reason"})


class Commands(BaseModel):
    """Text templates the host sends (terminator appended); ``None``: the device has none.

    Placeholders: ``{round}``, ``{slot_index}``, ``{slot}``, ``{reason}``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cue: str | None = None
    rescan: str | None = None
    reject: str | None = None

    @field_validator("cue", "rescan", "reject")
    @classmethod
    def _known_placeholders(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value:
            raise ValueError("a command template is not empty (leave it out instead)")
        unknown = set(_PLACEHOLDERS.findall(value)) - _COMMAND_FIELDS
        if unknown:
            raise ValueError(
                f"unknown placeholder(s) {sorted(unknown)}; known: {sorted(_COMMAND_FIELDS)}"
            )
        if not value.isascii():
            raise ValueError("a command template is ASCII")
        return value


class Records(BaseModel):
    """How the device writes its records.

    The simulator writes these; the load checks that the pattern reads them back.
    Placeholders: ``{code}``, ``{position}``, ``{status}``, ``{checksum}``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    card: str = Field(min_length=1)
    status: str | None = None
    sample_position: str = "S1"
    """A position the load's check (and the benchmark) writes card records with."""


class CodeTable(BaseModel):
    """Device code → card notation (one card a code; one code a card, or a card's copies).

    Attributes:
        name: The table's (the deck's) name.
        codes: Code → card, in the controller's notation.
        codes_per_card: How many codes one card may have: 1 for a deck of cards; 2 for
            Mahjong Pai Gow's tiles, whose set holds two copies of each (each copy has its own
            tag, both read as the same tile).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    codes_per_card: int = Field(default=1, ge=1, le=8)
    codes: dict[str, str] = Field(min_length=1)

    @field_validator("codes")
    @classmethod
    def _codes_a_card(cls, codes: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        most = info.data.get("codes_per_card", 1)
        seen: dict[str, list[str]] = {}
        for code, card in codes.items():
            if not code or not card or not card.isascii() or len(card) > 8:
                raise ValueError(f"code {code!r}: a card is 1-8 ASCII characters, not {card!r}")
            seen.setdefault(card, []).append(code)
            if len(seen[card]) <= most:
                continue
            if most == 1:
                first = seen[card][0]
                raise ValueError(f"card {card!r} has two codes: {first!r} and {code!r}")
            listed = ", ".join(repr(c) for c in seen[card])
            raise ValueError(
                f"card {card!r} has {len(seen[card])} codes ({listed}); codes_per_card is {most}"
            )
        return codes

    def card_of(self, code: str) -> str | None:
        """The card a code stands for, ``None`` if the table does not know it."""
        return self.codes.get(code)

    def code_of(self, card: str, copy: int = 0) -> str | None:
        """The code of a card's ``copy``-th copy (the simulator's direction; wraps around)."""
        codes = self.codes_of(card)
        return codes[copy % len(codes)] if codes else None

    def codes_of(self, card: str) -> list[str]:
        """Every code of a card, in the table's order."""
        return [code for code, value in self.codes.items() if value == card]


class DeviceProfile(BaseModel):
    """A line-oriented card reader, as data (see ``docs/drivers.md``, "Device profiles").

    Attributes:
        name: The profile's name (what ``?profile=`` gives).
        description: What device this is.
        terminator: ``"CR"``, ``"LF"``, ``"CRLF"`` or one byte as ``"0x03"``.
        pattern: The regular expression a whole record matches: named groups ``code`` (a
            card's code), ``position``, ``status``, ``checksum`` and ``payload``.
        checksum: The checksum kind, when records carry one (the ``checksum`` group, upper or
            lower-case hexadecimal); it covers the ``payload`` group, or else all the record
            before the checksum group.
        misread_status: Status words that mean "the device could not read the card".
        position_must_match_cue: A card read at a position other than the cued slot's name
            is refused.
        position_reader: The device is a position reader (one at each place of a table,
            bound to its positions by the table's ``[[devices]]``): ``run --simulate``
            demos it with one simulated reader per hand.
        commands: What the host can send; a cue the device cannot take reaches the dealer
            through the table's event feed only.
        records: How the device writes records (for the simulator and the load's check).
        codes: The code table inline, or ``code_table``: a file (relative to the profile's
            folder) holding one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")
    description: str = ""
    terminator: str = "CRLF"
    pattern: str
    checksum: ChecksumKind | None = None
    misread_status: tuple[str, ...] = ()
    position_must_match_cue: bool = False
    position_reader: bool = False
    commands: Commands = Commands()
    records: Records
    codes: dict[str, str] | None = None
    code_table: str | None = None
    baud: int | None = Field(default=None, gt=0)

    @field_validator("terminator")
    @classmethod
    def _terminator(cls, value: str) -> str:
        if value in _TERMINATORS:
            return value
        if re.fullmatch(r"0x[0-9a-fA-F]{2}", value):
            return value
        raise ValueError('a terminator is "CR", "LF", "CRLF" or one byte as "0x03"')

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        unknown = set(compiled.groupindex) - {"code", "position", "status", "checksum", "payload"}
        if unknown:
            raise ValueError(f"unknown named group(s) {sorted(unknown)}")
        if "code" not in compiled.groupindex:
            raise ValueError("the pattern needs a named group 'code'")
        return value

    @property
    def terminator_bytes(self) -> bytes:
        """The terminator as bytes."""
        return _TERMINATORS.get(self.terminator) or bytes([int(self.terminator, 16)])

    @property
    def regex(self) -> re.Pattern[str]:
        """The compiled pattern."""
        return re.compile(self.pattern)

    def command(self, name: str, **fields: Any) -> bytes | None:
        """The bytes of command ``name`` with its fields filled in; ``None``: no such command."""
        template: str | None = getattr(self.commands, name)
        if template is None:
            return None
        text = _PLACEHOLDERS.sub(lambda match: str(fields.get(match.group(1), "")), template)
        return text.encode("ascii", "replace") + self.terminator_bytes


def render_record(profile: DeviceProfile, template: str, **fields: str) -> bytes:
    """A record as the device writes it, checksum computed, terminator appended.

    Raises:
        ProfileError: The rendered record does not match the profile's pattern.
    """
    digits = CHECKSUMS[profile.checksum][0] if profile.checksum else 0
    draft = _PLACEHOLDERS.sub(
        lambda m: "0" * digits if m.group(1) == "checksum" else fields.get(m.group(1), ""),
        template,
    )
    match = profile.regex.fullmatch(draft)
    if match is None:
        raise ProfileError(
            "a record the profile writes does not match its pattern",
            detail=f"record {draft!r}, pattern {profile.pattern!r}",
            profile=profile.name,
        )
    if profile.checksum is None:
        return draft.encode("ascii") + profile.terminator_bytes
    start, end = _covered(match)
    value = checksum(profile.checksum, draft[start:end].encode("ascii"))
    span = match.span("checksum")
    text = draft[: span[0]] + value + draft[span[1] :]
    return text.encode("ascii") + profile.terminator_bytes


def _covered(match: re.Match[str]) -> tuple[int, int]:
    if "payload" in match.re.groupindex and match.group("payload") is not None:
        return match.span("payload")
    return 0, match.start("checksum")


# ---------------------------------------------------------------------- loading


PROFILES_PACKAGE = "drivers.profiles"


def shipped_profiles() -> list[str]:
    """The names of the profiles shipped with tablectl."""
    folder = resources.files(PROFILES_PACKAGE)
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError("cannot read the file", file=str(path), detail=str(exc)) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError("not valid TOML", file=str(path), detail=str(exc)) from exc


def _validation_error(path: Path, exc: ValidationError, what: str) -> ProfileError:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "(top level)"
    reasons = "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or '(top level)'}: {error['msg']}"
        for error in exc.errors()
    )
    return ProfileError(f"invalid {what}", file=str(path), field=field, detail=reasons)


def load_code_table(path: Path) -> CodeTable:
    """Read and check a code table file (``name = ...`` and a ``[codes]`` table).

    Raises:
        ProfileError: Unreadable, not TOML, or not a valid table (file, field, reason).
    """
    data = _read_toml(path)
    try:
        return CodeTable.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(path, exc, "code table") from exc


def resolve_profile_path(name_or_path: str) -> Path:
    """A shipped profile's file by name, or the file named.

    Raises:
        ProfileError: No shipped profile of that name and no such file.
    """
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        return Path(name_or_path)
    candidate = Path(str(resources.files(PROFILES_PACKAGE).joinpath(f"{name_or_path}.toml")))
    if not candidate.is_file():
        raise ProfileError(
            "no shipped device profile of that name (or give a .toml path)",
            profile=name_or_path,
            detail=f"shipped: {', '.join(shipped_profiles())}",
        )
    return candidate


def load_grammar(name_or_path: str) -> tuple[DeviceProfile, Path]:
    """Load and check a profile without its code table (enrolment writes that table).

    Raises:
        ProfileError: The file, the field and the reason.
    """
    path = resolve_profile_path(name_or_path)
    data = _read_toml(path)
    try:
        profile = DeviceProfile.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(path, exc, "device profile") from exc
    if profile.checksum is not None and "checksum" not in profile.regex.groupindex:
        raise ProfileError(
            "invalid device profile", file=str(path), field="pattern",
            detail="a checksum is declared but the pattern has no 'checksum' group",
        )  # fmt: skip
    return profile, path


@dataclass(frozen=True, slots=True)
class LoadedProfile:
    """A profile with its code table, ready for a driver or a simulator."""

    profile: DeviceProfile
    table: CodeTable
    path: Path


def load_profile(name_or_path: str, codes: str | None = None) -> LoadedProfile:
    """Load and check a profile and its code table.

    Besides each field, the load checks what only the whole can say: a code table is given
    exactly once, the checksum has its group, and every record template (with every code of
    the table) is read back by the pattern as what it was written from.

    Args:
        name_or_path: A shipped profile's name or a ``.toml`` path.
        codes: A code table file replacing the profile's own (an enrolled deck: the URL's
            ``codes=``); a relative path is taken from the working directory, or else, for a
            shipped table, from the profile's folder (``codes/rfid-demo-tiles.toml``).

    Raises:
        ProfileError: The file, the field and the reason.
    """
    profile, path = load_grammar(name_or_path)
    if codes is not None:
        table = load_code_table(_code_table_path(path, codes))
        _check_records(path, profile, table)
        return LoadedProfile(profile, table, path)
    if (profile.codes is None) == (profile.code_table is None):
        raise ProfileError(
            "invalid device profile", file=str(path), field="codes",
            detail="give the code table once: inline [codes] or code_table = FILE",
        )  # fmt: skip
    if profile.codes is not None:
        try:
            table = CodeTable(name=f"{profile.name} (inline)", codes=profile.codes)
        except ValidationError as exc:
            raise _validation_error(path, exc, "device profile's codes") from exc
    else:
        assert profile.code_table is not None
        table = load_code_table(path.parent / profile.code_table)
    _check_records(path, profile, table)
    return LoadedProfile(profile, table, path)


def _code_table_path(profile_path: Path, codes: str) -> Path:
    given = Path(codes)
    if given.is_absolute() or given.exists():
        return given
    return profile_path.parent / codes


def _check_records(path: Path, profile: DeviceProfile, table: CodeTable) -> None:
    decoder = LineDecoder(profile, table)
    for code, card in table.codes.items():
        try:
            line = render_record(
                profile, profile.records.card, code=code, position=profile.records.sample_position
            )
        except ProfileError as exc:
            raise ProfileError(
                "invalid device profile",
                file=str(path),
                field="records.card",
                detail=f"{exc.message}: {exc.detail}",
            ) from exc
        reads = decoder.feed(line, 0.0)
        if len(reads) != 1 or not isinstance(reads[0], CardRead) or reads[0].value != card:
            raise ProfileError(
                "invalid device profile", file=str(path), field="records.card",
                detail=f"the record for code {code!r} reads back as {reads!r}, not {card!r}",
            )  # fmt: skip


# ---------------------------------------------------------------------- the codec


class LineDecoder:
    """Bytes in, reads out, for one profile. No I/O, no clock.

    Args:
        profile: The grammar.
        table: The code table; ``None`` for enrolment: a card read's value is then the
            device's code itself, not a card.
    """

    def __init__(self, profile: DeviceProfile, table: CodeTable | None) -> None:
        self.profile = profile
        self.table = table
        self._regex = profile.regex
        self._terminator = profile.terminator_bytes
        self._buffer = bytearray()
        self._seq = 0
        self._misread_words = {word.upper() for word in profile.misread_status}

    def reset(self) -> None:
        """Forget a partial record (the port was reopened)."""
        self._buffer.clear()

    def feed(self, data: bytes, at: float) -> list[Read]:
        """The reads completed by ``data`` (in order); ``at`` is their arrival time."""
        self._buffer += data
        reads: list[Read] = []
        terminator = self._terminator
        while True:
            end = self._buffer.find(terminator)
            if end < 0:
                break
            line = bytes(self._buffer[:end])
            del self._buffer[: end + len(terminator)]
            if line:
                reads.append(self.decode_line(line, at))
        if len(self._buffer) > MAX_LINE:
            noise = len(self._buffer)
            self._buffer.clear()
            reads.append(Misread("line", f"{noise} bytes without a terminator", None, at))
        return reads

    def decode_line(self, line: bytes, at: float) -> Read:
        """One record (without its terminator) as a read."""
        seq = self._seq
        self._seq += 1
        try:
            text = line.decode("ascii")
        except UnicodeDecodeError:
            return Misread("line", f"record is not ASCII: {line[:40]!r}", seq, at)
        match = self._regex.fullmatch(text)
        if match is None:
            return Misread("line", f"record does not match the profile: {text[:60]!r}", seq, at)
        if self.profile.checksum is not None:
            refused = self._check_sum(match)
            if refused is not None:
                return Misread("checksum", refused, seq, at)
        groups: Mapping[str, str | None] = match.groupdict()
        code, status = groups.get("code"), groups.get("status")
        if not code:
            word = status or ""
            if word.upper() in self._misread_words:
                return Misread("device", f"the device could not read: {word}", seq, at)
            return DeviceStatus(word.lower() or "unknown", text, at)
        if self.table is None:
            return CardRead(code, groups.get("position") or None, seq, at)
        card = self.table.card_of(code)
        if card is None:
            return Misread(
                "unknown_code", f"code {code!r} is not in code table {self.table.name!r}", seq, at
            )
        return CardRead(card, groups.get("position") or None, seq, at)

    def _check_sum(self, match: re.Match[str]) -> str | None:
        assert self.profile.checksum is not None
        given = match.group("checksum")
        start, end = _covered(match)
        expected = checksum(self.profile.checksum, match.string[start:end].encode("ascii"))
        if given is None or given.upper() != expected:
            return f"checksum {given!r} but the record gives {expected!r}"
        return None
