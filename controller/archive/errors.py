"""The archive's exceptions (rooted in :class:`controller.errors.TablectlError`)."""

from __future__ import annotations

from controller.errors import TablectlError


class ArchiveError(TablectlError):
    """The archive cannot do what it was asked: a config, a migration, the database."""
