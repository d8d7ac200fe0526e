"""Cobra's largest topologies (Figure 11) on this one machine (issue 34): 1M feeds / 10M
subscriptions (``1m10m``), 500k / 20M (``500k20m``) and 250k / 40M (``250k40m``), at Cobra's own
rates (section 4.2), on the embedded hub (``feedmesh serve``, one process: ``embedded``) and on
``feedmesh up`` with the plan ``feedmesh provision --model processes`` gives for this machine
(``up``).

The workload, per topology:

* the farm (``benchmarks/farm.py``'s testbed), its clock sped up so that its feeds post Cobra's
  **48.5 updated articles a second per million feeds** (24.25/s at 500k, 12.1/s at 250k): the
  speed follows from the farm's posting law (:func:`farm_speed`);
* a crawl every 15 minutes (1,111 fetches/s at 1M feeds; most find nothing new, 304s);
* ``match/workload.py``'s Cobra-shaped conjunctions (``hub.provision``; ``topology.provision``
  under ``up``), k = 10 each;
* a poller reading a sample of private feeds with conditional GETs (``If-None-Match``) at the
  ``ttl`` each advertises.

The first crawl's backlog is not matched (``--no-backlog``); the crawl cycle after it is not
steady either (each feed's gap since its first fetch is shorter than the interval), so the
window opens when the cycle after that one begins and spans ``--intervals`` whole crawl
intervals, each holding one whole cycle (``cycle_s``: what the window's last cycle took, against
the interval's 0.8 it is paced over); ``--quick``: the one interval right after the first crawl:
~70 s to provision 10M subscriptions, >= 1,000 s for the first crawl at the embedded crawler's
~1,000 fetches/s, 900 s measured: ~35 minutes at best; the first crawl measured 192 feeds/s at
--scale 10 on a loaded machine on 2026-12-02, ~100 minutes, and 960 feeds/s on 2026-12-04, ~35
minutes: see docs/measurements.md). Over it:
intra-hub latency first seen -> stored in the reflector (p50, p99: exact, from the reflectors'
stores), the fetch rate, articles/s out of the crawler, matches/s, every process's RSS (peak and
median of 1 s samples), the poller's 200s and 304s per second. After the window the farm stops,
the queues drain, the hub stops, and a sample of the entries first seen in the window is
**re-matched** offline (``parse_query(q).matches``, the tests' oracle) against a sample of
subscriptions: a matching pair is *dropped* when the subscription's reflector neither holds the
entry nor holds k entries newer than it (k = 10: an older one is rightly pushed out).

``--scale F`` divides feeds, subscriptions and the crawl interval by F, keeping Cobra's fetches/s
and articles/s (the farm runs F times faster): the crawler's and the bus's load stay Cobra's,
the matching cost per article is 1/F of it. The test (tests/hub/test_cobra_scale.py) runs that
way at a few thousand feeds.

    .venv/bin/python benchmarks/cobra_scale.py [--quick] [--topos 1m10m,...] [--modes embedded,up]
        [--intervals 2] [--scale 1]

Last line: one JSON object with, per topology and mode, ``{topo}_{mode}_p50_ms``, ``_p99_ms``,
``_dropped``, ``_fetches_per_s``, ``_rss_gb``, ``_articles_per_s``, ``_feed_200_per_s``,
``_feed_304_per_s`` (and ``_runs``: every figure behind them, each process's peak RSS included).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import aiohttp
import numpy as np
import topology

import hub
from feedmesh.compose import FEED_SECRET_FILE, private_feed_key
from feedmesh.compose.engines import open_ingest_store, open_reflector_log
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.farm.posting import ALPHA, RATE_MAX, RATE_MIN
from feedmesh.hub.front.archive import TTL_UNKNOWN_MINUTES
from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.hub.tiers.held import restore_held
from feedmesh.match.article import article_from_entry
from feedmesh.match.query import parse_query
from feedmesh.match.workload import Workload
from feedmesh.procstat import cpu_seconds, rss_bytes
from feedmesh.store.pg_server import LocalPostgres

TOPOS = {"1m10m": (1_000_000, 10_000_000, 48.5), "500k20m": (500_000, 20_000_000, 24.25),
         "250k40m": (250_000, 40_000_000, 12.1)}
"""topology -> (feeds, subscriptions, updated articles per second): Cobra sections 4.2-4.3."""
MODES = ("embedded", "up")
CRAWL_INTERVAL_S = 900.0
KEEP = 10
COBRA_MEDIANS_S = {"1m10m": 5.06, "250k40m": 34.22, "100k1m": 30.81}
"""Cobra's Figure 13 medians as its text gives them (section 4.3; 500k / 20M's is not quoted)."""
PYTHON = [sys.executable, "-m", "feedmesh"]


def mean_posts_per_day() -> float:
    """A farm feed's mean posting rate: the mean of the truncated power law r^-(1+ALPHA) on
    [RATE_MIN, RATE_MAX] (farm/posting.py; the daily profiles have mean 1)."""
    a = ALPHA
    top = (RATE_MAX ** (1 - a) - RATE_MIN ** (1 - a)) / (1 - a)
    bottom = (RATE_MIN ** -a - RATE_MAX ** -a) / a
    return top / bottom


def farm_cache_mb(feeds: int) -> float:
    """The farm's document cache, sized to hold every feed's document (~15 KB with its encoded
    variants): past its 1 GB default, at 100k feeds, the farm re-rendered a dropped document for
    most conditional requests (0.94 ms of CPU each, 0.62 of a core at 658 fetches/s, against 0.19
    ms at 50k feeds): the testbed, standing in for the web, then took the hub's cores."""
    return max(1024.0, feeds * 0.025)


