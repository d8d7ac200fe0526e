"""The timer wheel every UDP endpoint of a process shares: callbacks run at or just after their
deadline (rounded up to the tick), in deadline order, and in scheduling order within a slot."""

from __future__ import annotations

import asyncio

import pytest

from feedmesh.mesh.transport.wheel import TimerWheel
from tests.eventually import eventually


async def test_callbacks_run_in_deadline_order_and_fifo_within_a_slot() -> None:
    loop = asyncio.get_running_loop()
    wheel = TimerWheel(loop, tick=0.005)
    ran: list[tuple[str, float]] = []
    start = (int(loop.time() / 0.005) + 1) * 0.005          # a slot boundary
    # b1, b2 and b3 share the slot ending at start + 0.020; b2 is scheduled second
    for name, delay in [("c", 0.040), ("a", 0.010), ("b1", 0.0199), ("b2", 0.016), ("b3", 0.018)]:
        wheel.call_at(start + delay, lambda name=name: ran.append((name, loop.time() - start)))
    assert wheel.pending() == 5
    await eventually(lambda: len(ran) == 5, timeout=5)
    assert [name for name, _ in ran] == ["a", "b1", "b2", "b3", "c"]
    # never early: each ran at or after its deadline rounded up to the slot
    assert ran[0][1] >= 0.010 - 1e-6 and ran[-1][1] >= 0.040 - 1e-6
    assert wheel.pending() == 0


async def test_one_loop_has_one_shared_wheel_and_a_failing_callback_spares_the_rest() -> None:
    loop = asyncio.get_running_loop()
    assert TimerWheel.of(loop) is TimerWheel.of(loop)
    errors: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        wheel = TimerWheel(loop)
        ran: list[int] = []
        wheel.call_later(0.005, lambda: 1 / 0)
        wheel.call_later(0.005, ran.append, 2)
        await eventually(lambda: ran == [2], timeout=5)
        assert isinstance(errors[0]["exception"], ZeroDivisionError)
    finally:
        loop.set_exception_handler(None)


async def test_a_tick_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive, not 0"):
        TimerWheel(asyncio.get_running_loop(), tick=0)
