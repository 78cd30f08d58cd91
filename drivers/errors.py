"""The drivers' exception tree.

Every exception a driver (or the codec) raises on purpose derives from :class:`DriverError`
and carries where it happened (``url``, ``device``) and what exactly went wrong (``detail``)
as attributes, so a supervisor can log it or decide to reconnect from the exception alone.
"""

from __future__ import annotations

from typing import Any


class DriverError(Exception):
    """Root of the drivers' exceptions.

    Args:
        message: A human sentence saying what was wrong.
        url: The card source's URL, when the error concerns one.
        device: The device path or ``host:port`` the URL resolved to.
        detail: The underlying cause (an OS error text, a timeout value, ...).
        **context: Anything else that says where (frame type, sequence number, ...).
    """

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        device: str | None = None,
        detail: str | None = None,
        **context: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.url = url
        self.device = device
        self.detail = detail
        self.context: dict[str, Any] = context

    def __str__(self) -> str:
        parts: dict[str, Any] = {}
        if self.url is not None:
            parts["url"] = self.url
        if self.device is not None:
            parts["device"] = self.device
        if self.detail is not None:
            parts["detail"] = self.detail
        parts.update(self.context)
        if not parts:
            return self.message
        where = ", ".join(f"{key}={value!r}" for key, value in parts.items())
        return f"{self.message} ({where})"


class UnsupportedUrl(DriverError, ValueError):
    """A card-source URL with a scheme, host or option no driver understands."""


class FrameError(DriverError, ValueError):
    """A frame that cannot be encoded (a field out of range, a text too long or not ASCII)."""


class TransportError(DriverError):
    """The port could not be opened, written or read, or is not open."""


class ConnectionLost(TransportError):
    """The device went away (end of file, I/O error, socket closed) while the port was open."""


class DeviceTimeout(DriverError):
    """The device did not answer in time (open, write, or heartbeats stopped)."""


class HeartbeatLost(DeviceTimeout):
    """No heartbeat from the device within ``heartbeat_timeout``."""


class DeviceAway(TransportError):
    """A command could not reach the device: it is away and the supervisor is reconnecting.

    Send it again after the ``recovered`` status.
    """
