"""The scheduler learns from four weeks of postings; the crawler forgets older ones as it runs,
so the postings table (a row per new entry) does not grow for ever."""

from __future__ import annotations

import asyncio
import logging

from feedmesh.clock import ManualClock
from feedmesh.crawl import Crawler
from feedmesh.crawl.scheduled import HISTORY_DAYS, ScheduledCrawler
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.model import Entry
from feedmesh.schedule import SchedulerSettings
from feedmesh.store import FeedUpdate
from feedmesh.store.sqlite import SQLiteStore
from tests.eventually import eventually

NOW = 1_760_000_000.0
DAY = 86400.0


async def test_postings_older_than_the_history_are_pruned_when_the_crawler_runs(tmp_path,
                                                                               caplog):
    store = SQLiteStore(tmp_path / "feeds.db")
    # A feed on a port nothing listens on: its fetches fail, which is not what is tested.
    (feed,) = store.add_feeds(["http://127.0.0.1:9/feed.xml"], now=NOW - 60 * DAY)
    ages_days = [45, 40, 30, 29, 27, 10, 1]
    for age in ages_days:
        store.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=NOW - age * DAY,
                                entries=(Entry(key=f"e{age}", content_hash=f"h{age}",
                                              title=f"{age} days old"),))])
    clock = ManualClock(NOW)
    caplog.set_level(logging.INFO, logger="feedmesh.crawl.scheduled")
    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",)), clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock)
        await crawler.load()
        live = ScheduledCrawler(crawler, store, clock, SchedulerSettings(policy="uniform"))
        live.start()
        stop = asyncio.Event()
        task = asyncio.create_task(live.run(stop))

        def kept() -> list[float]:
            return [round((NOW - p.first_seen_at) / DAY) for p in store.postings(feed.id)]

        await eventually(lambda: kept() == [27, 10, 1])
        stop.set()
        await task
        await crawler.aclose()
    store.close()
    assert f"postings_pruned rows=4 before={NOW - HISTORY_DAYS * DAY:.0f}" in caplog.text


async def test_pruning_goes_a_batch_at_a_time(tmp_path):
    store = SQLiteStore(tmp_path / "feeds.db")
    (feed,) = store.add_feeds(["http://127.0.0.1:9/feed.xml"], now=0.0)
    for t in range(1, 26):
        store.apply([FeedUpdate(feed_id=feed.id, state=feed.state, seen_at=float(t),
                                entries=(Entry(key=str(t), content_hash=f"h{t}", title=str(t)),))])
    clock = ManualClock(100.0)
    async with Fetcher(FetchSettings(), clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock)
        assert await crawler.prune_postings(before=21.0, pause_s=0.0, batch=6) == 20
        await crawler.aclose()
    assert [p.first_seen_at for p in store.postings(feed.id)] == [21.0, 22.0, 23.0, 24.0, 25.0]
    store.close()
