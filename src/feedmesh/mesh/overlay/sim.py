"""The overlay's discrete-event simulation: the mesh's one event loop, a latency matrix, no I/O.

It drives the very objects a real transport drives (any node of the mesh's dialect,
:mod:`feedmesh.mesh.sansio`), on :class:`~feedmesh.mesh.sansio.EventLoop`, delivering each sent
message after the link's latency. Links are
25 ms +-10% by default, fixed per pair (so each link is FIFO), drawn from a seeded hash of the pair:
an N x N matrix computed on demand, which keeps 100,000 nodes in memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from feedmesh.mesh.overlay.ids import Handle
from feedmesh.mesh.overlay.messages import Route
from feedmesh.mesh.sansio import EventLoop, MeshNode

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


class SimNode(MeshNode[Handle, Any], Protocol):
    """What the simulator drives: a node of the mesh's one dialect, known by its handle."""

    handle: Handle


def message_kind(body: Any) -> str:
    if type(body) is Route:
        return f"Route/{type(body.payload).__name__}"
    return type(body).__name__


class Simulator:
    """The overlay's scenario on the mesh's one event loop: message arrivals after the link's
    latency, node wake-ups, scheduled calls."""

    def __init__(self, latency: Callable[[Any, Any], float] | None = None) -> None:
        self.latency = latency or LatencyMatrix()
        self.loop = EventLoop()
        self.nodes: dict[Hashable, SimNode] = {}
        self.dead: set[Hashable] = set()
        self.sent: Counter[str] = Counter()
        self.sent_by: Counter[Hashable] = Counter()
        self.sent_by_kind: Counter[tuple[Hashable, str]] = Counter()
        self.after_step: Callable[[SimNode], None] | None = None
        # fault injection for tests: return True to lose a message (sender addr, destination, body)
        self.lose: Callable[[Hashable, Handle, Any], bool] | None = None

    @property
    def now(self) -> float:
        return self.loop.now

    def add(self, node: SimNode) -> None:
        self.nodes[node.handle.addr] = node

    def at(self, when: float, call: Callable[[float], None], addr: Hashable | None = None) -> None:
        """Run ``call(now)`` at ``when``; with ``addr``, flush that node's outputs afterwards."""
        self.loop.at(when, self._call, call, addr)

    def act(self, addr: Hashable, call: Callable[[SimNode, float], None]) -> None:
        """Run ``call(node, now)`` now and send what it produced."""
        node = self.nodes[addr]
        call(node, self.loop.now)
        self._flush(node)

    def kill(self, addr: Hashable) -> None:
        """The node stops at once: no goodbye, its messages in flight to it are lost."""
        self.dead.add(addr)

    def run_until(self, until: float) -> None:
        self.loop.run_until(until)

    def _arrive(self, when: float, addr: Hashable, sender: Handle, body: Any, _d: Any) -> None:
        if addr in self.dead or addr not in self.nodes:
            return
        node = self.nodes[addr]
        node.receive(when, sender, body)
        self._flush(node)

    def _fire(self, when: float, addr: Hashable) -> None:
        if addr in self.dead:
            return
        node = self.nodes[addr]
        node.fire(when)
        self._flush(node)

    def _call(self, when: float, call: Callable[[float], None], addr: Hashable | None,
              _c: Any, _d: Any) -> None:
        call(when)
        if addr is not None and addr not in self.dead:
            self._flush(self.nodes[addr])

    def _flush(self, node: SimNode) -> None:
        addr = node.handle.addr
        sender = node.handle
        loop = self.loop
        now = loop.now
        for destination, body in node.take():
            if self.lose is not None and self.lose(addr, destination, body):
                continue
            kind = message_kind(body)
            self.sent[kind] += 1
            self.sent_by[addr] += 1
            self.sent_by_kind[addr, kind] += 1
            loop.at(now + self.latency(addr, destination.addr), self._arrive, destination.addr,
                    sender, body)
        deadline = node.next_deadline()
        if deadline is not None:
            loop.wake(addr, deadline, self._fire)
        if self.after_step is not None:
            self.after_step(node)