def farm_speed(feeds: int, articles_per_s: float) -> float:
    """The farm clock's speed-up for ``feeds`` to post ``articles_per_s`` on average."""
    return articles_per_s / (feeds * mean_posts_per_day() / 86400.0)


class TtlPoller:
    """Readers of ``urls`` (private feeds): each GETs its feed, then again with ``If-None-Match``
    every ``ttl`` minutes the feed advertises, counting 200s, 304s and failures (status 0).

    The ttl is real time at every ``--scale``: a subscription matches as many articles a second
    at 1/F of the subscriptions (Cobra's articles/s are kept), so its feed's ttl is the full
    size's. A 304 keeps the last ttl read. The first read of each reader falls at random
    in the first ``spread_s``, the second at random within its ttl, then one every ttl (at least
    ``min_s`` apart): the readers' phases are spread, so that a window opened any time after
    ``spread_s`` sees the steady rate (len(urls) / ttl), not the burst or the lull after the
    first reads (which the window used to see: 0.00 per s under up)."""

    TTL = re.compile(rb"<ttl>(\d+)</ttl>")

    def __init__(self, urls: list[str], spread_s: float = 60.0, min_s: float = 1.0) -> None:
        self.urls, self.spread_s, self.min_s = urls, spread_s, min_s
        self.statuses: dict[int, int] = {}
        self.stopped = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.wake: asyncio.Event | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self) -> TtlPoller:
        self.thread.start()
        return self

    def counts(self) -> tuple[int, int, int]:
        """200s, 304s and everything else (failures included) so far."""
        ok, unchanged = self.statuses.get(200, 0), self.statuses.get(304, 0)
        return ok, unchanged, sum(self.statuses.values()) - ok - unchanged

    def stop(self) -> None:
        self.stopped.set()
        if self.loop is not None and self.wake is not None:
            self.loop.call_soon_threadsafe(self.wake.set)
        self.thread.join(60)

    async def _run(self) -> None:
        self.loop, self.wake = asyncio.get_running_loop(), asyncio.Event()
        if self.stopped.is_set():
            return
        async with aiohttp.ClientSession() as session:
            await asyncio.gather(*(self._reader(session, url, n)
                                   for n, url in enumerate(self.urls)))

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wake.wait(), seconds)

    async def _reader(self, session: aiohttp.ClientSession, url: str, n: int) -> None:
        rng = random.Random(n)
        await self._pause(rng.uniform(0, self.spread_s))
        etag, reads, wait = "", 0, 60.0 * TTL_UNKNOWN_MINUTES
        while not self.stopped.is_set():
            try:
                headers = {"If-None-Match": etag} if etag else {}
                async with session.get(url, headers=headers) as answer:
                    body = await answer.read()
                    self.statuses[answer.status] = self.statuses.get(answer.status, 0) + 1
                    if answer.status == 200:
                        etag = answer.headers.get("ETag", "")
                        found = self.TTL.search(body)
                        if found:
                            wait = 60.0 * int(found.group(1))
            except (aiohttp.ClientError, OSError, TimeoutError):
                self.statuses[0] = self.statuses.get(0, 0) + 1
            reads += 1
            pause = max(self.min_s, wait)
            await self._pause(rng.uniform(0, pause) if reads == 1 else pause)


