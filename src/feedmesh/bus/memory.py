"""The in-process bus: the embedded hub's default :class:`~.ports.Bus`.

Each group of a subject has a FIFO bounded in *bytes* (Cobra's 1 MB buffer per upstream): a
publisher whose message does not fit waits until the group acknowledges enough. That wait is the
backpressure that makes a slow reflector slow down the filter, and a slow filter the crawler. The
bytes of a delivery stay accounted until it is acknowledged; a nak puts it back at the head of its
group's queue (after a delay, if asked), counted as a redelivery.

Not durable: groups and messages live as long as the process. The hub does not need more, because
it replays from the ingest store what the reflectors had not stored before a crash (their
watermarks, see :mod:`feedmesh.compose.embedded`).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Sequence

from feedmesh.bus.ports import BusClosedError, Consumer, Delivery, Outgoing, Parked, reason_line

__all__ = ["MemoryBus"]


class _Message:
    __slots__ = ("data", "msg_id", "seq")

    def __init__(self, data: bytes, seq: int, msg_id: str | None) -> None:
        self.data = data
        self.seq = seq
        self.msg_id = msg_id


class _Group:
    """One durable group: its queue, its buffer accounting and its ack floor."""

    def __init__(self, subject: str, name: str, capacity: int, start_seq: int) -> None:
        self.subject = subject
        self.name = name
        self.capacity = capacity
        self.items: deque[tuple[_Message, int]] = deque()  # (message, redeliveries)
        self.held = 0  # bytes queued or delivered but not acknowledged
        self.unsettled = 0  # messages queued or delivered but not acknowledged
        self.floor = start_seq  # every message up to here is acknowledged
        self.acked_above: set[int] = set()  # acknowledged out of order, above the floor
        self.changed = asyncio.Condition()
        self.closed = False
        self.waiting = 0  # publishers waiting for room

    async def put(self, message: _Message) -> None:
        size = len(message.data)
        async with self.changed:
            # One message larger than the whole buffer still goes through, alone.
            self.waiting += 1
            try:
                await self.changed.wait_for(
                    lambda: self.closed or self.held == 0 or self.held + size <= self.capacity)
            finally:
                self.waiting -= 1
            if self.closed:
                raise BusClosedError(f"bus closed while publishing to {self.subject} "
                                     f"(group {self.name} was full)")
            self.items.append((message, 0))
            self.held += size
            self.unsettled += 1
            self.changed.notify_all()

    async def get(self) -> _MemoryDelivery | None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.closed or bool(self.items))
            if not self.items:
                return None
            message, redeliveries = self.items.popleft()
            return _MemoryDelivery(self, message, redeliveries)

    async def settle(self, message: _Message) -> None:
        async with self.changed:
            self.held -= len(message.data)
            self.unsettled -= 1
            seq = message.seq
            if seq == self.floor + 1:
                self.floor = seq
                while self.floor + 1 in self.acked_above:
                    self.floor += 1
                    self.acked_above.discard(self.floor)
            elif seq > self.floor:
                self.acked_above.add(seq)
            self.changed.notify_all()

    async def requeue(self, message: _Message, redeliveries: int) -> None:
        async with self.changed:
            if self.closed:
                return
            self.items.appendleft((message, redeliveries))
            self.changed.notify_all()

    async def wait_floor(self, seq: int) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.closed or self.floor >= seq)

    async def close(self) -> None:
        async with self.changed:
            self.closed = True
            self.changed.notify_all()


class _MemoryDelivery:
    __slots__ = ("_group", "_message", "_settled", "redeliveries")

    def __init__(self, group: _Group, message: _Message, redeliveries: int) -> None:
        self._group = group
        self._message = message
        self._settled = False
        self.redeliveries = redeliveries

    @property
    def subject(self) -> str:
        return self._group.subject

    @property
    def data(self) -> bytes:
        return self._message.data

    @property
    def seq(self) -> int:
        return self._message.seq

    @property
    def msg_id(self) -> str | None:
        return self._message.msg_id

    @property
    def size(self) -> int:
        return len(self._message.data)

    async def ack(self) -> None:
        if not self._settled:
            self._settled = True
            await self._group.settle(self._message)

    async def nak(self, delay_s: float = 0.0) -> None:
        if self._settled:
            return
        self._settled = True
        group, message, again = self._group, self._message, self.redeliveries + 1
        if delay_s <= 0:
            await group.requeue(message, again)
            return
        loop = asyncio.get_running_loop()
        loop.call_later(delay_s, lambda: loop.create_task(group.requeue(message, again)))


class _MemoryConsumer:
    def __init__(self, group: _Group) -> None:
        self._group = group

    @property
    def subject(self) -> str:
        return self._group.subject

    @property
    def group(self) -> str:
        return self._group.name

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Delivery]:
        while True:
            delivery = await self._group.get()
            if delivery is None:
                return
            yield delivery

    async def get(self, timeout: float | None = None) -> Delivery | None:
        if timeout is None:
            return await self._group.get()
        try:
            return await asyncio.wait_for(self._group.get(), timeout)
        except TimeoutError:
            return None

    async def close(self) -> None:
        await self._group.close()


class _Subject:
    __slots__ = ("groups", "last_seq", "recent_ids")

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}
        self.last_seq = 0
        self.recent_ids: OrderedDict[str, int] = OrderedDict()


class MemoryBus:
    """In-process bus: byte-bounded queues per (subject, group).

    ``duplicate_window`` is how many recent ``msg_id`` s per subject are remembered for
    de-duplication (JetStream remembers them for a time, two minutes by default).
    """

    def __init__(self, capacity_bytes: int = 1024 * 1024, *,
                 duplicate_window: int = 100_000, parked_limit: int = 1000) -> None:
        self.capacity_bytes = capacity_bytes
        self.duplicate_window = duplicate_window
        self._parked: deque[Parked] = deque(maxlen=parked_limit)
        self._subjects: dict[str, _Subject] = {}
        self._closed = False
        self.dropped: dict[str, int] = {}
        """Messages published to a subject that had no group yet (nobody would ever read them)."""

    def _subject(self, name: str) -> _Subject:
        subject = self._subjects.get(name)
        if subject is None:
            subject = self._subjects[name] = _Subject()
        return subject

    async def publish(self, subject: str, data: bytes, *, msg_id: str | None = None) -> int:
        if self._closed:
            raise BusClosedError(f"bus closed: cannot publish to {subject}")
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"the bus carries bytes, not {type(data).__name__}")
        state = self._subject(subject)
        if msg_id is not None:
            first = state.recent_ids.get(msg_id)
            if first is not None:
                return first
        state.last_seq += 1
        seq = state.last_seq
        if msg_id is not None:
            state.recent_ids[msg_id] = seq
            if len(state.recent_ids) > self.duplicate_window:
                state.recent_ids.popitem(last=False)
        if not state.groups:
            self.dropped[subject] = self.dropped.get(subject, 0) + 1
            return seq
        message = _Message(bytes(data), seq, msg_id)
        for group in list(state.groups.values()):
            await group.put(message)
        return seq

    async def publish_many(self, messages: Sequence[Outgoing]) -> list[int]:
        return [await self.publish(subject, data, msg_id=msg_id)
                for subject, data, msg_id in messages]

    async def ack_many(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            await delivery.ack()

    async def consumer(self, subject: str, group: str) -> Consumer:
        if self._closed:
            raise BusClosedError(f"bus closed: cannot consume {subject}")
        state = self._subject(subject)
        found = state.groups.get(group)
        if found is None:
            found = state.groups[group] = _Group(subject, group, self.capacity_bytes,
                                                 state.last_seq)
        return _MemoryConsumer(found)

    async def drop_group(self, subject: str, group: str) -> bool:
        state = self._subjects.get(subject)
        found = state.groups.pop(group, None) if state is not None else None
        if found is None:
            return False
        await found.close()  # its members' iterations end, publishers waiting on it go on
        return True

    async def last_seq(self, subject: str) -> int:
        state = self._subjects.get(subject)
        return state.last_seq if state is not None else 0

    async def wait_acked(self, subject: str, seq: int, *, timeout: float) -> bool:
        state = self._subjects.get(subject)
        if state is None:
            return True
        groups = list(state.groups.values())

        async def every_floor() -> None:
            for group in groups:  # floors only rise: waiting for them in turn is enough
                await group.wait_floor(seq)

        try:
            await asyncio.wait_for(every_floor(), timeout)
        except TimeoutError:
            return False
        return all(group.floor >= seq for group in groups)

    async def park(self, delivery: Delivery, group: str, reason: str) -> None:
        self._parked.append(Parked(subject=delivery.subject, seq=delivery.seq, group=group,
                                   reason=reason_line(reason), data=bytes(delivery.data),
                                   parked_at=time.time()))
        await delivery.ack()

    async def parked(self, limit: int = 100) -> list[Parked]:
        return list(reversed(self._parked))[:limit]

    def depths(self) -> dict[str, tuple[int, int]]:
        return {f"{name}/{group.name}": (group.unsettled, group.held)
                for name, state in self._subjects.items() for group in state.groups.values()}

    def waiting_publishers(self, subject: str | None = None) -> int:
        """Publishers waiting for room in a group's buffer of ``subject`` (of any subject when
        None): backpressure at work."""
        return sum(group.waiting for name, state in self._subjects.items()
                   if subject is None or name == subject for group in state.groups.values())

    async def close(self) -> None:
        self._closed = True
        for state in self._subjects.values():
            for group in state.groups.values():
                await group.close()
