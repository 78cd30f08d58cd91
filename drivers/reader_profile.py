"""Reader profiles: RFID readers whose tags are latched (``drivers/presence.py``), as data.

A reader that reports tags (an Eccel Pepper C1 polled on its antennas; other latched readers
can use the same file) is described by a small TOML file: how often it is polled, how long a
reply may take, its presence times and the code table its tags are mapped by. The shipped
ones are in ``drivers/profiles/readers/`` (``pepper-c1``); a ``.toml`` path names any other.
``docs/drivers.md`` ("Eccel Pepper C1") lists the fields.

Example::

    name = "pepper-c1"
    description = "Eccel Pepper C1, polled on its antennas"
    family = "pepper-c1"
    baud = 115200
    poll_ms = 40
    response_ms = 500
    code_table = "../codes/rfid-demo-deck.toml"

    [presence]
    place_after_ms = 0
    remove_after_ms = 400
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from drivers.presence import PresenceTimes
from drivers.profile import CodeTable, ProfileError, load_code_table

__all__ = [
    "LoadedReaderProfile",
    "PresenceSection",
    "ReaderProfile",
    "load_reader_profile",
    "shipped_reader_profiles",
]

READERS_PACKAGE = "drivers.profiles.readers"


class PresenceSection(BaseModel):
    """A profile's ``[presence]``: the latch's times (milliseconds).

    Attributes:
        place_after_ms: How long a tag must be stable before it counts as placed.
        remove_after_ms: How long a placed tag must be absent before it counts as removed
            (a shorter drop is no removal).
        repeats: The reader repeats a tag while it is there (a polled reader does).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    place_after_ms: float = Field(default=0, ge=0, le=10_000)
    remove_after_ms: float = Field(default=400, gt=0, le=60_000)
    repeats: bool = True

    def times(self) -> PresenceTimes:
        """The latch's times in seconds."""
        return PresenceTimes.from_ms(
            self.place_after_ms, self.remove_after_ms, repeats=self.repeats
        )


class ReaderProfile(BaseModel):
    """A latched RFID reader, as data.

    Attributes:
        name: The profile's name.
        description: What device this is.
        family: The driver family (``pepper-c1``).
        baud: The serial speed (serial links only).
        poll_ms: How often each antenna is polled.
        response_ms: How long one reply may take before the reader counts as gone.
        code_table: The code table file (relative to the profile), tag UID -> card.
        presence: The latch's times.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    description: str = ""
    family: str = Field(min_length=1)
    baud: int = Field(default=115200, gt=0)
    poll_ms: float = Field(default=40, ge=1, le=5_000)
    response_ms: float = Field(default=500, ge=10, le=30_000)
    code_table: str = Field(min_length=1)
    presence: PresenceSection = PresenceSection()

    @model_validator(mode="after")
    def _repeats_outlast_the_poll(self) -> ReaderProfile:
        if self.presence.repeats and self.presence.remove_after_ms <= 2 * self.poll_ms:
            raise ValueError(
                f"presence.remove_after_ms ({self.presence.remove_after_ms:g}) must exceed two "
                f"polls (poll_ms {self.poll_ms:g}): a tag lying still would be removed "
                "between its repeats"
            )
        return self


@dataclass(frozen=True, slots=True)
class LoadedReaderProfile:
    """A reader profile with its code table."""

    profile: ReaderProfile
    table: CodeTable
    path: Path


def shipped_reader_profiles() -> list[str]:
    """The names of the reader profiles shipped with tablectl."""
    folder = resources.files(READERS_PACKAGE)
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    )


def _path(name_or_path: str) -> Path:
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        return Path(name_or_path)
    path = Path(str(resources.files(READERS_PACKAGE).joinpath(f"{name_or_path}.toml")))
    if not path.is_file():
        raise ProfileError(
            "no shipped reader profile of that name (or give a .toml path)",
            profile=name_or_path,
            detail=f"shipped: {', '.join(shipped_reader_profiles())}",
        )
    return path


def load_reader_profile(name_or_path: str, codes: str | None = None) -> LoadedReaderProfile:
    """Load and check a reader profile and its code table.

    Args:
        name_or_path: A shipped profile's name or a ``.toml`` path.
        codes: A code table file replacing the profile's (an enrolled deck: the URL's
            ``codes=``); a relative path is taken from the working directory.

    Raises:
        ProfileError: The file, the field and the reason.
    """
    path = _path(name_or_path)
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError("cannot read the file", file=str(path), detail=str(exc)) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError("not valid TOML", file=str(path), detail=str(exc)) from exc
    try:
        profile = ReaderProfile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ProfileError(
            "invalid reader profile", file=str(path), field=field, detail=first["msg"]
        ) from exc
    table_path = Path(codes) if codes is not None else path.parent / profile.code_table
    return LoadedReaderProfile(profile, load_code_table(table_path), path)
