"""The pit console's exceptions (rooted in :class:`controller.errors.TablectlError`)."""

from __future__ import annotations

from controller.errors import TablectlError


class PitError(TablectlError):
    """Root of the pit console's exceptions; ``context`` says what and where."""


class PitConfigError(PitError):
    """A pit console config that cannot be used (``context``: file, field)."""


class PasswordHashError(PitError):
    """A stored password hash that cannot be read (``context``: user, what is wrong)."""


class RecallError(PitError):
    """A round cannot be recalled (``context``: round id, source)."""
