"""Signing in: who the client is, and how wrong sign-ins are slowed down (pure, no I/O).

:func:`client_address` is the address a sign-in (or a WebSocket) is counted against: the
direct peer, unless the peer is a configured trusted proxy, in which case the nearest
address the proxies were given (``X-Forwarded-For`` or ``Forwarded``, whichever the settings
name) that is not itself a trusted proxy.

:class:`LoginThrottle` counts every sign-in **before** its password is checked
(:meth:`LoginThrottle.begin` is synchronous, so parallel sign-ins cannot all pass a limit
while the slow scrypt checks run), and slows down per client address:

* ``max_failures`` wrong sign-ins from one address within ``window_seconds``: that address
  waits ``lockout_seconds``, doubled at each further wait up to ``max_lockout_seconds``. Other
  addresses are not affected: no one can lock a user out by knowing the name.
* ``max_failures_per_user`` wrong sign-ins for one name from all addresses together within
  the window: the name can then be tried only from addresses that signed in as that user
  before (since the console started), until the window has passed. A guess spread over
  many addresses is slowed; the pit boss's own terminals still sign in.

A right sign-in clears its address and takes its own attempt back from the name's count. The
clock is a parameter, so the rules are tested without waiting.
"""

from __future__ import annotations

import ipaddress
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from controller.studio.pit.settings import IPNetwork, LoginSettings

_V = TypeVar("_V")

KNOWN_ADDRESSES_PER_USER = 32
"""Addresses remembered per user as having signed in (the oldest forgotten first)."""


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _trusted(text: str, proxies: Iterable[IPNetwork]) -> bool:
    address = _ip(text)
    return address is not None and any(address in network for network in proxies)


def _forwarded_for(value: str) -> list[str]:
    """The ``for=`` nodes of an RFC 7239 ``Forwarded`` header, in order (ports dropped)."""
    nodes = []
    for element in value.split(","):
        for pair in element.split(";"):
            name, _, node = pair.strip().partition("=")
            if name.strip().lower() != "for":
                continue
            node = node.strip().strip('"')
            if node.startswith("["):  # "[2001:db8::1]:4711"
                node = node[1:].partition("]")[0]
            elif node.count(":") == 1:  # "192.0.2.60:4711"
                node = node.partition(":")[0]
            nodes.append(node)
    return nodes


def client_address(
    peer: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    proxies: Iterable[IPNetwork],
    header: str = "x-forwarded-for",
) -> str:
    """The client a request is counted against.

    Args:
        peer: The direct peer's address (the TCP connection's other end).
        headers: The request's headers (names in any case; a header given more than once is
            read as one list, in order).
        proxies: The trusted proxies' networks (empty: trust none).
        header: ``x-forwarded-for`` or ``forwarded``: the one the trusted proxies set.

    Returns:
        ``peer`` when it is not a trusted proxy, or the forwarded chain names no one else;
        else the right-most address of the chain that is not a trusted proxy (each proxy
        appends the address it was connected from, so everything to its left may be forged).
        A chain entry that is not an IP address is never trusted further: the peer is
        returned.
    """
    proxies = tuple(proxies)
    if not proxies or not _trusted(peer, proxies):
        return peer
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    values = [value for name, value in pairs if name.lower() == header]
    if header == "forwarded":
        chain = [node for value in values for node in _forwarded_for(value)]
    else:
        chain = [part.strip() for value in values for part in value.split(",")]
    for entry in reversed(chain):
        if _ip(entry) is None:
            return peer
        if not _trusted(entry, proxies):
            return str(_ip(entry))
    return peer


@dataclass(frozen=True)
class Attempt:
    """A sign-in counted (as wrong until :meth:`LoginThrottle.succeeded` says otherwise).

    Attributes:
        address: The client's address.
        user: The user name tried (lower case).
        at: When it was counted (the throttle's clock).
    """

    address: str
    user: str
    at: float


@dataclass(frozen=True)
class Refused:
    """A sign-in not checked at all.

    Attributes:
        wait_seconds: How long until the same sign-in may be tried.
        reason: ``address`` (too many wrong sign-ins from it) or ``user`` (too many for the
            name from everywhere, and this address never signed in as it).
    """

    wait_seconds: float
    reason: str


@dataclass
class _Address:
    failures: deque[float] = field(default_factory=deque)
    locks: int = 0
    locked_until: float = 0.0


@dataclass
class _User:
    failures: deque[float] = field(default_factory=deque)
    known: dict[str, None] = field(default_factory=dict)


class LoginThrottle:
    """Counts sign-ins per client address and per user name, before they are checked.

    Args:
        settings: The limits.
        clock: Seconds, monotonic (``time.monotonic`` by default).
        max_keys: Addresses (and names) remembered; the least recently seen are forgotten
            first.
    """

    def __init__(
        self,
        settings: LoginSettings,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = 10_000,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._max_keys = max_keys
        self._addresses: dict[str, _Address] = {}
        self._users: dict[str, _User] = {}

    def _forget_old(self, failures: deque[float], now: float) -> None:
        while failures and failures[0] <= now - self.settings.window_seconds:
            failures.popleft()

    @staticmethod
    def _touch(table: dict[str, _V], key: str, make: Callable[[], _V], limit: int) -> _V:
        value = table.pop(key, None)
        table[key] = value if value is not None else make()  # most recent last
        while len(table) > limit:
            del table[next(iter(table))]
        return table[key]

    def begin(self, address: str, user: str) -> Attempt | Refused:
        """Count a sign-in before its password is checked, or refuse it unchecked.

        Synchronous on purpose: between the look at the limits and the count nothing else
        runs, so of any number of parallel sign-ins from one address at most
        ``max_failures`` are checked.

        Args:
            address: The client's address (:func:`client_address`).
            user: The user name tried.

        Returns:
            The counted :class:`Attempt` (pass it to :meth:`succeeded` when the password is
            right), or :class:`Refused` with how long to wait.
        """
        now = self._clock()
        limits = self.settings
        name = user.lower()
        record = self._touch(self._addresses, address, _Address, self._max_keys)
        if record.locked_until > now:
            return Refused(record.locked_until - now, "address")
        self._forget_old(record.failures, now)
        if not record.failures and record.locked_until <= now - limits.window_seconds:
            record.locks = 0  # a whole window without a wrong sign-in since the last wait
        person = self._touch(self._users, name, _User, self._max_keys)
        self._forget_old(person.failures, now)
        if len(person.failures) >= limits.max_failures_per_user and address not in person.known:
            wait = person.failures[0] + limits.window_seconds - now
            return Refused(max(wait, 0.0), "user")
        record.failures.append(now)
        person.failures.append(now)
        if len(record.failures) >= limits.max_failures:
            record.locks += 1
            record.failures.clear()
            wait = limits.lockout_seconds * 2 ** min(record.locks - 1, 30)
            record.locked_until = now + min(wait, limits.max_lockout_seconds)
        return Attempt(address, name, now)

    def succeeded(self, attempt: Attempt) -> None:
        """The password was right: clear its address, and remember it as the user's.

        The name's count forgets this attempt (only this one: a right sign-in does not undo
        the wrong ones others made for the name).
        """
        self._addresses.pop(attempt.address, None)
        person = self._users.get(attempt.user)
        if person is None:
            return
        if attempt.at in person.failures:
            person.failures.remove(attempt.at)
        person.known.pop(attempt.address, None)
        person.known[attempt.address] = None
        while len(person.known) > KNOWN_ADDRESSES_PER_USER:
            del person.known[next(iter(person.known))]
