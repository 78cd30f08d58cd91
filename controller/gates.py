"""Conditions that must hold before a new round opens.

A round that has not started when the network fails is voided, so a table must not open one
while the broker is unreachable or while the betting system is away: it waits, and says why.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass
class EventGate:
    """A gate that is open while an :class:`asyncio.Event` is set.

    Attributes:
        name: Short machine name (``"broker"``).
        reason: Why the table waits while it is closed, for people.
        event: Set while the condition holds.
    """

    name: str
    reason: str
    event: asyncio.Event

    def is_open(self) -> bool:
        """Whether the condition holds now."""
        return self.event.is_set()

    async def wait_open(self) -> None:
        """Return once the condition holds."""
        await self.event.wait()
