"""The studio tests' fixtures: the pit console's Chromium (``pit_browser.py``) and the
archive's PostgreSQL (``tests/archive/conftest.py``: a cluster per session, a database a test).
"""

from __future__ import annotations

from tests.archive.conftest import archive_db, postgres_cluster
from tests.studio.pit_browser import chromium

__all__ = ["archive_db", "chromium", "postgres_cluster"]
