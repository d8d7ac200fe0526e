"""A node's deadlines: one heap of ``(when, order, token)``, the timer structure of every node kind.

``add`` schedules a token (the same token may be pending several times: each fires once); ``set``
keeps at most one deadline per token (a later ``set`` replaces the pending one: a periodic task,
a batch flush, a query's wait) and ``cancel`` forgets it. ``due(now)`` pops the tokens whose time
has come, in time order, ties in the order they were scheduled. A replaced or cancelled entry is
dropped lazily from the head of the heap, so :meth:`next_deadline` never reports a deadline that
will not fire. Tokens are never None.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Any

__all__ = ["Timers"]


class Timers:
    """Deadlines of one node, on the time the driver passes in (never a clock of its own)."""

    __slots__ = ("_heap", "_keyed", "_order")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Any, bool]] = []
        self._order = itertools.count()
        self._keyed: dict[Hashable, tuple[int, float]] = {}   # token -> its one live set

    def add(self, when: float, token: Any) -> None:
        """Fire ``token`` at ``when`` (each ``add`` fires once, whatever else is pending)."""
        heapq.heappush(self._heap, (when, next(self._order), token, False))

    def set(self, when: float, token: Hashable) -> None:
        """Fire ``token`` at ``when`` instead of any earlier ``set`` of it."""
        order = next(self._order)
        self._keyed[token] = (order, when)
        heapq.heappush(self._heap, (when, order, token, True))

    def cancel(self, token: Hashable) -> None:
        """Forget the pending ``set`` of ``token`` (nothing if none)."""
        self._keyed.pop(token, None)

    def at(self, token: Hashable) -> float | None:
        """When the pending ``set`` of ``token`` fires (None: not pending)."""
        live = self._keyed.get(token)
        return None if live is None else live[1]

    def next_deadline(self) -> float | None:
        heap, keyed = self._heap, self._keyed
        while heap:
            when, order, token, is_keyed = heap[0]
            if not is_keyed:
                return when
            live = keyed.get(token)
            if live is not None and live[0] == order:
                return when
            heapq.heappop(heap)       # replaced or cancelled
        return None

    def pop_due(self, now: float) -> Any | None:
        """The first token due at ``now`` (popped), or None: nothing is due."""
        heap = self._heap
        if heap and heap[0][3]:
            self._drop_stale()
        if not heap or heap[0][0] > now:
            return None
        _, _, token, keyed = heapq.heappop(heap)
        if keyed:
            del self._keyed[token]
        return token

    def due(self, now: float) -> list[Any]:
        """Pop and return every token due at ``now``, in time order."""
        tokens = []
        while (token := self.pop_due(now)) is not None:
            tokens.append(token)
        return tokens

    def clear(self) -> None:
        self._heap.clear()
        self._keyed.clear()

    def __len__(self) -> int:
        """Pending deadlines (an entry replaced or cancelled may still count until it surfaces)."""
        return len(self._heap)

    def _drop_stale(self) -> None:
        heap, keyed = self._heap, self._keyed
        while heap:
            _, order, token, is_keyed = heap[0]
            if not is_keyed:
                return
            live = keyed.get(token)
            if live is not None and live[0] == order:
                return
            heapq.heappop(heap)
