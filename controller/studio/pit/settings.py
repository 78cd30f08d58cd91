"""The pit console's settings (``[pit]`` of the studio config, or a file of its own).

```toml
session_secret = "..."          # >= 32 characters; signs the session cookie
tables = ["tp-01", "tp-02"]     # or leave it out: every table seen on the broker

[[users]]
name = "alice"
role = "pitboss"                # may resume, void, replay
password_hash = "scrypt$32768$8$1$...$..."   # python -m controller.studio.pit.passwords

[[users]]
name = "sam"
role = "observer"               # sees the floor and recalls rounds, sends nothing

[mqtt]                          # the fields of a table's [mqtt] (controller.mqtt.settings)
urls = ["mqtts://broker.studio:8883"]
username = "pitboss"            # the pit role's credential (docs/security.md)
```
"""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from controller.mqtt.settings import MqttSettings
from controller.studio.pit.errors import PasswordHashError, PitConfigError
from controller.studio.pit.passwords import parse_hash

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

PitRole = Literal["pitboss", "observer"]
"""``pitboss``: sees the floor, recalls rounds, sends pit actions. ``observer``: no actions."""

ACTING_ROLES: frozenset[str] = frozenset({"pitboss"})
"""Roles that may send pit actions."""


class PitUser(BaseModel):
    """One person who may sign in to the pit console.

    Attributes:
        name: The login name; sent in every pit command (``operator``) and journalled by the
            table.
        role: ``pitboss`` or ``observer``.
        password_hash: ``scrypt$N$r$p$SALT$HASH`` (:mod:`controller.studio.pit.passwords`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._@-]+$")
    role: PitRole
    password_hash: str

    @field_validator("password_hash")
    @classmethod
    def _readable(cls, value: str) -> str:
        try:
            parse_hash(value)
        except PasswordHashError as exc:
            raise ValueError(str(exc)) from exc
        return value


class LoginSettings(BaseModel):
    """How wrong sign-ins are slowed down (docs/studio-pit.md, "Throttling").

    Every sign-in is counted before its password is checked, so parallel tries cannot all get
    in under a limit.

    Attributes:
        failure_delay_seconds: Every wrong sign-in is answered after this long.
        max_failures: Wrong sign-ins from one client address within ``window_seconds``; the
            one that reaches it is still checked, then the address waits ``lockout_seconds``.
        lockout_seconds: How long an address waits; it doubles with each further wait.
        max_lockout_seconds: The longest wait.
        window_seconds: Wrong sign-ins older than this are forgotten.
        max_failures_per_user: Wrong sign-ins for one user name, from every address together,
            within ``window_seconds``; beyond it the name can be tried only from addresses
            that signed in as that user before (a distributed guess is slowed, the pit boss's
            own terminals are never locked out).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    failure_delay_seconds: float = Field(default=1.0, ge=0)
    max_failures: int = Field(default=5, ge=1)
    lockout_seconds: float = Field(default=30.0, ge=0)
    max_lockout_seconds: float = Field(default=900.0, ge=0)
    window_seconds: float = Field(default=900.0, gt=0)
    max_failures_per_user: int = Field(default=50, ge=1)


class SocketLimits(BaseModel):
    """How many pit console WebSockets may be open.

    Attributes:
        per_address: Open sockets from one client address.
        total: Open sockets in all.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    per_address: int = Field(default=8, ge=1)
    total: int = Field(default=64, ge=1)


class DeckCheckSettings(BaseModel):
    """The pit's own reader for deck checks (``[pit.deck_check]``).

    Attributes:
        device: The reader's URL (any card source: ``profile+serial://...``,
            ``mqtt-reader://...``); the deck is put on it at the pit, one card at a time.
        codes: The decks' code table (``codes=`` of the URL), if the reader maps tags.
        idle_seconds: The check ends this long after the last card read.
        first_read_seconds: How long to wait for the first card.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: str = Field(min_length=1)
    codes: str | None = None
    idle_seconds: float = Field(default=5.0, gt=0)
    first_read_seconds: float = Field(default=120.0, gt=0)