def first_id_before(store, t0: float) -> int:
    """An entry id below every entry first seen at or after ``t0`` (ids grow with first-seen
    time): a binary search, so that the first crawl's millions of entries are not read."""
    lo, hi = 0, 2**31
    while hi - lo > 1:
        mid = (lo + hi) // 2
        page = store.entries_after(mid, 1)
        if page and page[0].first_seen_at < t0:
            lo = mid
        else:
            hi = mid
    return lo


def dropped_pairs(pairs: list[tuple[int, int]], held: dict[int, list[int]], keep: int) -> int:
    """The (subscription, entry) pairs that should be held and are not: the entry is missing
    and the subscription does not hold ``keep`` entries newer than it (ids grow with time)."""
    dropped = 0
    for sub_id, entry_id in pairs:
        have = held.get(sub_id, [])
        if entry_id not in have and not (len(have) >= keep and min(have) > entry_id):
            dropped += 1
    return dropped


def rematch(ingest_at: str, log_at, reflectors: int, subs: int, t0: float, t1: float,
            sample_subs: int, sample_entries: int, seed: int = 34) -> dict:
    """Entries first seen in [t0, t1] (a sample) against a sample of subscriptions: the matching
    pairs, and those dropped (the reflector holds neither the entry nor k newer ones).
    ``log_at(n)``: reflector n's log location; subscription id i belongs to reflector
    (i - 1) % reflectors, as the provisioning spread them."""
    started = time.perf_counter()
    store = open_ingest_store(ingest_at)
    try:
        urls = {row.id: row.state.url for row in store.feeds()}
        window, after = [], first_id_before(store, t0)
        while True:
            page = store.entries_after(after, 5000)
            if not page or page[0].first_seen_at > t1:
                break
            after = page[-1].id
            window += [e for e in page if t0 <= e.first_seen_at <= t1 and not e.backlog]
    finally:
        store.close()
    rng = random.Random(seed)
    entries = rng.sample(window, min(sample_entries, len(window)))
    queries = Workload(seed=1).subscriptions(subs)
    sub_ids = sorted(rng.sample(range(1, subs + 1), min(sample_subs, subs)))
    parsed = {s: parse_query(queries[s - 1]) for s in sub_ids}
    articles = [(e.id, article_from_entry(e.entry, urls[e.feed_id])) for e in entries]
    pairs = [(s, entry_id) for s in sub_ids for entry_id, a in articles if parsed[s].matches(a)]
    keeps = np.full(subs + 1, KEEP, dtype=np.int16)
    held: dict[int, list[int]] = {}
    for n in range(reflectors):
        log = open_reflector_log(log_at(n), n)
        try:
            topk = restore_held(log, keeps).topk
        finally:
            log.close()
        for s in sub_ids:
            if (s - 1) % reflectors == n:
                held[s] = topk.newest_ids(s, KEEP)
        del topk
    dropped = dropped_pairs(pairs, held, KEEP)
    return {"rematch_window_entries": len(window), "rematch_entries": len(entries),
            "rematch_subs": len(sub_ids), "rematch_pairs": len(pairs), "dropped": dropped,
            "rematch_s": round(time.perf_counter() - started, 1)}


def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def percentiles(lat: np.ndarray) -> dict:
    out = {"latency_samples": len(lat)}
    for q in (50, 90, 99):
        out[f"p{q}_ms"] = round(float(np.percentile(lat, q)), 1) if len(lat) else None
    # the CDF drawn in docs/measurements.md: 101 points, 0..100th percentile
    out["cdf_ms"] = ([round(float(x), 1) for x in np.percentile(lat, np.arange(101))]
                     if len(lat) else [])
    return out


def legs(lat: np.ndarray) -> dict:
    """The two legs of the intra-hub latency, from rows of (first seen -> stored, first seen ->
    matched): the crawler, the bus and the filter's queue and match (``match``), then the bus
    and the reflector's queue and commit (``store``): which part a missed percentile is in."""
    if not len(lat):
        return {}
    matched, stored = lat[:, 1], lat[:, 0] - lat[:, 1]
    return {f"{name}_p{q}_ms": round(float(np.percentile(leg, q)), 1)
            for name, leg in (("match", matched), ("store", stored)) for q in (50, 99)}


