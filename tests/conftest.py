"""Shared fixtures: a real Mosquitto broker, hypothesis profiles, and the fast tier.

``mosquitto`` (one per test) can be stopped, killed and restarted for outage tests;
``mosquitto_session`` is one broker shared by the tests that just need a broker.

The fast tier (``make test-fast``, ``pytest --fast``) is what a developer runs on every
change: tests/unit and the tests marked ``fast`` elsewhere (the same end-to-end tests on the
in-memory null modem and broker: ``drivers/memory.py``, ``controller/mqtt/memory.py``),
without any test marked ``infra`` or ``slow`` (exhaustive counts: the whole suite runs them),
with 25 hypothesis examples a test instead of 100. A test is ``infra`` when it uses a fixture
that starts Mosquitto, PostgreSQL or Chromium (marked here, from its fixtures) or is marked so
by hand (a pty, a child process). Under ``--fast`` a test that opens a pty or starts a process
anyway fails, saying to mark it: the tier's promise is checked, not assumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from hypothesis import HealthCheck, settings

from tests.support.mosquitto import MosquittoError, MosquittoProcess
from tests.support.mosquitto import find_mosquitto as _find_mosquitto

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fast", deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# `tablectl run --simulate` starts a studio on 8080 unless told otherwise, and a taken port is an
# error: the suite's tables (several at once under xdist, and a developer's `make run`) take a
# free port each. A test of the port itself passes --studio-port.
os.environ["TABLECTL_STUDIO_HTTP__PORT"] = "0"

INFRA_FIXTURES = frozenset(
    {"mosquitto", "mosquitto_session", "postgres_cluster", "archive_db", "browser"}
)
"""Fixtures that start Mosquitto, PostgreSQL or Chromium: their tests are ``infra``."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier: tests/unit and tests marked fast, no infra test (make test-fast)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """The fast tier draws 25 hypothesis examples a test (the whole suite: 100)."""
    if config.getoption("--fast") and "HYPOTHESIS_PROFILE" not in os.environ:
        settings.load_profile("fast")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``infra`` from the fixtures; under ``--fast`` keep the fast tier only."""
    unit = Path(__file__).parent / "unit"
    for item in items:
        if INFRA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.infra)
    if not config.getoption("--fast"):
        # The slow ones first: on workers the suite then ends on short tests, not on a
        # minute-long one started last.
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        in_tier = unit in item.path.parents or item.get_closest_marker("fast") is not None
        excluded = item.get_closest_marker("infra") or item.get_closest_marker("slow")
        if in_tier and excluded is None:
            keep.append(item)
        else:
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _refuse(what: str) -> Any:
    def refuse(*args: object, **kwargs: object) -> NoReturn:
        pytest.fail(
            f"the fast tier (--fast) never {what}: mark this test @pytest.mark.infra",
            pytrace=False,
        )

    return refuse


@pytest.fixture(autouse=True)
def _fast_tier_keeps_its_promise(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``--fast``: no pty and no child process (Mosquitto, PostgreSQL and Chromium
    come through their fixtures, whose tests are not collected)."""
    if not request.config.getoption("--fast"):
        return
    monkeypatch.setattr(os, "openpty", _refuse("opens a pty"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refuse("starts a process"))
    monkeypatch.setattr(asyncio, "create_subprocess_exec", _refuse("starts a process"))


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
