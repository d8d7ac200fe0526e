"""The one discrete-event loop of the mesh: a heap of timed events on a simulated clock.

Each event is ``(when, order, handler, a, b, c, d)``: at ``when`` the loop sets :attr:`now` and
calls ``handler(when, a, b, c, d)``. Ties run in the order they were scheduled, so a run is
deterministic and two messages sent on one link with one latency arrive in the order they left.
:meth:`wake` is a node's wake-up: at most one pending per node, the earliest wins, and a wake-up
that an earlier one replaced is skipped (the node is asked ``next_deadline()`` again after every
step). The scenarios (the overlay's :mod:`feedmesh.mesh.overlay.sim`, FeedEx's
:mod:`feedmesh.mesh.feedex.sim`) decide what an event means: a delivery, a fetch, a departure.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["EventLoop", "Handler"]

Handler = Callable[[float, Any, Any, Any, Any], None]
"""``handler(when, a, b, c, d)``: what an event does (its four payload slots are the caller's)."""

_INF = float("inf")


class EventLoop:
    """Events in time order on a simulated clock; :attr:`events` counts those run."""

    __slots__ = ("_heap", "_order", "_wake", "events", "now")

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.events = 0
        self._heap: list[tuple[float, int, Handler, Any, Any, Any, Any]] = []
        self._order = itertools.count()
        self._wake: dict[Hashable, float] = {}

    def at(self, when: float, handler: Handler, a: Any = None, b: Any = None, c: Any = None,
           d: Any = None) -> None:
        """Run ``handler(when, a, b, c, d)`` at ``when``."""
        heapq.heappush(self._heap, (when, next(self._order), handler, a, b, c, d))

    def wake(self, key: Hashable, deadline: float, fire: Callable[[float, Hashable], None]) -> None:
        """Call ``fire(when, key)`` at ``deadline`` (not before now), unless a wake-up of ``key``
        is pending no later: one pending wake-up per key, the earliest."""
        deadline = max(deadline, self.now)
        if deadline < self._wake.get(key, _INF):
            self._wake[key] = deadline
            self.at(deadline, self._woken, key, fire)

    def _woken(self, when: float, key: Hashable, fire: Callable[[float, Hashable], None],
               _c: Any, _d: Any) -> None:
        if self._wake.get(key) != when:
            return                      # an earlier wake-up replaced this one and has run
        del self._wake[key]
        fire(when, key)

    def pending(self) -> int:
        return len(self._heap)

    def next_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def run_until(self, until: float, *, inclusive: bool = True) -> None:
        """Run every event due by ``until`` (``inclusive`` False: before it), in order; then the
        clock reads ``until`` if it had not passed it."""
        heap = self._heap
        pop = heapq.heappop
        while heap and (heap[0][0] <= until if inclusive else heap[0][0] < until):
            when, _, handler, a, b, c, d = pop(heap)
            self.now = when
            self.events += 1
            handler(when, a, b, c, d)
        self.now = max(self.now, until)
