"""Debian's headless Chromium driven by Playwright, for the studio's page tests and bench.

Playwright is pointed at ``/usr/bin/chromium`` (``TABLECTL_CHROMIUM`` overrides): no browser
is ever downloaded. Test support: not part of the product.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.async_api import Browser

CHROMIUM = os.environ.get("TABLECTL_CHROMIUM", "/usr/bin/chromium")
"""The browser binary (Debian's ``chromium`` package)."""

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""Flags for a quiet headless run as root on a server (no sandbox, no GPU, no updates)."""

MISSING = f"needs Chromium at {CHROMIUM} (apt-get install chromium, or make test)"


def have_chromium() -> bool:
    """Whether the browser binary is there."""
    return os.access(CHROMIUM, os.X_OK)


def artifacts_dir() -> Path:
    """Where tests write screenshots: ``$TABLECTL_ARTIFACTS`` or ``tests/artifacts``."""
    path = Path(os.environ.get("TABLECTL_ARTIFACTS") or Path(__file__).parents[1] / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A headless Chromium (Debian's), closed on the way out."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            await browser.close()
