"""The simulators' exceptions: a branch of the one exception tree (``controller/errors.py``)."""

from __future__ import annotations

from controller.errors import TablectlError


class SimulatorError(TablectlError):
    """Root of the simulators' exceptions.

    Args:
        message: A human sentence saying what was wrong.
        **context: Where and with what (option name, value, device path, ...).
    """


class SimulatorConfigError(SimulatorError, ValueError):
    """A simulator option that cannot be used (a rate outside 0-1, no cards, ...)."""
