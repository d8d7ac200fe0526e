"""Push at a realistic rate (issue 34): 10,000 WebSub subscribers and 10,000 webhooks on
subscriptions that match at most about 100 entries a day (real alerts), on a hub that crawls and
matches meanwhile, measured from an entry's first sighting by the crawler to the receiver.

The alert subscriptions are Cobra-shaped conjunctions (``match/workload.py``, a seed of their
own) whose match rate on the farm's own text is known before the run: the farm's
``ContentMaker`` writes ``--sample`` random articles of the run's farm, the real matcher counts
each candidate's matches over them, and a candidate is an alert when its count, at the hub's
article rate, gives at most ``--per-day`` (100) matches a day. The run then measures the rate
they actually get (every queued pair, from the hub's metrics) and reports it beside the goal.

Background: ``benchmarks/hub.py``'s case (a) feeds and its 100,000 Cobra-style subscriptions,
the farm slowed to Cobra's article rate at 1M feeds (48.5 a second, section 4.2) by default.
The hub runs on one core, this process (the 20,000 receivers: aiohttp servers on 127.0.1.x, a
path each) and the farm on the other. Webhooks are added over the account API, WebSub
subscribers over ``POST /hub`` with verification of intent, each on its own alert subscription.

CPU per delivery: the hub's CPU time (``/proc``) over windows of whole crawl intervals. At
alert rates the deliveries (about 14 a second for 20,000 alerts) cost too little beside the
crawl and the matching for a difference of two windows to show them, so the figure comes from a
calibration window after the push window: ``--calibration`` (2,000) more WebSub subscribers,
each on a background subscription (about one match a second each), drive the same delivery path
(render the fat ping, sign, POST, record) at the hub's delivery budget; (its CPU - the baseline
window's) / its deliveries. The two baseline windows' difference is reported as the noise.

    .venv/bin/python benchmarks/push_alerts.py [--quick] [--window 120]

Last line: JSON with ``push_p50_ms``, ``push_p99_ms``, ``push_cpu_us_per_delivery`` (goals:
p50 <= 1,000 ms, p99 <= 3,000 ms) and the figures behind them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np
from aiohttp import web
from websub_delivery import first_seen, percentile, subscribe_all, wait_for

import hub as hub_bench  # benchmarks/hub.py: the case, the hub's start and its waits
from feedmesh.compose import FEED_SECRET_FILE
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.farm.catalog import FeedCatalog
from feedmesh.farm.content import ContentMaker
from feedmesh.farm.posting import Post
from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.match import tokenize_article
from feedmesh.match.article import article_from_entry
from feedmesh.match.index import IndexSettings, SubscriptionIndex
from feedmesh.match.workload import Workload
from feedmesh.store.sqlite_hub import SQLiteHubState

ENTRY_ID = re.compile(rb"tag:feedmesh,2026:entry-(\d+)")
CASE_A_ARTICLES_PER_S = 315.0
"""Case (a)'s farm at its speed (600x) posts about 315 articles a second once its feeds hold
their backlog (measured: 65 a second at 124x); hub.py's windows count the crawler's 220-248."""


# -- the alert subscriptions -------------------------------------------------------------------

def farm_articles(config: FarmConfig, count: int, seed: int):  # type: ignore[no-untyped-def]
    """``count`` random articles of the farm ``config`` serves, tokenized as the crawler does."""
    catalog = FeedCatalog(config)
    makers: dict[int, ContentMaker] = {}
    rng = random.Random(seed)
    for _ in range(count):
        feed = rng.randrange(config.feeds)
        maker = makers.get(feed)
        if maker is None:
            maker = makers[feed] = ContentMaker(catalog.spec(feed), "http://farm.invalid")
        entry = maker.entry(Post(0, rng.randrange(1 << 30), rng.randrange(64)))
        yield tokenize_article(article_from_entry(entry, f"http://farm.invalid/feeds/{feed}"))


def alert_queries(config: FarmConfig, wanted: int, articles_per_s: float, per_day: float,
                  sample: int, seed: int = 5) -> tuple[list[str], np.ndarray, dict]:
    """``wanted`` conjunctions each estimated at 1..``per_day`` matches a day on ``config``'s
    farm at ``articles_per_s``; with their estimates (matches a day) and how they were found.

    Two passes over fresh articles: the first (a tenth) drops the candidates that match too
    often to be alerts, on a small sample; the second counts the rest over the whole sample."""
    started = time.perf_counter()
    candidates = Workload(seed=seed).subscriptions(wanted * 20)
    first = max(1, sample // 10)
    index = SubscriptionIndex.build(enumerate(candidates), IndexSettings())
    counts = np.zeros(len(candidates), np.int64)
    for article in farm_articles(config, first, seed):
        counts[index.match(article, observe=False)] += 1
    per_article = per_day / (articles_per_s * 86_400.0)
    rare = np.flatnonzero(counts <= max(1, round(per_article * first * 3)))
    kept = [candidates[i] for i in rare]
    index = SubscriptionIndex.build(enumerate(kept), IndexSettings())
    counts = np.zeros(len(kept), np.int64)
    for article in farm_articles(config, sample, seed + 1):
        counts[index.match(article, observe=False)] += 1
    ceiling = int(per_article * sample)
    if ceiling < 1:
        raise SystemExit(f"--sample {sample} is too small to tell {per_day:g} matches a day at "
                         f"{articles_per_s:g} articles/s: it needs >= {1 / per_article:,.0f}")
    eligible = np.flatnonzero((counts >= 1) & (counts <= ceiling))
    if len(eligible) < wanted:
        raise SystemExit(f"only {len(eligible)} alert candidates of {len(candidates)}; "
                         f"{wanted} wanted: raise --sample")
    chosen = np.random.default_rng(seed).choice(eligible, wanted, replace=False)
    estimate = counts[chosen] / sample * articles_per_s * 86_400.0
    found = {"candidates": len(candidates), "sample_articles": sample,
             "rare_after_first_pass": len(kept), "eligible": len(eligible),
             "estimated_per_day_median": round(float(np.median(estimate)), 1),
             "estimated_per_day_max": round(float(estimate.max()), 1),
             "seconds": round(time.perf_counter() - started, 1)}
    return [kept[i] for i in chosen], estimate, found


def provision_alerts(data: Path, queries: list[str],
                     per_account: int = 20) -> dict[int, str]:
    """The alert subscriptions, ``per_account`` to an account (people, not one robot: the API
    paces each account): each one's id and its owner's token."""
    db = SQLiteHubState(data / "hub.db")
    owners: dict[int, str] = {}
    for start in range(0, len(queries), per_account):
        account, token = db.create_account(f"alerts {start // per_account}", time.time())
        part = queries[start:start + per_account]
        db.add_subscriptions(((account.id, f"alert {start + n}", q, 10, 0)
                              for n, q in enumerate(part)), time.time())
        owners.update((s.id, token) for s in db.subscriptions(account.id))
    db.close()
    return owners


# -- the receivers ------------------------------------------------------------------------------

class Receivers:
    """Every WebSub callback and webhook: ``/websub/<sub>`` answers verification of intent and
    takes fat pings, ``/hook/<sub>`` takes webhook JSON; each records the first arrival of each
    (subscription, entry)."""

    def __init__(self, websub: set[int], hooks: set[int]) -> None:
        self.websub = websub
        self.hooks = hooks
        self.verified: set[int] = set()
        self.seen: dict[int, set[int]] = {}
        self.received: list[tuple[str, int, int, float]] = []
        self.posts = {"websub": 0, "webhook": 0}

    async def verify(self, request: web.Request) -> web.Response:
        sub_id = int(request.match_info["sub"])
        if sub_id not in self.websub or request.query.get("hub.mode") != "subscribe":
            return web.Response(status=404)
        self.verified.add(sub_id)
        return web.Response(text=request.query.get("hub.challenge", ""))

    def _took(self, kind: str, sub_id: int, body: bytes) -> web.Response:
        now = time.time()
        self.posts[kind] += 1
        seen = self.seen.setdefault(sub_id, set())
        for match in ENTRY_ID.finditer(body):
            entry_id = int(match.group(1))
            if entry_id not in seen:
                seen.add(entry_id)
                self.received.append((kind, sub_id, entry_id, now))
        return web.Response(status=204)

    async def ping(self, request: web.Request) -> web.Response:
        return self._took("websub", int(request.match_info["sub"]), await request.read())

    async def hook(self, request: web.Request) -> web.Response:
        return self._took("webhook", int(request.match_info["sub"]), await request.read())

    async def serve(self, hosts: list[str]) -> tuple[web.AppRunner, list[str]]:
        app = web.Application()
        app.router.add_get("/websub/{sub}", self.verify)
        app.router.add_post("/websub/{sub}", self.ping)
        app.router.add_post("/hook/{sub}", self.hook)
        return await hub_bench.serve_app(app, hosts)


async def add_webhooks(base: str, owners: dict[int, str], urls: dict[int, str],
                       concurrency: int = 32) -> float:
    """Each owner adds its webhooks over the API, waiting as a 429's Retry-After says."""
    started = time.perf_counter()
    pending = list(urls)
    async with aiohttp.ClientSession() as session:
        async def worker() -> None:
            while pending:
                sub_id = pending.pop()
                while True:
                    async with session.post(
                            f"{base}/api/subscriptions/{sub_id}/webhooks",
                            json={"url": urls[sub_id]},
                            headers={"Authorization": f"Bearer {owners[sub_id]}"}) as response:
                        if response.status == 201:
                            break
                        if response.status != 429:
                            raise RuntimeError(f"webhook of {sub_id}: {response.status} "
                                               f"{await response.text()}")
                        await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


