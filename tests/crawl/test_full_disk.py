"""A full disk while crawling loses nothing: a commit that fails forgets what its fetches
taught (validators, document hashes), so the same documents are fetched again, whole, and stored
once there is room. SQLite's page limit makes the store full exactly as a full disk does."""

from __future__ import annotations

import logging

from feedmesh.clock import ManualClock
from feedmesh.crawl import Crawler, CrawlSettings
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.store.sqlite import SQLiteStore

ORIGIN = 1_800_000_000.0
FEEDS = 12


async def crawl_once(farm: FarmServer, store: SQLiteStore, clock: ManualClock) -> Crawler:
    fetch = FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=8)
    async with Fetcher(fetch, clock=clock) as fetcher:
        crawler = Crawler(store, fetcher, clock, settings=CrawlSettings(batch_interval_s=0.01))
        await crawler.load()
        if not crawler.states:
            await crawler.add_feeds([farm.feed_url(i) for i in range(FEEDS)])
        crawler.last_stats = await crawler.crawl()  # type: ignore[attr-defined]
        await crawler.aclose()
    return crawler


def stored_keys(store: SQLiteStore) -> dict[str, set[str]]:
    urls = {row.id: row.source_url for row in store.feeds()}
    keys: dict[str, set[str]] = {}
    for item in store.entries_after(0, 10**9):
        keys.setdefault(urls[item.feed_id], set()).add(item.entry.key)
    return keys


async def test_entries_fetched_while_the_disk_is_full_are_stored_once_it_has_room(
        tmp_path, caplog):
    clock = ManualClock(ORIGIN + 3 * 86400)  # the farm's documents stay as they are
    config = FarmConfig(feeds=FEEDS, seed=8, faults="none", origin=ORIGIN)
    async with FarmServer(config, clock=clock) as farm:
        store = SQLiteStore(tmp_path / "full.db")
        full = store._file._writer
        store.add_feeds([farm.feed_url(i) for i in range(FEEDS)], clock.now())
        pages = full.execute("PRAGMA page_count").fetchone()[0]
        full.execute(f"PRAGMA max_page_count = {pages}")
        caplog.set_level(logging.ERROR, logger="feedmesh.crawl")
        crawler = await crawl_once(farm, store, clock)
        stats = crawler.last_stats
        assert stats.fetched == FEEDS and stats.errors.get("store") == FEEDS, stats
        assert store.entry_count() == 0
        # Nothing the failed fetches taught was kept: no validators, no document hash.
        assert all(not row.state.etag and not row.state.doc_hash for row in store.feeds())
        failures = [r for r in caplog.records if "commit_failed" in r.getMessage()]
        assert len(failures) == 1 and "full" in failures[0].getMessage()  # one line, not 12

        full.execute("PRAGMA max_page_count = 1073741823")  # room again
        again = await crawl_once(farm, store, clock)
        assert again.last_stats.ok == FEEDS and again.last_stats.not_modified == 0

        reference = SQLiteStore(tmp_path / "reference.db")  # the same farm, never full
        await crawl_once(farm, reference, clock)
        assert stored_keys(store) == stored_keys(reference) != {}
        store.close()
        reference.close()
