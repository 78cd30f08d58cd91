"""A table's configuration: a TOML file, overridden by environment variables.

Precedence, highest first: values given by the command line, environment variables
(``TABLECTL_`` prefix, ``__`` between nested names: ``TABLECTL_MQTT__URLS='["mqtt://b:1883"]'``,
``TABLECTL_ROUNDS__BETTING_SECONDS=20``), the TOML file, the defaults below.

A config that cannot be used fails at start with the file, the field and the reason
(:class:`controller.errors.ConfigError`), never half-way through a round.
"""

from __future__ import annotations

import contextvars
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from controller.errors import ConfigError, PayTableError
from controller.games.registry import DEFAULT_GAME, GAME_IDS
from controller.money import parse_odds
from controller.mqtt.settings import MqttSettings
from drivers.source import DriverSettings

if TYPE_CHECKING:
    GameId = str
else:
    GameId = Literal[GAME_IDS]
    """Exactly the registry's game ids (``Literal`` keeps pydantic's message listing them)."""

_toml_path: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "tablectl_toml_path", default=None
)


class DeviceSettings(BaseModel):
    """The card source of the table.

    Attributes:
        url: ``serial:///dev/ttyUSB0?baud=115200``, ``socket://host:port``, ``usb://VID:PID``
            or ``profile+serial:///dev/ttyUSB0?profile=NAME`` (a device profile: a shipped
            name or a ``.toml`` path; see ``docs/drivers.md``).
        driver: Timeouts and line settings of the driver.
    """

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1)
    driver: DriverSettings = Field(default_factory=DriverSettings)

    @field_validator("url")
    @classmethod
    def _profile_loads(cls, url: str) -> str:
        """A ``profile+serial://`` URL's device profile must load (:func:`check_profile_url`)."""
        return check_profile_url(url)


def check_profile_url(url: str) -> str:
    """A device profile a URL names (and its code table) must load.

    ``profile+serial://``, ``hidpos://`` and ``hidkbd://`` name one; ``mqtt-reader://`` and
    ``jsonl+serial://`` a reader profile. A malformed profile or code table stops the
    controller at start (the file, the field and the reason).

    Raises:
        ValueError: The profile or its code table does not load (why, where).
    """
    if url.lower().startswith(("mqtt-reader:", "jsonl+serial:")):
        return _check_json_reader_url(url)
    if not url.lower().startswith(("profile+serial:", "hidpos:", "hidkbd:")):
        return url
    from drivers.errors import DriverError
    from drivers.hid import HidSpec
    from drivers.profile import load_profile
    from drivers.source import ProfileSpec, parse_url

    try:
        spec = parse_url(url)
        assert isinstance(spec, ProfileSpec | HidSpec)
        load_profile(spec.profile, spec.codes)
    except DriverError as exc:
        raise ValueError(str(exc)) from exc
    return url


def _check_json_reader_url(url: str) -> str:
    """A JSON tag reader's URL reads, and its reader profile and code table load.

    Raises:
        ValueError: The URL, the profile or the code table is wrong (why, where).
    """
    from drivers.errors import DriverError
    from drivers.json_readers import JsonLinesSpec, MqttReaderSpec
    from drivers.reader_json import load_reader_setup
    from drivers.source import parse_url

    try:
        spec = parse_url(url)
        assert isinstance(spec, MqttReaderSpec | JsonLinesSpec)
        load_reader_setup(spec.profile, spec.codes, spec.place_after_ms, spec.remove_after_ms)
    except DriverError as exc:
        raise ValueError(str(exc)) from exc
    return url


class ReaderSettings(BaseModel):
    """One reader of a multi-reader table (``[[devices]]``).

    Attributes:
        name: The reader's name in logs and the journal (default ``reader-N``, N from 1).
        url: Its device URL, as ``[device] url``.
        positions: What it reads: slot names of the game (``"A1"``) or hand names
            (``"A"``: every slot of the hand). Each slot is read by exactly one reader.
        driver: Timeouts and line settings of its driver.
    """

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
    url: str = Field(min_length=1)
    positions: list[str] = Field(min_length=1)
    driver: DriverSettings = Field(default_factory=DriverSettings)

    @field_validator("url")
    @classmethod
    def _profile_loads(cls, url: str) -> str:
        """As ``[device] url``: a device profile must load."""
        return check_profile_url(url)


