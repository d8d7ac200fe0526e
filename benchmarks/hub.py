"""The hub under load, Cobra-style (sections 4.2-4.3): a farm process and a `feedmesh serve`
process on this 2-core machine, with Cobra-style subscriptions provisioned in the hub's database.

Cases: (a) 10k feeds / 100k subscriptions, (b) 100k feeds / 1M subscriptions. The farm's clock is
accelerated so that at least 200 new articles/s flow once the first crawl (whose backlog is not
matched: ``--no-backlog``) is done. Over a measurement window it reports:

* sustained articles/s through the tiers (crawler out, filter in, reflector in);
* intra-hub latency p50/p99 (first seen by the crawler -> stored by the reflector), exact, from
  the reflector's store (Cobra: medians of 5 to 34 s);
* the hub process's resident memory (every tier in one process; Cobra's reflector alone: ~500 MB
  for 1M subscriptions);
* per-tier bandwidth, bytes/s in and out (Cobra Figure 12);
* personalized feed requests/s answered 200 and 304 (farm stopped, load from this process).

Case (a) also runs with the other filter -> reflector delivery (``article``: Cobra's final design,
the reflector re-matches) to measure that trade-off in the same run.

    .venv/bin/python benchmarks/hub.py [--quick] [--window 60]

Last line: JSON with ``articles_per_s``, ``latency_p50_ms``, ``latency_p99_ms``, ``reflector_mb``,
``feed_304_per_s``, ``feed_200_per_s`` (of the largest case run) and every case's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from pathlib import Path

import aiohttp
import msgspec
import numpy as np
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from feedmesh.bus.nats_server import LocalNats
from feedmesh.compose import FEED_SECRET_FILE
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.match.workload import Workload
from feedmesh.store import ReflectedItem
from feedmesh.store.sqlite_hub import SQLiteHubState

ORIGIN = 1_760_000_000.0
CASES = {"a": (10_000, 100_000, 600.0, 20.0), "b": (100_000, 1_000_000, 65.0, 300.0)}
"""case -> (feeds, subscriptions, farm speed, crawl interval in seconds). The hub spreads each
crawl over 80% of its interval; the speeds give >= 200 new articles/s. Figures are taken over
whole intervals (at least the window) once the first two cycles are done."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 30, token_file: str = "") -> bytes:
    """``url``'s body; ``token_file``: a bearer token to send (a reflector under `up`)."""
    headers = ({"Authorization": "Bearer " + Path(token_file).read_text().strip()}
               if token_file else {})
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                timeout=timeout) as answer:
        return answer.read()


def _metrics(base: str, token_file: str = "") -> dict[str, float]:
    figures = {}
    for family in text_string_to_metric_families(
            _get(f"{base}/metrics", token_file=token_file).decode()):
        for sample in family.samples:
            label = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            figures[f"{sample.name}{{{label}}}" if label else sample.name] = sample.value
    return figures


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def stop(process: subprocess.Popen, timeout: float = 120.0) -> None:
    """SIGTERM, then SIGKILL if ``process`` has not ended within ``timeout`` s: how every
    benchmark ends a hub or ``up`` it started, whether its run finished or failed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def serve_app(app: web.Application, hosts: list[str]) -> tuple[web.AppRunner, list[str]]:
    """Serve ``app`` on an ephemeral port of each loopback address in ``hosts``; the runner and
    each address's base URL (the receivers of the push benchmarks)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    bases = []
    for host in hosts:
        site = web.TCPSite(runner, host, 0, backlog=4096)
        await site.start()
        bases.append(f"http://{host}:{site._server.sockets[0].getsockname()[1]}")
    return runner, bases