# -- the run ------------------------------------------------------------------------------------

def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def window(base: str, pid: int, seconds: float) -> dict:
    before, cpu0, t0 = hub_bench._metrics(base), cpu_seconds(pid), time.time()
    await asyncio.sleep(seconds)
    after, cpu1, t1 = hub_bench._metrics(base), cpu_seconds(pid), time.time()

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)
    return {"t0": t0, "t1": t1, "cpu_s": cpu1 - cpu0,
            "articles": delta("feedmesh_tier_articles_out_total{tier=crawler}"),
            "queued_pairs": delta("feedmesh_push_entries_total"),
            "failed": delta("feedmesh_push_deliveries_total{kind=websub,result=failed}")
            + delta("feedmesh_push_deliveries_total{kind=webhook,result=failed}")}


async def run(args: argparse.Namespace) -> dict:
    feeds, subs, case_speed, interval = hub_bench.CASES["a"]
    speed = case_speed * args.articles_per_s / CASE_A_ARTICLES_PER_S
    config = FarmConfig(feeds=feeds, seed=1, faults="none", hosts=50, speed=speed,
                        origin=hub_bench.ORIGIN, max_age_share=0.0)
    count = args.websub + args.webhooks
    queries, _, found = alert_queries(config, count, args.articles_per_s, args.per_day,
                                             args.sample)
    print(f"alerts: {count} of {found['candidates']} candidates, estimated "
          f"{found['estimated_per_day_median']:g} matches a day (median, max "
          f"{found['estimated_per_day_max']:g}) from {args.sample:,} farm articles, "
          f"in {found['seconds']:.0f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        hub_bench.provision(data, subs)
        owners = provision_alerts(data, queries)
        ids = sorted(owners)
        websub_ids, hook_ids = ids[:args.websub], ids[args.websub:]
        receivers = Receivers(set(websub_ids), set(hook_ids))
        port = hub_bench._free_port()
        base = f"http://127.0.0.1:{port}"
        farm = FarmProcess(config, cpu=0).start()
        hub = hub_bench.start_hub(data, port, farm, "ids", interval,
                                  extra=("--hub-rate", "100000", "--hub-burst", "100000"))
        try:
            first = await asyncio.to_thread(hub_bench.wait_first_crawl, base, hub, feeds, 1800)
            print(f"  {feeds} feeds, {subs + count} subscriptions; first crawl done after "
                  f"{first:.0f} s", flush=True)
            cycles = json.loads(hub_bench._get(f"{base}/api/stats"))["crawl_cycles"]
            await asyncio.to_thread(hub_bench.wait_cycles, base, hub, cycles + 1,
                                    3 * interval + 600)
            baseline = [await window(base, hub.pid, args.window) for _ in range(2)]
            print(f"  baseline: hub CPU {baseline[0]['cpu_s']:.1f} and {baseline[1]['cpu_s']:.1f} "
                  f"s over two windows of {args.window:.0f} s", flush=True)
            runner, bases = await receivers.serve([f"127.0.1.{n + 1}" for n in range(args.hosts)])
            tokens = FeedTokens((data / FEED_SECRET_FILE).read_bytes())
            hooks = {s: f"{bases[n % len(bases)]}/hook/{s}" for n, s in enumerate(hook_ids)}
            took_hooks = await add_webhooks(base, owners, hooks)
            topics = {s: f"{base}/f/{tokens.make(s, 0)}.rss" for s in websub_ids}
            callbacks = {s: f"{bases[n % len(bases)]}/websub/{s}"
                         for n, s in enumerate(websub_ids)}
            took_websub = await subscribe_all(base, topics, callbacks)
            await wait_for(lambda: len(receivers.verified) == len(websub_ids), 600,
                           f"{len(websub_ids)} verifications")
            print(f"  {len(hook_ids)} webhooks added in {took_hooks:.0f} s, {len(websub_ids)} "
                  f"WebSub subscribers verified in {took_websub:.0f} s", flush=True)
            cycles = json.loads(hub_bench._get(f"{base}/api/stats"))["crawl_cycles"]
            await asyncio.to_thread(hub_bench.wait_cycles, base, hub, cycles + 1,
                                    3 * interval + 600)
            posts0 = sum(receivers.posts.values())
            pushed = await window(base, hub.pid, args.window)
            deliveries = sum(receivers.posts.values()) - posts0
            # calibration: the same delivery path, busy (background subscriptions)
            busy = list(range(1, args.calibration + 1))
            receivers.websub |= set(busy)
            topics = {s: f"{base}/f/{tokens.make(s, 0)}.rss" for s in busy}
            callbacks = {s: f"{bases[n % len(bases)]}/websub/{s}" for n, s in enumerate(busy)}
            await subscribe_all(base, topics, callbacks)
            await wait_for(lambda: receivers.verified >= set(busy), 600,
                           f"{len(busy)} calibration verifications")
            await asyncio.sleep(interval)   # the busy subscribers' deliveries under way
            posts0 = sum(receivers.posts.values())
            calibration = await window(base, hub.pid, args.window)
            calibrated = sum(receivers.posts.values()) - posts0
            farm.stop()
            await asyncio.sleep(args.drain)   # what was first seen in the window arrives
            await runner.cleanup()
        finally:
            hub_bench.stop(hub)
            farm.stop()
        seen_at = first_seen(data, sorted({e for _, _, e, _ in receivers.received}))
        intra = hub_bench.latencies(data, pushed["t0"], pushed["t1"])[:, 0]

    t0, t1 = pushed["t0"], pushed["t1"]
    alerts = set(websub_ids) | set(hook_ids)   # not the calibration's busy subscribers
    in_window = [(kind, (arrival - seen_at[e]) * 1000.0) for kind, sub, e, arrival
                 in receivers.received
                 if sub in alerts and e in seen_at and t0 <= seen_at[e] <= t1]
    latency = np.array([ms for _, ms in in_window])
    by_kind = {kind: np.array([ms for k, ms in in_window if k == kind])
               for kind in ("websub", "webhook")}
    seconds = t1 - t0
    base_rate = sum(b["cpu_s"] for b in baseline) / sum(b["t1"] - b["t0"] for b in baseline)
    base_spread = abs(baseline[0]["cpu_s"] - baseline[1]["cpu_s"])
    calibration_s = calibration["t1"] - calibration["t0"]
    extra_cpu = calibration["cpu_s"] - base_rate * calibration_s
    per_day = pushed["queued_pairs"] / count / seconds * 86_400.0
    return {
        "push_p50_ms": percentile(latency, 50), "push_p99_ms": percentile(latency, 99),
        "push_cpu_us_per_delivery": (round(extra_cpu / calibrated * 1e6, 1)
                                     if calibrated else None),
        "push_cpu_noise_us_per_delivery": (round(base_spread / calibrated * 1e6, 1)
                                           if calibrated else None),
        "calibration_deliveries_per_s": round(calibrated / calibration_s, 1),
        "hub_cpu_share_push_window": round(pushed["cpu_s"] / seconds, 3),
        "hub_cpu_share_baseline": round(base_rate, 3),
        "push_websub_p50_ms": percentile(by_kind["websub"], 50),
        "push_websub_p99_ms": percentile(by_kind["websub"], 99),
        "push_webhook_p50_ms": percentile(by_kind["webhook"], 50),
        "push_webhook_p99_ms": percentile(by_kind["webhook"], 99),
        "received_pairs": len(latency), "queued_pairs": int(pushed["queued_pairs"]),
        "seen_share": (round(len(latency) / pushed["queued_pairs"], 3)
                       if pushed["queued_pairs"] else None),
        "deliveries": deliveries, "deliveries_per_s": round(deliveries / seconds, 2),
        "failed_deliveries": int(pushed["failed"]),
        "matches_per_alert_per_day": round(per_day, 1),
        "articles_per_s": round(pushed["articles"] / seconds, 1),
        "baseline_windows_differ_s": round(base_spread, 2),
        "intra_hub_p50_ms": percentile(intra, 50), "intra_hub_p99_ms": percentile(intra, 99),
        "window_s": round(seconds, 1), "websub_subscribers": len(websub_ids),
        "webhooks": len(hook_ids), "alerts": found}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1,000 + 1,000 targets, a 60 s window, a smaller sample")
    parser.add_argument("--window", type=float, default=120.0,
                        help="each window, seconds (a whole number of 20-s crawl intervals)")
    parser.add_argument("--calibration", type=int, default=2_000,
                        help="busy WebSub subscribers the CPU per delivery is measured with")
    parser.add_argument("--websub", type=int, default=10_000)
    parser.add_argument("--webhooks", type=int, default=10_000)
    parser.add_argument("--per-day", type=float, default=100.0,
                        help="the most matches a day an alert subscription may have")
    parser.add_argument("--articles-per-s", type=float, default=48.5,
                        help="the farm's article rate (Cobra's estimate at 1M feeds: 48.5)")
    parser.add_argument("--sample", type=int, default=100_000,
                        help="farm articles the alerts' match rates are estimated on")
    parser.add_argument("--hosts", type=int, default=8, help="loopback addresses of receivers")
    parser.add_argument("--drain", type=float, default=15.0)
    args = parser.parse_args()
    if args.quick:
        args.websub, args.webhooks, args.window = 1_000, 1_000, 60.0
        args.sample = min(args.sample, 60_000)
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})  # beside the farm; the hub has the other core
    figures = asyncio.run(run(args))
    print()
    for key, value in figures.items():
        if key != "alerts":
            print(f"  {key:32} {value}")
    print("goal: push p50 <= 1,000 ms, p99 <= 3,000 ms from first seen to the receiver, "
          "alerts at <= 100 matches a day; CPU per delivery reported")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