def reader_bindings(
    game: str, readers: list[ReaderSettings], game_options: Mapping[str, Any] | None = None
) -> dict[str, tuple[str, ...]]:
    """Each reader's name and the slots it reads (hand names expanded), checked whole.

    The slots are those a table of the game with ``game_options`` can deal
    (:meth:`controller.games.spec.GameSpec.plan_for`: Hold'em's seats and burns, Mahjong's
    positions); options the game refuses fall back to the default plan (the table stops on
    them anyway, naming them).

    Raises:
        ValueError: A position that is no slot or hand of the game, a slot claimed by two
            readers, a slot no reader reads, or two readers with one name (which entry,
            which position, why).
    """
    from controller.games.registry import game_spec

    spec = game_spec(game)
    try:
        plan = spec.plan_for(spec.options.model_validate(dict(game_options or {})))
    except ValidationError:
        plan = spec.deal_plan
    slot_names = [slot.name for slot in plan.slots]
    by_hand = {hand: [s.name for s in plan.slots if s.hand == hand] for hand in plan.hands}
    owner: dict[str, str] = {}
    bindings: dict[str, tuple[str, ...]] = {}
    for index, reader in enumerate(readers):
        name = reader.name or f"reader-{index + 1}"
        where = f"devices[{index}] ({name})"
        if name in bindings:
            raise ValueError(f"{where}.name: another reader is named {name!r}")
        slots: list[str] = []
        for position in reader.positions:
            if position in by_hand and position not in slot_names:
                expanded = by_hand[position]
            elif position in slot_names:
                expanded = [position]
            else:
                raise ValueError(
                    f"{where}.positions: {position!r} is no slot or hand of {game} "
                    f"(slots: {', '.join(slot_names)}; hands: {', '.join(plan.hands)})"
                )
            for slot in expanded:
                if slot in owner:
                    raise ValueError(
                        f"{where}.positions: {position!r} claims slot {slot}, already read "
                        f"by {owner[slot]}: two readers cannot claim one position"
                    )
                owner[slot] = where
                slots.append(slot)
        bindings[name] = tuple(slots)
    unread = [slot for slot in slot_names if slot not in owner]
    if unread:
        raise ValueError(f"no reader reads slot(s) {', '.join(unread)} of {game}")
    return bindings


class RoundSettings(BaseModel):
    """How a round runs.

    Attributes:
        betting_seconds: Length of the betting window; the orchestrator owns this clock.
        pause_seconds: Pause between a result and the next betting window.
        rescan_alert_after: After this many consecutive misreads of one slot, an alert asks
            for the pit boss (the slot keeps waiting: the rules never give up on a card).
        bounce_seconds: A second read of the card just accepted within this window is a
            bounce of the same physical card and is ignored.
        waiting_log_seconds: While a slot waits for a card, log that it is waiting this often.
        device_halt_seconds: A round whose device is lost this long is halted for the pit boss.
        halted_stop_seconds: After a stop signal, how long a halted round waits for the pit
            boss (resume or void) before the controller exits anyway, the round left halted
            in the journal (it comes back halted at the next start). A second signal exits
            at once.
        wait_for_broker: Open no new round while the broker is unreachable.
        wait_for_betting_system: Open no new round while the betting system's status topic
            says it is offline.
        idle_retry_seconds: While the game cannot open a round (Hold'em with fewer than two
            players with chips), how often to try again.
        gate_grace_seconds: How long a closed gate may take to open before the table
            journals that it is waiting (the broker connection at start-up).
        settle_seconds: After each card, and before each cue, wait at most this long for
            the broker to acknowledge what the table has published, so that the next card
            finds the controller idle and the work that follows a card (the next cue, the
            result) does not compete with its way to the subscribers; 0 waits for nothing.
            Never longer than this: an unreachable broker does not hold the deal up.
    """

    model_config = ConfigDict(extra="forbid")

    betting_seconds: float = Field(default=15.0, ge=0.0, le=3600.0)
    pause_seconds: float = Field(default=3.0, ge=0.0, le=3600.0)
    rescan_alert_after: int = Field(default=3, ge=1)
    bounce_seconds: float = Field(default=1.0, ge=0.0, le=60.0)
    waiting_log_seconds: float = Field(default=30.0, gt=0.0)
    device_halt_seconds: float = Field(default=30.0, gt=0.0)
    halted_stop_seconds: float = Field(default=120.0, gt=0.0, le=3600.0)
    wait_for_broker: bool = True
    wait_for_betting_system: bool = False
    gate_grace_seconds: float = Field(default=3.0, ge=0.0)
    idle_retry_seconds: float = Field(default=5.0, gt=0.0)
    settle_seconds: float = Field(default=0.05, ge=0.0, le=5.0)


