"""The simulators' exception tree."""

from __future__ import annotations

from typing import Any


class SimulatorError(Exception):
    """Root of the simulators' exceptions.

    Args:
        message: A human sentence saying what was wrong.
        **context: Where and with what (option name, value, device path, ...).
    """

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, Any] = context

    def __str__(self) -> str:
        if not self.context:
            return self.message
        where = ", ".join(f"{key}={value!r}" for key, value in self.context.items())
        return f"{self.message} ({where})"


class SimulatorConfigError(SimulatorError, ValueError):
    """A simulator option that cannot be used (a rate outside 0-1, no cards, ...)."""
