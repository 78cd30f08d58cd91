"""How often the MQTT client runs paho's ``loop_misc`` (keep-alive): controller/mqtt/client.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.mqtt.client import MISC_MIN_SLEEP, MISC_SECONDS, misc_delay, misc_seconds


@pytest.mark.parametrize(("keepalive", "expected"), [(2, 1.0), (4, 1.0), (15, 3.75), (60, 15.0)])
def test_the_misc_loop_runs_every_quarter_keepalive_and_at_least_every_second(
    keepalive: int, expected: float
) -> None:
    assert misc_seconds(keepalive) == expected


@pytest.mark.parametrize("keepalive", [2, 3, 5, 15, 30, 60, 65535])
def test_a_ping_is_always_sent_before_the_broker_gives_up(keepalive: int) -> None:
    # A PINGREQ is due once `keepalive` has passed without traffic; the loop notices it at most
    # one sleep later, well before the broker closes the link at 1.5 times the keep-alive.
    assert keepalive + misc_seconds(keepalive) < 1.5 * keepalive or (
        misc_seconds(keepalive) == MISC_SECONDS and keepalive + MISC_SECONDS <= 1.5 * keepalive
    )


@pytest.mark.parametrize(
    ("now", "period", "expected"),
    [
        (0.0, 3.75, 3.75),  # on a tick: the next one
        (1.0, 3.75, 2.75),
        (3.7499995, 3.75, 3.7500005),  # just before a tick: that one is too close, the next
        (7.5, 3.75, 3.75),
        (100.25, 1.0, 0.75),
    ],
)
def test_the_misc_ticks_fall_on_the_multiples_of_the_period(
    now: float, period: float, expected: float
) -> None:
    assert misc_delay(now, period) == pytest.approx(expected, abs=1e-9)


@given(
    now=st.floats(min_value=0, max_value=1e7, allow_nan=False),
    period=st.sampled_from([1.0, 3.75, 15.0, 16383.75]),
)
def test_a_misc_tick_is_on_the_grid_never_too_soon_nor_more_than_a_period_away(
    now: float, period: float
) -> None:
    delay = misc_delay(now, period)
    assert MISC_MIN_SLEEP <= delay <= period + MISC_MIN_SLEEP
    tick = (now + delay) / period
    assert abs(tick - round(tick)) * period < 1e-6 * max(1.0, now), "on the grid"
