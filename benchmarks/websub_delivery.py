"""WebSub delivery latency under load: 10,000 WebSub subscribers on loopback, attached to a hub
carrying `benchmarks/hub.py`'s case (a) (10k feeds, 100k Cobra-style subscriptions, >= 200 new
articles/s from an accelerated farm), measured from an article's first sighting by the crawler to
the subscriber's callback receiving a feed that holds it.

The farm and the hub run as in hub.py (its functions: provision, start_hub, the waits), the hub on
one core; this process runs the 10,000 subscribers (aiohttp servers on 127.0.1.1..N, a path per
subscriber) on the other core beside the farm. Each subscriber subscribes over ``POST /hub`` to
the RSS feed of one of the 100,000 subscriptions, chosen at random (seeded), and answers the
verification of intent. Over the window it records, per (subscriber, entry), the first delivery
whose feed holds the entry; latency = that arrival - the entry's ``first_seen_at`` in the ingest
store (same machine, same clock). Baseline in the same run: the intra-hub latency (first seen ->
stored by the reflector) of the entries stored in the window, which every delivery includes.

A fat ping carries the feed's newest 10 entries: entries pushed out of a busy feed between two
deliveries are never seen by its subscriber; the share of queued (subscriber, entry) pairs seen is
reported beside the latencies.

    .venv/bin/python benchmarks/websub_delivery.py [--quick] [--window 60] [--phases 1000 10000]

It measures 1,000 subscribers, then adds 9,000 and measures 10,000, on the same hub (15 s after
each window, with the farm still posting, for its entries to arrive before the next phase). The
hub's delivery budget (``serve --push-rate``, 400/s) keeps the crawler and the reflectors at the
articles' pace; beyond it entries coalesce into later deliveries.

Last line: JSON with ``websub_delivery_p50_ms`` and ``websub_delivery_p99_ms`` (10,000
subscribers) and every phase's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sqlite3
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np
from aiohttp import web

import hub as hub_bench  # benchmarks/hub.py: case (a) is built by its functions
from feedmesh.compose import FEED_SECRET_FILE
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.hub.front.tokens import FeedTokens

ENTRY_ID = re.compile(rb"tag:feedmesh,2026:entry-(\d+)")


class Subscribers:
    """Every subscriber's callback, on ``hosts`` loopback addresses: ``/cb/<sub id>``."""

    def __init__(self, wanted: set[int]) -> None:
        self.wanted = wanted
        self.verified: set[int] = set()
        self.seen: dict[int, set[int]] = {}
        self.received: list[tuple[int, int, float]] = []
        """(subscription, entry, arrival) of each entry's first delivery to a subscriber."""
        self.posts = 0
        self.bytes = 0

    async def get(self, request: web.Request) -> web.Response:
        sub_id = int(request.match_info["sub"])
        query = request.query
        if sub_id not in self.wanted or query.get("hub.mode") != "subscribe":
            return web.Response(status=404)
        self.verified.add(sub_id)
        return web.Response(text=query.get("hub.challenge", ""))

    async def post(self, request: web.Request) -> web.Response:
        body = await request.read()
        now = time.time()
        sub_id = int(request.match_info["sub"])
        self.posts += 1
        self.bytes += len(body)
        seen = self.seen.setdefault(sub_id, set())
        for match in ENTRY_ID.finditer(body):
            entry_id = int(match.group(1))
            if entry_id not in seen:
                seen.add(entry_id)
                self.received.append((sub_id, entry_id, now))
        return web.Response(status=204)

    async def serve(self, hosts: list[str]) -> tuple[list[web.AppRunner], list[str]]:
        app = web.Application()
        app.router.add_get("/cb/{sub}", self.get)
        app.router.add_post("/cb/{sub}", self.post)
        runner, bases = await hub_bench.serve_app(app, hosts)
        return [runner], bases


