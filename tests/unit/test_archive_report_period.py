"""``tablectl archive report``'s period when ``--from`` or ``--to`` is left out (issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.archive.errors import ArchiveError
from controller.cli.archive import report_period

NOW = datetime(2026, 11, 27, 23, 5, tzinfo=UTC)


def test_no_option_is_today_utc():
    assert report_period(None, None, now=NOW) == (
        datetime(2026, 11, 27, tzinfo=UTC),
        datetime(2026, 11, 28, tzinfo=UTC),
    )


def test_from_alone_is_that_day():
    assert report_period("2026-11-25", None, now=NOW) == (
        datetime(2026, 11, 25, tzinfo=UTC),
        datetime(2026, 11, 26, tzinfo=UTC),
    )
    start, end = report_period("2026-11-25T21:00:00+00:00", None, now=NOW)
    assert (start.hour, end) == (21, datetime(2026, 11, 26, tzinfo=UTC))


def test_both_given_are_taken_as_they_are():
    assert report_period("2026-11-01", "2026-12-01", now=NOW) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )


def test_a_bad_time_names_its_option():
    with pytest.raises(ArchiveError, match="--to 'tomorrow' is not a time"):
        report_period(None, "tomorrow", now=NOW)
