"""The live monitor against an accelerated farm: the crawler and the farm share one accelerated
clock, so hours of posting pass in seconds and the farm's request log is in the same time."""

from __future__ import annotations

import asyncio
import itertools
from bisect import bisect_left
from collections import Counter

import pytest

from feedmesh.clock import AcceleratedClock
from feedmesh.crawl import Crawler, CrawlSettings
from feedmesh.crawl.scheduled import ScheduledCrawler, host_of
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.fetch import BackoffPolicy, Fetcher, FetchSettings
from feedmesh.fetch.host_state import HostPause
from feedmesh.schedule import SchedulerSettings
from feedmesh.store.sqlite import SQLiteStore
from tests.eventually import eventually

ORIGIN = 1_760_000_000.0
SPEED = 1800.0  # half an hour of farm time per real second
HOST_PER_MINUTE = 6


def settings(**overrides) -> SchedulerSettings:
    fields = {"policy": "feedmesh", "budget_per_feed_per_day": 96.0,
              "host_max_per_minute": HOST_PER_MINUTE, "host_min_spacing_s": 5.0,
              "first_fetch_spread_s": 1800.0}
    fields.update(overrides)
    return SchedulerSettings(**fields)


async def run_for(farm: FarmServer, clock: AcceleratedClock, path, snapshot, real_s: float,
                  feeds: int, grants: list[tuple[str, float]] | None = None,
                  scheduler_settings: SchedulerSettings | None = None) -> ScheduledCrawler:
    store = SQLiteStore(path)
    fetch = FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=4)
    async with Fetcher(fetch, clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock, settings=CrawlSettings(batch_interval_s=0.01))
        await crawler.load()
        if not crawler.states:
            await crawler.add_feeds([farm.feed_url(i) for i in range(feeds)])
        live = ScheduledCrawler(crawler, store, clock, scheduler_settings or settings(),
                                snapshot_path=snapshot)
        live.start()  # restores (replaces) the scheduler from the snapshot
        if grants is not None:
            record_grants(live, crawler, grants)
        stop = asyncio.Event()
        task = asyncio.create_task(live.run(stop))
        await asyncio.sleep(real_s)
        stop.set()
        await task
        await crawler.aclose()
    store.close()
    return live


def record_grants(live: ScheduledCrawler, crawler: Crawler,
                  grants: list[tuple[str, float]]) -> None:
    """Log (host, instant) of every fetch the scheduler grants, on the clock it was given."""
    pop_due = live.scheduler.pop_due

    def logged(now: float, limit: int | None = None) -> list[str]:
        due = pop_due(now, limit)
        grants.extend((host_of(crawler.states[int(feed_id)].url), now) for feed_id in due)
        return due

    live.scheduler.pop_due = logged  # type: ignore[method-assign]


async def warm_up(tmp_path_factory) -> None:
    # At 1,800x a second of real time is half a farm hour: compile the scheduler's numba kernels
    # (a fresh clone has no cache) on a throwaway farm first, so the measured runs do not stall.
    warm_clock = AcceleratedClock(speed=SPEED, origin=ORIGIN)
    warm_dir = tmp_path_factory.mktemp("warm")
    async with FarmServer(FarmConfig(feeds=6, seed=3, faults="none", hosts=1, speed=SPEED,
                                     origin=ORIGIN), clock=warm_clock) as warm:
        await run_for(warm, warm_clock, warm_dir / "warm.db", warm_dir / "warm.bin", 3.0, 6)


@pytest.fixture
async def farm_and_clock(tmp_path_factory):
    await warm_up(tmp_path_factory)
    clock = AcceleratedClock(speed=SPEED, origin=ORIGIN)
    config = FarmConfig(feeds=60, seed=12, faults="none", hosts=3, speed=SPEED, origin=ORIGIN,
                        max_age_share=0.0)
    async with FarmServer(config, clock=clock) as farm:
        yield farm, clock


