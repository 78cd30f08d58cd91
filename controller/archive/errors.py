"""The archive's exceptions (rooted in :class:`controller.errors.TablectlError`)."""

from __future__ import annotations

from controller.errors import TablectlError


class ArchiveError(TablectlError):
    """The archive cannot do what it was asked: a config, a migration, the database."""


class ArchiveRefused(ArchiveError):
    """The archive database refused what it was given.

    A message's fault: stored as rejected (``store_error``); nothing of that transaction was
    written.
    """


class ArchiveDatabaseLost(ArchiveError):
    """The archive database cannot be used any more.

    Gone, read-only, locked past its timeout: not a message's fault; the consumer holds the
    batch unacknowledged and tries again after a back-off (``DbLink.retry``).
    """