def provision(data: Path, subscriptions: int) -> float:
    """Cobra-style conjunctive subscriptions, written straight into the hub's database."""
    started = time.perf_counter()
    db = SQLiteHubState(data / "hub.db")
    account, _ = db.create_account("bench", time.time())
    queries = Workload(seed=1).subscriptions(subscriptions)
    db.add_subscriptions(((account.id, "", q, 10, 0) for q in queries), time.time())
    db.close()
    return time.perf_counter() - started


def start_hub(data: Path, port: int, farm: FarmProcess, delivery: str,
              interval: float, bus: str = "memory",
              extra: tuple[str, ...] = ()) -> subprocess.Popen:
    def pin() -> None:
        if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, {1})

    return subprocess.Popen(
        [sys.executable, "-m", "feedmesh", "serve", "--data", str(data), "--port", str(port),
         "--policy", "interval", "--interval", str(interval), "--allow-network", "127.0.0.0/8",
         "--per-host", "64",
         "--opml", farm.opml_url, "--no-backlog", "--delivery", delivery,
         "--feed-rate", "100000", "--feed-burst", "100000", "--log-level", "warning",
         "--bus", bus, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=pin)


def wait_first_crawl(base: str, hub: subprocess.Popen, feeds: int, timeout: float) -> float:
    """Seconds until a crawl cycle covering every feed has finished (the backlog cycle)."""
    started = time.perf_counter()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub.poll() is not None:
            raise RuntimeError(f"hub exited: {hub.stderr.read()[-2000:]}")
        try:
            stats = json.loads(_get(f"{base}/api/stats", 10))
            cycle = stats["last_crawl"]
            if cycle is not None and cycle["feeds_due"] >= feeds:
                return time.perf_counter() - started
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the first crawl did not finish in time")


def wait_cycles(base: str, hub: subprocess.Popen, cycles: int, timeout: float) -> None:
    """Until the crawler has finished ``cycles`` cycles."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub.poll() is not None:
            raise RuntimeError(f"hub exited: {hub.stderr.read()[-2000:]}")
        if json.loads(_get(f"{base}/api/stats", 30))["crawl_cycles"] >= cycles:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the crawler did not finish cycle {cycles} in time")


def wait_quiet(base: str, timeout: float = 300.0) -> None:
    """Until every queue has been empty for two seconds (nothing left to reflect)."""
    quiet_since = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = json.loads(_get(f"{base}/api/stats", 30))
        if all(q["bytes"] == 0 for q in stats["queues"].values()):
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= 2.0:
                return
        else:
            quiet_since = None
        time.sleep(0.25)
    raise RuntimeError("the hub's queues did not drain")


def latencies(data: Path, start: float, end: float) -> np.ndarray:
    """Per entry stored in [start, end]: (first seen -> stored, first seen -> matched) in ms."""
    db = sqlite3.connect(f"file:{data / 'reflector-0.db'}?mode=ro", uri=True)
    decoder = msgspec.msgpack.Decoder(ReflectedItem)
    rows = db.execute("SELECT data FROM items WHERE stored_at BETWEEN ? AND ?", (start, end))
    values = [(item.stored_at - item.first_seen_at, item.matched_at - item.first_seen_at)
              for item in (decoder.decode(r[0]) for r in rows)]
    db.close()
    return np.array(values).reshape(-1, 2) * 1000.0


FEED_ROUNDS = 3
"""Rounds of the feed load (an 8-second window of 200s, then one of 304s, each round): the
figures are their medians, the rounds beside them. One window each moved by +-15% between runs
of the same code on this shared 2-core machine."""


def feed_rates(urls: list[str]) -> dict[str, object]:
    """Private feeds answered 200 and 304 per second: medians of ``FEED_ROUNDS`` rounds."""
    served: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(FEED_ROUNDS):
        for conditional in (False, True):
            served[conditional].append(asyncio.run(feed_load(urls, 8.0, conditional)))
    return {"feed_200_per_s": round(statistics.median(served[False])),
            "feed_304_per_s": round(statistics.median(served[True])),
            "feed_200_rounds": [round(x) for x in served[False]],
            "feed_304_rounds": [round(x) for x in served[True]]}


async def feed_load(urls: list[str], seconds: float, conditional: bool,
                    concurrency: int = 32) -> float:
    etags: dict[str, str] = {}
    done = 0
    async with aiohttp.ClientSession() as session:
        if conditional:
            for url in urls:
                async with session.get(url) as response:
                    await response.read()
                    etags[url] = response.headers["ETag"]
        deadline = time.perf_counter() + seconds
        expected = 304 if conditional else 200

        async def worker(seed: int) -> None:
            nonlocal done
            rng = random.Random(seed)
            while time.perf_counter() < deadline:
                url = rng.choice(urls)
                headers = {"If-None-Match": etags[url]} if conditional else {}
                async with session.get(url, headers=headers) as response:
                    await response.read()
                    if response.status != expected:
                        raise RuntimeError(f"{url}: {response.status}, expected {expected}")
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker(n) for n in range(concurrency)))
        return done / (time.perf_counter() - started)


async def steady_polls(urls: list[str], per_s: float, seconds: float) -> dict[str, float]:
    """Readers polling ``per_s`` private feeds a second for ``seconds``, each a different feed
    (round robin over ``urls``), gzip, no validators: what readers who find news cost."""
    answered = {"polls": 0, "ok": 0, "bytes": 0, "items": 0}
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        async def poll(url: str) -> None:
            async with session.get(url, headers={"Accept-Encoding": "gzip"}) as response:
                body = await response.read()
                answered["ok"] += response.status == 200
                answered["bytes"] += len(body)
                if response.status == 200:
                    answered["items"] += items_in(body)

        tasks, started, sent = set(), time.perf_counter(), 0
        while (elapsed := time.perf_counter() - started) < seconds:
            while sent < int(elapsed * per_s):
                tasks.add(asyncio.create_task(poll(urls[sent % len(urls)])))
                sent += 1
            tasks = {t for t in tasks if not t.done()}
            await asyncio.sleep(0.01)
        await asyncio.gather(*tasks)
        answered["polls"] = sent
        answered["seconds"] = time.perf_counter() - started
    return answered


def items_in(body: bytes) -> int:
    """Entries in an RSS private feed answered with gzip (0 if it cannot be read)."""
    try:
        return zlib.decompress(body, 47).count(b"<item>")
    except zlib.error:
        return 0


async def feed_wire_samples(urls: list[str]) -> list[tuple[int, int]]:
    """(entries held, bytes on the wire) of up to 100 private feeds answered 200, as a reader
    asking for gzip gets them, headers included."""
    samples = []
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        for url in urls[:100]:
            async with session.get(url, headers={"Accept-Encoding": "gzip"}) as response:
                body = await response.read()
                if response.status == 200:
                    samples.append((items_in(body), len(body) + sum(
                        len(k) + len(v) + 4 for k, v in response.raw_headers)))
    return samples


async def feed_wire_bytes(urls: list[str]) -> float:
    """Median bytes on the wire of a private feed answered 200, as a reader asking for gzip gets
    it (the provisioner's model of a reflector's outbound bandwidth: feedmesh provision)."""
    return float(statistics.median(size for _, size in await feed_wire_samples(urls)))


def answer_fit(samples: list[tuple[int, int]], k: int = 10) -> dict[str, float]:
    """A private feed's bytes as a line in the entries it holds (least squares over
    ``samples``): what an answer holding k costs, and what each entry adds."""
    items = np.array([n for n, _ in samples], dtype=float)
    sizes = np.array([b for _, b in samples], dtype=float)
    if len(samples) < 2 or np.ptp(items) == 0:
        return {"samples": len(samples), "bytes_per_item": 0.0,
                "bytes_at_k": float(np.median(sizes)) if len(samples) else 0.0,
                "mean_items": float(items.mean()) if len(samples) else 0.0}
    slope, intercept = np.polyfit(items, sizes, 1)
    return {"samples": len(samples), "bytes_per_item": round(float(slope), 1),
            "bytes_at_k": round(float(intercept + k * slope), 1),
            "mean_items": round(float(items.mean()), 2)}


def fetch_rate(before: dict[str, float], after: dict[str, float], elapsed: float) -> float:
    """Fetches per second over a window (every outcome: new, unchanged, errors)."""
    return sum(value - before.get(key, 0.0) for key, value in after.items()
               if key.startswith("feedmesh_fetches_total")) / elapsed


def run_case(name: str, feeds: int, subs: int, speed: float, interval: float, window: float,
             delivery: str, bus: str = "memory", serve_feeds: bool = True) -> dict:
    print(f"case {name}: {feeds} feeds, {subs} subscriptions, farm x{speed:g}, delivery "
          f"{delivery}, bus {bus}", flush=True)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as servers:
        data = Path(tmp)
        bus_url = "memory"
        if bus == "nats":  # its own server, its streams in this case's folder
            bus_url = servers.enter_context(LocalNats(data / "nats")).url
        provision_s = provision(data, subs)
        print(f"  provisioned {subs} subscriptions in {provision_s:.1f} s", flush=True)
        # max_age_share=0: an accelerated farm's Cache-Control would be honoured in real seconds
        config = FarmConfig(feeds=feeds, seed=1, faults="none", hosts=50, speed=speed,
                            origin=ORIGIN, max_age_share=0.0)
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        farm = FarmProcess(config, cpu=0).start()
        hub = start_hub(data, port, farm, delivery, interval, bus_url)
        try:
            first = wait_first_crawl(base, hub, feeds, timeout=1800)
            print(f"  hub up and first crawl done after {first:.0f} s", flush=True)
            # The second cycle is not steady: each feed's gap since its first fetch is shorter
            # than the interval. Measure from the end of that cycle, over whole intervals.
            wait_cycles(base, hub, json.loads(_get(f"{base}/api/stats"))["crawl_cycles"] + 1,
                        timeout=3 * interval + 600)
            window = math.ceil(window / interval) * interval
            before = _metrics(base)
            t0 = time.time()
            rss = []
            while time.time() - t0 < window:
                rss.append(_rss_mb(hub.pid))
                time.sleep(1.0)
            after = _metrics(base)
            t1 = time.time()
            elapsed = t1 - t0

            def rate(key: str) -> float:
                return (after.get(key, 0.0) - before.get(key, 0.0)) / elapsed

            figures = {"case": name, "feeds": feeds, "subscriptions": subs,
                       "delivery": delivery, "bus": bus, "farm_speed": speed,
                       "crawl_interval_s": interval,
                       "first_crawl_s": round(first, 1), "window_s": round(elapsed, 1)}
            for tier in ("crawler", "filter", "reflector"):
                figures[f"{tier}_articles_in_per_s"] = round(
                    rate(f"feedmesh_tier_articles_in_total{{tier={tier}}}"), 1)
                figures[f"{tier}_articles_out_per_s"] = round(
                    rate(f"feedmesh_tier_articles_out_total{{tier={tier}}}"), 1)
                figures[f"{tier}_bytes_in_per_s"] = round(
                    rate(f"feedmesh_tier_bytes_in_total{{tier={tier}}}"))
                figures[f"{tier}_bytes_out_per_s"] = round(
                    rate(f"feedmesh_tier_bytes_out_total{{tier={tier}}}"))
            figures["articles_per_s"] = figures["crawler_articles_out_per_s"]
            figures["fetches_per_s"] = round(fetch_rate(before, after, elapsed), 1)
            figures["matches_per_s"] = round(rate("feedmesh_matches_total"), 1)
            both = latencies(data, t0, t1)
            lat, to_filter = both[:, 0], both[:, 1]
            figures["latency_samples"] = len(lat)
            for q in (50, 99):
                figures[f"latency_p{q}_ms"] = (round(float(np.percentile(lat, q)), 1)
                                               if len(lat) else None)
                # the crawler's leg (commit, bus) vs the reflector's (bus, batch, log write)
                figures[f"to_filter_p{q}_ms"] = (round(float(np.percentile(to_filter, q)), 1)
                                                 if len(lat) else None)
            # The reflector's own memory (its rows, columns and caches, as it accounts them) and
            # the whole hub process (every tier, the crawler's state, numba and the libraries).
            figures["reflector_mb"] = round(after["feedmesh_reflector_memory_bytes"] / 2**20, 1)
            # the filter's matching time (the provisioner's model: feedmesh provision calibrate)
            figures["match_cpu_s_per_s"] = round(rate("feedmesh_match_seconds_sum"), 4)
            figures["hub_rss_mb"] = round(statistics.median(rss), 1)
            figures["hub_rss_max_mb"] = round(max(rss), 1)
            farm.stop()  # feeds now measured alone, once what was crawled has been reflected
            if serve_feeds:
                wait_quiet(base)
                tokens = FeedTokens((data / FEED_SECRET_FILE).read_bytes())  # made by the hub
                step = max(1, subs // 500)
                urls = [f"{base}/f/{tokens.make(sub_id, 0)}.rss"
                        for sub_id in range(1, subs, step)]
                figures["feed_200_wire_bytes"] = round(asyncio.run(feed_wire_bytes(urls)))
                figures.update(feed_rates(urls))
        finally:
            stop(hub)
            farm.stop()
    print("  " + json.dumps(figures), flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="case (a) alone")
    parser.add_argument("--window", type=float, default=60.0, help="measurement seconds")
    parser.add_argument("--bus", choices=("memory", "nats"), default="memory",
                        help="where the hub's tiers meet: in its process, or on a NATS "
                        "JetStream server this benchmark starts (`feedmesh serve --bus`)")
    parser.add_argument("--ids-only", action="store_true",
                        help="skip case (a) with article delivery")
    args = parser.parse_args()
    results = [run_case("a", *CASES["a"], args.window, "ids", args.bus)]
    if not args.ids_only:
        results.append(run_case("a", *CASES["a"], args.window, "article", args.bus))
    if not args.quick:
        results.append(run_case("b", *CASES["b"], args.window, "ids", args.bus))
    print()
    header = (f"{'case':4} {'delivery':8} {'art/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'refl MB':>7} "
              f"{'hub MB':>7} "
              f"{'crawl->filter B/s':>18} {'filter->refl B/s':>17} {'200/s':>7} {'304/s':>7}")
    print(header)
    for r in results:
        print(f"{r['case']:4} {r['delivery']:8} {r['articles_per_s']:>7.0f} "
              f"{r['latency_p50_ms'] or 0:>8.1f} {r['latency_p99_ms'] or 0:>8.1f} "
              f"{r['reflector_mb']:>7.0f} {r['hub_rss_mb']:>7.0f} "
              f"{r['crawler_bytes_out_per_s']:>18,} "
              f"{r['filter_bytes_out_per_s']:>17,} {r['feed_200_per_s']:>7} "
              f"{r['feed_304_per_s']:>7}")
    print("goals: >= 200 articles/s, p50 <= 100 ms, p99 <= 1000 ms, reflector <= 300 MB "
          "(Cobra: medians 5-34 s, reflector ~500 MB per 1M subscriptions)")
    main_result = results[-1]
    keys = ("articles_per_s", "latency_p50_ms", "latency_p99_ms", "reflector_mb", "hub_rss_mb",
            "feed_304_per_s", "feed_200_per_s")
    print(json.dumps({**{k: main_result[k] for k in keys}, "case": main_result["case"],
                      "cases": results}))


if __name__ == "__main__":
    main()
