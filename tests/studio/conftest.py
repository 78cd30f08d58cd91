"""The studio tests' fixtures: the pit console's Chromium (``pit_browser.py``)."""

from __future__ import annotations

from tests.studio.pit_browser import chromium

__all__ = ["chromium"]
