"""One timer wheel per event loop, shared by every UDP endpoint on it.

An endpoint needs a timer for each datagram it sends (the emulated link latency) and one for its
node's next deadline. With hundreds of endpoints in a process that is tens of thousands of
``asyncio.TimerHandle`` objects a second, each pushed on and popped off the loop's heap. The wheel
rounds every deadline up to its ``tick`` (1 ms) and keeps one list of callbacks per occupied slot:
the loop sees one timer per occupied millisecond, whatever the number of endpoints.

Order: callbacks due in the same slot run in the order they were scheduled, slots in time order,
so two datagrams sent on one link (same latency) still arrive in the order they left. Nothing is
cancelled: a caller that no longer wants a callback ignores it when it runs (the endpoint compares
the deadline it was woken for with its current one, as the simulator does).
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["TimerWheel"]

_WHEELS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TimerWheel] = \
    weakref.WeakKeyDictionary()


class TimerWheel:
    """``call_at(when, callback, *args)`` rounded up to ``tick`` seconds, one loop timer per slot."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tick: float = 0.001) -> None:
        if tick <= 0:
            raise ValueError(f"a timer wheel's tick must be positive, not {tick}")
        self.loop = loop
        self.tick = tick
        self._slots: dict[int, list[tuple[Callable[..., Any], tuple[Any, ...]]]] = {}

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> TimerWheel:
        """The wheel every endpoint on ``loop`` shares (made on first use)."""
        wheel = _WHEELS.get(loop)
        if wheel is None:
            wheel = _WHEELS[loop] = cls(loop)
        return wheel

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any) -> None:
        slot = math.ceil(when / self.tick)
        entries = self._slots.get(slot)
        if entries is None:
            self._slots[slot] = [(callback, args)]
            self.loop.call_at(slot * self.tick, self._run, slot)
        else:
            entries.append((callback, args))

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> None:
        self.call_at(self.loop.time() + delay, callback, *args)

    def pending(self) -> int:
        """Callbacks scheduled and not yet run."""
        return sum(len(entries) for entries in self._slots.values())

    def _run(self, slot: int) -> None:
        for callback, args in self._slots.pop(slot, ()):
            try:
                callback(*args)
            except Exception as error:   # one endpoint's bug must not starve the others' timers
                self.loop.call_exception_handler({
                    "message": f"timer wheel callback {callback!r} failed", "exception": error})