class PitSettings(BaseModel):
    """Everything the pit console needs.

    Attributes:
        users: Who may sign in; at least one ``pitboss``.
        session_secret: Signs the session cookie (at least 32 characters).
        session_max_age_seconds: A session ends this long after sign-in.
        https_only: Mark the cookie ``Secure`` (behind TLS in production).
        mqtt: The broker and the pit role's credential (``pitboss``).
        tables: The tables shown; ``None``: every table that publishes on the broker.
        command_timeout: Seconds a pit action waits for the table's answer.
        page_send_timeout: Seconds a page may take to take one update (else it is dropped;
            it reconnects and reads the floor again).
        archive_url: The studio archive (``postgresql://...``) for recall; ``None``: recall
            from what the console saw since it started.
        archive_timeout: Seconds a recall from the archive may take.
        public_keys: Table id -> Ed25519 public key (PEM) to verify results the console saw.
        recent_rounds: Rounds per table kept in memory for recall without the archive.
        alerts_per_table: Alerts kept per table.
        lines_per_table: Recent event lines kept per table.
        login: How wrong sign-ins are slowed down.
        trusted_proxies: Addresses or networks (``"127.0.0.1"``, ``"10.0.0.0/24"``) of the
            reverse proxies in front of the console. Only when the direct peer is one of them
            is the client's address read from ``proxy_header``; empty: trust none (the peer
            is the client).
        proxy_header: The header the trusted proxies set: ``x-forwarded-for`` or
            ``forwarded`` (RFC 7239); the other is ignored.
        sockets: How many WebSockets may be open, per client address and in all.
        deck_check: The pit's reader for deck checks; ``None``: no deck check on the console.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    users: list[PitUser] = Field(min_length=1)
    session_secret: SecretStr
    session_max_age_seconds: int = Field(default=12 * 3600, ge=60)
    https_only: bool = False
    mqtt: MqttSettings
    tables: list[str] | None = None
    command_timeout: float = Field(default=10.0, gt=0)
    page_send_timeout: float = Field(default=10.0, gt=0)
    archive_url: SecretStr | None = None
    archive_timeout: float = Field(default=10.0, gt=0)
    public_keys: dict[str, Path] = Field(default_factory=dict)
    recent_rounds: int = Field(default=50, ge=1, le=10_000)
    alerts_per_table: int = Field(default=50, ge=1, le=10_000)
    lines_per_table: int = Field(default=30, ge=1, le=10_000)
    login: LoginSettings = Field(default_factory=LoginSettings)
    trusted_proxies: list[str] = Field(default_factory=list, max_length=256)
    proxy_header: Literal["x-forwarded-for", "forwarded"] = "x-forwarded-for"
    sockets: SocketLimits = Field(default_factory=SocketLimits)
    deck_check: DeckCheckSettings | None = None

    @field_validator("session_secret")
    @classmethod
    def _long_secret(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 32:
            raise ValueError("session_secret must be at least 32 characters (random)")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(
                    f"trusted proxy {entry!r} is not an IP address or network: {exc}"
                ) from exc
        return value

    def proxy_networks(self) -> tuple[IPNetwork, ...]:
        """:attr:`trusted_proxies`, read."""
        return tuple(ipaddress.ip_network(entry, strict=False) for entry in self.trusted_proxies)

    @field_validator("tables")
    @classmethod
    def _table_ids(cls, value: list[str] | None) -> list[str] | None:
        for table in value or []:
            if not table or any(ch in table for ch in "/+#"):
                raise ValueError(f"table id {table!r} must be one topic level (no '/', '+', '#')")
        return value

    @model_validator(mode="after")
    def _users(self) -> PitSettings:
        names = [user.name for user in self.users]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"user names must be unique: {', '.join(twice)}")
        if not any(user.role in ACTING_ROLES for user in self.users):
            raise ValueError("at least one user must have the role 'pitboss'")
        return self

    def user(self, name: str) -> PitUser | None:
        """The configured user of that name, if any."""
        return next((user for user in self.users if user.name == name), None)


def pit_settings(data: dict[str, Any], *, origin: str = "pit settings") -> PitSettings:
    """Checked settings from a mapping (a TOML table).

    Raises:
        PitConfigError: Every field that is wrong, named, with ``origin``.
    """
    try:
        return PitSettings.model_validate(data)
    except ValidationError as exc:
        fields = [
            (".".join(str(part) for part in error["loc"]) or "(top)", error["msg"])
            for error in exc.errors()
        ]
        said = "; ".join(f"field {where!r}: {msg}" for where, msg in fields)
        raise PitConfigError(f"{origin}: {said}", file=origin, field=fields[0][0]) from exc


def load_pit_settings(path: str | Path, *, section: str | None = None) -> PitSettings:
    """Read the pit console's settings from a TOML file (or one of its tables).

    Args:
        path: The file.
        section: A table of the file holding them (``"pit"`` in a studio config).

    Raises:
        PitConfigError: Unreadable, not TOML, no such section, or a wrong field (named).
    """
    file = Path(path)
    try:
        data: Any = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PitConfigError(f"cannot read {file}: {exc.strerror or exc}", file=str(file)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise PitConfigError(f"{file} is not TOML: {exc}", file=str(file)) from exc
    if section is not None:
        data = data.get(section)
        if not isinstance(data, dict):
            raise PitConfigError(f"{file} has no [{section}] table", file=str(file))
    return pit_settings(data, origin=str(file))
