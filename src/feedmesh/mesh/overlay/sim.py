"""A discrete-event simulator for overlay nodes: an injected clock, a latency matrix, no I/O.

It drives the very objects a real transport drives (anything with ``receive``/``fire``/
``next_deadline``/``take``), delivering each sent message after the link's latency. Links are
25 ms +-10% by default, fixed per pair (so each link is FIFO), drawn from a seeded hash of the pair:
an N x N matrix computed on demand, which keeps 100,000 nodes in memory.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from feedmesh.mesh.overlay.ids import Handle
from feedmesh.mesh.overlay.messages import Route

__all__ = ["LatencyMatrix", "SimNode", "Simulator"]

_MASK = (1 << 64) - 1


def _mix(value: int) -> int:
    """splitmix64: a good spread for a pair hash."""
    value = (value + 0x9E3779B97F4A7C15) & _MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & _MASK
    return value ^ (value >> 31)


@dataclass(frozen=True, slots=True)
class LatencyMatrix:
    """One-way latency between two addresses (ints): ``base`` * (1 +- ``spread``), symmetric."""

    base: float = 0.025
    spread: float = 0.10
    seed: int = 0

    def __call__(self, a: int, b: int) -> float:
        low, high = (a, b) if a <= b else (b, a)
        unit = (_mix((low << 32) ^ high ^ (self.seed << 17)) & 0xFFFFFF) / 0xFFFFFF
        return self.base * (1.0 + self.spread * (2.0 * unit - 1.0))


class SimNode(Protocol):
    handle: Handle

    def receive(self, now: float, sender: Handle, body: Any) -> None: ...
    def fire(self, now: float) -> None: ...
    def next_deadline(self) -> float | None: ...
    def take(self) -> list[tuple[Handle, Any]]: ...


def message_kind(body: Any) -> str:
    if type(body) is Route:
        return f"Route/{type(body.payload).__name__}"
    return type(body).__name__


class Simulator:
    """Events in time order: message arrivals, node wake-ups, scheduled calls."""

    def __init__(self, latency: Callable[[Any, Any], float] | None = None) -> None:
        self.latency = latency or LatencyMatrix()
        self.now = 0.0
        self.nodes: dict[Hashable, SimNode] = {}
        self.dead: set[Hashable] = set()
        self.sent: Counter[str] = Counter()
        self.sent_by: Counter[Hashable] = Counter()
        self.sent_by_kind: Counter[tuple[Hashable, str]] = Counter()
        self.after_step: Callable[[SimNode], None] | None = None
        # fault injection for tests: return True to lose a message (sender addr, destination, body)
        self.lose: Callable[[Hashable, Handle, Any], bool] | None = None
        self._events: list[tuple[float, int, int, Any, Any, Any]] = []
        self._order = itertools.count()
        self._wake: dict[Hashable, float] = {}

    def add(self, node: SimNode) -> None:
        self.nodes[node.handle.addr] = node

    def at(self, when: float, call: Callable[[float], None], addr: Hashable | None = None) -> None:
        """Run ``call(now)`` at ``when``; with ``addr``, flush that node's outputs afterwards."""
        heapq.heappush(self._events, (when, next(self._order), 2, call, addr, None))

    def act(self, addr: Hashable, call: Callable[[SimNode, float], None]) -> None:
        """Run ``call(node, now)`` now and send what it produced."""
        node = self.nodes[addr]
        call(node, self.now)
        self._flush(node)

    def kill(self, addr: Hashable) -> None:
        """The node stops at once: no goodbye, its messages in flight to it are lost."""
        self.dead.add(addr)

    def run_until(self, until: float) -> None:
        events = self._events
        while events and events[0][0] <= until:
            when, _, kind, first, second, third = heapq.heappop(events)
            self.now = when
            if kind == 0:
                if first in self.dead or first not in self.nodes:
                    continue
                node = self.nodes[first]
                node.receive(when, second, third)
                self._flush(node)
            elif kind == 1:
                if first in self.dead or self._wake.get(first) != when:
                    continue
                del self._wake[first]
                node = self.nodes[first]
                node.fire(when)
                self._flush(node)
            else:
                first(when)
                if second is not None and second not in self.dead:
                    self._flush(self.nodes[second])
        self.now = max(self.now, until)

    def _flush(self, node: SimNode) -> None:
        addr = node.handle.addr
        sender = node.handle
        now = self.now
        for destination, body in node.take():
            if self.lose is not None and self.lose(addr, destination, body):
                continue
            kind = message_kind(body)
            self.sent[kind] += 1
            self.sent_by[addr] += 1
            self.sent_by_kind[addr, kind] += 1
            heapq.heappush(self._events, (now + self.latency(addr, destination.addr),
                                          next(self._order), 0, destination.addr, sender, body))
        deadline = node.next_deadline()
        if deadline is not None:
            deadline = max(deadline, now)
            if deadline < self._wake.get(addr, float("inf")):
                self._wake[addr] = deadline
                heapq.heappush(self._events, (deadline, next(self._order), 1, addr, None, None))
        if self.after_step is not None:
            self.after_step(node)
