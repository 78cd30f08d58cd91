"""A real headless Chromium for the pit console's tests (Debian's ``/usr/bin/chromium``).

Driven by the ``playwright`` package pointed at the system browser (no browser download).
The studio's shared fixture (``tests/support/browser.py``) will replace this one when the
branches are merged. Screenshots go to ``$TABLECTL_ARTIFACTS`` or ``tests/artifacts/``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser

CHROMIUM = os.environ.get("TABLECTL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MISSING = f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)"


def have_chromium() -> bool:
    """Whether the system Chromium is there."""
    return os.access(CHROMIUM, os.X_OK)


def artifacts_dir() -> Path:
    """Where screenshots go (created)."""
    root = os.environ.get("TABLECTL_ARTIFACTS")
    directory = Path(root) if root else Path(__file__).resolve().parents[1] / "artifacts"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@pytest.fixture
async def chromium() -> AsyncIterator[Browser]:
    """A launched headless Chromium (a ``playwright.async_api.Browser``), closed after."""
    if not have_chromium():
        pytest.skip(MISSING)
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()
