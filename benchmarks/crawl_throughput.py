"""Crawl throughput: feeds per second through fetch + parse + dedup + store, against the farm.

The farm runs in its own process pinned to core 0, the crawler in this one pinned to core 1 (this
machine has two). The farm's clock runs so that one crawl cycle spans about 15 farm minutes (Cobra's
crawl interval), which gives the realistic share of unchanged feeds: most answer 304 or an
identical document, a few per cent bring new entries.

For each size: cycle 1 (every feed new: all fetched whole and parsed) and the steady-state
cycles after it; feeds/s is the median of the steady cycles. State bytes per feed is what the
crawler keeps in memory per feed (its fetch state), measured with tracemalloc around loading it.

    .venv/bin/python benchmarks/crawl_throughput.py [--feeds 10000 100000] [--cycles 3]

Last line: JSON with ``feeds``, ``feeds_per_s``, ``state_bytes_per_feed`` (of the largest size)
and the per-size figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from feedmesh.clock import SystemClock
from feedmesh.crawl import Crawler, CrawlSettings
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.store.sqlite import SQLiteStore

CYCLE_FARM_SECONDS = 900.0


async def measure(feeds: int, cycles: int, hosts: int) -> dict:
    # A first guess of the cycle length sets the farm speed; 15 farm minutes per cycle.
    guess_s = max(2.0, feeds / 3000)
    config = FarmConfig(feeds=feeds, seed=1, faults="none", hosts=hosts,
                        speed=CYCLE_FARM_SECONDS / guess_s, origin=1_760_000_000.0)
    with FarmProcess(config, cpu=0) as farm, tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "crawl.db")
        settings = FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=64,
                                 max_connections=512)
        clock = SystemClock()
        async with Fetcher(settings, clock=clock) as fetcher:
            crawler = Crawler(store, fetcher, clock,
                              settings=CrawlSettings(concurrency=256, batch_size=500))
            urls = [farm.feed_url(i) for i in range(feeds)]
            await crawler.add_feeds(urls)
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            await crawler.load()
            state_bytes = (tracemalloc.get_traced_memory()[0] - before) / feeds
            tracemalloc.stop()
            rows = []
            for cycle in range(cycles + 1):
                started = time.perf_counter()
                stats = await crawler.crawl()
                elapsed = time.perf_counter() - started
                changed = stats.new_entries > 0
                rows.append({"cycle": cycle + 1, "seconds": round(elapsed, 2),
                             "feeds_per_s": round(stats.fetched / elapsed, 1),
                             "not_modified": stats.not_modified, "ok": stats.ok,
                             "unchanged_documents": stats.unchanged_documents,
                             "parsed": stats.parsed, "new_entries": stats.new_entries,
                             "errors": sum(stats.errors.values()), "changed": changed})
                print(f"  {feeds} feeds, cycle {cycle + 1}: {elapsed:.1f} s, "
                      f"{stats.fetched / elapsed:.0f} feeds/s, 304 {stats.not_modified}, "
                      f"200 {stats.ok} (unchanged {stats.unchanged_documents}), parsed "
                      f"{stats.parsed}, new entries {stats.new_entries}, errors "
                      f"{sum(stats.errors.values())}", flush=True)
            await crawler.aclose()
        store.close()
    steady = rows[1:]
    return {"feeds": feeds,
            "first_cycle_feeds_per_s": rows[0]["feeds_per_s"],
            "feeds_per_s": statistics.median(r["feeds_per_s"] for r in steady),
            "parsed_share_steady": round(statistics.median(r["parsed"] for r in steady) / feeds, 4),
            "state_bytes_per_feed": round(state_bytes, 1),
            "cycles": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feeds", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--cycles", type=int, default=3, help="steady-state cycles")
    parser.add_argument("--hosts", type=int, default=50, help="farm loopback hosts")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > 1:
        os.sched_setaffinity(0, {1})
    results = []
    for feeds in args.feeds:
        print(f"crawling {feeds} feeds ({args.cycles} steady cycles after the first)...",
              flush=True)
        results.append(asyncio.run(measure(feeds, args.cycles, args.hosts)))
    print()
    print(f"{'feeds':>8} {'first cycle':>12} {'steady feeds/s':>15} {'parsed share':>13} "
          f"{'state B/feed':>13}   goal: >= 1,000 feeds/s, <= 1,024 B/feed")
    for r in results:
        print(f"{r['feeds']:>8} {r['first_cycle_feeds_per_s']:>12.0f} {r['feeds_per_s']:>15.0f} "
              f"{r['parsed_share_steady']:>13.3f} {r['state_bytes_per_feed']:>13.0f}")
    largest = results[-1]
    print(json.dumps({"feeds": largest["feeds"], "feeds_per_s": largest["feeds_per_s"],
                      "state_bytes_per_feed": largest["state_bytes_per_feed"],
                      "first_cycle_feeds_per_s": largest["first_cycle_feeds_per_s"],
                      "by_size": {str(r["feeds"]): {k: r[k] for k in (
                          "feeds_per_s", "first_cycle_feeds_per_s", "state_bytes_per_feed",
                          "parsed_share_steady")} for r in results}}))


if __name__ == "__main__":
    main()
