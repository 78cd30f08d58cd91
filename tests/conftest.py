"""Shared fixtures: a real Mosquitto broker, and hypothesis profiles.

``mosquitto`` (one per test) can be stopped, killed and restarted for outage tests;
``mosquitto_session`` is one broker shared by the tests that just need a broker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

MOSQUITTO_CANDIDATES = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto")


def find_mosquitto() -> str:
    """The Mosquitto binary, or a failure saying how to get one."""
    for candidate in (os.environ.get("MOSQUITTO_BIN"), *MOSQUITTO_CANDIDATES):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("mosquitto")
    if found:
        return found
    pytest.fail(
        "mosquitto binary not found (looked in MOSQUITTO_BIN, /usr/sbin, /usr/local/sbin and "
        "PATH): install it (`apt-get install mosquitto`, or run `make test`, which does)",
        pytrace=False,
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _user_name() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


class MosquittoBroker:
    """A real Mosquitto on a loopback port of its own, with its own config and persistence.

    Attributes:
        host: ``127.0.0.1``.
        port: The port (the same across restarts).
        url: ``mqtt://127.0.0.1:PORT``.
        workdir: Config, persistence and the captured stderr live here.
    """

    def __init__(self, workdir: Path, binary: str) -> None:
        self.host = "127.0.0.1"
        self.port = _free_port()
        self.url = f"mqtt://{self.host}:{self.port}"
        self.workdir = workdir
        self.binary = binary
        self.persistence = workdir / "data"
        self.persistence.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "mosquitto.conf"
        self.stderr_path = workdir / "mosquitto.stderr"
        self.config.write_text(
            "\n".join(
                [
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
                    "",
                ]
            )
        )
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 10.0) -> None:
        """Start the broker and wait until it accepts TCP connections."""
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
                pytest.fail(
                    f"mosquitto exited with {self.process.returncode} at start:\n{self.log()}",
                    pytrace=False,
                )
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.host, self.port), timeout=0.5),
            ):
                return
            time.sleep(0.02)
        self.kill()
        pytest.fail(
            f"mosquitto did not accept connections on {self.url} within {timeout} s:\n{self.log()}",
            pytrace=False,
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


@contextlib.contextmanager
def _broker(workdir: Path) -> Iterator[MosquittoBroker]:
    broker = MosquittoBroker(workdir, find_mosquitto())
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture
def mosquitto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MosquittoBroker]:
    """A Mosquitto of this test's own (stop/start/restart it at will)."""
    with _broker(tmp_path_factory.mktemp("mosquitto")) as broker:
        yield broker


@pytest.fixture(scope="session")
def mosquitto_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MosquittoBroker]:
    """One Mosquitto shared by the session's tests (do not stop it)."""
    with _broker(tmp_path_factory.mktemp("mosquitto-session")) as broker:
        yield broker
