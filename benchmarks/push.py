"""Issue 12, section 5: publishers that push versus polling them, and our own pushes' delay.

Two runs of the same farm (same seed, origin and speed, so the same posts at the same farm times),
each crawled by a whole feedmesh hub (every tier and its web server, the scheduler's ``feedmesh``
policy at ``--budget`` fetches per feed per day) on the farm's accelerated clock:

(a) **poll**: the farm serves its feeds only; the scheduler polls them at the budget;
(b) **push**: the farm advertises its own WebSub hub (src/feedmesh/farm/websub.py) in every feed;
    the hub subscribes through it after its first fetch of each feed (callbacks on
    ``--public-url``), receives a signed fat ping on each new post, and the scheduler polls the
    live feeds only as a daily safety net.

Measured over ``--hours`` farm hours after every feed was fetched once (and, in (b), every
subscription verified):

* **detection delay**: publication (the entry's date, as the farm posted it) -> first stored, for
  the posts of that window (the last ``--guard`` hours excluded: a poll may not have come yet).
  Polling's delay is made of farm time (when the schedule next fetches), so it is quoted in farm
  seconds. A push's delay is made of real work (the farm hub's POST, parse, dedup, commit), which
  takes the same wall-clock time at any clock speed, while the farm clock ran ``--speed`` times
  faster than the wall: its farm-time delay divided by the speed is what a deployment sees;
* **requests to publishers per feed per day**: the farm's request log (feed GETs), plus in (b) the
  requests made to its hub (subscribe, renew), per feed, per farm day. The window is longer than
  a day so that it holds the live feeds' daily safety-net polls (a shorter one would show none).

Then the other direction, ``benchmarks/websub_delivery.py``'s measure: WebSub subscribers of the
hub's private feeds on loopback at ``benchmarks/hub.py`` case (a) load, first sighting of an
article -> the subscriber's callback received it (10,000 subscribers; ``--quick``: that phase
alone, a 20 s window; ``--skip-delivery`` leaves it out).

    .venv/bin/python benchmarks/push.py [--feeds 400] [--hours 50] [--speed 600] [--quick]

Last line: JSON with ``push_detect_p50_s`` and ``publisher_requests_saved_pct`` (goals: <= 2 s,
>= 95 %), ``websub_delivery_p50_ms`` and ``websub_delivery_p99_ms`` (goals: <= 200 ms, <= 2 s),
and the figures behind them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from aiohttp import web

from feedmesh.clock import AcceleratedClock
from feedmesh.compose.embedded import embedded_hub
from feedmesh.compose.settings import HubSettings
from feedmesh.crawl import CrawlSettings
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.farm.websub import FarmHub
from feedmesh.fetch import FetchSettings, StaticResolver
from feedmesh.hub.web import build_app
from feedmesh.schedule import SchedulerSettings
from feedmesh.websub.lease import SubscriberSettings

ORIGIN = 1_760_000_000.0
HUB_HOST = "127.0.6.1"


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


async def wait_for(condition, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"push benchmark: {what} did not happen within {timeout_s:.0f} s")
        await asyncio.sleep(0.05)


async def run_arm(push: bool, args: argparse.Namespace) -> dict[str, float]:
    clock = AcceleratedClock(speed=args.speed, origin=ORIGIN)
    config = FarmConfig(feeds=args.feeds, seed=args.seed, faults="none", hosts=args.hosts,
                        speed=args.speed, origin=ORIGIN, prerender=True)
    port = free_port(HUB_HOST)
    public = f"http://{HUB_HOST}:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        settings = HubSettings(
            data_dir=tmp, public_url=public if push else "",
            schedule=SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=args.budget),
            fetch=FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=8,
                                total_timeout_s=10.0),
            crawl=CrawlSettings(batch_interval_s=0.01),
            # Leases are counted on the farm clock: ask for (and get) a month.
            websub=SubscriberSettings(lease_s=30 * 86400, hub_rate_per_s=1000.0,
                                      hub_burst=10_000))
        async with FarmServer(config, clock=clock) as farm:
            farm_hub = await FarmHub(farm).start() if push else None
            hub = embedded_hub(settings, clock=clock, resolver=StaticResolver({}))
            urls = [farm.feed_url(i) for i in range(args.feeds)]
            hub.store.add_feeds(urls, clock.now())  # before start: the first refit counts them
            await hub.start()
            runner = web.AppRunner(build_app(hub.front, base_url=public), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, HUB_HOST, port).start()
            try:
                ids = sorted(hub.crawler.crawler.states)
                await wait_for(lambda: all(hub.crawler.fetch_state(i).last_fetched_at
                                           for i in ids), args.warmup_s, "every first fetch")
                if push:
                    await wait_for(lambda: len(hub.crawler.scheduled.live) == len(ids),
                                   args.warmup_s, "every subscription verified")
                started = clock.now()
                seq0 = farm.log.next_seq
                hub_requests0 = len(farm_hub.received) if farm_hub else 0
                pushes0 = farm_hub.pushes if farm_hub else 0
                await asyncio.sleep(args.hours * 3600.0 / args.speed)
                ended = clock.now()
                feed_gets = sum(1 for r in farm.requests(seq0) if r.feed is not None)
                hub_requests = (len(farm_hub.received) - hub_requests0) if farm_hub else 0
                pushes = (farm_hub.pushes - pushes0) if farm_hub else 0
                truth = {fid: [p.time for p in farm.truth(i, since=started, until=ended)]
                         for i, fid in enumerate(ids)}
            finally:
                await runner.cleanup()
                await hub.stop()
                if farm_hub is not None:
                    await farm_hub.stop()
            # The hub is stopped: its store is closed. Read what it kept from the file.
            from feedmesh.compose import open_ingest_store
            store = open_ingest_store(Path(tmp) / "feedmesh.db")
            postings = store.all_postings(since=started)
            store.close()
    counted_until = ended - args.guard * 3600.0
    delays = [p.first_seen_at - p.published for fid in ids for p in postings.get(fid, [])
              if not p.backlog and p.published is not None
              and started <= p.published <= counted_until]
    made = sum(1 for times in truth.values() for t in times if started <= t <= counted_until)
    days = (ended - started) / 86400.0
    delays_farm = np.array(delays) if delays else np.array([np.nan])
    scale = args.speed if push else 1.0
    return {
        "posts": made, "seen": len(delays),
        "detect_p50_s": float(np.median(delays_farm)) / scale,
        "detect_p90_s": float(np.percentile(delays_farm, 90)) / scale,
        "detect_p50_farm_s": float(np.median(delays_farm)),
        "requests_per_feed_per_day": (feed_gets + hub_requests) / len(ids) / days,
        "feed_gets": feed_gets, "hub_requests": hub_requests,
        "pushes_per_feed_per_day": pushes / len(ids) / days, "farm_days": days,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feeds", type=int, default=400)
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--hours", type=float, default=50.0,
                        help="farm hours measured per run (over a day: the safety-net polls of "
                             "live feeds come daily)")
    parser.add_argument("--speed", type=float, default=600.0, help="farm seconds per second")
    parser.add_argument("--budget", type=float, default=96.0,
                        help="the scheduler's fetches per feed per day (both runs)")
    parser.add_argument("--guard", type=float, default=1.0,
                        help="last farm hours whose posts are not counted")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--warmup-s", type=float, default=120.0,
                        help="real seconds allowed for first fetches and subscriptions")
    parser.add_argument("--skip-delivery", action="store_true",
                        help="leave out the WebSub delivery measure (websub_delivery.py)")
    parser.add_argument("--quick", action="store_true",
                        help="100 feeds, 26 farm hours per run at 1200x (about three minutes)")
    args = parser.parse_args()
    if args.quick:
        args.feeds, args.hosts, args.hours, args.speed = 100, 25, 26.0, 1200.0
    logging.basicConfig(level=logging.ERROR)
    print(f"push vs poll: {args.feeds} farm feeds on {args.hosts} hosts, {args.hours:g} farm "
          f"hours per run at {args.speed:g}x, budget {args.budget:g} fetches/feed/day",
          file=sys.stderr)
    poll = asyncio.run(run_arm(False, args))
    push = asyncio.run(run_arm(True, args))
    saved = 100.0 * (1.0 - push["requests_per_feed_per_day"] / poll["requests_per_feed_per_day"])
    print(f"{'':8}{'posts':>7}{'seen':>7}{'p50 delay':>12}{'p90 delay':>12}"
          f"{'req/feed/day':>14}{'pushes/feed/day':>17}")
    for name, arm in (("poll", poll), ("push", push)):
        print(f"{name:8}{arm['posts']:>7}{arm['seen']:>7}{arm['detect_p50_s']:>11.2f}s"
              f"{arm['detect_p90_s']:>11.2f}s{arm['requests_per_feed_per_day']:>14.2f}"
              f"{arm['pushes_per_feed_per_day']:>17.2f}")
    print(f"push: p50 {push['detect_p50_farm_s']:.1f} farm s at {args.speed:g}x = "
          f"{push['detect_p50_s'] * 1000:.0f} ms of real work; {push['hub_requests']} requests "
          f"to the farm's hub, {push['feed_gets']} feed GETs in {push['farm_days']:.2f} farm days")
    print(f"publisher requests saved by push: {saved:.1f}% (goal >= 95%); push detection p50 "
          f"{push['detect_p50_s']:.3f} s (goal <= 2 s) vs polling {poll['detect_p50_s']:.0f} s")
    delivery: dict = {}
    if not args.skip_delivery:
        import websub_delivery

        phases = [10_000] if args.quick else [1_000, 10_000]
        results = asyncio.run(websub_delivery.run(20.0 if args.quick else 60.0, phases, 8, 15.0,
                                                  400.0))
        last = results[-1]
        print(f"WebSub delivery, {last['subscribers']} subscribers: p50 "
              f"{last['websub_delivery_p50_ms']} ms, p99 {last['websub_delivery_p99_ms']} ms "
              f"(goal <= 200 / 2,000 ms); the hub stored them at p50 {last['intra_hub_p50_ms']} ms")
        delivery = {"websub_delivery_p50_ms": last["websub_delivery_p50_ms"],
                    "websub_delivery_p99_ms": last["websub_delivery_p99_ms"],
                    "websub_subscribers": last["subscribers"], "delivery_phases": results}
    print(json.dumps({
        "push_detect_p50_s": round(push["detect_p50_s"], 4),
        "publisher_requests_saved_pct": round(saved, 2),
        "push_detect_p90_s": round(push["detect_p90_s"], 4),
        "poll_detect_p50_s": round(poll["detect_p50_s"], 1),
        "poll_requests_per_feed_per_day": round(poll["requests_per_feed_per_day"], 3),
        "push_requests_per_feed_per_day": round(push["requests_per_feed_per_day"], 3),
        "push_posts_seen": push["seen"], "poll_posts_seen": poll["seen"],
        "posts": push["posts"], "feeds": args.feeds, "farm_hours": args.hours,
        "speed": args.speed, "budget_per_feed_per_day": args.budget, **delivery,
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