async def test_politeness_budget_and_restart_without_a_burst(farm_and_clock, tmp_path):
    farm, clock = farm_and_clock
    db, snapshot = tmp_path / "live.db", tmp_path / "schedule.bin"
    grants: list[tuple[str, float]] = []
    first = await run_for(farm, clock, db, snapshot, 8.0, 60, grants)  # ~4 farm hours
    assert snapshot.exists()
    stopped_at = clock.now()
    assert first.stats.fetched > 60 and first.stats.new_entries > 0

    second = await run_for(farm, clock, db, snapshot, 4.0, 60, grants)  # ~2 more hours, restored
    assert second.stats.fetched > 0

    requests = [r for r in farm.requests() if r.feed is not None]
    # Politeness, as the scheduler decided it (on the clock it was given, across the restart):
    # no host is granted more than its limit in any 60 s, nor two fetches closer than 5 s.
    by_host: dict[str, list[float]] = {}
    for host, at in grants:
        by_host.setdefault(host, []).append(at)
    for host, times in by_host.items():
        times.sort()
        busiest = max(bisect_left(times, t + 60.0) - i for i, t in enumerate(times))
        assert busiest <= HOST_PER_MINUTE, f"{host}: {busiest} fetches granted within 60 s"
        assert min(b - a for a, b in itertools.pairwise(times)) >= 5.0 - 1e-6
    # On the wire: every request the farm saw was one the scheduler granted (nothing bypasses
    # it). Arrival times are not checked against the 60 s window: at 1,800x one real millisecond
    # between the grant and the farm's handler is 1.8 farm seconds, so a fetch granted at the end
    # of one farm minute can land in the next. The spacing holds on the whole.
    assert Counter(r.host for r in requests) == Counter(host for host, _ in grants)
    arrivals: dict[str, list[float]] = {}
    for r in requests:
        arrivals.setdefault(r.host, []).append(r.farm_time)
    for times in arrivals.values():
        times.sort()
        gaps = sorted(b - a for a, b in itertools.pairwise(times))
        assert gaps[len(gaps) // 10] >= 5.0 - 0.5  # 90% of gaps honour the spacing exactly
    # Budget: 96 fetches a feed a day is 4 an hour; over ~6 hours of 60 feeds, well under 2x.
    hours = (clock.now() - ORIGIN) / 3600
    assert len(requests) <= 2 * 4 * 60 * hours
    # Restart: the restored schedule spreads what fell due while stopped instead of a burst.
    after = sorted(r.farm_time for r in requests if r.farm_time >= stopped_at)
    first_ten_minutes = [t for t in after if t < after[0] + 600]
    assert len(first_ten_minutes) <= 3 * 10 * HOST_PER_MINUTE


async def test_every_fetch_is_reported_to_the_scheduler(farm_and_clock, tmp_path):
    farm, clock = farm_and_clock
    live = await run_for(farm, clock, tmp_path / "r.db", None, 5.0, 20)
    statuses = live.scheduler.statuses()
    assert len(statuses) == 20
    assert all(s.last_fetch_at is not None for s in statuses)
    learned = [s for s in statuses if s.window_rate_per_day > 0]
    assert learned, "posting rates are learned from what the fetches found"


async def test_a_page_that_is_not_a_feed_waits_for_the_fetch_states_backoff(tmp_path_factory,
                                                                          tmp_path):
    # The farm answers 200 with an HTML page for feed 1: the outcome is OK, the fetch state backs
    # off (not_a_feed, doubling). The scheduler must follow that, not its plan: here one fetch
    # every 5 minutes, which the page would otherwise get.
    await warm_up(tmp_path_factory)
    clock = AcceleratedClock(speed=SPEED, origin=ORIGIN)
    config = FarmConfig(feeds=4, seed=5, faults="none", fault_overrides={1: "html"}, hosts=1,
                        speed=SPEED, origin=ORIGIN, max_age_share=0.0)
    every_five_minutes = settings(policy="uniform", budget_per_feed_per_day=288.0)
    async with FarmServer(config, clock=clock) as farm:
        live = await run_for(farm, clock, tmp_path / "html.db", None, 4.0, 4,
                             scheduler_settings=every_five_minutes)  # ~2 farm hours
        fetched = sorted(r.farm_time for r in farm.requests() if r.feed == 1)
    (feed_id,) = [i for i, s in live.crawler.states.items() if s.url == farm.feed_url(1)]
    page = live.crawler.states[feed_id]
    assert page.last_outcome == "not_a_feed" and page.errors == len(fetched) >= 3
    base = BackoffPolicy().base_s  # what the crawler's fetch state uses
    for k, (a, b) in enumerate(itertools.pairwise(fetched)):
        assert b - a >= 0.98 * base * 2**k, f"fetch {k + 2} came {b - a:.0f} s after the last"
    assert live.scheduler.status(str(feed_id)).next_due_at >= page.not_before


async def test_a_host_that_cannot_be_reached_is_paused_in_the_schedulers_host_table(
        farm_and_clock, tmp_path):
    # 20 feeds on an address where nothing listens, beside the farm's 60, all due in the first
    # farm minute. Each dead feed backs off only after its own failure, so the host would be
    # tried 20 times; paused after 5 failures in a row, it is tried once a pause after that.
    farm, clock = farm_and_clock
    port = int(farm.feed_url(0).split(":")[2].split("/")[0])
    dead = [f"http://127.0.3.9:{port}/feeds/{i}" for i in range(20)]
    store = SQLiteStore(tmp_path / "dead.db")
    fetch = FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=4)
    async with Fetcher(fetch, clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock, settings=CrawlSettings(batch_interval_s=0.01))
        await crawler.add_feeds([farm.feed_url(i) for i in range(60)] + dead)
        live = ScheduledCrawler(crawler, store, clock, settings(
            host_min_spacing_s=1.0, host_max_per_minute=60, first_fetch_spread_s=60.0))
        live.start()
        grants: list[tuple[str, float]] = []
        record_grants(live, crawler, grants)
        pauses: list[HostPause] = []
        record = crawler.hosts.record

        def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
            pause = record(*args, **kwargs)  # the crawler's own rule, observed
            if pause is not None:
                pauses.append(pause)
            return pause

        crawler.hosts.record = recording  # type: ignore[method-assign]
        stop = asyncio.Event()
        task = asyncio.create_task(live.run(stop))
        await eventually(lambda: len(pauses) >= 3, timeout=30.0)
        stop.set()
        await task
        refused = live.stats.errors.get("connection_error", 0)
        hosts = live.scheduler.state.hosts
        blocked_until = hosts.state(hosts.row("127.0.3.9"))[2]
        await crawler.aclose()
    store.close()
    assert [p.host for p in pauses] == ["127.0.3.9"] * len(pauses)
    assert [p.pauses for p in pauses] == list(range(1, len(pauses) + 1))
    # Five in a row, then one probe per pause: no fetch of the host starts while it is paused
    # (16 of the 20 did, in a run where the scheduler was not told).
    assert [p.failures for p in pauses] == list(range(5, 5 + len(pauses)))
    for pause in pauses:
        began = pause.until - 60.0 * 2 ** (pause.pauses - 1)
        during = [t for host, t in grants if host == "127.0.3.9" and began <= t < pause.until]
        assert not during, f"fetches started during pause {pause.pauses}: {during}"
    assert refused >= 5 + len(pauses) - 1
    assert blocked_until >= pauses[-1].until  # the scheduler holds the pause
    assert live.stats.ok > 0  # the farm's feeds went on being fetched
