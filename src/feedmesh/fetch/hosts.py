"""How many requests may be in flight to one host at once: a connection cap, as a browser keeps
six per host, so that many feeds on one server never open many connections to it at once.

When a request to a host may *start* (minimum spacing, at most N a minute, a pause the server
asked for with 429/503 and Retry-After) is per-host politeness, and that is decided in one place:
the scheduler's host table (:mod:`feedmesh.schedule`), which the live crawler asks before it
fetches. Nothing here sleeps to be polite.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["HostConnections"]


class _Host:
    __slots__ = ("in_flight", "semaphore", "users")

    def __init__(self, limit: int) -> None:
        self.semaphore = asyncio.Semaphore(limit)
        self.users = 0  # holding a slot or waiting for one
        self.in_flight = 0  # holding a slot


class HostConnections:
    def __init__(self, per_host: int) -> None:
        if per_host < 1:
            raise ValueError(f"at least one connection per host is needed, not {per_host}")
        self.per_host = per_host
        self._hosts: dict[str, _Host] = {}

    @asynccontextmanager
    async def slot(self, host: str) -> AsyncIterator[None]:
        """Hold one of ``host``'s connections for the duration of the block."""
        state = self._hosts.get(host)
        if state is None:
            state = self._hosts[host] = _Host(self.per_host)
        state.users += 1
        try:
            async with state.semaphore:
                state.in_flight += 1
                try:
                    yield
                finally:
                    state.in_flight -= 1
        finally:
            state.users -= 1
            if state.users == 0:  # idle: forget it, so that 100k hosts do not pile up
                del self._hosts[host]

    def in_flight(self) -> int:
        """Requests holding a connection now, over every host."""
        return sum(state.in_flight for state in self._hosts.values())
