"""``tablectl check-config FILE [--offline]``: will this table start with this config?

Checks, one output line each (``OK``, ``FAIL`` with the reason, or ``SKIP`` when a check
cannot be made), exit status 1 if any check failed:

``config``
    The file loads (:func:`controller.settings.load_settings`: TOML, every field, the
    environment overrides) and names a game this controller deals live with pay-table
    overrides that exist (what ``tablectl run`` does first). Always run.
``device`` (a multi-reader table: ``device[N] (NAME)``, one line a reader)
    ``profile+serial://PATH?profile=NAME``: the device profile and its code table load and
    pass every check (``drivers/profile.py``: the file, the field and the reason otherwise),
    then the port is checked as for ``serial://``.
    ``serial://PATH``: the path exists and pyserial opens it read/write, exclusively (as the
    driver does), within the timeout; a busy port fails. ``socket://HOST:PORT``: a TCP
    connect within the timeout. ``pepper://`` / ``pepper+serial://``: the reader profile and
    code table load, the port opens and the Pepper C1 answers a poll within the timeout.
``broker``
    For every configured URL (they are fail-over alternatives; each should work): an MQTT
    CONNECT with the configured protocol, user name, password and TLS is answered by a
    CONNACK accepting it. Uses its own client id, so a running controller is not kicked off.
``journal``
    The journal's directory exists and this user may write in it (SQLite WAL needs side
    files), or, as ``tablectl run`` creates a missing directory, the closest existing
    ancestor is a directory this user may write in. Run the command as the service user
    (``sudo -u tablectl``) for this to mean anything.

With ``--offline`` only ``config`` is checked (for CI, or preparing a config elsewhere).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from controller.errors import ConfigError, TablectlError

if TYPE_CHECKING:
    from controller.broker import BrokerAddress
    from controller.mqtt.settings import MqttSettings
    from controller.settings import TableSettings
    from drivers.mqtt_reader import MqttReaderSource
    from drivers.source import CardSource, DriverSettings, ProfileSpec

Verdict = Literal["OK", "FAIL", "SKIP"]

DEFAULT_TIMEOUT = 5.0

_AUTH_CODES = (0x86, 0x87, 4, 5)
"""CONNACK codes meaning the credentials were refused (v5 0x86/0x87, v3.1.1 4/5)."""


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one check.

    Attributes:
        name: What was checked (``config``, ``device``, ``broker``, ``journal``).
        verdict: ``OK``, ``FAIL`` or ``SKIP``.
        detail: What was found, or what was wrong and where.
    """

    name: str
    verdict: Verdict
    detail: str

    @property
    def failed(self) -> bool:
        """Whether this check found a fault."""
        return self.verdict == "FAIL"

    def line(self) -> str:
        """The output line: ``FAIL  device: ...``."""
        return f"{self.verdict:<5} {self.name}: {self.detail}"


# --- config --------------------------------------------------------------------------------


def check_config(path: str | Path) -> tuple[Check, TableSettings | None]:
    """Load and validate the table config the way ``tablectl run`` does before starting.

    Returns:
        The check, and the settings when they loaded.
    """
    from controller.games.registry import make_live_game
    from controller.settings import load_settings

    try:
        settings = load_settings(path)
    except ConfigError as exc:
        return Check("config", "FAIL", str(exc)), None
    try:
        make_live_game(settings.game, settings.game_options, settings.paytables)
    except TablectlError as exc:
        field = exc.context.get("field", "paytables")
        return Check("config", "FAIL", f"{path}: {field}: {exc}"), settings
    detail = f"{path} (table {settings.table_id}, game {settings.game})"
    return Check("config", "OK", detail), settings


# --- device --------------------------------------------------------------------------------


def _open_serial(path: str, baud: int) -> None:
    import serial

    port = serial.Serial()
    port.port = path
    port.baudrate = baud
    port.exclusive = True
    # Do not raise DTR/RTS: many boards reset when DTR goes up.
    port.dtr = False
    port.rts = False
    port.open()
    port.close()