def sample_rss(pids: dict[str, int], rss: dict[str, list[float]]) -> None:
    for name, pid in pids.items():
        rss.setdefault(name, []).append((rss_bytes(pid) or 0) / 2**30)


def farm_renders(farm: FarmProcess) -> int:
    """Documents the farm has rendered so far (a conditional request for a cached one costs
    none)."""
    return farm.stats()["cache"]["renders"]


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and every process under it (PostgreSQL's backends)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        one = todo.pop()
        total += cpu_seconds(one) or 0.0
        todo.extend(children.get(one, ()))
    return total


def cpu_snapshot(pids: dict[str, int]) -> dict[str, float]:
    """Each process with its children, but this one (the poller) alone: the farm, the hub and
    ``feedmesh up`` are its children, counted by their own names."""
    return {name: (cpu_seconds(pid) or 0.0) if pid == os.getpid() else tree_cpu(pid)
            for name, pid in pids.items()}


def usage(processes: dict[str, int], farm: FarmProcess) -> tuple[dict[str, float], int]:
    """What the window's cores and farm figures are differences of: CPU seconds per process,
    the farm's renders."""
    return cpu_snapshot(processes), farm_renders(farm)


def usage_figures(before: tuple[dict[str, float], int], after: tuple[dict[str, float], int],
                  elapsed: float) -> dict:
    """Cores each process (with its children) used over the window, and all together (which
    part a missed goal waits on, when the two cores are full), and the farm's renders/s."""
    cores = {name: round((after[0][name] - before[0].get(name, 0.0)) / elapsed, 3)
             for name in after[0]}
    return {"cpu_cores": cores, "cpu_cores_total": round(sum(cores.values()), 2),
            "farm_renders_per_s": round((after[1] - before[1]) / elapsed, 1)}


def rss_figures(rss: dict[str, list[float]]) -> dict:
    peaks = {name: round(max(v), 3) for name, v in rss.items() if v}
    # all processes together: the peak of the per-sample sums
    total = max(sum(v[i] for v in rss.values() if i < len(v))
                for i in range(max(len(v) for v in rss.values())))
    return {"rss_gb": round(total, 3), "rss_peak_gb": peaks,
            "rss_median_gb": {name: round(statistics.median(v), 3) for name, v in rss.items()}}


def cycle_begun(stats: Callable[[], dict], after: int, timeout: float) -> int:
    """Until a crawl cycle after the first ``after`` is under way; its number. A cycle starts
    every interval and is paced over 0.8 of it, so a window opened here and an interval long
    spans whole cycles, whatever the cycle before took (one opened when a cycle ends cuts the
    next one short by however much longer that one takes)."""
    seen: dict = {}

    def begun() -> bool:
        seen.update(stats())
        return seen["crawl_cycles"] >= after and seen.get("crawl_running") is not None

    topology.wait_for(begun, "a crawl cycle beginning", timeout)
    return seen["crawl_cycles"] + 1


def cycles_ended(stats: Callable[[], dict], cycle: int, timeout: float) -> float | None:
    """Once cycle number ``cycle`` has ended (None: not within ``timeout``), the seconds the
    last cycle took: the window's own, when it ended by then."""
    seen: dict = {}

    def ended() -> bool:
        seen.update(stats())
        return seen["crawl_cycles"] >= cycle

    with contextlib.suppress(RuntimeError):
        topology.wait_for(ended, "the window's crawl cycles ending", timeout)
        return round(seen["last_crawl"]["elapsed_s"], 1)
    return None


def run_embedded(topo: str, feeds: int, subs: int, articles: float, interval: float,
                 intervals: int, poll_feeds: int, sample_subs: int, sample_entries: int,
                 settle: bool = True) -> dict:
    speed = farm_speed(feeds, articles)
    print(f"{topo} embedded: {feeds:,} feeds, {subs:,} subscriptions, crawl every "
          f"{interval:g} s, farm x{speed:.3f} ({articles:g} articles/s asked)", flush=True)
    figures: dict = {"topo": topo, "mode": "embedded", "feeds": feeds, "subscriptions": subs,
                     "crawl_interval_s": interval, "farm_speed": round(speed, 4),
                     "articles_per_s_asked": articles,
                     "fetches_per_s_asked": round(feeds / interval, 1)}
    with tempfile.TemporaryDirectory(prefix="cobra-scale-") as tmp:
        data = Path(tmp)
        figures["provision_s"] = round(hub.provision(data, subs), 1)
        print(f"  provisioned in {figures['provision_s']} s", flush=True)
        config = FarmConfig(feeds=feeds, seed=1, faults="none", hosts=50, speed=speed,
                            origin=hub.ORIGIN, max_age_share=0.0, cache_mb=farm_cache_mb(feeds))
        port = hub._free_port()
        base = f"http://127.0.0.1:{port}"
        farm = FarmProcess(config, cpu=0).start()
        server = hub.start_hub(data, port, farm, "ids", interval)
        poller = None
        rss: dict[str, list[float]] = {}
        try:
            started = time.perf_counter()
            first = hub.wait_first_crawl(base, server, feeds, timeout=3 * interval + 7200)
            figures["first_crawl_s"] = round(first, 1)
            sample_rss({"hub": server.pid, "farm": farm.pid}, rss)
            print(f"  first crawl done after {first:.0f} s", flush=True)
            tokens = FeedTokens((data / FEED_SECRET_FILE).read_bytes())
            step = max(1, subs // poll_feeds)
            poller = TtlPoller([f"{base}/f/{tokens.make(s, 0)}.rss"
                                for s in range(1, subs + 1, step)][:poll_feeds]).start()
            if settle:  # the cycle after the first is not steady (see the module docstring)
                hub.wait_cycles(base, server,
                                json.loads(hub._get(f"{base}/api/stats"))["crawl_cycles"] + 1,
                                timeout=3 * interval + 3600)
            def stats() -> dict:
                return json.loads(hub._get(f"{base}/api/stats", 30))

            cycle = cycle_begun(stats, stats()["crawl_cycles"], 3 * interval + 3600)
            figures["steady_after_s"] = round(time.perf_counter() - started, 1)
            processes = {"hub": server.pid, "farm": farm.pid, "poller": os.getpid()}
            before, polled0, load0 = hub._metrics(base), poller.counts(), loadavg()
            used0, t0 = usage(processes, farm), time.time()
            while time.time() - t0 < intervals * interval:
                sample_rss({"hub": server.pid, "farm": farm.pid}, rss)
                time.sleep(1.0)
            after, polled1, t1 = hub._metrics(base), poller.counts(), time.time()
            elapsed = t1 - t0
            figures["cycle_s"] = cycles_ended(stats, cycle + intervals - 1, interval)
            figures.update(window(before, after, elapsed, polled0, polled1, load0))
            figures.update(usage_figures(used0, usage(processes, farm), elapsed))
            lat = hub.latencies(data, t0, t1)
            figures.update(percentiles(lat[:, 0]))
            figures["legs"] = legs(lat)
            figures.update(rss_figures(rss))
            poller.stop()
            poller = None
            farm.stop()
            with contextlib.suppress(RuntimeError):
                hub.wait_quiet(base, timeout=600)
        finally:
            if poller is not None:
                poller.stop()
            hub.stop(server, 600)
            farm.stop()
        figures.update(rematch(str(data / "feedmesh.db"), lambda n: data / f"reflector-{n}.db",
                               1, subs, t0, t1, sample_subs, sample_entries))
    print("  " + json.dumps({k: v for k, v in figures.items() if k != "cdf_ms"}), flush=True)
    return figures


def window(before: dict, after: dict, elapsed: float, polled0: tuple[int, int, int],
           polled1: tuple[int, int, int], load0: list[float]) -> dict:
    def rate(key: str) -> float:
        return (after.get(key, 0.0) - before.get(key, 0.0)) / elapsed

    return {"window_s": round(elapsed, 1),
            "fetches_per_s": round(hub.fetch_rate(before, after, elapsed), 1),
            "articles_per_s": round(rate("feedmesh_tier_articles_out_total{tier=crawler}"), 2),
            "matches_per_s": round(rate("feedmesh_matches_total"), 1),
            "match_cpu_s_per_s": round(rate("feedmesh_match_seconds_sum"), 4),
            "feed_200_per_s": round((polled1[0] - polled0[0]) / elapsed, 2),
            "feed_304_per_s": round((polled1[1] - polled0[1]) / elapsed, 2),
            "feed_failed_per_s": round((polled1[2] - polled0[2]) / elapsed, 2),
            "loadavg_before": load0, "loadavg_after": loadavg()}


def plan(folder: Path, feeds: int, subs: int, interval: float) -> dict:
    """``feedmesh provision --model processes`` for this one machine (2 cores, 24 GB)."""
    done = subprocess.run([*PYTHON, "provision", "--json", "--model", "processes",
                           "--feeds", str(feeds), "--subs", str(subs), "--crawl-interval",
                           str(interval), "--keep", str(KEEP), "--cpu", "2", "--memory-mb",
                           "24000", "--bandwidth-mbps", "10000"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"feedmesh provision: {done.stderr.strip()}")
    (folder / "plan.json").write_text(done.stdout)
    return json.loads(done.stdout)


def run_up(topo: str, feeds: int, subs: int, articles: float, interval: float, intervals: int,
           poll_feeds: int, sample_subs: int, sample_entries: int, settle: bool = True) -> dict:
    speed = farm_speed(feeds, articles)
    folder = Path(tempfile.mkdtemp(prefix="cobra-scale-up-"))
    figures: dict = {"topo": topo, "mode": "up", "feeds": feeds, "subscriptions": subs,
                     "crawl_interval_s": interval, "farm_speed": round(speed, 4),
                     "articles_per_s_asked": articles,
                     "fetches_per_s_asked": round(feeds / interval, 1)}
    up = farm = poller = None
    try:
        with contextlib.ExitStack() as servers:
            layout = plan(folder, feeds, subs, interval)
            reflectors = layout["reflectors"]
            figures["plan"] = {k: layout[k] for k in ("crawlers", "filters", "reflectors")}
            print(f"{topo} up: plan {figures['plan']}; {feeds:,} feeds, {subs:,} subscriptions, "
                  f"crawl every {interval:g} s, farm x{speed:.3f}", flush=True)
            pg_folder = tempfile.mkdtemp(prefix="cobra-scale-pg-")  # (as provision_check.py)
            servers.callback(shutil.rmtree, pg_folder, True)
            pg = LocalPostgres(pg_folder, durable=True).start()
            servers.callback(pg.stop)
            url = pg.superuser_login(folder / "secrets" / "superuser.pgpass").url  # no password
            started = time.perf_counter()
            topology.provision(url, subs, reflectors)
            figures["provision_s"] = round(time.perf_counter() - started, 1)
            print(f"  provisioned in {figures['provision_s']} s", flush=True)
            config = FarmConfig(feeds=feeds, seed=1, faults="none", hosts=50, speed=speed,
                                origin=hub.ORIGIN, max_age_share=0.0,
                                cache_mb=farm_cache_mb(feeds))
            farm = FarmProcess(config, cpu=0).start()
            data = folder / "up"
            log = open(folder / "up.log", "wb")  # noqa: SIM115 (closed with the stack)
            servers.callback(log.close)
            up = subprocess.Popen(
                [*PYTHON, "up", "--data", str(data), "--topology", str(folder / "plan.json"),
                 "--store", url, "--opml", farm.opml_url, "--allow-network", "127.0.0.0/8",
                 "--crawl-interval", str(interval), "--per-host", "64", "--no-backlog",
                 "--delivery", "ids", "--port", "0", "--web", "1"],
                stdout=subprocess.DEVNULL, stderr=log)
            topology.wait_for(lambda: (data / "up.json").exists() or up.poll() is not None,
                              "the topology starting", 1800)
            if up.poll() is not None:
                raise RuntimeError(f"feedmesh up exited: {(folder / 'up.log').read_text()[-2000:]}")
            listing = json.loads((data / "up.json").read_text())
            pids = {f"{p['role']}-{p.get('shard', '') or n}": p["pid"]
                    for n, p in enumerate(listing["processes"])}
            crawler = next(p["metrics"].removesuffix("/metrics") for p in listing["processes"]
                           if p["role"] == "crawler")
            tiers = [p for p in listing["processes"] if p["role"] in ("filter", "reflector")]

            def crawl_stats() -> dict:
                return json.loads(hub._get(f"{crawler}/api/stats", 30))

            def cycles() -> int:
                return crawl_stats()["crawl_cycles"] or 0

            def first_crawl_done() -> bool:  # as hub.wait_first_crawl: a cycle over every feed
                last = crawl_stats()["last_crawl"]
                return last is not None and last["feeds_due"] >= feeds

            def totals() -> dict[str, float]:
                out = dict(hub._metrics(crawler))
                for p in tiers:
                    for key, value in hub._metrics(p["metrics"].removesuffix("/metrics"),
                                                   p.get("token_file", "")).items():
                        if key.startswith(("feedmesh_matches_total", "feedmesh_match_seconds")):
                            out[key] = out.get(key, 0.0) + value
                return out

            rss: dict[str, list[float]] = {}
            topology.wait_for(first_crawl_done, "the first crawl", 3 * interval + 7200)
            figures["first_crawl_s"] = round(time.perf_counter() - started, 1)
            first_cycles = cycles()
            tokens = FeedTokens(private_feed_key(data / "hub", url))
            step = max(1, subs // poll_feeds)
            poller = TtlPoller([f"{listing['web']}/f/{tokens.make(s, 0)}.rss"
                                for s in range(1, subs + 1, step)][:poll_feeds]).start()
            if settle:
                topology.wait_for(lambda: cycles() > first_cycles, "a steady crawl cycle",
                                  3 * interval + 3600)
            cycle = cycle_begun(crawl_stats, cycles(), 3 * interval + 3600)
            pids["farm"] = farm.pid
            processes = {**pids, "postgres": pg.pid, "poller": os.getpid()}
            before, polled0, load0 = totals(), poller.counts(), loadavg()
            used0, t0 = usage(processes, farm), time.time()
            while time.time() - t0 < intervals * interval:
                sample_rss(pids, rss)
                time.sleep(1.0)
            after, polled1, t1 = totals(), poller.counts(), time.time()
            figures["cycle_s"] = cycles_ended(crawl_stats, cycle + intervals - 1, interval)
            figures.update(window(before, after, t1 - t0, polled0, polled1, load0))
            figures.update(usage_figures(used0, usage(processes, farm), t1 - t0))
            lat = topology.pg_latencies(url, t0, t1, legs=True)
            figures.update(percentiles(lat[:, 0]))
            figures["legs"] = legs(lat)
            figures.update(rss_figures(rss))
            poller.stop()
            poller = None
            farm.stop()
            with contextlib.suppress(RuntimeError):
                topology.wait_for(lambda: sum(
                    v for p in tiers for k, v in hub._metrics(
                        p["metrics"].removesuffix("/metrics"), p.get("token_file", "")).items()
                    if k.startswith("feedmesh_queue_messages")) == 0, "the queues draining", 600)
            up.send_signal(signal.SIGTERM)
            up.wait(600)
            up = None
            figures.update(rematch(url, lambda n: url, reflectors, subs, t0, t1, sample_subs,
                                   sample_entries))
    finally:
        if poller is not None:
            poller.stop()
        if up is not None:
            hub.stop(up, 600)
        if farm is not None:
            farm.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print("  " + json.dumps({k: v for k, v in figures.items() if k != "cdf_ms"}), flush=True)
    return figures


KEYS = ("p50_ms", "p99_ms", "dropped", "fetches_per_s", "rss_gb", "articles_per_s",
        "feed_200_per_s", "feed_304_per_s")


def keyed(run: dict) -> dict:
    """A run's figures under the issue's keys, ``{topo}_{mode}_...``."""
    prefix = f"{run['topo']}_{run['mode']}_"
    return {**{prefix + key: run.get(key) for key in KEYS},
            prefix + "rss_peak_gb": run.get("rss_peak_gb")}


def draw_cdf(runs: list[dict], path: Path) -> None:
    """Each run's latency CDF (log-scaled ms) beside Cobra's Figure 13 medians, as an SVG."""
    width, height, left, bottom = 640, 360, 60, 40
    lo, hi = 1.0, 100_000.0

    def x(ms: float) -> float:
        ms = min(max(ms, lo), hi)
        return left + (width - left - 20) * math.log10(ms / lo) / math.log10(hi / lo)

    def y(share: float) -> float:
        return height - bottom - (height - bottom - 20) * share

    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
              'font-family="sans-serif" font-size="11">'),
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<line x1="{left}" y1="{y(0)}" x2="{width - 20}" y2="{y(0)}" stroke="black"/>',
             f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{y(1)}" stroke="black"/>']
    for ms in (1, 10, 100, 1000, 10_000, 100_000):
        parts.append(f'<text x="{x(ms) - 12}" y="{y(0) + 15}">{ms:g} ms</text>')
    for share in (0, 0.5, 1):
        parts.append(f'<text x="{left - 30}" y="{y(share) + 4}">{share:g}</text>')
    for n, (topo, seconds) in enumerate(COBRA_MEDIANS_S.items()):
        label = f"Cobra {topo} median {seconds:g} s"
        parts.append(f'<line x1="{x(seconds * 1000)}" y1="{y(0)}" x2="{x(seconds * 1000)}" '
                     f'y2="{y(1)}" stroke="grey" stroke-dasharray="4"/>')
        parts.append(f'<text x="{x(seconds * 1000) - 150}" y="{y(0.5) + 14 * n}" '
                     f'fill="grey">{label}</text>')
    for n, run in enumerate(r for r in runs if r.get("cdf_ms")):
        points = " ".join(f"{x(ms):.1f},{y(q / 100):.1f}" for q, ms in enumerate(run["cdf_ms"]))
        colour = colours[n % len(colours)]
        parts.append(f'<polyline points="{points}" fill="none" stroke="{colour}"/>')
        parts.append(f'<text x="{left + 10}" y="{30 + 14 * n}" fill="{colour}">{run["topo"]} '
                     f'{run["mode"]} (scale 1/{run.get("scale", 1):g}): p50 {run["p50_ms"]} ms, '
                     f'p99 {run["p99_ms"]} ms</text>')
    parts.append(f'<text x="{width / 2 - 150}" y="{height - 5}">intra-hub latency, first seen '
                 '-> stored in the reflector (CDF)</text></svg>')
    path.write_text("\n".join(parts) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="1m10m on the embedded hub alone, the one interval right after "
                        "the first crawl (no settling cycle; >= 35 minutes at scale 1)")
    parser.add_argument("--topos", default=",".join(TOPOS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--intervals", type=int, default=2,
                        help="whole crawl intervals measured after the first two cycles")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="divide feeds, subscriptions and the crawl interval by this "
                        "(Cobra's fetches/s and articles/s kept)")
    parser.add_argument("--poll-feeds", type=int, default=1000,
                        help="private feeds the poller reads")
    parser.add_argument("--sample-subs", type=int, default=1000,
                        help="subscriptions re-matched (each against every sampled entry, "
                        "in Python: the re-match's time grows as their product)")
    parser.add_argument("--sample-entries", type=int, default=1000)
    parser.add_argument("--cdf", type=Path, default=None, help="draw the latency CDFs (SVG)")
    args = parser.parse_args()
    topos = [t.strip() for t in args.topos.split(",") if t.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.quick:
        topos, modes, args.intervals = ["1m10m"], ["embedded"], 1
    if set(topos) - set(TOPOS) or set(modes) - set(MODES):
        parser.error(f"--topos among {', '.join(TOPOS)}; --modes among {', '.join(MODES)}")
    figures: dict = {"scale": args.scale, "loadavg_start": loadavg()}
    runs = []
    for topo in topos:
        feeds, subs, articles = TOPOS[topo]
        feeds, subs = round(feeds / args.scale), round(subs / args.scale)
        interval = CRAWL_INTERVAL_S / args.scale
        for mode in modes:
            run = (run_embedded if mode == "embedded" else run_up)(
                topo, feeds, subs, articles, interval, args.intervals, args.poll_feeds,
                args.sample_subs, args.sample_entries, settle=not args.quick)
            run["scale"], run["settled"] = args.scale, not args.quick
            runs.append(run)
            figures |= keyed(run)
    print()
    print(f"{'run':18} {'p50 ms':>8} {'p99 ms':>8} {'dropped':>7} {'fetch/s':>8} {'asked':>6} "
          f"{'art/s':>6} {'asked':>6} {'RSS GB':>7} {'200/s':>6} {'304/s':>6}")
    for r in runs:
        print(f"{r['topo'] + ' ' + r['mode']:18} {r['p50_ms'] or 0:>8.1f} {r['p99_ms'] or 0:>8.1f} "
              f"{r['dropped']:>7} {r['fetches_per_s']:>8.1f} {r['fetches_per_s_asked']:>6.0f} "
              f"{r['articles_per_s']:>6.1f} {r['articles_per_s_asked']:>6.1f} "
              f"{r['rss_gb']:>7.2f} {r['feed_200_per_s']:>6.2f} {r['feed_304_per_s']:>6.2f}")
    print("goals: p50 <= 200 ms, p99 <= 1000 ms, 0 dropped, fetches/s within 2% of asked, "
          "<= 12 GB all processes (Cobra: medians 5.06-34.22 s on 51-57 machines)")
    if args.cdf is not None:
        draw_cdf(runs, args.cdf)
    figures["loadavg_end"] = loadavg()
    figures["runs"] = runs
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
