"""A process's roles meet a fault they cannot survive (compose/lifecycle.py): a loop whose input
closed for good, or one that keeps crashing, stops the process with status 1, so its supervisor
(`feedmesh up`, systemd's Restart=on-failure) starts it again; a clean stop is 0."""

from __future__ import annotations

import asyncio
import itertools

from feedmesh.compose.lifecycle import HttpPart, Tasks, run_roles


class LoopRole:
    """A role with one loop, ``run``."""

    name = "filter"
    registry = None

    def __init__(self, run) -> None:
        self.ready = asyncio.Event()
        self.run = run
        self.stopped = False

    def http(self) -> HttpPart:
        return HttpPart()

    async def start(self, tasks: Tasks) -> None:
        self.loop = tasks.spawn(self.name, self.run)
        self.ready.set()

    async def stop(self) -> None:
        self.stopped = True


async def test_a_loop_whose_input_closed_stops_the_process_with_status_1():
    async def input_closed() -> None:
        await asyncio.sleep(0.01)  # (the bus connection closed for good: the loop returns)

    role = LoopRole(input_closed)
    assert await asyncio.wait_for(run_roles([role]), 30) == 1
    assert role.stopped  # stopped in order all the same


async def test_a_clean_stop_is_status_0():
    stop = asyncio.Event()

    async def runs() -> None:
        await stop.wait()

    role = LoopRole(runs)
    asyncio.get_running_loop().call_later(0.05, stop.set)
    assert await asyncio.wait_for(run_roles([role], stop=stop), 30) == 0


async def test_a_loop_that_keeps_crashing_gives_up_and_one_that_recovers_does_not():
    ticks = itertools.count(step=20.0)  # every reading of the clock 20 s later
    stop = asyncio.Event()
    tasks = Tasks(stop, give_up_s=100.0, clock=lambda: next(ticks))
    crashes = 0

    async def store_gone() -> None:
        nonlocal crashes
        crashes += 1
        raise OSError("the store is gone")

    await asyncio.wait_for(tasks.spawn("reflector", store_gone), 30)
    assert stop.is_set() and "kept crashing for 100 s" in tasks.failure
    assert 2 <= crashes <= 4

    # a loop that runs a minute between its crashes is not failing: it is restarted each time
    stop = asyncio.Event()
    ticks = itertools.count(step=70.0)
    tasks = Tasks(stop, give_up_s=100.0, clock=lambda: next(ticks))
    runs = 0

    async def sometimes_crashes() -> None:
        nonlocal runs
        runs += 1
        if runs == 6:
            stop.set()
            return
        raise OSError("a bad message")

    await asyncio.wait_for(tasks.spawn("reflector", sometimes_crashes), 30)
    assert runs == 6 and tasks.failure == ""
