"""The Bus port that joins the hub's tiers, and its in-process implementation.

The semantics are JetStream's, so a NATS implementation fits without touching the tiers:

* a message is published to a *subject*;
* each *group* consuming a subject receives every message of it (fan-out between groups, e.g. one
  group per filter shard), and within a group each message goes to one member (work sharing);
* a consumer acknowledges what it has processed (:meth:`Delivery.ack`); JetStream redelivers
  unacknowledged messages after a crash, the in-process bus cannot (the hub replays from the store
  instead, see :mod:`feedmesh.hub.recovery`).

:class:`MemoryBus` bounds each group's queue in *bytes* (Cobra's 1 MB buffer per upstream): a
publisher whose message does not fit waits until the consumer drains it. That wait is the
backpressure that makes a slow reflector slow down the filter, and a slow filter the crawler.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Protocol

from feedmesh.hub.messages import HubMessage, encode

__all__ = ["Bus", "Consumer", "Delivery", "MemoryBus", "QueueStats"]


class Delivery:
    __slots__ = ("_queue", "message", "size")

    def __init__(self, message: HubMessage, size: int, queue: _ByteQueue | None = None) -> None:
        self.message = message
        self.size = size
        self._queue = queue

    async def ack(self) -> None:
        if self._queue is not None:
            queue, self._queue = self._queue, None
            await queue.release(self.size)


class Consumer(Protocol):
    def __aiter__(self) -> AsyncIterator[Delivery]: ...

    async def get(self, timeout: float | None = None) -> Delivery | None:
        """The next delivery; None when ``timeout`` passed or the consumer was closed.
        (Safe to time out: unlike ``anext`` on the iterator, nothing is lost or closed.)"""
        ...

    async def close(self) -> None: ...


class QueueStats(Protocol):
    messages: int
    bytes: int


class Bus(Protocol):
    async def publish(self, subject: str, message: HubMessage) -> int:
        """Send ``message`` to every group of ``subject``; returns its encoded size in bytes.
        Waits while a group's buffer is full."""
        ...

    async def consumer(self, subject: str, group: str) -> Consumer: ...

    def depths(self) -> dict[str, tuple[int, int]]:
        """``"subject/group" -> (messages, bytes)`` waiting, for metrics."""
        ...

    async def close(self) -> None: ...


class _ByteQueue:
    """A FIFO bounded by the bytes of messages not yet acknowledged."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: deque[Delivery] = deque()
        self.held = 0  # bytes queued or delivered but not acknowledged
        self.changed = asyncio.Condition()
        self.closed = False

    async def put(self, message: HubMessage, size: int) -> None:
        async with self.changed:
            # One message larger than the whole buffer still goes through, alone.
            await self.changed.wait_for(
                lambda: self.closed or self.held == 0 or self.held + size <= self.capacity)
            if self.closed:
                return
            self.items.append(Delivery(message, size, self))
            self.held += size
            self.changed.notify_all()

    async def get(self) -> Delivery | None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.closed or bool(self.items))
            if not self.items:
                return None
            return self.items.popleft()

    async def release(self, size: int) -> None:
        async with self.changed:
            self.held -= size
            self.changed.notify_all()

    async def close(self) -> None:
        async with self.changed:
            self.closed = True
            self.changed.notify_all()


class _MemoryConsumer:
    def __init__(self, queue: _ByteQueue) -> None:
        self.queue = queue

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Delivery]:
        while True:
            delivery = await self.queue.get()
            if delivery is None:
                return
            yield delivery

    async def get(self, timeout: float | None = None) -> Delivery | None:
        if timeout is None:
            return await self.queue.get()
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            return None

    async def close(self) -> None:
        await self.queue.close()


class MemoryBus:
    """In-process bus: bounded, byte-accounted queues per (subject, group)."""

    def __init__(self, capacity_bytes: int = 1024 * 1024) -> None:
        self.capacity_bytes = capacity_bytes
        self._groups: dict[str, dict[str, _ByteQueue]] = {}
        self.published_bytes: dict[str, int] = {}
        self.published_messages: dict[str, int] = {}
        self.dropped: dict[str, int] = {}

    async def publish(self, subject: str, message: HubMessage) -> int:
        size = len(encode(message))
        self.published_bytes[subject] = self.published_bytes.get(subject, 0) + size
        self.published_messages[subject] = self.published_messages.get(subject, 0) + 1
        groups = self._groups.get(subject)
        if not groups:
            self.dropped[subject] = self.dropped.get(subject, 0) + 1
            return size
        for queue in list(groups.values()):
            await queue.put(message, size)
        return size

    async def consumer(self, subject: str, group: str) -> Consumer:
        groups = self._groups.setdefault(subject, {})
        queue = groups.get(group)
        if queue is None:
            queue = groups[group] = _ByteQueue(self.capacity_bytes)
        return _MemoryConsumer(queue)

    def depths(self) -> dict[str, tuple[int, int]]:
        return {f"{subject}/{group}": (len(q.items), q.held)
                for subject, groups in self._groups.items() for group, q in groups.items()}

    async def close(self) -> None:
        for groups in self._groups.values():
            for queue in groups.values():
                await queue.close()