class ReplayLimitSettings(BaseModel):
    """How many replays a role may ask for (``[replay]``; docs/security.md, "Replay limits").

    Counted per role (``betting``: ``cmd/replay``, also the archive's; ``pit``:
    ``cmd/pit/replay``) over the last 60 s. A replay asked beyond either limit is refused
    with the time it may be asked again; repeated command ids (answered again) do not count.

    Attributes:
        commands_per_minute: Replay commands a role may have accepted in any 60 s.
        messages_per_minute: Messages re-sent to a role in any 60 s; a replay asked once
            they are spent is refused (one replay that starts within the budget runs to
            its end: at most :data:`~controller.outbox.replay.MAX_REPLAY_MESSAGES`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    commands_per_minute: int = Field(default=10, ge=1, le=10_000)
    messages_per_minute: int = Field(default=1000, ge=1, le=1_000_000)


class JournalSettings(BaseModel):
    """Where the journal lives.

    Attributes:
        path: The SQLite file (its directory must be writable: WAL needs side files).
    """

    model_config = ConfigDict(extra="forbid")

    path: Path = Path("var/journal.sqlite")


class SigningSettings(BaseModel):
    """Signatures on results (Ed25519).

    Attributes:
        key_file: The private key (PEM, PKCS8); ``None``: results are not signed.
        key_id: The id consumers use to pick the public key.
    """

    model_config = ConfigDict(extra="forbid")

    key_file: Path | None = None
    key_id: str = "tablectl"


class MetricsSettings(BaseModel):
    """The Prometheus endpoint.

    Attributes:
        port: TCP port serving ``/metrics``; ``None``: no endpoint.
        host: Address to listen on.
    """

    model_config = ConfigDict(extra="forbid")

    port: int | None = Field(default=None, ge=1, le=65535)
    host: str = "127.0.0.1"


class LoggingSettings(BaseModel):
    """Log output.

    Attributes:
        level: Minimum level.
        format: ``json`` for production, ``console`` for people, ``auto`` by terminal.
    """

    model_config = ConfigDict(extra="forbid")

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["auto", "json", "console"] = "auto"


class TableSettings(BaseSettings):
    """Everything one table controller needs.

    Attributes:
        table_id: The table's id in topics and results (letters, digits, ``-``, ``_``).
        game: The game this table deals.
        device: The card source (one device), or ``None`` when ``devices`` is given.
        devices: A multi-reader table (``[[devices]]``): several readers, each bound to
            positions; exactly one of ``device`` and ``devices`` is given.
        mqtt: The broker(s) and client settings.
        rounds: Round timing and escalation.
        replay: How many replays each role may ask for.
        journal: The journal file.
        paytables: Overrides of the game's default pay tables: bet id -> outcome -> ratio
            (``"0.95:1"``, ``"3:2"``, ``"50:1"``).
        game_options: The game's live options (decision windows, seats, blinds, banker
            positions...), validated by the game when the table starts.
        signing: Signatures on results.
        metrics: The Prometheus endpoint.
        logging: Log output.
    """

    model_config = SettingsConfigDict(
        env_prefix="TABLECTL_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    table_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    game: GameId = DEFAULT_GAME
    device: DeviceSettings | None = None
    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    rounds: RoundSettings = Field(default_factory=RoundSettings)
    replay: ReplayLimitSettings = Field(default_factory=ReplayLimitSettings)
    journal: JournalSettings = Field(default_factory=JournalSettings)
    paytables: dict[str, dict[str, str]] = Field(default_factory=dict)
    game_options: dict[str, Any] = Field(default_factory=dict)
    signing: SigningSettings = Field(default_factory=SigningSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    devices: list[ReaderSettings] | None = Field(default=None, min_length=1)

    @field_validator("devices")
    @classmethod
    def _readers_cover_the_game(
        cls, value: list[ReaderSettings] | None, info: ValidationInfo
    ) -> list[ReaderSettings] | None:
        """Each reader's positions are slots or hands of the game; each slot, one reader."""
        game = info.data.get("game")
        if value is None or game is None:
            return value
        reader_bindings(game, value, info.data.get("game_options"))
        return value

    @model_validator(mode="after")
    def _one_device_form(self) -> TableSettings:
        if (self.device is None) == (self.devices is None):
            raise ValueError(
                "give the card source once: [device] (one device) or [[devices]] "
                "(several readers bound to positions)"
            )
        return self

    @field_validator("paytables")
    @classmethod
    def _ratios_are_exact(cls, value: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for bet, table in value.items():
            for outcome, ratio in table.items():
                try:
                    parse_odds(ratio)
                except PayTableError as exc:
                    raise ValueError(f"{bet}.{outcome}: {exc.message}") from exc
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Command line (init) over environment over the TOML file."""
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _toml_path.get()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


_NO_FILE = "(environment)"
"""The origin of settings read without a TOML file."""

_ENV_PREFIX = "TABLECTL_"
_ENV_DELIMITER = "__"


def _given(overrides: Mapping[str, Any], loc: tuple[int | str, ...]) -> bool:
    """Whether the command line's overrides hold a value at ``loc`` (or above it)."""
    value: Any = overrides
    for part in loc:
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


def _environment_variable(loc: tuple[int | str, ...]) -> str | None:
    """The environment variable that gave the value at ``loc`` (or a parent of it), if any.

    Names are matched as pydantic-settings matches them: prefix ``TABLECTL_``, nested fields
    joined by ``__``, case-insensitive.
    """
    present = {name.upper(): name for name in os.environ}
    for end in range(len(loc), 0, -1):
        name = _ENV_PREFIX + _ENV_DELIMITER.join(str(part) for part in loc[:end]).upper()
        if name in present:
            return present[name]
    return None


def _source(loc: tuple[int | str, ...], overrides: Mapping[str, Any], origin: str) -> str:
    """Where a wrong value came from: the command line, an environment variable, the file."""
    if loc and _given(overrides, loc):
        return "the command line"
    variable = _environment_variable(loc) if loc else None
    if variable is not None:
        return f"environment variable {variable}"
    return origin


def _describe(error: ValidationError, origin: str, overrides: Mapping[str, Any]) -> ConfigError:
    problems = []
    sources: list[str] = []
    first_field = ""
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        first_field = first_field or where
        given = item.get("input")
        shown = "" if isinstance(given, dict) or item["type"] == "missing" else f" (got {given!r})"
        source = _source(tuple(item["loc"]), overrides, origin)
        if source not in sources:
            sources.append(source)
        came = f" [from {source}]" if source != origin else ""
        problems.append(f"{where}: {item['msg']}{shown}{came}")
    whose = f"table config {origin}" if origin in sources else "settings"
    message = f"invalid {whose}: " + "; ".join(problems)
    if origin == _NO_FILE:
        return ConfigError(message, field=first_field, source=sources[0])
    return ConfigError(message, file=origin, field=first_field, source=sources[0])


def read_toml_file(path: str | Path, what: str) -> dict[str, Any]:
    """A config file's data, or a :class:`ConfigError` naming ``what`` and the file.

    Args:
        path: The file.
        what: What it is, for the message (``"studio config"``, ``"archive config"``).

    Raises:
        ConfigError: Unreadable (``cannot read WHAT``) or not TOML (``WHAT is not TOML``),
            with ``path`` in its context.
    """
    file = Path(path)
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror or exc}", path=str(file)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} is not TOML: {exc}", path=str(file)) from exc


def deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` laid over it, tables merged key by key (neither is changed).

    How a config file's data takes overrides (command-line options, environment variables):
    a nested table of ``extra`` changes only the keys it names.
    """
    merged = dict(base)
    for key, value in extra.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = value
    return merged


def load_settings(path: str | Path | None = None, **overrides: Any) -> TableSettings:
    """Read a table config.

    Args:
        path: The TOML file, or ``None`` for environment and overrides only.
        **overrides: Values that win over the file and the environment (from the CLI).

    Raises:
        ConfigError: The file is missing or not TOML, or a field is wrong; the message names
            the file, the field and the reason.
    """
    origin = str(path) if path is not None else _NO_FILE
    toml_file: Path | None = None
    if path is not None:
        toml_file = Path(path)
        try:
            with toml_file.open("rb") as handle:
                tomllib.load(handle)
        except FileNotFoundError as exc:
            raise ConfigError(f"table config {origin} does not exist", file=origin) from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(
                f"table config {origin} is not valid TOML: {exc}", file=origin
            ) from exc
        except OSError as exc:
            raise ConfigError(f"table config {origin} cannot be read: {exc}", file=origin) from exc
    token = _toml_path.set(toml_file)
    try:
        return TableSettings(**overrides)
    except ValidationError as exc:
        raise _describe(exc, origin, overrides) from exc
    finally:
        _toml_path.reset(token)