async def check_device(url: str, driver: DriverSettings, timeout: float) -> Check:  # noqa: ASYNC109
    """Whether the card source named by ``url`` can be opened now."""
    from drivers.errors import DriverError
    from drivers.source import parse_url

    try:
        spec = parse_url(url, driver.baud)
    except DriverError as exc:
        return Check("device", "FAIL", f"{url}: {exc}")
    if spec.kind == "serial":
        return await _check_serial(url, spec.device, spec.port_url, spec.baud, timeout)
    if spec.kind == "socket":
        return await _check_socket(url, spec.device, timeout)
    if spec.kind == "profile+serial":
        return await _check_profile_device(url, spec, driver, timeout)
    # Any other transport (usb://): open it with the real driver, the way `run` would.
    from drivers.source import open_card_source

    try:
        source = open_card_source(url, driver)
    except DriverError as exc:  # a profile or code table that does not load
        return Check("device", "FAIL", f"{url}: {exc}")
    answered = await _check_answering(spec.kind, url, source, timeout)
    if answered is not None:
        return answered
    try:
        await asyncio.wait_for(source.open(), timeout)
    except TimeoutError:
        return Check("device", "FAIL", f"{url}: opening took longer than {timeout} s")
    except DriverError as exc:
        return Check("device", "FAIL", f"{url}: {exc}")
    finally:
        with contextlib.suppress(Exception):
            await source.close()
    if spec.kind == "pcsc":
        from drivers.pcsc_source import PcscCardSource

        assert isinstance(source, PcscCardSource)
        table = source.table
        return Check(
            "device",
            "OK",
            f"{url}: PC/SC reader {source.reader!r} found through pcscd; profile "
            f"{source.profile.name}, code table {table.name!r} ({len(table.codes)} tags)",
        )
    return Check("device", "OK", f"{url}: the {spec.kind} device opens")


async def _check_answering(
    kind: str,
    url: str,
    source: CardSource,
    timeout: float,  # noqa: ASYNC109
) -> Check | None:
    """The check of a reader that must answer (not only open); ``None`` for other kinds."""
    if kind == "mqtt-reader":
        from drivers.mqtt_reader import MqttReaderSource

        assert isinstance(source, MqttReaderSource)
        return await _check_mqtt_reader(url, source, timeout)
    if kind in ("pepper", "pepper+serial"):
        return await _check_pepper(url, source, timeout)
    return None


async def _check_pepper(url: str, source: CardSource, timeout: float) -> Check:  # noqa: ASYNC109
    """The port opens and the Pepper C1 answers a poll (its first reply) within the timeout."""
    from drivers.errors import DriverError
    from drivers.pepper_source import PepperCardSource

    assert isinstance(source, PepperCardSource)
    try:
        async with asyncio.timeout(timeout):
            await source.open()
            await source.answered()  # the first poll's reply
    except TimeoutError:
        return Check("device", "FAIL", f"{url}: no Pepper C1 answered within {timeout} s")
    except DriverError as exc:
        return Check("device", "FAIL", f"{url}: {exc}")
    finally:
        with contextlib.suppress(Exception):
            await source.close()
    table = source.table
    return Check(
        "device",
        "OK",
        f"{url}: the Pepper C1 answers; profile {source.profile.name}, code table "
        f"{table.name!r} ({len(table.codes)} tags)"
        if table is not None
        else f"{url}: the Pepper C1 answers",
    )


async def _check_mqtt_reader(url: str, source: MqttReaderSource, timeout: float) -> Check:  # noqa: ASYNC109
    """The readers' broker accepts the connection and the subscription to their topic.

    A reader that publishes nothing is not a failure (no tag lies on it now); the line says
    how many tags the code table knows, so a wrong deck shows.
    """
    from drivers.errors import DriverError

    table = source.core.table
    known = f"code table {table.name!r} ({len(table.codes)} tags)" if table is not None else ""
    try:
        await asyncio.wait_for(source.open(), timeout)
    except TimeoutError:
        return Check("device", "FAIL", f"{url}: the readers' broker did not answer in {timeout} s")
    except DriverError as exc:
        return Check("device", "FAIL", f"{url}: {exc}")
    finally:
        with contextlib.suppress(Exception):
            await source.close()
    return Check("device", "OK", f"{url}: broker connected, reader topic subscribed; {known}")


