"""Issue 5, section 5: the live crawler against an accelerated farm measures the delays the trace
simulator predicts for the same farm, policy and budget.

The farm and the crawler share one accelerated clock (two farm days pass in about a minute). The
farm's ground truth (when each post was made) becomes a trace; the simulator replays it with the
same scheduler settings. Live delay = when the crawler first saw an entry - when it was posted.
Both count the same posts: those made after the crawl started and early enough that a fetch
after them had time to happen before the run ended.

At 3,600x a real second is a farm hour, so anything that holds the crawler up for a second shows
as an hour of delay. The setup keeps such stalls out of the measured run: the scheduler's numba
kernels are compiled (a fresh clone has no cache) and the farm's documents rendered before the
clock is read, and the live crawler has no in-flight cap (nor one per host), like the simulator
it is compared with.
(With the default cap of 64 the first hour's burst of first fetches fills it, and
``ScheduledCrawler._wait`` then busy-waits on the overdue feeds, starving the store thread of the
GIL: commits took seconds and the run fell hours behind. See ``test_scheduled_cap.py``.)
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from feedmesh.clock import AcceleratedClock
from feedmesh.crawl import Crawler, CrawlSettings
from feedmesh.crawl.scheduled import ScheduledCrawler
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.model import FetchOutcome
from feedmesh.schedule import FetchReport, Scheduler, SchedulerSettings
from feedmesh.schedule.simulator import SimWindow, simulate
from feedmesh.store.sqlite import SQLiteStore

ORIGIN = 1_760_000_400.0
SPEED = 3600.0
FEEDS = 240
DAYS = 1.5
GUARD_S = 6 * 3600.0  # posts in the last six hours may not have been fetched yet: not counted


def compile_scheduler(settings: SchedulerSettings) -> None:
    """Run a throwaway scheduler through the calls the live loop makes (add, pop, record, next
    due, refits over two days), so numba compiles its kernels now rather than mid-run."""
    scheduler = Scheduler(settings)
    now = ORIGIN
    for i in range(4):
        scheduler.add_feed(str(i), now=now, host=f"h{i % 2}",
                           history=[now - 3600.0 * k for k in range(1, 9)])
    end = now + 2 * 86400.0
    while now < end:
        for feed_id in scheduler.pop_due(now, 8):
            outcome = FetchOutcome.OK if int(feed_id) % 2 else FetchOutcome.NOT_MODIFIED
            new = 1 if outcome is FetchOutcome.OK else 0
            scheduler.record(FetchReport(feed_id=feed_id, fetched_at=now, outcome=outcome,
                                         new_entries=new, published=(now - 60.0,) * new,
                                         entries_in_document=10))
        due = scheduler.next_due_at(now)
        now = max(now + 60.0, due if due is not None else now + 3600.0)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["uniform", "feedmesh"])
async def test_live_delays_agree_with_the_simulator(policy, tmp_path):
    # No cap on a host's fetches in flight either: a fetch of a few real milliseconds lasts
    # minutes of farm time, so two in flight to each of the farm's four hosts would queue the
    # crawl behind its own commits (live 88-118 min against 59 simulated), which the
    # simulator, whose fetches take no time, never does.
    settings = SchedulerSettings(policy=policy, budget_per_feed_per_day=12.0,
                                 first_fetch_spread_s=3600.0, host_concurrency=FEEDS)
    compile_scheduler(settings)
    clock = AcceleratedClock(speed=SPEED, origin=ORIGIN)
    config = FarmConfig(feeds=FEEDS, seed=31, faults="none", hosts=4, speed=SPEED,
                        origin=ORIGIN, max_age_share=0.0, ttl_share=0.0, skip_hours_share=0.0,
                        prerender=True)
    store = SQLiteStore(tmp_path / "live.db")
    async with FarmServer(config, clock=clock) as farm:
        fetch = FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=8)
        async with Fetcher(fetch, clock=clock) as fetcher:
            crawler = Crawler(store, fetcher, clock, settings=CrawlSettings(batch_interval_s=0.01))
            ids = await crawler.add_feeds([farm.feed_url(i) for i in range(FEEDS)])
            live = ScheduledCrawler(crawler, store, clock, settings, concurrency=FEEDS)
            live.start()
            started = clock.now()
            stop = asyncio.Event()
            task = asyncio.create_task(live.run(stop))
            await asyncio.sleep(DAYS * 86400.0 / SPEED)
            stop.set()
            await task
            ended = clock.now()
            await crawler.aclose()
        # The simulator's feeds list their last 10 entries; compare on the farm feeds that do
        # (a quarter of farm feeds list fewer, a quarter more, as real feeds do), and whose
        # format dates its entries (RSS 0.91 does not: their posting times are unknown live).
        tens = [i for i in range(FEEDS) if farm.model.spec(i).entries_cap == 10
                and farm.model.spec(i).format != "rss0.91"]
        truth = {ids[i]: np.array([p.time for p in farm.truth(i, since=started, until=ended)],
                                  dtype=np.float64) for i in tens}

    # Live: the first sighting of every post made in the counted span.
    counted_until = ended - GUARD_S
    postings = store.all_postings(since=started)
    live_delays = []
    for fid in truth:
        for posting in postings.get(fid, []):
            # (A post made after the start but before the feed's first fetch arrives in that
            # first document, flagged backlog: it still counts, as in the simulator.)
            if posting.published is None:
                continue
            if started <= posting.published <= counted_until:
                live_delays.append((posting.first_seen_at - posting.published) / 60.0)
    store.close()
    made = sum(int(((t >= started) & (t <= counted_until)).sum()) for t in truth.values())
    assert made > 80, "too few posts to compare"
    # Posts that scrolled out of a feed's document before a fetch are lost to a poller; the
    # simulator counts those too (feed_size entries visible), so the shares must agree.
    live_lost_pct = 100.0 * (1 - len(live_delays) / made)

    # Simulated: the same posts, the same settings, starting when the crawl started.
    window = SimWindow(start=started, train_end=started, end=counted_until,
                       feed_ids=[str(ids[i]) for i in tens],
                       hosts=[farm.model.spec(i).host for i in tens],
                       times=[t[t <= counted_until] for t in truth.values()])
    predicted = simulate(window, settings, tick_s=0.0)
    live_mean = float(np.mean(live_delays))
    print(f"{policy}: live mean {live_mean:.1f} min over {len(live_delays)} posts seen, "
          f"{live_lost_pct:.1f}% lost; simulated {predicted.mean_delay_min:.1f} min over "
          f"{predicted.postings}, {predicted.lost_pct:.1f}% lost")
    assert predicted.postings == made
    assert live_mean == pytest.approx(predicted.mean_delay_min, rel=0.25)
    assert abs(live_lost_pct - predicted.lost_pct) <= 10.0
