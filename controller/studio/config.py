"""The studio's config (``studio.toml``): where it listens, its brokers and roles, its tables.

```toml
tables = ["tp-01", "th-02"]    # the tables to show; empty or absent: every table seen

[http]
host = "0.0.0.0"
port = 8080

[mqtt]                         # the fields of a table's [mqtt] (controller.mqtt.settings)
urls = ["mqtts://broker.studio:8883"]
username = "viewer"            # the studio's own role: public topics only
password = "..."
ca_file = "/etc/tablectl/ca.crt"

[secure]                       # only for the overlay's secure-delay mode
delay_seconds = 30.0
username = "stream"            # the secure role (stream production): reads secure/ topics
password = "..."
```

Every field can be overridden from the environment, ``TABLECTL_STUDIO_`` and the path with
``__`` (``TABLECTL_STUDIO_SECURE__PASSWORD=...``): passwords need not sit in the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from controller.errors import ConfigError
from controller.mqtt.settings import MqttSettings
from controller.settings import deep_merge, read_toml_file
from controller.studio.pit.settings import PitSettings

ENV_PREFIX = "TABLECTL_STUDIO_"
"""Environment variables that override ``studio.toml`` fields (``__`` between levels)."""


class HttpSettings(BaseModel):
    """Where the studio listens.

    Attributes:
        host: The address to bind (``127.0.0.1``: this machine only).
        port: The TCP port (0: any free port, printed at start).
        send_timeout_seconds: A page that does not take an update within this long is
            dropped (it reconnects and reads the state again): one slow screen never holds
            the others back.
        ping_seconds: Each page socket is pinged this often (a dead one is noticed).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    send_timeout_seconds: float = Field(default=5.0, gt=0)
    ping_seconds: float = Field(default=10.0, gt=0)


class SecureSettings(BaseModel):
    """The overlay's secure-delay mode: the secure feed, held back by ``delay_seconds``.

    Attributes:
        delay_seconds: How long every message is held back before secure-delay overlays get
            it (the stream's video delay).
        username: The secure role's broker user (stream production: may read ``secure/``).
        password: Its password.
        client_id: The secure connection's client id (``{studio client id}-secure``).
        cert_file: A client certificate for the secure role, if the broker wants one.
        key_file: Its key.
        token: If set, a secure-delay overlay must give it (``?token=...`` in the browser
            source's URL): the secure feed is not for any page on the network.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    delay_seconds: float = Field(gt=0)
    username: str | None = None
    password: SecretStr | None = None
    client_id: str | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    token: SecretStr | None = None


class StudioSettings(BaseModel):
    """The whole studio config.

    Attributes:
        http: Where the pages are served.
        mqtt: The studio's own (public, read-only) broker connection: URLs, credentials,
            TLS, timeouts, topic prefix.
        tables: Table ids to show; empty: every table seen on the broker.
        secure: The secure-delay mode (``None``: not configured; the overlay then refuses
            ``?mode=secure-delay``).
        pit: The pit-boss console (``controller.studio.pit``, docs/studio-pit.md), mounted at
            ``/pit`` when the section is present; it connects with its own (pit) role.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    http: HttpSettings = Field(default_factory=HttpSettings)
    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    tables: list[str] = Field(default_factory=list)
    secure: SecureSettings | None = None
    pit: PitSettings | None = None

    @field_validator("tables")
    @classmethod
    def _check_tables(cls, tables: list[str]) -> list[str]:
        for table in tables:
            if not table or any(ch in table for ch in "/+#"):
                raise ValueError(f"table id {table!r} must be one topic level (no '/', '+', '#')")
        return tables

    @property
    def secure_mqtt(self) -> MqttSettings | None:
        """The secure role's connection settings (the studio's, with the secure credentials)."""
        secure = self.secure
        if secure is None:
            return None
        base = self.mqtt.client_id or "tablectl-studio"
        update: dict[str, Any] = {
            "username": secure.username,
            "password": secure.password,
            "client_id": secure.client_id or f"{base}-secure",
        }
        if secure.cert_file is not None:
            update |= {"cert_file": secure.cert_file, "key_file": secure.key_file}
        return self.mqtt.model_copy(update=update)

    def shows(self, table: str) -> bool:
        """Whether ``table`` is one of the studio's (every table when none is listed)."""
        return not self.tables or table in self.tables


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        *parents, leaf = name[len(ENV_PREFIX) :].lower().split("__")
        target = overrides
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return overrides


def studio_settings(
    data: dict[str, Any], *, source: str = "<settings>", environ: dict[str, str] | None = None
) -> StudioSettings:
    """Check a studio config given as data (the file's, or built by ``tablectl run``).

    Raises:
        ConfigError: A field that is wrong, named with ``source`` and the reason.
    """
    merged = deep_merge(data, _env_overrides(dict(os.environ) if environ is None else environ))
    try:
        return StudioSettings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ConfigError(
            f"studio config field {where!r}: {first['msg']}", path=source, field=where
        ) from exc
    except ConfigError as exc:  # raised by a validator of MqttSettings (a URL, TLS files)
        raise ConfigError(f"studio config: {exc.message}", path=source, **exc.context) from exc


def load_studio_settings(path: str | Path, environ: dict[str, str] | None = None) -> StudioSettings:
    """Read and check a ``studio.toml`` (environment overrides applied).

    Raises:
        ConfigError: Unreadable, not TOML, or a field that is wrong (file, field, reason).
    """
    file = Path(path)
    data = read_toml_file(file, "studio config")
    return studio_settings(data, source=str(file), environ=environ)
