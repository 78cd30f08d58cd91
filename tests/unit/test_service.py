"""sd_notify and the watchdog, against a real unix datagram socket standing in for systemd."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from controller import service


class FakeSystemd:
    """A bound unix datagram socket: what systemd listens on for notifications."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.setblocking(False)

    def pending(self) -> list[str]:
        out = []
        while True:
            try:
                out.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return out

    async def receive(self) -> str:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(10):
            data = await loop.sock_recv(self.sock, 4096)
        return data.decode()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSystemd]:
    path = tmp_path / "notify.sock"
    assert len(str(path)) < 100, "unix socket path too long for this test"
    fake = FakeSystemd(str(path))
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    yield fake
    fake.close()


def test_without_notify_socket_everything_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert service.notify("READY=1") is False
    assert service.ready() is False
    assert service.status("x") is False
    assert service.stopping() is False


def test_ready_status_stopping(systemd: FakeSystemd) -> None:
    assert service.ready()
    assert service.status("round 12:\n dealing  A2")
    assert service.stopping("finishing round 12")
    assert service.extend_timeout(1.5)
    assert service.ready("up")
    assert systemd.pending() == [
        "READY=1",
        "STATUS=round 12: dealing A2",
        "STOPPING=1\nSTATUS=finishing round 12",
        "EXTEND_TIMEOUT_USEC=1500000",
        "READY=1\nSTATUS=up",
    ]


def test_abstract_namespace_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"tablectl-test-{uuid.uuid4().hex}"
    fake = FakeSystemd("\0" + name)
    try:
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert service.notify("READY=1")
        assert fake.pending() == ["READY=1"]
        # Not the same as a file called "@name" or "name".
        monkeypatch.setenv("NOTIFY_SOCKET", name)
        assert service.notify("READY=1") is False
        assert fake.pending() == []
    finally:
        fake.close()


def test_dead_socket_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "nobody-listens.sock"))
    assert service.notify("READY=1") is False


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [
        (None, None, None),
        ("30000000", None, 30.0),
        ("30000000", "self", 30.0),
        ("30000000", "other", None),
        ("30000000", "junk", None),
        ("0", None, None),
        ("-5", None, None),
        ("abc", None, None),
        ("500", None, 0.0005),
    ],
)
def test_watchdog_interval(
    monkeypatch: pytest.MonkeyPatch, usec: str | None, pid: str | None, expected: float | None
) -> None:
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    if usec is not None:
        monkeypatch.setenv("WATCHDOG_USEC", usec)
    if pid == "self":
        monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    elif pid == "other":
        monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))
    elif pid is not None:
        monkeypatch.setenv("WATCHDOG_PID", pid)
    assert service.watchdog_interval() == expected


async def test_no_interval_returns_at_once() -> None:
    await asyncio.wait_for(service.run_watchdog(lambda: True, None), 5)
    await asyncio.wait_for(service.run_watchdog(lambda: True, 0.0), 5)


class Health:
    """A health check the test flips, counting its calls."""

    def __init__(self, healthy: bool) -> None:
        self.healthy = healthy
        self.calls = 0
        self.called = asyncio.Event()
        self.boom = False

    def __call__(self) -> bool:
        self.calls += 1
        self.called.set()
        if self.boom:
            raise RuntimeError("check broke")
        return self.healthy

    async def wait_calls(self, n: int) -> None:
        target = self.calls + n
        async with asyncio.timeout(10):
            while self.calls < target:
                self.called.clear()
                await self.called.wait()


@contextlib.asynccontextmanager
async def watchdog(health: Health, interval: float) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(service.run_watchdog(health, interval))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_watchdog_pings_only_while_healthy(systemd: FakeSystemd) -> None:
    health = Health(healthy=True)
    async with watchdog(health, interval=0.04) as task:
        assert await systemd.receive() == "WATCHDOG=1"
        assert await systemd.receive() == "WATCHDOG=1"

        # Unhealthy: after several checks said no, nothing at all was sent.
        health.healthy = False
        await health.wait_calls(1)  # the check that may already be in flight
        systemd.pending()
        await health.wait_calls(4)
        assert systemd.pending() == []

        # A check that raises counts as unhealthy and does not end the task.
        health.boom = True
        await health.wait_calls(3)
        assert systemd.pending() == []
        assert not task.done()

        # Healthy again: pings resume.
        health.boom = False
        health.healthy = True
        assert await systemd.receive() == "WATCHDOG=1"


async def test_a_wedged_loop_sends_nothing(systemd: FakeSystemd) -> None:
    """The pings come from the event loop: while it is blocked, none are sent."""
    health = Health(healthy=True)
    async with watchdog(health, interval=0.02):
        assert await systemd.receive() == "WATCHDOG=1"
        systemd.pending()
        calls_before = health.calls
        # Block the loop (as a wedged coroutine would) for many periods.
        import time

        time.sleep(0.2)  # noqa: ASYNC251 (the point: a blocked loop)
        assert health.calls == calls_before
        assert systemd.pending() == []
