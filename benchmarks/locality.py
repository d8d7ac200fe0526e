"""Locality-aware feed mapping (Cobra 3.7, Figure 9): crawl time per feed and crawl-cycle makespan
with random assignment, Cobra's first-fit mapping and ours (equal work, near first).

The testbed, all on loopback:

* the farm (its own process) serves the feeds from ``--hosts`` addresses 127.0.1.1.. spread over
  three regions as feeds are on the Web (half in North America, 30% in Europe, 20% in Asia), and
  emulates the wide-area network: each answer waits for its round trips between the client's
  region and the host's (:class:`feedmesh.farm.Geography`: 20-250 ms, handshake, slow start,
  jitter);
* ``--crawlers`` real fetchers (:class:`feedmesh.fetch.Fetcher`), each sending from its own
  address 127.0.1.201.. in a region (as Cobra's 11 PlanetLab crawlers in North America, Europe
  and Asia), each with ``--concurrency`` requests in flight and at most 2 per host;
* the monitor's view, which the mappings may use: each feed's posting rate estimated from its
  last 30 days of posts, and its size from one fetch (by a client the geography does not place);
* the latency matrix for Cobra's mapping and ours is *measured*: HEAD probes from each crawler's
  address to one feed per host (:class:`feedmesh.locality.probe.ProbeEstimator`).

A crawl cycle: every feed is fetched ``n`` times, ``n`` its polls per cycle (one per expected post
over ``--cycle-hours``, within [1, ``--max-polls``]: posting rates are heavy-tailed, so a few feeds
cost many times the median); a crawler works through its shuffled list; the cycle's makespan is
when its last crawler finishes. Fetches are unconditional (a feed polled in step with its posting
finds something new nearly every time), so each mapping is given the same work to do.
Mappings run interleaved, cycle by cycle, so background load falls on all three alike.

    .venv/bin/python benchmarks/locality.py [--quick] [--feeds 3000] [--hosts 90] [--cycles 3]
                                            [--per-crawler]

Last line: JSON with ``median_ms_random``, ``median_ms_cobra``, ``median_ms_ours``,
``makespan_s_cobra``, ``makespan_s_ours`` and the rest of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time

import numpy as np

from feedmesh.farm import FarmConfig, FarmModel, FarmProcess, Geography
from feedmesh.fetch import Fetcher, FetchRequest, FetchSettings
from feedmesh.locality import (
    CrawlerSite,
    FeedLoad,
    balanced,
    fetches_per_cycle,
    first_fit,
    group_by_host,
    random_assignment,
    work,
)
from feedmesh.locality.probe import ProbeEstimator

ORIGIN = 1_760_000_000.0
HOST_SHARES = {"na": 0.5, "eu": 0.3, "asia": 0.2}
CRAWLER_REGIONS = ["na", "eu", "asia"]  # dealt in turn: 11 crawlers -> 4 na, 4 eu, 3 asia
LOOPBACK = ("127.0.0.0/8",)


def crawler_sites(count: int) -> tuple[list[CrawlerSite], dict[str, str]]:
    sites, regions = [], {}
    for i in range(count):
        region = CRAWLER_REGIONS[i % 3]
        site = CrawlerSite(f"{region}-{i // 3 + 1}", f"127.0.1.{201 + i}")
        sites.append(site)
        regions[site.source_address] = region
    return sites, regions


def host_regions(hosts: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return rng.choice(list(HOST_SHARES), size=hosts, p=list(HOST_SHARES.values())).tolist()


async def monitor_view(urls: list[str], model: FarmModel, cycle_s: float,
                       max_polls: float) -> tuple[list[float], list[int], list[float]]:
    """Polls per cycle (from the estimated posting rate), bytes per fetch, and the local time
    of a fetch with no emulated delay (this machine's own share of every crawl time)."""
    now = ORIGIN  # the farm starts here: the monitor has seen the 30 days before
    polls = []
    for feed_id in range(len(urls)):
        posted = len(model.posts(feed_id, now - 30 * 86400.0, now))
        polls.append(fetches_per_cycle(posted / 30.0, cycle_s, max_polls))
    sizes, local = [0] * len(urls), []
    settings = FetchSettings(allow_networks=LOOPBACK, source_address="127.0.1.250",
                             max_connections=64, per_host_connections=2)
    async with Fetcher(settings) as fetcher:
        queue = list(range(len(urls)))

        async def worker() -> None:
            while queue:
                feed_id = queue.pop()
                result = await fetcher.fetch(FetchRequest(url=urls[feed_id]))
                sizes[feed_id] = result.wire_bytes
                local.append(result.elapsed_s)

        await asyncio.gather(*(worker() for _ in range(8)))
    return polls, sizes, local


async def crawl_cycle(mapping: dict[str, str], urls: list[str], polls: list[float],
                      sites: list[CrawlerSite], concurrency: int, seed: int) -> dict:
    """Every crawler fetches its feeds (each ``round(polls)`` times) at once; per fetch times
    and each crawler's finishing time."""
    times: list[float] = []
    failures = 0
    finished: dict[str, float] = {}
    started = time.perf_counter()

    async def crawler(site: CrawlerSite) -> None:
        nonlocal failures
        mine = [int(feed) for feed, owner in mapping.items() if owner == site.name]
        todo = [feed for feed in mine for _ in range(max(1, round(polls[feed])))]
        random.Random(f"{seed}:{site.name}").shuffle(todo)
        settings = FetchSettings(allow_networks=LOOPBACK, source_address=site.source_address,
                                 max_connections=64, per_host_connections=2, accept_delta=False)
        async with Fetcher(settings) as fetcher:
            async def worker() -> None:
                nonlocal failures
                while todo:
                    result = await fetcher.fetch(FetchRequest(url=urls[todo.pop()]))
                    if result.ok:
                        times.append(result.elapsed_s)
                    else:
                        failures += 1
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        finished[site.name] = time.perf_counter() - started

    await asyncio.gather(*(crawler(site) for site in sites))
    return {"times": times, "finished": finished, "failures": failures,
            "makespan": max(finished.values())}


async def run(args: argparse.Namespace) -> dict:
    sites, client_regions = crawler_sites(args.crawlers)
    regions = host_regions(args.hosts, args.seed)
    geography = Geography(host_regions=regions, clients=client_regions)
    config = FarmConfig(feeds=args.feeds, hosts=args.hosts, seed=args.seed, faults="none",
                        origin=ORIGIN, speed=1.0, geography=geography, prerender=True)
    cycle_s = args.cycle_hours * 3600.0
    with FarmProcess(config, cpu=0) as farm:
        urls = [farm.feed_url(i) for i in range(args.feeds)]
        model = FarmModel(config, farm.base_urls)
        t0 = time.perf_counter()
        polls, sizes, local = await monitor_view(urls, model, cycle_s, args.max_polls)
        monitor_s = time.perf_counter() - t0
        groups = group_by_host({str(i): url for i, url in enumerate(urls)})
        group_of = {feed: g.key for g in groups for feed in g.feeds}
        t0 = time.perf_counter()
        probe = ProbeEstimator(probes=args.probes, allow_networks=LOOPBACK)
        latency = await probe.estimate(sites, groups)
        probe_s = time.perf_counter() - t0
        loads = [FeedLoad(str(i), group_of[str(i)], float(max(1, round(polls[i]))), sizes[i])
                 for i in range(args.feeds)]
        names = [s.name for s in sites]
        # The crawler's own time per fetch, as the monitor's undelayed fetches measured it.
        overhead_s = statistics.median(local)
        mappings = {
            "random": random_assignment([load.feed for load in loads], names, args.seed),
            "cobra": first_fit(loads, names, latency),
            "ours": balanced(loads, names, latency, overhead_s=overhead_s),
        }
        results: dict[str, list[dict]] = {name: [] for name in mappings}
        for cycle in range(args.cycles):
            for name, mapping in mappings.items():
                results[name].append(await crawl_cycle(mapping, urls, polls, sites,
                                                       args.concurrency, args.seed + cycle))
    region_of_host = {g.key: regions[int(g.key.split(":")[0].rsplit(".", 1)[1]) - 1]
                      for g in groups}
    region_of_site = {s.name: client_regions[s.source_address] for s in sites}
    summary = {}
    for name, mapping in mappings.items():
        times = sorted(t for r in results[name] for t in r["times"])
        predicted = work(mapping, loads, names, latency, overhead_s)
        home = sum(1 for load in loads
                   if region_of_host[load.group] == region_of_site[mapping[load.feed]])
        if args.per_crawler:
            for site in names:
                mine = [load for load in loads if mapping[load.feed] == site]
                print(f"    {name:6} {site:7} feeds {len(mine):4} fetches "
                      f"{sum(load.fetches_per_cycle for load in mine):5.0f} predicted "
                      f"{predicted[site]:6.2f} s, done after "
                      + " ".join(f"{r['finished'][site]:6.2f}" for r in results[name]) + " s")
        summary[name] = {
            "median_ms": 1000 * statistics.median(times),
            "p90_ms": 1000 * times[int(0.9 * (len(times) - 1))],
            "makespan_s": statistics.median(r["makespan"] for r in results[name]),
            "fetches": len(times), "failures": sum(r["failures"] for r in results[name]),
            "home_share": home / len(loads),
            "finish_spread": statistics.median(min(r["finished"].values()) / r["makespan"]
                                               for r in results[name]),
            "predicted_max_work_s": max(predicted.values()),
            "predicted_spread": min(predicted.values()) / max(predicted.values()),
            "mean_finish_s": statistics.median(statistics.mean(r["finished"].values())
                                               for r in results[name]),
            "feeds_per_crawler": sorted(sum(1 for c in mapping.values() if c == n) for n in names),
        }
    polls_rounded = [max(1, round(p)) for p in polls]
    return {"summary": summary, "probe_s": probe_s, "probe_requests": probe.requests,
            "probe_failures": len(probe.failures), "monitor_s": monitor_s,
            "local_ms": 1000 * statistics.median(local), "groups": len(groups),
            "polls_median": statistics.median(polls_rounded), "polls_max": max(polls_rounded),
            "polls_total": sum(polls_rounded),
            "bytes_median": statistics.median(sizes), "bytes_max": max(sizes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small run (under 2 minutes)")
    parser.add_argument("--feeds", type=int, default=3000)
    parser.add_argument("--hosts", type=int, default=90)
    parser.add_argument("--crawlers", type=int, default=11)
    parser.add_argument("--concurrency", type=int, default=3, help="fetches in flight per crawler")
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--cycle-hours", type=float, default=6.0)
    parser.add_argument("--max-polls", type=float, default=48.0,
                        help="cap on polls per feed and cycle (default: one per expected post)")
    parser.add_argument("--probes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--per-crawler", action="store_true",
                        help="print each crawler's predicted work and finishing times")
    args = parser.parse_args()
    if args.quick:
        args.feeds, args.hosts, args.cycles, args.probes = 800, 45, 1, 2
    if not 1 <= args.hosts <= 200 or not 1 <= args.crawlers <= 45:
        parser.error("--hosts must be within 1..200 and --crawlers within 1..45 "
                     "(crawlers use 127.0.1.201..)")
    started = time.perf_counter()
    out = asyncio.run(run(args))
    s = out["summary"]
    print(f"locality: {args.feeds} feeds on {out['groups']} hosts (na/eu/asia 50/30/20%), "
          f"{args.crawlers} crawlers x {args.concurrency} in flight, {args.cycles} cycle(s)")
    print(f"  polls per feed and cycle: median {out['polls_median']}, max {out['polls_max']}, "
          f"total {out['polls_total']}; feed bytes median {out['bytes_median']:.0f}, "
          f"max {out['bytes_max']}")
    print(f"  probes: {out['probe_requests']} HEAD requests in {out['probe_s']:.1f} s "
          f"({out['probe_failures']} failed); local fetch time without delay "
          f"{out['local_ms']:.1f} ms (median)")
    print(f"  {'mapping':8} {'median ms':>10} {'p90 ms':>8} {'makespan s':>11} "
          f"{'first/last done':>16} {'predicted':>10} {'mean done s':>12} {'home':>6} "
          f"{'feeds per crawler':>18}")
    for name, row in s.items():
        print(f"  {name:8} {row['median_ms']:10.1f} {row['p90_ms']:8.1f} "
              f"{row['makespan_s']:11.2f} {row['finish_spread']:16.2f} "
              f"{row['predicted_spread']:10.2f} {row['mean_finish_s']:12.2f} "
              f"{row['home_share']:6.0%} {row['feeds_per_crawler'][0]:>8}-"
              f"{row['feeds_per_crawler'][-1]}")
    cut_cobra = 1 - s["cobra"]["median_ms"] / s["random"]["median_ms"]
    cut_ours = 1 - s["ours"]["median_ms"] / s["random"]["median_ms"]
    makespan_cut = 1 - s["ours"]["makespan_s"] / s["cobra"]["makespan_s"]
    print(f"  median vs random: cobra -{cut_cobra:.0%}, ours -{cut_ours:.0%} "
          f"(Cobra's paper: 197 -> 160 ms, -18%); makespan ours vs cobra: -{makespan_cut:.0%}")
    print(f"  wall time {time.perf_counter() - started:.0f} s")
    print(json.dumps({
        "median_ms_random": round(s["random"]["median_ms"], 1),
        "median_ms_cobra": round(s["cobra"]["median_ms"], 1),
        "median_ms_ours": round(s["ours"]["median_ms"], 1),
        "makespan_s_cobra": round(s["cobra"]["makespan_s"], 2),
        "makespan_s_ours": round(s["ours"]["makespan_s"], 2),
        "makespan_s_random": round(s["random"]["makespan_s"], 2),
        "p90_ms_random": round(s["random"]["p90_ms"], 1),
        "p90_ms_cobra": round(s["cobra"]["p90_ms"], 1),
        "p90_ms_ours": round(s["ours"]["p90_ms"], 1),
        "median_cut_cobra_vs_random": round(cut_cobra, 3),
        "median_cut_ours_vs_random": round(cut_ours, 3),
        "makespan_cut_ours_vs_cobra": round(makespan_cut, 3),
        "feeds": args.feeds, "hosts": out["groups"], "crawlers": args.crawlers,
        "cycles": args.cycles, "probe_requests": out["probe_requests"],
    }))


if __name__ == "__main__":
    main()
