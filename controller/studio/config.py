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
token = "..."                  # required unless [http] host is a loopback address
```

Every field can be overridden from the environment, ``TABLECTL_STUDIO_`` and the path with
``__`` (``TABLECTL_STUDIO_SECURE__PASSWORD=...``): passwords need not sit in the file.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from controller.errors import ConfigError
from controller.mqtt.settings import MqttSettings
from controller.settings import deep_merge, read_toml_file
from controller.studio.pit.settings import PitSettings

ENV_PREFIX = "TABLECTL_STUDIO_"
"""Environment variables that override ``studio.toml`` fields (``__`` between levels)."""

TOKEN_PLACEHOLDER = "REPLACE-ME"
"""Marks the example config's token: a studio whose token still holds it does not start."""

MIN_TOKEN_LENGTH = 16
"""The shortest ``secure.token`` taken (``secrets.token_urlsafe(32)`` gives 43 characters)."""

TOKEN_RECIPE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
"""How to make a token (in the errors and the example config)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name to bind or a ``Host`` header's name) is loopback.

    ``localhost``, 127.0.0.0/8 and ``::1``; a wildcard (``0.0.0.0``, ``::``, empty) or any
    other name is not.
    """
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HttpSettings(BaseModel):
    """Where the studio listens.

    Attributes:
        host: The address to bind (``127.0.0.1``: this machine only).
        port: The TCP port (0: any free port, printed at start).
        send_timeout_seconds: A page that does not take an update within this long is
            dropped (it reconnects and reads the state again): one slow screen never holds
            the others back.
        ping_seconds: Each page socket is pinged this often (a dead one is noticed).

        max_sockets: Page sockets (dealer screens, overlays, secure-delay overlays) open
            at once in all; one more is refused at the handshake (HTTP 403).
        max_sockets_per_client: Page sockets open at once from one client address (behind a
            reverse proxy every page has the proxy's address: raise it there).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    send_timeout_seconds: float = Field(default=5.0, gt=0)
    ping_seconds: float = Field(default=10.0, gt=0)
    max_sockets: int = Field(default=500, ge=1)
    max_sockets_per_client: int = Field(default=32, ge=1)


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
        token: A secure-delay overlay must give it (``?token=...`` in the browser source's
            URL). Required unless ``http.host`` is a loopback address (the studio does not
            start otherwise); at least 16 characters, not the example's placeholder.
        allowed_origins: Web origins (``https://mixer.studio:8443``) whose pages may open
            the secure-delay socket besides the studio's own pages (same origin). A socket
            request with any other ``Origin`` is refused; one without ``Origin`` (not a
            browser page: OBS, a script) is judged by the token alone.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    delay_seconds: float = Field(gt=0)
    username: str | None = None
    password: SecretStr | None = None
    client_id: str | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    token: SecretStr | None = None
    allowed_origins: list[str] = Field(default_factory=list)

    @field_validator("token")
    @classmethod
    def _check_token(cls, token: SecretStr | None) -> SecretStr | None:
        if token is None:
            return None
        text = token.get_secret_value()
        if TOKEN_PLACEHOLDER in text:
            raise ValueError(
                f"the token is still the example's placeholder: make one with {TOKEN_RECIPE}"
            )
        if len(text) < MIN_TOKEN_LENGTH:
            raise ValueError(
                f"the token has {len(text)} characters; at least {MIN_TOKEN_LENGTH} "
                f"(make one with {TOKEN_RECIPE})"
            )
        return token

    @field_validator("allowed_origins")
    @classmethod
    def _check_origins(cls, origins: list[str]) -> list[str]:
        checked = []
        for origin in origins:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or not parts.netloc or parts.path:
                raise ValueError(
                    f"origin {origin!r} must be scheme://host[:port] (http or https, no path)"
                )
            checked.append(f"{parts.scheme}://{parts.netloc}".lower())
        return checked


LOGO_TYPES = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg",
              ".jpeg": "image/jpeg", ".webp": "image/webp"}  # fmt: skip
"""The logo files the overlay shows, by suffix, with the type they are served as."""

MAX_LOGO_BYTES = 2_000_000
"""The largest logo file taken (a title bar's logo, not a video)."""


class BrandingSettings(BaseModel):
    """The table's branding on the stream overlay's title bar.

    Attributes:
        name: The studio's or table's name shown before the game's (empty: none).
        colour: The brand colour, ``#rgb`` or ``#rrggbb``: the title bar's chip, the card
            backs, the accents.
        logo: A logo file (PNG, SVG, JPEG or WebP, at most 2 MB) shown in the title bar,
            served at ``/branding/logo``; read when the studio starts.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(default="", max_length=40)
    colour: str = Field(default="#1a4d8f", pattern=r"^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
    logo: Path | None = None

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
            raise ValueError("the name holds a control character")
        return name.strip()

    @field_validator("logo")
    @classmethod
    def _check_logo(cls, logo: Path | None) -> Path | None:
        if logo is None:
            return None
        if logo.suffix.lower() not in LOGO_TYPES:
            raise ValueError(
                f"logo {str(logo)!r}: a {', '.join(sorted(LOGO_TYPES))} file is needed"
            )
        try:
            size = logo.stat().st_size
        except OSError as exc:
            raise ValueError(f"logo {str(logo)!r} cannot be read: {exc.strerror}") from None
        if not logo.is_file() or size > MAX_LOGO_BYTES:
            raise ValueError(f"logo {str(logo)!r} must be a file of at most 2 MB")
        return logo

    def page_data(self) -> dict[str, Any]:
        """What the overlay page is given: ``name``, ``colour``, ``logo`` (whether one)."""
        return {"name": self.name, "colour": self.colour, "logo": self.logo is not None}


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
        branding: The overlay's branding (name, colour, logo).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    http: HttpSettings = Field(default_factory=HttpSettings)
    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    tables: list[str] = Field(default_factory=list)
    secure: SecureSettings | None = None
    pit: PitSettings | None = None
    branding: BrandingSettings = Field(default_factory=BrandingSettings)

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

    def pit_shares_feed(self) -> bool:
        """Whether the mounted pit console's floor can read the studio's feed (one connection).

        When its link is the studio's (same broker, credentials, TLS, prefix: ``make run``)
        and its tables are among those the studio subscribes to.
        """
        pit = self.pit
        if pit is None or not pit.mqtt.same_link(self.mqtt):
            return False
        if not self.tables:
            return True
        return pit.tables is not None and set(pit.tables) <= set(self.tables)

    def exposure_problem(self) -> str | None:
        """Why this config must not start: a secure-delay feed with no token off loopback."""
        if self.secure is None or self.secure.token is not None or is_loopback(self.http.host):
            return None
        return (
            f"the studio listens on {self.http.host!r} (not loopback only) with a secure-delay "
            "feed and no token: any page on the network could read hole cards; set "
            f"secure.token (make one with {TOKEN_RECIPE}) or listen on 127.0.0.1"
        )

    def check_exposure(self, source: str = "<settings>") -> None:
        """Refuse a config that would serve the secure feed off loopback without a token.

        Raises:
            ConfigError: ``secure.token`` missing while ``http.host`` is not loopback.
        """
        problem = self.exposure_problem()
        if problem is not None:
            raise ConfigError(
                f"studio config field 'secure.token': {problem}", path=source, field="secure.token"
            )

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
        ConfigError: A field that is wrong, named with ``source`` and the reason; a
            secure-delay feed without a token on a studio that does not listen on loopback.
    """
    merged = deep_merge(data, _env_overrides(dict(os.environ) if environ is None else environ))
    try:
        settings = StudioSettings.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ConfigError(
            f"studio config field {where!r}: {first['msg']}", path=source, field=where
        ) from exc
    except ConfigError as exc:  # raised by a validator of MqttSettings (a URL, TLS files)
        raise ConfigError(f"studio config: {exc.message}", path=source, **exc.context) from exc
    settings.check_exposure(source)
    return settings


def load_studio_settings(path: str | Path, environ: dict[str, str] | None = None) -> StudioSettings:
    """Read and check a ``studio.toml`` (environment overrides applied).

    Raises:
        ConfigError: Unreadable, not TOML, or a field that is wrong (file, field, reason).
    """
    file = Path(path)
    data = read_toml_file(file, "studio config")
    return studio_settings(data, source=str(file), environ=environ)
