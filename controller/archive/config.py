"""The archive's config (``archive.toml``): database, broker, tables and their keys, gaps.

```toml
[database]
url = "postgresql://archive@db.studio/archive"

[mqtt]                      # the fields of a table's [mqtt] (controller.mqtt.settings)
urls = ["mqtt://broker.studio:1883"]
client_id = "tablectl-archive-1"
username = "archive"

[database]                  # (continued) every database await is bounded:
timeout_seconds = 10.0      # one batch's transaction, one gap check
connect_timeout_seconds = 5.0
reconnect_min_seconds = 0.2 # back-off after a lost connection (doubling, jittered)
reconnect_max_seconds = 10.0

[consumer]
share_group = "archive"     # MQTT 5 shared subscriptions: instances with one group share the load
# partition = "0/2"         # or: instance 0 of 2 takes its half of the tables (plain subscriptions)
receive_maximum = 1000      # unacknowledged messages the broker may send (acks follow commits)

[gaps]
grace_seconds = 1.0         # a gap waits this long for late messages before a replay is asked
timeout_seconds = 30.0      # a gap still open this long after it was seen is an alert
replay_role = "pit"         # cmd/pit/replay (the credential must be allowed to send it)

[tables.tp-01]
public_key = "keys/tp-01.pub"   # results must carry a valid signature by this key

[tables.tp-02]                  # a table that does not sign: an empty table

[metrics]                       # `archive run` serves Prometheus metrics (docs/archive.md)
host = "127.0.0.1"
port = 9465

[retention]                     # `archive retain` (docs/archive.md, "Retention")
export_dir = "export"           # relative to the config file

unattributed_keep = "90d"       # rejected/alerts rows of no table, rejected of no class

[retention.classes.regulated]
tables = ["tp-*"]               # table ids or shell patterns (fnmatch)
keep = "5y"                     # Nd, Nw, Nm (calendar months) or Ny
```
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from controller.errors import ConfigError
from controller.mqtt.settings import MqttSettings
from controller.settings import read_toml_file

if TYPE_CHECKING:  # `cryptography` is loaded only when a key is (controller/signing.py)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class DatabaseSettings(BaseModel):
    """Where the archive writes.

    Attributes:
        url: A libpq connection URL (``postgresql://user@host:port/db``), or
            ``sqlite:///PATH`` for an archive of one instance (docs/archive.md, "SQLite").
        timeout_seconds: Every await on the database is bounded by this (one batch's
            transaction, one gap check); past it the connection counts as lost.
        connect_timeout_seconds: One connection attempt (TCP, authentication).
        reconnect_min_seconds: First back-off delay after the connection is lost.
        reconnect_max_seconds: Longest back-off delay (the delay doubles up to it, jittered).
    """

    model_config = ConfigDict(extra="forbid")
    url: str = Field(min_length=1)
    timeout_seconds: float = Field(default=10.0, gt=0)
    connect_timeout_seconds: float = Field(default=5.0, gt=0)
    reconnect_min_seconds: float = Field(default=0.2, gt=0)
    reconnect_max_seconds: float = Field(default=10.0, gt=0)

    @model_validator(mode="after")
    def _check_backoff(self) -> DatabaseSettings:
        if self.reconnect_max_seconds < self.reconnect_min_seconds:
            raise ValueError("reconnect_max_seconds is below reconnect_min_seconds")
        return self


class ConsumerSettings(BaseModel):
    """How the archive subscribes (docs/archive.md, "Several instances").

    Attributes:
        share_group: MQTT 5 shared subscriptions ``$share/{group}/{prefix}/+/events`` (and
            ``results``, ``status``): the broker gives each message to one instance of the
            group; every instance of one archive uses the same group and its own
            ``mqtt.client_id``. ``None``: not shared.
        partition: ``"I/N"``: instance ``I`` of ``N`` (0-based) subscribes, with plain
            subscriptions, to the configured tables whose id hashes (CRC-32) to ``I`` modulo
            ``N``. For brokers that forget shared subscriptions when they restart (Mosquitto
            2.0: docs/archive.md). ``None``: every table.
        receive_maximum: MQTT 5 Receive Maximum: how many messages the broker may send
            before they are acknowledged. The archive acknowledges a message only once its
            batch is committed, so this also bounds what it holds in memory.
        linger_seconds: How long a batch waits, after its first message, for more before
            it is stored (a transaction, a hand-over to the database and one write of
            acknowledgements for all of them). 0: what has arrived is stored at once (an
            instance under load batches by itself). The archive beside one table (``make
            run``) lingers 2 s: a round's dealing burst in one or two batches.
    """

    model_config = ConfigDict(extra="forbid")
    share_group: str | None = None
    partition: str | None = None
    receive_maximum: int = Field(default=1000, ge=1, le=65535)
    linger_seconds: float = Field(default=0.0, ge=0.0, le=60.0)

    @field_validator("share_group")
    @classmethod
    def _check_group(cls, group: str | None) -> str | None:
        if group is not None and (not group or any(ch in group for ch in "/+#\0")):
            raise ValueError("a share group must be one topic level (no '/', '+', '#')")
        return group

    @field_validator("partition")
    @classmethod
    def _check_partition(cls, partition: str | None) -> str | None:
        if partition is None:
            return None
        index, _, count = partition.partition("/")
        if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
            raise ValueError(f"partition {partition!r} is not I/N with 0 <= I < N (e.g. 0/2)")
        return partition

    @model_validator(mode="after")
    def _one_way(self) -> ConsumerSettings:
        if self.share_group is not None and self.partition is not None:
            raise ValueError("share_group and partition exclude each other: choose one")
        return self

    def owns(self, table: str) -> bool:
        """Whether this instance subscribes to ``table`` (always, unless partitioned)."""
        if self.partition is None:
            return True
        index, _, count = self.partition.partition("/")
        return zlib.crc32(table.encode("utf-8")) % int(count) == int(index)


class GapSettings(BaseModel):
    """How the archive fills gaps in a table's ``seq`` (docs/archive.md, "Gaps").

    Attributes:
        grace_seconds: A hole in a table's archived ``seq`` values (the database's, shared by
            every instance) becomes a gap once the ``seq`` after it was archived this long
            ago; the table is then asked for a replay.
        timeout_seconds: A gap not filled this long after it was recorded is an alert.
        replay_role: Which command topic the replay goes to (``pit``: ``cmd/pit/replay``).
        replay_timeout_seconds: How long a replay command waits for the table's answer.
        check_seconds: How often each instance looks at the gaps (a few statements each
            time: docs/archive.md, "Gaps").
        replay_every_seconds: A gap still open and not alerted whose replay was asked this
            long ago is asked again (the request failed, the table was away, or the instance
            that claimed it died before sending it); the alert after ``timeout_seconds``
            ends the asking.
    """

    model_config = ConfigDict(extra="forbid")
    grace_seconds: float = Field(default=1.0, ge=0)
    timeout_seconds: float = Field(default=30.0, gt=0)
    replay_role: Literal["pit", "betting"] = "pit"
    replay_timeout_seconds: float = Field(default=10.0, gt=0)
    check_seconds: float = Field(default=0.5, gt=0)
    replay_every_seconds: float = Field(default=10.0, gt=0)


class TableEntry(BaseModel):
    """One table the archive accepts.

    Attributes:
        public_key: Its Ed25519 public key (PEM); ``None``: the table does not sign.
        unsigned: A table without a key is archived only when this says so: then everything
            from it is kept as ``unsigned`` (``archive verify`` and ``recall --archive`` say
            "unsigned: not verifiable"); otherwise its messages are rejected (``unsigned``).
    """

    model_config = ConfigDict(extra="forbid")
    public_key: Path | None = None
    unsigned: bool = False

    @model_validator(mode="after")
    def _one_or_the_other(self) -> TableEntry:
        if self.public_key is not None and self.unsigned:
            raise ValueError("a table with a public_key signs: unsigned = true is for one without")
        return self


KEEP_PATTERN = re.compile(r"^([1-9][0-9]{0,4})([dwmy])$")
"""A retention period: a count and a unit (days, weeks, calendar months, years)."""


def _check_period(value: str) -> str:
    """``value`` if it is a retention period.

    Raises:
        ValueError: It is not (the message names the forms).
    """
    if not KEEP_PATTERN.match(value):
        raise ValueError(
            f"{value!r} is not a period: a number and d, w, m (months) or y, e.g. '5y'"
        )
    return value


class RetentionClass(BaseModel):
    """A class of tables and how long their entries are kept.

    Attributes:
        tables: Table ids or shell patterns (``fnmatch``, case-sensitive: ``tp-*``).
        keep: How long: ``90d``, ``12w``, ``18m`` (calendar months) or ``5y``.
    """

    model_config = ConfigDict(extra="forbid")
    tables: list[str] = Field(min_length=1)
    keep: str

    @field_validator("keep")
    @classmethod
    def _keep_is_a_period(cls, value: str) -> str:
        return _check_period(value)


class RetentionSettings(BaseModel):
    """What ``tablectl archive retain`` exports and deletes (docs/archive.md, "Retention").

    Attributes:
        export_dir: Where the CSV files and manifests go (relative: to the config file).
        classes: Name → its tables and period. A table in no class is kept for ever.
        lock_timeout_seconds: How long dropping a whole partition keeps trying to lock
            ``events`` between the ingest's transactions (``NOWAIT``, every 50 ms) before it
            falls back to deleting the rows.
        unattributed_keep: The period of the side tables' rows no class covers: ``rejected``
            and ``alerts`` rows with no table id, and ``rejected`` rows of tables in no class
            (``unknown_table`` messages anyone can send). ``None``: kept for ever.
    """

    model_config = ConfigDict(extra="forbid")
    export_dir: Path = Path("export")
    classes: dict[str, RetentionClass] = Field(default_factory=dict)
    lock_timeout_seconds: float = Field(default=5.0, gt=0)
    unattributed_keep: str | None = None

    @field_validator("unattributed_keep")
    @classmethod
    def _unattributed_is_a_period(cls, value: str | None) -> str | None:
        return None if value is None else _check_period(value)


class MetricsSettings(BaseModel):
    """Where ``tablectl archive run`` serves ``/metrics`` (Prometheus text format).

    Attributes:
        host: The address to listen on (loopback by default; the studio network's to scrape).
        port: The TCP port (9465 suggested; the tables' default is 9464); ``None``: no
            endpoint (as a table's ``[metrics]``).
    """

    model_config = ConfigDict(extra="forbid")
    host: str = "127.0.0.1"
    port: int | None = Field(default=None, ge=1, le=65535)


class ArchiveSettings(BaseModel):
    """The whole archive config."""

    model_config = ConfigDict(extra="forbid")
    database: DatabaseSettings
    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    consumer: ConsumerSettings = Field(default_factory=ConsumerSettings)
    gaps: GapSettings = Field(default_factory=GapSettings)
    tables: dict[str, TableEntry] = Field(default_factory=dict)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)

    @model_validator(mode="after")
    def _one_sqlite_instance(self) -> ArchiveSettings:
        shared = self.consumer.share_group is not None or self.consumer.partition is not None
        if shared and self.database.url.startswith("sqlite://"):
            raise ValueError(
                "consumer.share_group and consumer.partition need a PostgreSQL archive "
                "(postgresql://...): an sqlite:/// archive is one instance's (its gaps are "
                'kept in the process; docs/archive.md, "SQLite")'
            )
        return self

    def public_keys(self, base: Path | None = None) -> dict[str, Ed25519PublicKey | None]:
        """Each table's public key, loaded (relative paths from ``base``).

        Raises:
            SignatureError: A key file that cannot be read or is not Ed25519.
        """
        from controller.signing import load_public_key

        keys: dict[str, Ed25519PublicKey | None] = {}
        for table, entry in self.tables.items():
            path = entry.public_key
            if path is not None and base is not None and not path.is_absolute():
                path = base / path
            keys[table] = None if path is None else load_public_key(path)
        return keys

    def unsigned_tables(self) -> frozenset[str]:
        """The tables allowed to publish unsigned (``unsigned = true``)."""
        return frozenset(table for table, entry in self.tables.items() if entry.unsigned)


def load_archive_settings(path: str | Path) -> ArchiveSettings:
    """Read and check an ``archive.toml``.

    Raises:
        ConfigError: Unreadable, not TOML, or a field that is wrong (named, with the file).
    """
    file = Path(path)
    data = read_toml_file(file, "archive config")
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
