"""Signing in: the check of a user name and password, slowed down after wrong ones (pure).

:class:`LoginThrottle` counts wrong logins per key (the user name tried, and the client's
address). After ``max_failures`` wrong logins in a row a key is locked for
``lockout_seconds``, doubled at each further lock up to ``max_lockout_seconds``; a right
login clears the counts of both its keys. Every wrong login is also answered only after
``failure_delay_seconds`` (the app's part). The clock is a parameter, so the rules are tested
without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from controller.studio.pit.settings import LoginSettings


@dataclass
class _Count:
    failures: int = 0
    locks: int = 0
    locked_until: float = 0.0


class LoginThrottle:
    """Locks a user name or an address after repeated wrong logins.

    Args:
        settings: The limits.
        clock: Seconds, monotonic (``time.monotonic`` by default).
        max_keys: Keys remembered (the oldest are forgotten first).
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
        self._counts: dict[str, _Count] = {}

    def locked_for(self, keys: Iterable[str]) -> float:
        """Seconds until every key of a login is unlocked (0: it may try now)."""
        now = self._clock()
        waits = [self._counts[key].locked_until - now for key in keys if key in self._counts]
        return max([0.0, *waits])

    def failed(self, keys: Iterable[str]) -> None:
        """Count a wrong login against each key (locking those that reach the limit)."""
        now = self._clock()
        limits = self.settings
        for key in keys:
            count = self._counts.pop(key, None) or _Count()
            self._counts[key] = count  # most recent last
            count.failures += 1
            if count.failures >= limits.max_failures:
                count.locks += 1
                count.failures = 0
                lock = limits.lockout_seconds * 2 ** min(count.locks - 1, 30)
                count.locked_until = now + min(lock, limits.max_lockout_seconds)
        while len(self._counts) > self._max_keys:
            del self._counts[next(iter(self._counts))]

    def succeeded(self, keys: Iterable[str]) -> None:
        """A right login: its keys start again from nothing."""
        for key in keys:
            self._counts.pop(key, None)
