"""The pit console's sign-in rules, pure: the throttle (clock injected) and the client address."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from controller.studio.pit.login import Attempt, LoginThrottle, Refused, client_address
from controller.studio.pit.settings import LoginSettings

PROXIES = (ipaddress.ip_network("127.0.0.1"), ipaddress.ip_network("10.1.0.0/16"))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def throttle(clock: Clock, **limits: float) -> LoginThrottle:
    return LoginThrottle(LoginSettings.model_validate(limits), clock)


def test_parallel_sign_ins_are_counted_before_any_is_checked():
    # 40 sign-ins arrive before the first check has answered: only the limit gets a check.
    guard = throttle(Clock(), max_failures=5)
    verdicts = [guard.begin("203.0.113.9", "alice") for _ in range(40)]
    assert sum(isinstance(v, Attempt) for v in verdicts) == 5
    refused = [v for v in verdicts if isinstance(v, Refused)]
    assert len(refused) == 35 and {v.reason for v in refused} == {"address"}
    assert refused[0].wait_seconds == 30


def test_an_address_waits_doubling_up_to_the_cap_and_forgets_after_the_window():
    clock = Clock()
    guard = throttle(
        clock, max_failures=3, lockout_seconds=10, max_lockout_seconds=15, window_seconds=60
    )
    for _ in range(3):
        assert isinstance(guard.begin("a", "alice"), Attempt)
    assert guard.begin("a", "alice") == Refused(10, "address")
    clock.now += 10
    for _ in range(3):
        assert isinstance(guard.begin("a", "bob"), Attempt), "any name counts for the address"
    assert guard.begin("a", "carol") == Refused(15, "address"), "doubled (20 s), capped"
    clock.now += 15 + 60  # a whole window without a wrong sign-in: the doubling starts again
    for _ in range(3):
        assert isinstance(guard.begin("a", "alice"), Attempt)
    assert guard.begin("a", "alice") == Refused(10, "address")


def test_wrong_sign_ins_older_than_the_window_are_forgotten():
    clock = Clock()
    guard = throttle(clock, max_failures=3, window_seconds=60)
    for _ in range(2):
        guard.begin("a", "alice")
    clock.now += 61
    for _ in range(2):
        assert isinstance(guard.begin("a", "alice"), Attempt)


def test_no_address_can_lock_the_user_out_of_another_address():
    guard = throttle(Clock(), max_failures=3)
    for _ in range(10):
        guard.begin("198.51.100.7", "alice")
    right = guard.begin("10.0.0.5", "alice")
    assert isinstance(right, Attempt), "the pit boss's terminal is not slowed by the guesser"
    guard.succeeded(right)


def test_a_right_sign_in_clears_its_address_only():
    guard = throttle(Clock(), max_failures=2)
    first = guard.begin("a", "alice")
    assert isinstance(first, Attempt)
    guard.succeeded(first)
    assert isinstance(guard.begin("a", "alice"), Attempt)
    assert isinstance(guard.begin("a", "alice"), Attempt), "the right one was taken back"
    assert isinstance(guard.begin("a", "alice"), Refused)


def test_a_guess_spread_over_many_addresses_is_slowed_but_known_terminals_sign_in():
    clock = Clock()
    guard = throttle(clock, max_failures=5, max_failures_per_user=20, window_seconds=600)
    known = guard.begin("10.0.0.5", "alice")
    assert isinstance(known, Attempt)
    guard.succeeded(known)  # the pit boss's terminal signed in once
    for n in range(20):  # 4 wrong from each of 5 addresses: none of them is slowed
        assert isinstance(guard.begin(f"198.51.100.{n // 4}", "Alice"), Attempt)
    fresh = guard.begin("198.51.100.200", "alice")
    assert isinstance(fresh, Refused) and fresh.reason == "user" and fresh.wait_seconds == 600
    assert isinstance(guard.begin("198.51.100.200", "bob"), Attempt), "only that name"
    assert isinstance(guard.begin("10.0.0.5", "alice"), Attempt), "a known terminal still may"
    clock.now += 601
    assert isinstance(guard.begin("198.51.100.201", "alice"), Attempt)


def test_forwarded_headers_are_ignored_unless_the_peer_is_a_trusted_proxy():
    forged = {"X-Forwarded-For": "192.0.2.1", "Forwarded": "for=192.0.2.2"}
    assert client_address("127.0.0.1", forged, ()) == "127.0.0.1", "trust none by default"
    assert client_address("198.51.100.4", forged, PROXIES) == "198.51.100.4"
    assert client_address("127.0.0.1", forged, PROXIES) == "192.0.2.1"
    assert client_address("127.0.0.1", forged, PROXIES, "forwarded") == "192.0.2.2"


def test_the_nearest_untrusted_address_of_the_chain_counts():
    # The client forged the left part; each proxy appended the address it was connected from.
    chain = [("x-forwarded-for", "6.6.6.6, 203.0.113.5"), ("X-Forwarded-For", "10.1.2.3")]
    assert client_address("127.0.0.1", chain, PROXIES) == "203.0.113.5"
    assert client_address("127.0.0.1", {"x-forwarded-for": "10.1.0.9"}, PROXIES) == "127.0.0.1"
    assert client_address("127.0.0.1", {"x-forwarded-for": "junk, 10.1.0.9"}, PROXIES) == (
        "127.0.0.1"
    )
    assert client_address("127.0.0.1", {}, PROXIES) == "127.0.0.1"
    forwarded = {"forwarded": 'for="[2001:DB8::1]:4711";proto=https, for=203.0.113.5:80'}
    assert client_address("127.0.0.1", forwarded, PROXIES, "forwarded") == "203.0.113.5"
    only_v6 = {"forwarded": 'For="[2001:DB8::1]:4711"'}
    assert client_address("127.0.0.1", only_v6, PROXIES, "forwarded") == "2001:db8::1"
    hidden = {"forwarded": "for=_hidden, for=unknown"}
    assert client_address("127.0.0.1", hidden, PROXIES, "forwarded") == "127.0.0.1"


@given(
    st.sampled_from(["x-forwarded-for", "forwarded"]),
    st.lists(st.text(max_size=60), max_size=4),
)
def test_any_header_text_gives_the_peer_or_an_address(header, values):
    headers = [(header, value) for value in values]
    found = client_address("127.0.0.1", headers, PROXIES, header)
    assert found == "127.0.0.1" or ipaddress.ip_address(found) not in PROXIES[1]
    ipaddress.ip_address(found)
