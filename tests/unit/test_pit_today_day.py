"""``/pit/today?day=``: any text is a day or a plain error naming it."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.studio.pit.today import parse_day


@given(st.text(max_size=200))
def test_any_text_is_a_day_or_a_value_error_naming_it(text: str) -> None:
    now = datetime(2026, 11, 27, 3, tzinfo=UTC)
    message = ""
    try:
        day: date | None = parse_day(text, now=now)
    except ValueError as exc:
        day, message = None, str(exc)
    if day is None:
        assert "is not a date (YYYY-MM-DD)" in message and len(message) <= 91
    else:
        assert isinstance(day, date)


def test_no_day_is_today_utc() -> None:
    assert parse_day(None, now=datetime(2026, 11, 27, 23, 59, tzinfo=UTC)) == date(2026, 11, 27)
    assert parse_day("2026-11-25") == date(2026, 11, 25)
    with pytest.raises(ValueError, match="'tomorrow' is not a date"):
        parse_day("tomorrow")