async def _check_reader(
    index: int,
    name: str | None,
    url: str,
    driver: DriverSettings,
    timeout: float,  # noqa: ASYNC109
) -> Check:
    """One reader of a multi-reader table (``[[devices]]``), checked as a device."""
    check = await check_device(url, driver, timeout)
    label = f"device[{index}] ({name or f'reader-{index + 1}'})"
    return Check(label, check.verdict, check.detail)


async def _check_profile_device(
    url: str,
    spec: ProfileSpec,
    driver: DriverSettings,
    timeout: float,  # noqa: ASYNC109
) -> Check:
    """A device profile and its code table load and check, then the port opens."""
    from drivers.profile import ProfileError, load_profile

    try:
        loaded = load_profile(spec.profile, spec.codes)
    except ProfileError as exc:
        return Check("device", "FAIL", f"{url}: {exc}")
    port = await _check_serial(
        url, spec.device, spec.port_url, spec.baud or loaded.profile.baud or driver.baud, timeout
    )
    summary = (
        f"profile {loaded.profile.name} ({loaded.path}), code table {loaded.table.name!r} "
        f"with {len(loaded.table.codes)} codes"
    )
    return Check("device", port.verdict, f"{summary}; {port.detail}")


async def _check_serial(url: str, device: str, port_url: str, baud: int, timeout: float) -> Check:  # noqa: ASYNC109
    """Whether the serial port ``device`` exists and opens read/write."""
    path = Path(device)
    if not await asyncio.to_thread(path.exists):
        return Check(
            "device",
            "FAIL",
            f"{url}: {path} does not exist (scanner plugged in? udev rule installed?)",
        )
    try:
        await asyncio.wait_for(asyncio.to_thread(_open_serial, port_url, baud), timeout)
    except TimeoutError:
        return Check("device", "FAIL", f"{url}: opening {path} took longer than {timeout} s")
    except (OSError, ValueError) as exc:  # serial.SerialException is an OSError
        return Check("device", "FAIL", f"{url}: cannot open {path} read/write: {exc}")
    return Check("device", "OK", f"{url}: {path} opens read/write at {baud} baud")


async def _check_socket(url: str, device: str, timeout: float) -> Check:  # noqa: ASYNC109
    """Whether the TCP address ``device`` (``host:port``) accepts a connection."""
    host, _, port_text = device.rpartition(":")
    host = host.strip("[]")
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, int(port_text))
    except TimeoutError:
        return Check("device", "FAIL", f"{url}: no TCP connection within {timeout} s")
    except OSError as exc:
        return Check("device", "FAIL", f"{url}: TCP connect failed: {exc.strerror or exc}")
    writer.close()
    with contextlib.suppress(TimeoutError, OSError):
        await asyncio.wait_for(writer.wait_closed(), timeout)
    return Check("device", "OK", f"{url}: TCP connect to {device} accepted")


# --- broker --------------------------------------------------------------------------------


def _quiet_logger() -> logging.Logger:
    logger = logging.getLogger("tablectl.checkconfig.mqtt")
    logger.setLevel(logging.CRITICAL)
    logger.propagate = False
    return logger


