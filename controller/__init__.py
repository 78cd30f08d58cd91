"""tablectl controller: rules, round orchestrator, journal, publisher, settings and CLI."""

from __future__ import annotations

__version__ = "0.1.0"
