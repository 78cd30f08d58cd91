"""A private Mosquitto process on a loopback port, for tests, benchmarks and chaos runs.

Production tables talk to the studio's broker; this starts the real ``mosquitto`` binary with
a config of its own (in a work directory), so tests and benchmarks never depend on, or
disturb, a broker someone else runs. Test support: not part of the product.

The binaries are found here once for every user (``MOSQUITTO_BIN`` first, then the PATH, then
``/usr/sbin``, ``/usr/local/sbin``): the fixtures in ``tests/conftest.py``, the brokers with
ACLs and TLS in ``tests/integration/_secure_broker.py``, the chaos run and the benchmarks.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from controller.errors import TablectlError

DEFAULT_BINARY_PATHS = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto")
DEFAULT_PASSWD_PATHS = ("/usr/bin/mosquitto_passwd", "/usr/local/bin/mosquitto_passwd")
MISSING = "needs mosquitto and mosquitto_passwd (apt-get install mosquitto)"
"""The reason of a test skipped for want of Mosquitto."""


class MosquittoError(TablectlError):
    """The Mosquitto process cannot be found, started or stopped."""


def find_mosquitto() -> str:
    """The path of the ``mosquitto`` binary (``MOSQUITTO_BIN`` first).

    Raises:
        MosquittoError: Not installed (``apt-get install mosquitto``).
    """
    override = os.environ.get("MOSQUITTO_BIN")
    if override and os.access(override, os.X_OK):
        return override
    found = shutil.which("mosquitto")
    if found:
        return found
    for candidate in DEFAULT_BINARY_PATHS:
        if os.access(candidate, os.X_OK):
            return candidate
    raise MosquittoError("mosquitto is not installed (apt-get install mosquitto)")


def find_mosquitto_passwd() -> str:
    """The path of ``mosquitto_passwd`` (beside ``MOSQUITTO_BIN`` first).

    Raises:
        MosquittoError: Not installed (``apt-get install mosquitto``).
    """
    override = os.environ.get("MOSQUITTO_BIN")
    candidates: list[str] = []
    if override:
        candidates.append(str(Path(override).with_name("mosquitto_passwd")))
    found = shutil.which("mosquitto_passwd")
    if found:
        candidates.append(found)
    candidates.extend(DEFAULT_PASSWD_PATHS)
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return candidate
    raise MosquittoError("mosquitto_passwd is not installed (apt-get install mosquitto)")


def have_mosquitto() -> bool:
    """Whether ``mosquitto`` and ``mosquitto_passwd`` are both installed."""
    try:
        find_mosquitto()
        find_mosquitto_passwd()
    except MosquittoError:
        return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "root"


class MosquittoProcess:
    """A real Mosquitto on a loopback port of its own, with its own config and persistence.

    Args:
        workdir: Config, persistence and the captured stderr live here.
        extra_config: Lines appended to the generated config.
        binary: The ``mosquitto`` binary (found on the PATH by default).

    Attributes:
        host: ``127.0.0.1``.
        port: The port (the same across restarts).
        url: ``mqtt://127.0.0.1:PORT``.
    """

    def __init__(self, workdir: Path, *, extra_config: str = "", binary: str | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = free_port(self.host)
        self.url = f"mqtt://{self.host}:{self.port}"
        self.workdir = workdir
        self.binary = binary or find_mosquitto()
        self.persistence = workdir / "data"
        self.persistence.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "mosquitto.conf"
        self.stderr_path = workdir / "mosquitto.stderr"
        lines = [
            f"listener {self.port} {self.host}",
            "allow_anonymous true",
            "persistence true",
            f"persistence_location {self.persistence}/",
            "autosave_interval 1",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "max_queued_messages 100000",
            "max_inflight_messages 100",
            # Without it the broker's small PUBACKs wait for Nagle + delayed ACK
            # (~40 ms stalls when several QoS 1 messages are in flight).
            "set_tcp_nodelay true",
            f"user {_user_name()}",
            extra_config,
            "",
        ]
        self.config.write_text("\n".join(lines))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 10.0) -> None:
        """Start the broker and wait until it accepts TCP connections.

        Raises:
            MosquittoError: It exited or did not listen in time; the message has its log.
        """
        if self.running:
            return
        with self.stderr_path.open("ab") as stderr:
            self.process = subprocess.Popen(
                [self.binary, "-c", str(self.config)],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise MosquittoError(
                    f"mosquitto exited with {self.process.returncode} at start:\n{self.log()}",
                    url=self.url,
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.host, self.port), timeout=0.5),
            ):
                return
            time.sleep(0.02)
        self.kill()
        raise MosquittoError(
            f"mosquitto did not accept connections within {timeout} s:\n{self.log()}",
            url=self.url,
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop it gracefully (SIGTERM: sessions and queued messages are saved to disk)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        self.process = None

    def kill(self) -> None:
        """Kill it abruptly (SIGKILL: what was not saved yet is lost)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self.process = None

    def restart(self) -> None:
        """Stop gracefully and start again on the same port with the same persistence."""
        self.stop()
        self.start()

    def log(self) -> str:
        """What the broker wrote to stderr so far."""
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> MosquittoProcess:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()