async def subscribe_all(base: str, topics: dict[int, str], callbacks: dict[int, str],
                        concurrency: int = 64) -> float:
    started = time.perf_counter()
    pending = list(topics)
    async with aiohttp.ClientSession() as session:
        async def worker() -> None:
            while pending:
                sub_id = pending.pop()
                form = {"hub.mode": "subscribe", "hub.topic": topics[sub_id],
                        "hub.callback": callbacks[sub_id]}
                async with session.post(f"{base}/hub", data=form) as response:
                    if response.status != 202:
                        raise RuntimeError(f"subscription {sub_id}: {response.status} "
                                           f"{await response.text()}")
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {timeout:.0f} s: {what}")
        await asyncio.sleep(0.2)


def first_seen(data: Path, ids: list[int]) -> dict[int, float]:
    db = sqlite3.connect(f"file:{data / 'feedmesh.db'}?mode=ro", uri=True)
    found: dict[int, float] = {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        found.update(db.execute(f"SELECT id, first_seen_at FROM entries WHERE id IN "
                                f"({','.join('?' * len(part))})", part).fetchall())
    db.close()
    return found


def percentile(values: np.ndarray, q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if len(values) else None


async def measure(base: str, subscribers: Subscribers, window: float) -> dict:
    """One window's hub figures; its entries' latencies are computed at the end."""
    before = hub_bench._metrics(base)
    posts_before = subscribers.posts
    t0 = time.time()
    await asyncio.sleep(window)
    t1 = time.time()
    after = hub_bench._metrics(base)

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    elapsed = t1 - t0
    return {"t0": t0, "t1": t1, "window_s": round(elapsed, 1),
            "articles_per_s": round(delta("feedmesh_tier_articles_out_total{tier=crawler}")
                                    / elapsed, 1),
            "deliveries_per_s": round((subscribers.posts - posts_before) / elapsed, 1),
            "failed_deliveries": delta(
                "feedmesh_push_deliveries_total{kind=websub,result=failed}"),
            "queued_pairs": delta("feedmesh_push_entries_total")}


async def run(window: float, phases: list[int], hosts: int, drain_s: float,
              push_rate: float) -> list[dict]:
    feeds, subs, speed, interval = hub_bench.CASES["a"]
    count = phases[-1]
    print(f"case (a): {feeds} feeds, {subs} subscriptions, farm x{speed:g}; WebSub "
          f"subscribers {' then '.join(map(str, phases))} on {hosts} loopback addresses, "
          f"push budget {push_rate:g} deliveries/s", flush=True)
    chosen = random.Random(7).sample(range(1, subs + 1), count)  # phase n: a prefix
    subscribers = Subscribers(set(chosen))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        print(f"  provisioned {subs} subscriptions in "
              f"{hub_bench.provision(data, subs):.1f} s", flush=True)
        config = FarmConfig(feeds=feeds, seed=1, faults="none", hosts=50, speed=speed,
                            origin=hub_bench.ORIGIN, max_age_share=0.0)
        port = hub_bench._free_port()
        base = f"http://127.0.0.1:{port}"
        farm = FarmProcess(config, cpu=0).start()
        hub = hub_bench.start_hub(data, port, farm, "ids", interval,
                                  extra=("--hub-rate", "100000", "--hub-burst", "100000",
                                         "--push-rate", str(push_rate)))
        try:
            first = await asyncio.to_thread(hub_bench.wait_first_crawl, base, hub, feeds, 1800)
            print(f"  hub up and first crawl done after {first:.0f} s", flush=True)
            tokens = FeedTokens((data / FEED_SECRET_FILE).read_bytes())
            runners, bases = await subscribers.serve([f"127.0.1.{n + 1}" for n in range(hosts)])
            done = 0
            for phase in phases:
                batch = chosen[done:phase]
                topics = {s: f"{base}/f/{tokens.make(s, 0)}.rss" for s in batch}
                callbacks = {s: f"{bases[n % hosts]}/cb/{s}" for n, s in enumerate(batch)}
                took = await subscribe_all(base, topics, callbacks)
                await wait_for(lambda wanted=phase: len(subscribers.verified) == wanted, 600,
                               f"{phase} verifications")
                done = phase
                print(f"  {len(batch)} more subscriptions requested in {took:.1f} s; {phase} "
                      "verified", flush=True)
                cycles = json.loads(hub_bench._get(f"{base}/api/stats"))["crawl_cycles"]
                await asyncio.to_thread(hub_bench.wait_cycles, base, hub, cycles + 1,
                                        3 * interval + 600)
                results.append({"subscribers": phase, **await measure(base, subscribers,
                                                                       window)})
                print(f"  measured {phase} subscribers", flush=True)
                if phase != phases[-1]:
                    # The window's entries arrive under this phase's load, not the next one's.
                    await asyncio.sleep(drain_s)
            farm.stop()  # what was first seen in the window gets its chance to arrive
            await asyncio.sleep(drain_s)
            for runner in runners:
                await runner.cleanup()
        finally:
            hub_bench.stop(hub)
            farm.stop()
        # The stores are read after the hub stopped (its last commits are in).
        seen_at = first_seen(data, sorted({e for _, e, _ in subscribers.received}))
        for figures in results:
            t0, t1 = figures.pop("t0"), figures.pop("t1")
            latencies = np.array([(arrival - seen_at[e]) * 1000.0
                                  for _, e, arrival in subscribers.received
                                  if e in seen_at and t0 <= seen_at[e] <= t1])
            baseline = hub_bench.latencies(data, t0, t1)[:, 0]
            queued = figures.pop("queued_pairs")
            figures.update({
                "loopback_addresses": hosts, "push_budget_per_s": push_rate,
                "queued_pairs_per_s": round(queued / figures["window_s"], 1),
                "received_pairs": len(latencies),
                "seen_share": round(len(latencies) / queued, 3) if queued else None,
                "websub_delivery_p50_ms": percentile(latencies, 50),
                "websub_delivery_p99_ms": percentile(latencies, 99),
                "intra_hub_p50_ms": percentile(baseline, 50),
                "intra_hub_p99_ms": percentile(baseline, 99)})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a 30 s window")
    parser.add_argument("--window", type=float, default=60.0, help="measurement seconds")
    parser.add_argument("--phases", type=int, nargs="+", default=[1_000, 10_000],
                        help="subscriber counts measured one after the other on the same hub "
                        "(each adds to the last)")
    parser.add_argument("--hosts", type=int, default=8, help="loopback addresses they use")
    parser.add_argument("--push-rate", type=float, default=400.0,
                        help="the hub's delivery budget (serve --push-rate)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})  # beside the farm; the hub has the other core
    window = 30.0 if args.quick else args.window
    results = asyncio.run(run(window, sorted(args.phases), args.hosts, 15.0, args.push_rate))
    print()
    print(f"{'subscribers':>11} {'art/s':>6} {'deliv/s':>8} {'pairs/s':>8} {'seen':>6} "
          f"{'stored p50':>10} {'p99':>8} {'pushed p50':>10} {'p99':>8}  (ms)")
    for r in results:
        print(f"{r['subscribers']:>11} {r['articles_per_s']:>6.0f} {r['deliveries_per_s']:>8.0f} "
              f"{r['queued_pairs_per_s']:>8.0f} {r['seen_share'] or 0:>6.2f} "
              f"{r['intra_hub_p50_ms'] or 0:>10.1f} {r['intra_hub_p99_ms'] or 0:>8.1f} "
              f"{r['websub_delivery_p50_ms'] or 0:>10.1f} {r['websub_delivery_p99_ms'] or 0:>8.1f}")
    print("stored: first seen -> stored by the reflector (the baseline); pushed: first seen -> "
          "the subscriber's callback received a feed holding it; seen: share of the queued "
          "(subscriber, entry) pairs that reached the subscriber")
    print("goal: pushed p50 <= 200 ms, p99 <= 2,000 ms with 10,000 subscribers")
    last = results[-1]
    print(json.dumps({"websub_delivery_p50_ms": last["websub_delivery_p50_ms"],
                      "websub_delivery_p99_ms": last["websub_delivery_p99_ms"],
                      "subscribers": last["subscribers"], "phases": results}))


if __name__ == "__main__":
    main()
