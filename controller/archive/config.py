"""The archive's config (``archive.toml``): database, broker, tables and their keys, gaps.

```toml
[database]
url = "postgresql://archive@db.studio/archive"

[mqtt]                      # the fields of a table's [mqtt] (controller.mqtt.settings)
urls = ["mqtt://broker.studio:1883"]
client_id = "tablectl-archive-1"
username = "archive"

[gaps]
grace_seconds = 1.0         # a gap waits this long for late messages before a replay is asked
timeout_seconds = 30.0      # a gap still open this long after it was seen is an alert
replay_role = "pit"         # cmd/pit/replay (the credential must be allowed to send it)

[tables.tp-01]
public_key = "keys/tp-01.pub"   # results must carry a valid signature by this key

[tables.tp-02]                  # a table that does not sign: an empty table
```
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from controller.errors import ConfigError
from controller.mqtt.settings import MqttSettings
from controller.signing import load_public_key


class DatabaseSettings(BaseModel):
    """Where the archive writes.

    Attributes:
        url: A libpq connection URL (``postgresql://user@host:port/db``).
    """

    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1)


class GapSettings(BaseModel):
    """How the archive fills gaps in a table's ``seq`` (docs/archive.md, "Gaps").

    Attributes:
        grace_seconds: A gap waits this long for late or redelivered messages before the
            archive asks the table for a replay.
        timeout_seconds: A gap not filled this long after it was seen is an alert.
        replay_role: Which command topic the replay goes to (``pit``: ``cmd/pit/replay``).
        replay_timeout_seconds: How long a replay command waits for the table's answer.
        check_seconds: How often open gaps are looked at.
    """

    model_config = ConfigDict(extra="forbid")
    grace_seconds: float = Field(default=1.0, ge=0)
    timeout_seconds: float = Field(default=30.0, gt=0)
    replay_role: Literal["pit", "betting"] = "pit"
    replay_timeout_seconds: float = Field(default=10.0, gt=0)
    check_seconds: float = Field(default=0.2, gt=0)


class TableEntry(BaseModel):
    """One table the archive accepts.

    Attributes:
        public_key: Its Ed25519 public key (PEM); ``None``: the table does not sign.
    """

    model_config = ConfigDict(extra="forbid")
    public_key: Path | None = None


class ArchiveSettings(BaseModel):
    """The whole archive config."""

    model_config = ConfigDict(extra="forbid")
    database: DatabaseSettings
    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    gaps: GapSettings = Field(default_factory=GapSettings)
    tables: dict[str, TableEntry] = Field(default_factory=dict)

    def public_keys(self, base: Path | None = None) -> dict[str, Ed25519PublicKey | None]:
        """Each table's public key, loaded (relative paths from ``base``).

        Raises:
            SignatureError: A key file that cannot be read or is not Ed25519.
        """
        keys: dict[str, Ed25519PublicKey | None] = {}
        for table, entry in self.tables.items():
            path = entry.public_key
            if path is not None and base is not None and not path.is_absolute():
                path = base / path
            keys[table] = None if path is None else load_public_key(path)
        return keys


def load_archive_settings(path: str | Path) -> ArchiveSettings:
    """Read and check an ``archive.toml``.

    Raises:
        ConfigError: Unreadable, not TOML, or a field that is wrong (named, with the file).
    """
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"cannot read archive config: {exc.strerror or exc}", path=str(file)
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"archive config is not TOML: {exc}", path=str(file)) from exc
    for table in data.get("tables", {}) if isinstance(data.get("tables"), dict) else {}:
        if not table or any(ch in table for ch in "/+#"):
            raise ConfigError(
                "a table id must be one topic level (no '/', '+', '#')", path=str(file), table=table
            )
    try:
        return ArchiveSettings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(
            f"archive config field {where!r}: {first['msg']}", path=str(file), field=where
        ) from exc
