"""The studio's tests: a real Mosquitto, simulated tables, and Debian's headless Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser

from tests.support.browser import MISSING, chromium, have_chromium


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """A headless Chromium (``/usr/bin/chromium``); the test fails plainly without one."""
    if not have_chromium():
        pytest.fail(MISSING, pytrace=False)
    async with chromium() as launched:
        yield launched
