"""Delivery to push targets (WebSub callbacks, webhooks) as data: what waits for each target, in
order, when it may be sent, and what a failure does, with the time passed in.

Each target has its own queue of entries (a key and a payload each, in the order they came), and
at most one send in flight: a target sees its deliveries in order, and a slow one holds up only
itself. A send takes what is pending (up to ``batch_max``); a WebSub fat ping carries the whole
updated feed anyway, so a burst of entries for one callback is one delivery. A failed send puts its
entries back in front and waits ``RetryPolicy.delay(failures)``; after ``max_failures`` failures
in a row the target is dropped (the caller deletes its subscription). A target's queue is
bounded: beyond ``max_pending`` entries the oldest are dropped and counted.

The caller (the hub's delivery worker) asks :meth:`DeliveryQueues.due` what to send now,
reports each outcome with :meth:`DeliveryQueues.finished`, and sleeps until
:meth:`DeliveryQueues.next_due` or until something new is added.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from enum import Enum
from typing import Any, NamedTuple

import msgspec

__all__ = ["DeliveryQueues", "Outcome", "RetryPolicy", "Send"]


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    first_delay_s: float = 1.0
    factor: float = 2.0
    max_delay_s: float = 600.0
    max_failures: int = 8
    """Failures in a row after which a target is dropped (with the defaults: ~4 minutes)."""

    def __post_init__(self) -> None:
        if self.first_delay_s <= 0 or self.factor < 1 or self.max_failures < 1:
            raise ValueError("RetryPolicy: first_delay_s > 0, factor >= 1, max_failures >= 1")

    def delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failure in a row (1, 2, ...)."""
        return min(self.max_delay_s, self.first_delay_s * self.factor ** max(0, failures - 1))


class Send(NamedTuple):
    target: Hashable
    keys: tuple[Any, ...]
    payloads: tuple[Any, ...]
    attempt: int
    """1 for a first try, 2 after one failure, ..."""


class Outcome(Enum):
    DELIVERED = "delivered"
    RETRY = "retry"
    DROPPED = "dropped"
    """Failed too often (or told to give up): the target is gone from the queues."""
    FORGOTTEN = "forgotten"
    """The target was removed (or replaced) while the send was in flight."""


class _Target:
    __slots__ = ("failures", "flight", "not_before", "pending", "queued")

    def __init__(self) -> None:
        self.pending: dict[Any, Any] = {}
        self.flight: Send | None = None
        self.failures = 0
        self.not_before = 0.0
        self.queued = False


class DeliveryQueues:
    def __init__(self, policy: RetryPolicy | None = None, *, batch_max: int = 100,
                 max_pending: int = 1000) -> None:
        self.policy = policy or RetryPolicy()
        self.batch_max = batch_max
        self.max_pending = max_pending
        self._targets: dict[Hashable, _Target] = {}
        self._ready: list[tuple[float, int, Hashable]] = []
        self._tick = 0
        self.overflowed = 0
        """Entries dropped because their target's queue was full."""

    def __len__(self) -> int:
        return len(self._targets)

    def _schedule(self, target: Hashable, state: _Target) -> None:
        if not state.queued and state.flight is None and state.pending:
            state.queued = True
            self._tick += 1
            heapq.heappush(self._ready, (state.not_before, self._tick, target))

    def add(self, target: Hashable, key: Any, payload: Any = None) -> None:
        """Queue one entry for ``target`` (an entry already pending is replaced in place)."""
        state = self._targets.get(target)
        if state is None:
            state = self._targets[target] = _Target()
        state.pending[key] = payload
        if len(state.pending) > self.max_pending:
            del state.pending[next(iter(state.pending))]
            self.overflowed += 1
        self._schedule(target, state)

    def remove(self, target: Hashable) -> None:
        """Forget a target and what waits for it (a send in flight finishes as FORGOTTEN)."""
        self._targets.pop(target, None)

    def first_pending(self, target: Hashable) -> Any:
        """The payload of the oldest entry waiting for ``target`` (None: none waits)."""
        state = self._targets.get(target)
        if state is None or not state.pending:
            return None
        return next(iter(state.pending.values()))

    def pending(self, target: Hashable) -> int:
        state = self._targets.get(target)
        return len(state.pending) if state is not None else 0

    def due(self, now: float, limit: int | None = None) -> list[Send]:
        """The sends to start now (at most ``limit``), each marked in flight."""
        sends: list[Send] = []
        while self._ready and (limit is None or len(sends) < limit):
            when, _, target = self._ready[0]
            if when > now:
                break
            heapq.heappop(self._ready)
            state = self._targets.get(target)
            if state is None or not state.queued:
                continue
            state.queued = False
            if state.flight is not None or not state.pending:
                continue
            if state.not_before > now:  # pushed back by a failure since it was queued
                self._schedule(target, state)
                continue
            keys = []
            for key in state.pending:
                keys.append(key)
                if len(keys) >= self.batch_max:
                    break
            payloads = tuple(state.pending.pop(key) for key in keys)
            state.flight = Send(target, tuple(keys), payloads, state.failures + 1)
            sends.append(state.flight)
        return sends

    def finished(self, send: Send, delivered: bool, now: float, *,
                 give_up: bool = False) -> Outcome:
        """Record how ``send`` went; ``give_up``: drop the target now (e.g. 410 Gone)."""
        state = self._targets.get(send.target)
        if state is None or state.flight is not send:
            return Outcome.FORGOTTEN
        state.flight = None
        if delivered:
            state.failures = 0
            state.not_before = 0.0
            self._schedule(send.target, state)
            return Outcome.DELIVERED
        state.failures += 1
        if give_up or state.failures >= self.policy.max_failures:
            del self._targets[send.target]
            return Outcome.DROPPED
        # Back in front, in their order, before what came meanwhile.
        state.pending = {**dict(zip(send.keys, send.payloads, strict=True)), **state.pending}
        state.not_before = now + self.policy.delay(state.failures)
        self._schedule(send.target, state)
        return Outcome.RETRY

    def next_due(self) -> float | None:
        """When the earliest queued send may start (None: nothing is queued)."""
        while self._ready:
            when, _, target = self._ready[0]
            state = self._targets.get(target)
            if state is not None and state.queued:
                return when
            heapq.heappop(self._ready)
        return None
