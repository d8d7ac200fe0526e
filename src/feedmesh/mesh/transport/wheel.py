"""The live drivers' timers: one timer wheel per event loop, and one per injected clock.

:class:`TimerWheel` runs on the event loop's own clock and is shared by every UDP endpoint on the
loop; :class:`ClockWheel` runs on an injected :class:`~feedmesh.clock.Clock` (the FeedEx HTTP
transport's, which a test or an accelerated farm sets) and keeps its deadlines in the mesh's one
timer structure (:class:`~feedmesh.mesh.sansio.Timers`). Both offer ``now()`` and
``call_at(when, callback, *args)``: what :class:`~feedmesh.mesh.transport.driver.NodeDriver`
needs.


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
from typing import Any, Protocol

from feedmesh.clock import Clock
from feedmesh.mesh.sansio import Timers

__all__ = ["ClockWheel", "TimerWheel", "Wheel"]


class Wheel(Protocol):
    """What a node's driver schedules its wake-ups on."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any) -> None: ...

_WHEELS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TimerWheel] = \
    weakref.WeakKeyDictionary()


class TimerWheel:
    """``call_at(when, callback, *args)`` rounded up to ``tick`` seconds, one loop timer per
    slot."""

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

    def now(self) -> float:
        return self.loop.time()

    def pending(self) -> int:
        """Callbacks scheduled and not yet run."""
        return sum(len(entries) for entries in self._slots.values())

    def _run(self, slot: int) -> None:
        for callback, args in self._slots.pop(slot, ()):
            try:
                callback(*args)
            except Exception as error:  # noqa: BLE001 - one endpoint's bug must not starve the others' timers
                self.loop.call_exception_handler({
                    "message": f"timer wheel callback {callback!r} failed", "exception": error})


class ClockWheel:
    """``call_at(when, callback, *args)`` on ``clock``'s time: one task sleeps on the clock until
    the earliest deadline (at most ``longest_s`` at a time), woken early when an earlier one comes.
    Callbacks due together run in time order, ties in the order they were scheduled."""

    def __init__(self, clock: Clock, *, longest_s: float = 60.0) -> None:
        self.clock = clock
        self.longest_s = longest_s
        self._timers = Timers()
        self._kick = asyncio.Event()
        self._wake_at = float("inf")
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def now(self) -> float:
        return self.clock.now()

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any) -> None:
        if self._closed:
            return
        self._timers.add(when, (callback, args))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        if when < self._wake_at:
            self._kick.set()   # earlier than the task sleeps: wake it to sleep less

    def pending(self) -> int:
        return len(self._timers)

    async def close(self) -> None:
        """Run nothing more; end the task."""
        self._closed = True
        self._timers.clear()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            now = self.clock.now()
            due = self._timers.due(now)
            for callback, args in due:
                try:
                    callback(*args)
                except Exception as error:  # noqa: BLE001 - one callback's bug must not stop the others
                    loop.call_exception_handler({
                        "message": f"clock wheel callback {callback!r} failed",
                        "exception": error})
            if due:
                await asyncio.sleep(0)
                continue
            at = self._timers.next_deadline()
            wait = self.longest_s if at is None else min(self.longest_s, at - now)
            self._wake_at = now + wait
            self._kick.clear()
            sleeper = asyncio.ensure_future(self.clock.sleep(wait))
            kicked = asyncio.ensure_future(self._kick.wait())
            try:
                await asyncio.wait({sleeper, kicked}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                kicked.cancel()
