"""The studio's exceptions (rooted in :class:`controller.errors.TablectlError`)."""

from __future__ import annotations

from controller.errors import TablectlError


class StudioError(TablectlError):
    """The studio cannot do what it was asked: its config, its port, a page's table."""