async def check_broker(
    address: BrokerAddress,
    mqtt: MqttSettings,
    timeout: float,  # noqa: ASYNC109
) -> Check:
    """Whether the broker at ``address`` accepts a connection with the table's credentials."""
    import aiomqtt
    from paho.mqtt.reasoncodes import ReasonCode

    from controller.mqtt.settings import tls_context

    where = address.url
    password = mqtt.password.get_secret_value() if mqtt.password is not None else None
    protocol = aiomqtt.ProtocolVersion.V5 if mqtt.protocol == "5" else aiomqtt.ProtocolVersion.V311
    client = aiomqtt.Client(
        address.host,
        address.port,
        username=mqtt.username,
        password=password,
        identifier=f"tablectl-check-{uuid.uuid4().hex[:12]}",
        protocol=protocol,
        tls_context=tls_context(mqtt) if address.tls else None,
        timeout=timeout,
        keepalive=max(5, int(timeout) + 1),
        logger=_quiet_logger(),
    )
    who = f" as {mqtt.username!r}" if mqtt.username else " anonymously"
    try:
        async with asyncio.timeout(timeout), client:
            pass
    except aiomqtt.MqttCodeError as exc:
        rc = exc.rc
        reason = rc.getName() if isinstance(rc, ReasonCode) else f"return code {rc}"
        hint = " (user name, password or ACL?)" if rc in _AUTH_CODES else ""
        return Check(
            "broker",
            "FAIL",
            f"{where}: the broker refused the connection{who}: {reason}{hint}",
        )
    except TimeoutError:
        return Check("broker", "FAIL", f"{where}: no CONNACK within {timeout} s")
    except (aiomqtt.MqttError, OSError) as exc:
        return Check("broker", "FAIL", f"{where}: cannot connect: {exc}")
    tls = ", TLS" if address.tls else ""
    return Check("broker", "OK", f"{where}: connection accepted{who} (MQTT {mqtt.protocol}{tls})")


def _table_running(journal: Path) -> bool:
    from controller.journal.opening import in_use

    return in_use(journal)


async def _running_skip(address: BrokerAddress, settings: TableSettings) -> Check:
    """The broker check left out: the table runs, and its user's session is its outbox's."""
    who = f"as {settings.mqtt.username!r} " if settings.mqtt.username else ""
    return Check(
        "broker",
        "SKIP",
        f"{address.url}: not checked: table {settings.table_id} is running (its journal "
        f"{settings.journal.path} is locked), and connecting {who}on a broker that binds client "
        "ids to users (the shipped one) would take over the running table's session; its "
        "connection shows in its status topic (tablectl watch)",
    )


# --- journal -------------------------------------------------------------------------------


def _nearest_existing(folder: Path) -> Path:
    """``folder`` or its closest ancestor that exists."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate
    return Path(folder.anchor or ".")


def check_journal(path: Path) -> Check:
    """Whether the journal can be created or opened for writing by this user.

    ``tablectl run`` creates a missing journal directory (and its parents), so a missing
    directory is fine when the closest existing ancestor is a directory this user may write in.
    """
    folder = path.parent if str(path.parent) else Path()
    if not folder.is_dir():
        base = _nearest_existing(folder)
        if not base.is_dir():
            return Check("journal", "FAIL", f"{path}: {base} is not a directory")
        if not os.access(base, os.W_OK | os.X_OK):
            return Check(
                "journal",
                "FAIL",
                f"{path}: directory {folder} does not exist and {base} is not writable by this "
                "user, so it cannot be created",
            )
        return Check("journal", "OK", f"{path}: directory {folder} will be created (in {base})")
    if not os.access(folder, os.W_OK | os.X_OK):
        return Check("journal", "FAIL", f"{path}: directory {folder} is not writable by this user")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        return Check("journal", "FAIL", f"{path}: exists but is not readable and writable")
    state = "exists" if path.exists() else "will be created"
    return Check("journal", "OK", f"{path}: {state}, directory writable")


# --- all of it -----------------------------------------------------------------------------


async def run_checks(
    path: str | Path,
    *,
    offline: bool = False,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109
) -> list[Check]:
    """Every check for one config file, in output order."""
    config, settings = check_config(path)
    checks = [config]
    if settings is None or offline:
        return checks
    if settings.device is not None:
        devices = [check_device(settings.device.url, settings.device.driver, timeout)]
    else:
        assert settings.devices is not None
        devices = [
            _check_reader(index, reader.name, reader.url, reader.driver, timeout)
            for index, reader in enumerate(settings.devices)
        ]
    if _table_running(settings.journal.path):
        brokers = [_running_skip(address, settings) for address in settings.mqtt.addresses]
    else:
        brokers = [
            check_broker(address, settings.mqtt, timeout) for address in settings.mqtt.addresses
        ]
    results = await asyncio.gather(*devices, *brokers)
    checks.extend(results)
    checks.append(check_journal(settings.journal.path))
    return checks
