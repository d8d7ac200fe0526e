"""The bad-input checklist over real HTTP: one farm feed per fault, crawled in one cycle beside
healthy feeds. Each fault yields its precise outcome or a correct recovery; nothing crashes; the
healthy feeds of the same cycle are unaffected."""

from __future__ import annotations

import re
import time

import pytest

from feedmesh.clock import SystemClock
from feedmesh.crawl import Crawler, CrawlSettings
from feedmesh.farm import FarmConfig, FarmProcess, Fault
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.store.sqlite import SQLiteStore

ORIGIN = 1_760_000_000.0

# fault -> (last_outcome after one crawl, parse problem recorded or None)
EXPECTED: dict[Fault, tuple[str, str | None]] = {
    Fault.SLOW: ("ok", None),
    Fault.SLOW_BODY: ("timeout", None),
    Fault.TIMEOUT: ("timeout", None),
    Fault.HTTP_500: ("server_error", None),
    Fault.HTTP_502: ("server_error", None),
    Fault.HTTP_503: ("rate_limited", None),
    Fault.RATE_LIMIT: ("rate_limited", None),
    Fault.RATE_LIMIT_DATE: ("rate_limited", None),
    Fault.REDIRECT_301: ("ok", None),
    Fault.REDIRECT_302: ("ok", None),
    Fault.REDIRECT_307: ("ok", None),
    Fault.REDIRECT_308: ("ok", None),
    Fault.REDIRECT_LOOP: ("redirect_error", None),
    Fault.REDIRECT_PRIVATE: ("blocked", None),
    Fault.NOT_FOUND: ("not_found", None),
    Fault.GONE: ("gone", None),
    Fault.MALFORMED: ("ok", "malformed"),
    Fault.HTML: ("not_a_feed", "not_a_feed"),
    Fault.ENDLESS: ("too_large", None),
    Fault.HUGE: ("too_large", None),
    Fault.GZIP_BOMB: ("too_large", None),
    Fault.WRONG_CHARSET: ("ok", None),
    Fault.UTF16: ("ok", None),
    Fault.CHANGING_GUIDS: ("ok", None),
    Fault.DUPLICATE_GUIDS: ("ok", None),
    Fault.MISSING_DATES: ("ok", None),
    Fault.FUTURE_DATES: ("ok", None),
    Fault.FLOOD: ("ok", None),
}
HEALTHY = 6


@pytest.fixture(scope="module")
def faulty_farm():
    # In its own process: rendering the 10,000-entry flood must not stall the crawler's loop.
    faults = list(EXPECTED)
    overrides = {i: str(f) for i, f in enumerate(faults)}
    # No Cache-Control max-age: the second-crawl checks need every feed fetched again at once.
    config = FarmConfig(feeds=len(faults) + HEALTHY, seed=4, faults="none",
                        fault_overrides=overrides, origin=ORIGIN, speed=60.0, slow_delay_s=1.0,
                        max_age_share=0.0)
    with FarmProcess(config) as farm:
        yield farm, faults


async def test_every_fault_is_contained(faulty_farm, tmp_path):
    farm, faults = faulty_farm
    store = SQLiteStore(tmp_path / "faults.db")
    settings = FetchSettings(allow_networks=("127.0.0.0/8",), total_timeout_s=3.0,
                             connect_timeout_s=2.0, per_host_connections=64)
    async with Fetcher(settings, clock=SystemClock()) as fetcher:
        crawler = Crawler(store, fetcher, SystemClock(), settings=CrawlSettings(concurrency=64))
        ids = await crawler.add_feeds([farm.feed_url(i) for i in range(len(faults) + HEALTHY)])
        stats = await crawler.crawl()
        await crawler.aclose()
    outcomes = {fault: crawler.states[ids[i]] for i, fault in enumerate(faults)}
    # One cycle is bounded by the fetch deadline, not by the worst server: the cycle ended although
    # one server never answers and one trickles for far longer, because the deadline cut them off.
    for fault in (Fault.TIMEOUT, Fault.SLOW_BODY):
        limit = re.search(r"within ([0-9.]+) s", outcomes[fault].last_error)
        assert limit and 0 < float(limit[1]) <= 3.0, (fault, outcomes[fault].last_error)
    for fault, (outcome, _) in EXPECTED.items():
        state = outcomes[fault]
        assert state.last_outcome == outcome, (fault, state.last_outcome, state.last_error)
        if outcome != "ok":
            assert state.last_error, f"{fault}: a failure must carry a message"
            assert farm.feed_url(faults.index(fault)) in state.last_error, \
                f"{fault}: the message names the feed: {state.last_error}"
    assert not outcomes[Fault.GONE].active
    assert outcomes[Fault.REDIRECT_301].redirect_seen == 1  # confirmed only after 3 sightings
    assert outcomes[Fault.REDIRECT_302].redirect_seen == 0
    assert outcomes[Fault.RATE_LIMIT].not_before > time.time() + 60  # Retry-After honoured
    assert "private" in outcomes[Fault.REDIRECT_PRIVATE].last_error \
        or "metadata" in outcomes[Fault.REDIRECT_PRIVATE].last_error
    assert stats.errors.get("parse:malformed", 0) >= 1

    by_feed = {fid: len(store.entries(fid, limit=5000)) for fid in ids}
    for i in range(len(faults), len(faults) + HEALTHY):
        assert by_feed[ids[i]] > 0, "healthy feeds in the same cycle are unaffected"
    for fault in (Fault.MALFORMED, Fault.WRONG_CHARSET, Fault.UTF16, Fault.DUPLICATE_GUIDS,
                  Fault.MISSING_DATES, Fault.FUTURE_DATES, Fault.REDIRECT_301, Fault.SLOW):
        assert by_feed[ids[faults.index(fault)]] > 0, f"{fault}: entries recovered"
    assert by_feed[ids[faults.index(Fault.FLOOD)]] >= 1000
    store.close()


async def test_changing_guids_are_not_new_twice(faulty_farm, tmp_path):
    farm, faults = faulty_farm
    index = faults.index(Fault.CHANGING_GUIDS)
    store = SQLiteStore(tmp_path / "guids.db")
    async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",))) as fetcher:
        crawler = Crawler(store, fetcher, SystemClock())
        (_fid,) = await crawler.add_feeds([farm.feed_url(index)])
        first = await crawler.crawl()
        second = await crawler.crawl()
        await crawler.aclose()
    assert first.new_entries > 0
    assert second.fetched == 1 and second.parsed == 1  # a new document every time (new guids)
    assert second.new_entries <= 1  # at most a genuinely new post, never the old ones again
    store.close()
