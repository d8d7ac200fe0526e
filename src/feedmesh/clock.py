"""Clocks: the only place feedmesh reads the time.

Logic never calls ``time.time()``; it receives ``now`` or a :class:`Clock`. Three implementations:

* :class:`SystemClock` - real time, for production;
* :class:`AcceleratedClock` - real time running ``speed`` times faster from a chosen origin, shared
  by the farm (``--speed``) and accelerated integration tests;
* :class:`ManualClock` - time moves only when told, for unit tests and the trace simulator.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable

__all__ = ["AcceleratedClock", "Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch (in this clock's world)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class AcceleratedClock:
    """Clock whose time runs ``speed`` times faster than the wall clock.

    ``now()`` equals ``origin`` at the real instant ``real_origin`` and advances ``speed`` seconds
    per real second. Two processes given the same ``origin``, ``real_origin`` and ``speed`` agree
    on the time, which lets a test predict what an accelerated farm will publish.
    """

    def __init__(self, speed: float = 1.0, origin: float | None = None,
                 real_origin: float | None = None) -> None:
        if speed <= 0:
            raise ValueError(f"clock speed must be > 0, got {speed}")
        self.speed = float(speed)
        self.real_origin = time.time() if real_origin is None else float(real_origin)
        self.origin = self.real_origin if origin is None else float(origin)

    def now(self) -> float:
        return self.origin + (time.time() - self.real_origin) * self.speed

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds) / self.speed)


class ManualClock:
    """A clock that moves only when :meth:`advance` or :meth:`set` is called.

    ``sleep`` advances the clock itself (and yields to the event loop), so code written against a
    Clock runs unchanged and instantly under a simulation.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"cannot move a ManualClock backwards by {seconds}")
        self._now += seconds

    def set(self, instant: float) -> None:
        self._now = float(instant)

    async def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)
