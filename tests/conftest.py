"""Shared fixtures: a real Mosquitto broker, and hypothesis profiles.

``mosquitto`` (one per test) can be stopped, killed and restarted for outage tests;
``mosquitto_session`` is one broker shared by the tests that just need a broker.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.mosquitto import MosquittoError, MosquittoProcess
from tests.support.mosquitto import find_mosquitto as _find_mosquitto

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def find_mosquitto() -> str:
    """The Mosquitto binary (``MOSQUITTO_BIN`` first), or a failure saying how to get one."""
    try:
        return _find_mosquitto()
    except MosquittoError:
        pytest.fail(
            "mosquitto binary not found (looked in MOSQUITTO_BIN, /usr/sbin, /usr/local/sbin "
            "and PATH): install it (`apt-get install mosquitto`, or run `make test`, which does)",
            pytrace=False,
        )


class MosquittoBroker(MosquittoProcess):
    """The shared :class:`tests.support.mosquitto.MosquittoProcess`, failing tests cleanly."""

    def __init__(self, workdir: Path, binary: str) -> None:
        super().__init__(workdir, binary=binary)

    def start(self, timeout: float = 10.0) -> None:
        """Start it; a broker that does not come up fails the test with its log."""
        try:
            super().start(timeout)
        except MosquittoError as exc:
            pytest.fail(str(exc), pytrace=False)


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
