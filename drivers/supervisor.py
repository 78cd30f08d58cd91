"""A card source that survives its device going away: reconnection with capped backoff.

:class:`SupervisedCardSource` wraps the source a URL names (serial, TCP or USB) and gives the
orchestrator the same :class:`~drivers.source.CardSource` interface. When the link fails
(:class:`~drivers.errors.ConnectionLost`, :class:`~drivers.errors.HeartbeatLost`, any
transport error or timeout), it closes the source and reopens it with capped, jittered
exponential backoff. The device's state comes out of :meth:`SupervisedCardSource.next_read`
in order with the cards, as :class:`~drivers.source.DeviceStatus` reads the orchestrator
journals: ``connected`` (first open), ``lost`` (with the reason) and ``recovered`` (with how
long the device was away and how many attempts it took).

A device whose reads do not survive its absence (a line-oriented or HID device: nothing
retransmits a record) is followed, after ``recovered``, by ``Misread("away")``: a card read
while it was away is lost, and the table asks for it again.

Commands sent while the device is away raise :class:`~drivers.errors.DeviceAway` (nothing
is dropped silently); the orchestrator sends its EXPECT again after ``recovered``.
Reconnection happens inside ``next_read`` (no background task): a cancelled ``next_read``
resumes the backoff where it was.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any, Literal

import structlog

from drivers.codec import LedColor
from drivers.errors import DeviceAway, DeviceTimeout, DriverError, TransportError
from drivers.source import (
    CardSource,
    DeviceStatus,
    DriverSettings,
    Misread,
    Read,
    open_card_source,
)

State = Literal["closed", "connected", "away", "probing"]

CONNECTED = "connected"
LOST = "lost"
RECOVERED = "recovered"
AWAY: Literal["away"] = "away"


def backoff_delay(
    attempt: int, minimum: float, maximum: float, jitter: float, rng: random.Random
) -> float:
    """The delay before reconnection attempt ``attempt`` (0-based).

    ``minimum * 2**attempt`` capped at ``maximum``, of which a share ``jitter`` is drawn at
    random (so many tables losing one switch do not all come back in step).
    """
    nominal = min(maximum, minimum * 2.0 ** min(attempt, 32))
    return float(nominal * (1.0 - jitter * rng.random()))


class SupervisedCardSource:
    """A card source that reconnects by itself.

    Args:
        url: The device URL (``serial://``, ``socket://``, ``usb://``).
        settings: Driver timeouts and the backoff settings.
        backoff_min: Overrides ``settings.backoff_min``.
        backoff_max: Overrides ``settings.backoff_max``.
        usb_backend: pyusb backend for ``usb://`` (tests: the simulated one).
        factory: Builds the underlying source (default :func:`open_card_source`).
        rng: Jitter source (seed it for reproducible tests).

    Attributes:
        reconnects: Times the device came back.
        losses: Times the device was lost.
    """

    def __init__(
        self,
        url: str,
        settings: DriverSettings | None = None,
        *,
        backoff_min: float | None = None,
        backoff_max: float | None = None,
        usb_backend: Any = None,
        factory: Callable[[], CardSource] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._url = url
        self._settings = settings if settings is not None else DriverSettings()
        self._min = backoff_min if backoff_min is not None else self._settings.backoff_min
        self._max = backoff_max if backoff_max is not None else self._settings.backoff_max
        if self._min <= 0 or self._max < self._min:
            raise ValueError(f"backoff needs 0 < min <= max, not {self._min}..{self._max}")
        self._source = (
            factory()
            if factory is not None
            else open_card_source(url, self._settings, usb_backend=usb_backend)
        )
        self._rng = rng if rng is not None else random.Random()
        self._state: State = "closed"
        self._pending: list[Read] = []
        self._attempt = 0
        self._next_try = 0.0
        self._lost_at = 0.0
        self._lost_reason = ""
        self._early: list[Read] = []
        self._probe_until = 0.0
        self.reconnects = 0
        self.losses = 0
        self._log = structlog.get_logger(__name__).bind(url=url)

    # ------------------------------------------------------------------ properties

    @property
    def url(self) -> str:
        """The device URL."""
        return self._url

    @property
    def source(self) -> CardSource:
        """The underlying driver (for its statistics)."""
        return self._source

    @property
    def state(self) -> State:
        """The supervisor's state.

        ``closed``, ``connected``, ``away`` (waiting to reopen) or ``probing`` (reopened,
        waiting for the first heartbeat).
        """
        return self._state

    @property
    def last_heartbeat_at(self) -> float | None:
        """The underlying source's last heartbeat (``None`` while away)."""
        return self._source.last_heartbeat_at if self._state == "connected" else None

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Open the device once (a table does not start on a device it cannot open).

        Raises:
            TransportError: It cannot be opened (or is open already).
            DeviceTimeout: Opening took longer than ``open_timeout``.
        """
        if self._state != "closed":
            raise TransportError("card source is already open", url=self._url)
        await self._source.open()
        self._state = "connected"
        self._attempt = 0
        self._pending.append(DeviceStatus(CONNECTED, self._url, time.monotonic()))
        self._log.info("device_connected")

    async def close(self) -> None:
        """Close the device and stop reconnecting. Never raises."""
        self._state = "closed"
        await self._source.close()

    # ------------------------------------------------------------------ reads

    async def next_read(self) -> Read:
        """The next read; device losses and recoveries come out as :class:`DeviceStatus`.

        Raises:
            TransportError: The source is closed.
        """
        while True:
            if self._pending:
                return self._pending.pop(0)
            if self._state == "closed":
                raise TransportError("card source is not open", url=self._url)
            if self._state == "away":
                await self._reconnect()
                continue
            if self._state == "probing":
                await self._probe()
                continue
            try:
                return await self._source.next_read()
            except (TransportError, DeviceTimeout) as exc:
                await self._lose(exc)

    async def _lose(self, exc: DriverError) -> None:
        if self._state != "connected":
            return
        self._state = "away"
        self.losses += 1
        self._lost_at = time.monotonic()
        self._lost_reason = str(exc)
        self._attempt = 0
        self._next_try = self._lost_at + self._delay()
        self._log.warning("device_lost", error=str(exc), error_type=type(exc).__name__)
        self._pending.append(DeviceStatus(LOST, str(exc), self._lost_at))
        await self._source.close()

    def _delay(self) -> float:
        return backoff_delay(
            self._attempt, self._min, self._max, self._settings.backoff_jitter, self._rng
        )

    async def _reconnect(self) -> None:
        wait = self._next_try - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        self._attempt += 1
        try:
            await self._source.open()
        except (TransportError, DeviceTimeout) as exc:
            self._retry_later(exc)
            return
        self._state = "probing"
        self._early = []
        limit = self._settings.heartbeat_timeout
        self._probe_until = time.monotonic() + (limit if limit is not None else 0.0)

    def _retry_later(self, exc: DriverError) -> None:
        self._next_try = time.monotonic() + self._delay()
        self._log.info(
            "device_reconnect_failed",
            attempt=self._attempt,
            error=str(exc),
            retry_in_s=round(self._next_try - time.monotonic(), 3),
        )

    async def _probe(self) -> None:
        """Reopened: wait for the first heartbeat before saying ``recovered``.

        The heartbeat tells the driver which frame the device finished last, so the
        orchestrator's first command after ``recovered`` cannot turn a card delivered before
        the loss into a false gap. Reads that arrive meanwhile follow ``recovered``.
        """
        try:
            while (
                self._settings.heartbeat_timeout is not None
                and self._source.last_heartbeat_at is None
            ):
                left = self._probe_until - time.monotonic()
                if left <= 0:
                    raise DeviceTimeout(
                        "reopened, but no heartbeat came",
                        url=self._url,
                        detail=f"heartbeat_timeout={self._settings.heartbeat_timeout}s",
                    )
                try:
                    async with asyncio.timeout(min(left, self._settings.read_timeout)):
                        self._early.append(await self._source.next_read())
                except TimeoutError:
                    continue
        except (TransportError, DeviceTimeout) as exc:
            self._state = "away"
            await self._source.close()
            self._retry_later(exc)
            return
        now = time.monotonic()
        self._state = "connected"
        self.reconnects += 1
        detail = (
            f"back after {now - self._lost_at:.2f}s and {self._attempt} attempt(s); "
            f"lost: {self._lost_reason}"
        )
        self._log.info("device_recovered", attempts=self._attempt, away_s=now - self._lost_at)
        self._pending.append(DeviceStatus(RECOVERED, detail, now))
        if getattr(self._source, "loses_reads_while_away", False):
            # A line or HID device keeps nothing for us while away: a card read meanwhile is
            # gone. Said as a misread (like a framed link's gap), so the table asks for the
            # slot's card again; reads that came during the probe follow.
            self._pending.append(
                Misread(
                    AWAY,
                    f"the device was away {now - self._lost_at:.2f}s: a read it made "
                    "meanwhile was lost with it; scan the card again",
                    None,
                    now,
                )
            )
        self._pending.extend(self._early)
        self._early = []

    # ------------------------------------------------------------------ commands

    async def _command(self, name: str, call: Callable[[], Any]) -> None:
        if self._state != "connected":
            raise DeviceAway(
                "the device is away; send the command again after it has recovered",
                url=self._url,
                command=name,
                detail=self._lost_reason or None,
            )
        try:
            await call()
        except (TransportError, DeviceTimeout) as exc:
            await self._lose(exc)
            raise DeviceAway(
                "the command did not reach the device, which is now away",
                url=self._url,
                command=name,
                detail=str(exc),
            ) from exc

    async def expect(self, round_no: int, slot_index: int, slot_name: str) -> None:
        """Cue a slot (EXPECT).

        Raises:
            DeviceAway: The device is away; send it again after ``recovered``.
            FrameError: A field is out of range.
        """
        await self._command("expect", lambda: self._source.expect(round_no, slot_index, slot_name))

    async def request_rescan(self, slot_name: str, reason: str) -> None:
        """Ask for the same card again (RESCAN).

        Raises:
            DeviceAway: The device is away.
            FrameError: A field is out of range.
        """
        await self._command("rescan", lambda: self._source.request_rescan(slot_name, reason))

    async def reject(self, slot_name: str, reason: str) -> None:
        """Refuse the card (REJECT).

        Raises:
            DeviceAway: The device is away.
            FrameError: A field is out of range.
        """
        await self._command("reject", lambda: self._source.reject(slot_name, reason))

    async def led(self, color: LedColor, *, blink: bool = False, duration_ms: int = 0) -> None:
        """Set the LED.

        Raises:
            DeviceAway: The device is away.
            FrameError: A field is out of range.
        """
        await self._command(
            "led", lambda: self._source.led(color, blink=blink, duration_ms=duration_ms)
        )

    async def beep(self, count: int = 1, duration_ms: int = 100) -> None:
        """Sound the beeper.

        Raises:
            DeviceAway: The device is away.
            FrameError: A field is out of range.
        """
        await self._command("beep", lambda: self._source.beep(count, duration_ms))

    async def reset(self) -> None:
        """Restart the device.

        Raises:
            DeviceAway: The device is away.
        """
        await self._command("reset", self._source.reset)
