"""systemd integration: ``sd_notify`` readiness, status and the watchdog, without libsystemd.

systemd starts ``tablectl run`` with ``Type=notify``: it passes the address of a unix datagram
socket in ``$NOTIFY_SOCKET`` and waits for ``READY=1`` before it considers the table started.
With ``WatchdogSec=`` it also sets ``$WATCHDOG_USEC`` (and ``$WATCHDOG_PID``) and restarts the
service when no ``WATCHDOG=1`` arrives within that interval.

:func:`run_watchdog` sends ``WATCHDOG=1`` at half the interval, but only while the table's
``is_healthy()`` check says so. Two failures therefore get the table restarted:

* a wedged event loop (the task never runs, so nothing is sent);
* a component the check reports dead (e.g. the publisher task ended, the driver gave up).

Outside systemd (no ``$NOTIFY_SOCKET``) every function here is a cheap no-op returning
``False``; so is a failing send (logged, never raised: readiness reporting must not take a
table down).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable

import structlog

_log = structlog.get_logger(__name__)

_UNHEALTHY_LOG_EVERY = 10
"""While unhealthy, log one warning every this many skipped pings."""


def _address() -> str | None:
    """The notify socket's address from ``$NOTIFY_SOCKET``, or ``None``.

    A leading ``@`` names a socket in the abstract namespace (a leading NUL byte).
    """
    raw = os.environ.get("NOTIFY_SOCKET")
    if not raw:
        return None
    if raw.startswith("@"):
        return "\0" + raw[1:]
    if raw.startswith("/"):
        return raw
    return None  # vsock:// and other forms systemd may use for VMs: not supported here


def notify(state: str) -> bool:
    """Send one notification (``"READY=1"``, ``"STATUS=..."``, ``"WATCHDOG=1"``...).

    Args:
        state: Newline-separated ``KEY=VALUE`` assignments (see ``man sd_notify``).

    Returns:
        ``True`` if it was handed to systemd; ``False`` without ``$NOTIFY_SOCKET`` (not under
        systemd) or when the send failed (logged).
    """
    address = _address()
    if address is None:
        if os.environ.get("NOTIFY_SOCKET"):
            _log.warning("notify_socket_unsupported", address=os.environ["NOTIFY_SOCKET"])
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(state.encode("utf-8"), address)
    except OSError as exc:
        _log.warning(
            "sd_notify_failed",
            state=state.split("\n", 1)[0],
            address=address.replace("\0", "@"),
            error=str(exc),
        )
        return False
    return True


def ready(status: str | None = None) -> bool:
    """Tell systemd the table is up (device open, journal open, broker connected)."""
    return notify("READY=1" if status is None else f"READY=1\nSTATUS={_one_line(status)}")


def stopping(status: str | None = None) -> bool:
    """Tell systemd the table is shutting down (e.g. finishing the started round)."""
    return notify("STOPPING=1" if status is None else f"STOPPING=1\nSTATUS={_one_line(status)}")


def status(text: str) -> bool:
    """Set the one-line status ``systemctl status`` shows (e.g. ``"round 123: dealing"``)."""
    return notify(f"STATUS={_one_line(text)}")


def extend_timeout(seconds: float) -> bool:
    """Ask systemd for ``seconds`` more before it gives up on a start or stop in progress.

    Use while finishing a started round after SIGTERM takes longer than expected.
    """
    return notify(f"EXTEND_TIMEOUT_USEC={max(0, int(seconds * 1_000_000))}")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def watchdog_interval() -> float | None:
    """The watchdog interval in seconds systemd expects pings within, or ``None``.

    ``None`` when ``$WATCHDOG_USEC`` is missing, not a positive integer, or when
    ``$WATCHDOG_PID`` names another process (the variable was inherited, not meant for us).
    """
    raw = os.environ.get("WATCHDOG_USEC")
    if not raw:
        return None
    pid = os.environ.get("WATCHDOG_PID")
    if pid:
        try:
            if int(pid) != os.getpid():
                return None
        except ValueError:
            return None
    try:
        usec = int(raw)
    except ValueError:
        return None
    if usec <= 0:
        return None
    return usec / 1_000_000


async def run_watchdog(is_healthy: Callable[[], bool], interval: float | None) -> None:
    """Ping the systemd watchdog at half ``interval`` while ``is_healthy()``; run until cancelled.

    Args:
        is_healthy: A quick, non-blocking check of the table (publisher task alive, driver not
            given up...). An exception from it counts as unhealthy.
        interval: The watchdog interval in seconds (:func:`watchdog_interval`); ``None`` or
            zero returns at once (no watchdog configured).
    """
    if interval is None or interval <= 0:
        return
    period = interval / 2
    skipped = 0
    while True:
        try:
            healthy = bool(is_healthy())
        except Exception as exc:  # a broken check must not kill the watchdog task
            _log.warning("watchdog_check_failed", error=repr(exc))
            healthy = False
        if healthy:
            if skipped:
                _log.info("watchdog_healthy_again", skipped_pings=skipped)
            skipped = 0
            notify("WATCHDOG=1")
        else:
            if skipped % _UNHEALTHY_LOG_EVERY == 0:
                _log.warning(
                    "watchdog_ping_withheld",
                    reason="table reports unhealthy",
                    skipped_pings=skipped + 1,
                    interval_seconds=interval,
                )
            skipped += 1
        await asyncio.sleep(period)
