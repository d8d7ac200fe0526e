"""Per-host politeness: at most N requests in flight to one host, and a minimum spacing between
the starts of two requests to it (measured on the injected clock)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from feedmesh.clock import Clock

__all__ = ["HostLimiter"]


class _HostSlot:
    __slots__ = ("next_start", "semaphore", "users")

    def __init__(self, concurrency: int) -> None:
        self.semaphore = asyncio.Semaphore(concurrency)
        self.next_start = 0.0
        self.users = 0


class HostLimiter:
    def __init__(self, clock: Clock, concurrency: int, interval_s: float) -> None:
        self.clock = clock
        self.concurrency = concurrency
        self.interval_s = interval_s
        self._slots: dict[str, _HostSlot] = {}

    @asynccontextmanager
    async def slot(self, host: str) -> AsyncIterator[None]:
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slots[host] = _HostSlot(self.concurrency)
        slot.users += 1
        try:
            async with slot.semaphore:
                if self.interval_s > 0:
                    # Reserve a start time before sleeping so concurrent waiters queue up in order.
                    now = self.clock.now()
                    start = max(now, slot.next_start)
                    slot.next_start = start + self.interval_s
                    if start > now:
                        await self.clock.sleep(start - now)
                yield
        finally:
            slot.users -= 1
            if slot.users == 0 and slot.next_start <= self.clock.now():
                # Idle host with no pending spacing: forget it so 100k hosts do not pile up.
                del self._slots[host]

    def in_flight(self) -> int:
        return sum(self.concurrency - s.semaphore._value for s in self._slots.values())
