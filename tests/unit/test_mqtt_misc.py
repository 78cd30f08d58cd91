"""How often the MQTT client runs paho's ``loop_misc`` (keep-alive): controller/mqtt/client.py."""

from __future__ import annotations

import pytest

from controller.mqtt.client import MISC_SECONDS, misc_seconds


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
