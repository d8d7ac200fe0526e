"""The live monitor with its in-flight cap full: it waits for a fetch to end, it does not spin.

When ``concurrency`` fetches are in flight and another feed is already due, ``ScheduledCrawler``
has nothing to do until a fetch ends. ``_wait`` used to sleep until the (past) due time, that
was ``clock.sleep(0)``, so the loop turned on every event-loop iteration (about 11,000 times a
second measured) and held the GIL. The store thread then waited for the GIL on every SQLite call,
commits took seconds instead of milliseconds, the in-flight fetches (which end at their commit)
did not end, and the spin fed itself. That is what made
``test_live_vs_simulated.py::test_live_delays_agree_with_the_simulator[uniform]`` flaky.

It failed before ``_wait`` learnt to wait for a fetch to end when every slot is taken.
"""

from __future__ import annotations

import asyncio

from feedmesh.clock import AcceleratedClock
from feedmesh.crawl.pipeline import FeedOutcome
from feedmesh.crawl.scheduled import ScheduledCrawler
from feedmesh.fetch.host_state import HostHealth
from feedmesh.fetch.state import FeedFetchState
from feedmesh.model import FetchOutcome, FetchResult
from feedmesh.schedule import SchedulerSettings
from feedmesh.store.sqlite import SQLiteStore
from tests.eventually import eventually

ORIGIN = 1_760_000_000.0
LOOP_TURNS = 200


class HeldCrawler:
    """Fetches that end (304) only when ``release`` is set."""

    def __init__(self, clock: AcceleratedClock) -> None:
        self.clock = clock
        self.release = asyncio.Event()
        self.started = 0
        self.hosts = HostHealth()

    async def fetch_feed(self, feed_id: int, stats: object = None) -> FeedOutcome:
        self.started += 1
        fetched_at = self.clock.now()
        await self.release.wait()
        url = f"http://h{feed_id}.example/feed"
        return FeedOutcome(feed_id=feed_id, state=FeedFetchState(url=url),
                           result=FetchResult(url=url, outcome=FetchOutcome.NOT_MODIFIED,
                                              fetched_at=fetched_at))


async def test_a_full_cap_waits_for_a_fetch_to_end() -> None:
    clock = AcceleratedClock(speed=1.0, origin=ORIGIN)
    crawler = HeldCrawler(clock)
    settings = SchedulerSettings(policy="uniform", budget_per_feed_per_day=24.0,
                                 first_fetch_spread_s=0.0)
    live = ScheduledCrawler(crawler, SQLiteStore(":memory:"), clock, settings,  # type: ignore[arg-type]
                            concurrency=2)
    for feed_id in range(3):  # three feeds due now, on three hosts: one must wait for room
        live.scheduler.add_feed(str(feed_id), now=clock.now(), host=f"h{feed_id}.example")
    turns = 0
    next_due_at = live.scheduler.next_due_at

    def counted(now: float | None = None) -> float | None:
        nonlocal turns
        turns += 1
        return next_due_at(now)

    live.scheduler.next_due_at = counted  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(live.run(stop))
    try:
        await eventually(lambda: crawler.started == 2, what="two fetches in flight")
        await eventually(lambda: live.scheduler.next_due_at(clock.now()) <= clock.now(),
                         what="the third feed is due")
        turns = 0
        for _ in range(LOOP_TURNS):  # the event loop moves on; the monitor has nothing to do
            await asyncio.sleep(0)
        assert turns <= 2, f"the monitor turned {turns} times in {LOOP_TURNS} loop iterations"
    finally:
        crawler.release.set()
        stop.set()
        await task
