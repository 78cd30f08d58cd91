"""The studio's tests: a real Mosquitto, simulated tables, Debian's headless Chromium, and the
archive's PostgreSQL (``tests/archive/conftest.py``: a cluster per session, a database a test).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser

from tests.archive.conftest import archive_db, postgres_cluster
from tests.support.browser import MISSING, chromium, have_chromium

__all__ = ["archive_db", "browser", "postgres_cluster"]


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """A headless Chromium (``/usr/bin/chromium``); the test fails plainly without one."""
    if not have_chromium():
        pytest.fail(MISSING, pytrace=False)
    async with chromium() as launched:
        yield launched
