"""A named crawler in one process (the embedded hub, SQLite, crawl cycles) following
its ownership table: feeds handed away stop being fetched once their fetches in flight are
committed, feeds handed to it are fetched from the store's fetch state, and its scheduler
adopts them. The processes-and-network version is tests/hub/test_ownership_moves.py."""

from __future__ import annotations

import msgspec
import pytest

from feedmesh.clock import ManualClock
from feedmesh.compose import open_feed_ownership
from feedmesh.crawl import Crawler
from feedmesh.crawl.scheduled import ScheduledCrawler
from feedmesh.farm import FarmConfig
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.schedule import SchedulerSettings
from feedmesh.store import FeedUpdate
from feedmesh.store.sqlite import SQLiteStore
from tests.eventually import eventually

from .conftest import ORIGIN


@pytest.fixture
def farm_config() -> FarmConfig:
    # a host per feed: the scheduler's per-host politeness does not hold the fetches back
    # (no publisher hint asks to be polled less often: every feed is fetched every cycle)
    return FarmConfig(feeds=10, hosts=10, seed=11, faults="none", speed=3600.0, origin=ORIGIN,
                      ttl_share=0.0, max_age_share=0.0, skip_hours_share=0.0)


@pytest.fixture
def hub_overrides():
    return {"crawler_name": "alpha"}


async def test_a_named_crawler_hands_feeds_over_and_takes_them_back(hub_env, tmp_path):
    hub, farm = hub_env.hub, hub_env.farm
    ids = await hub.add_feeds([farm.feed_url(n) for n in range(10)])
    table = open_feed_ownership(tmp_path / "feedmesh.db")
    try:
        assert {row.owner for row in table.owners().values()} == {"alpha"}  # claimed
        by_farm_id = dict(zip(range(10), ids, strict=True))

        def fetched_since(seq: int) -> set[int]:
            return {request.feed for request in farm.log.since(seq)
                    if request.status in (200, 304)}

        await eventually(lambda: fetched_since(0) >= set(range(10)), timeout=30)
        away = {by_farm_id[n] for n in range(5)}
        assert table.stage(dict.fromkeys(away, "beta")) == 5
        assert await hub.desk.owners.reconcile() is True  # it handed them over
        assert {f for f, row in table.owners().items() if row.owner == "beta"} == away
        assert all(table.owners()[f].epoch == 2 for f in away)
        assert set(hub.crawler.crawler.states) == set(ids) - away
        handed_at = farm.log.next_seq
        await eventually(lambda: fetched_since(handed_at) >= set(range(5, 10)), timeout=30)
        assert not fetched_since(handed_at) & set(range(5))  # nothing of what it gave away

        # beta leaves; its feeds come back at once, with what beta stored.
        assert table.transfer(dict.fromkeys(away, "alpha")) == 5
        assert await hub.desk.owners.reconcile() is False  # nothing to hand over
        assert set(hub.crawler.crawler.states) == set(ids)
        back_at = farm.log.next_seq
        await eventually(lambda: fetched_since(back_at) >= set(range(5)), timeout=30)
    finally:
        table.close()


async def test_the_scheduler_adopts_a_moved_feed_from_the_store_and_forgets_a_lost_one(tmp_path):
    """The learned schedule of a named crawler: a feed gained is scheduled from what the store
    holds (its last fetch; a feed never fetched soon), a feed lost is no longer scheduled."""
    store = SQLiteStore(tmp_path / "feedmesh.db")
    clock = ManualClock(ORIGIN)
    fetched, fresh = store.add_feeds(["http://127.0.1.1/a", "http://127.0.1.2/b"], now=ORIGIN)
    store.apply([FeedUpdate(feed_id=fetched.id, seen_at=ORIGIN - 600.0,
                            state=msgspec.structs.replace(fetched.state,
                                                          last_fetched_at=ORIGIN - 600.0))])
    async with Fetcher(FetchSettings(), clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock)
        crawler.owned = {}
        live = ScheduledCrawler(crawler, store, clock, SchedulerSettings(
            policy="feedmesh", budget_per_feed_per_day=96.0))
        live.start()
        for row in store.feeds():  # what CrawlerTier.gain does before it calls adopt
            crawler.owned[row.id] = 1
            crawler.states[row.id] = row.state
        live.adopt([fetched.id, fresh.id])
        assert ORIGIN <= live.next_fetch_at(fresh.id) <= ORIGIN + 1.0  # never fetched: soon
        assert str(fetched.id) in live.scheduler.feed_ids()
        assert live.scheduler.next_due_at(ORIGIN) <= ORIGIN + 1.0  # the fresh one first
        live.remove_feed(fresh.id)  # handed away: no longer scheduled
        assert live.next_fetch_at(fresh.id) is None
        assert str(fresh.id) not in live.scheduler.feed_ids()
        assert live.scheduler.next_due_at(ORIGIN) > ORIGIN + 60.0  # fetched 10 minutes ago
        await crawler.aclose()
    store.close()


async def test_a_crawler_not_told_of_a_transfer_is_fenced_off(hub_env, tmp_path):
    """The feeds go to another crawler while this one is not told (cut off from the bus, say):
    it goes on fetching them, and the store drops every such commit (the epoch moved on)."""
    hub, farm = hub_env.hub, hub_env.farm
    ids = await hub.add_feeds([farm.feed_url(n) for n in range(4)])
    store = hub.store
    table = open_feed_ownership(tmp_path / "feedmesh.db")
    try:
        def fetched_since(seq: int) -> set[int]:
            return {request.feed for request in farm.log.since(seq)
                    if request.status in (200, 304)}

        await eventually(lambda: all(store.feed(f).state.last_fetched_at for f in ids),
                         timeout=30)
        assert table.transfer(dict.fromkeys(ids[:2], "beta")) == 2
        before = {f: store.feed(f).state.last_fetched_at for f in ids}
        moved_at = farm.log.next_seq
        # it fetches all four again (it was not told) ...
        await eventually(lambda: fetched_since(moved_at) >= {0, 1, 2, 3}, timeout=30)
        await eventually(lambda: all(store.feed(f).state.last_fetched_at > before[f]
                                     for f in ids[2:]), timeout=30)
        # ... but only the commits of the feeds it still holds were stored, and the dropped
        # ones are counted
        assert all(store.feed(f).state.last_fetched_at == before[f] for f in ids[:2])
        await eventually(lambda: hub.metrics.fenced._value.get() >= 2, timeout=30)
    finally:
        table.close()
