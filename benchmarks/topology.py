"""The hub as processes under load: one crawler, F filter shards, R reflectors and one web
process over a NATS JetStream server and a PostgreSQL server (both started here), crawling a farm
process with the workload of ``benchmarks/hub.py`` (its cases, its subscriptions). Used by
``benchmarks/distributed.py`` for its ``nats_111`` and ``nats_122`` modes; the embedded mode is
``hub.run_case`` itself, so the three are measured the same way.

Figures over a window of whole crawl intervals once two cycles are done: articles/s out of the
crawler; intra-hub latency p50/p99, exact, from every reflector's stored items (first seen by the
crawler -> stored by the reflector); each process's CPU share and median RSS; bytes/s on the
bus (crawler -> filters, filters -> reflectors); PostgreSQL commits/s; then, the farm stopped and
the queues drained, private feeds answered 200 and 304 per second by the web process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

from feedmesh.bus.nats_server import LocalNats
from feedmesh.compose import private_feed_key
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.match.workload import Workload
from feedmesh.procstat import cpu_seconds, rss_bytes
from feedmesh.store.pg_server import LocalPostgres
from feedmesh.store.postgres_hub import PostgresHubState
from hub import (
    ORIGIN,
    _free_port,
    _get,
    _metrics,
    answer_fit,
    feed_rates,
    feed_wire_samples,
    fetch_rate,
    steady_polls,
    stop,
)

PYTHON = [sys.executable, "-m", "feedmesh"]


class Process:
    def __init__(self, name: str, argv: list[str], ready: str, logs: Path,
                 metrics: str = "") -> None:
        self.name = name
        self.metrics = metrics
        self.log = logs / f"{name}.log"
        with open(self.log, "wb") as err:
            self.popen = subprocess.Popen([*PYTHON, *argv], stdout=subprocess.DEVNULL,
                                          stderr=err)
        deadline = time.monotonic() + 1800
        while ready not in self.log.read_text(errors="replace"):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start: "
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        stop(self.popen, 300)


def provision(url: str, subscriptions: int, reflectors: int) -> None:
    """hub.py's subscriptions, spread over the reflectors by row."""
    state = PostgresHubState(url)
    account, _ = state.create_account("bench", time.time())
    queries = Workload(seed=1).subscriptions(subscriptions)
    state.add_subscriptions(((account.id, "", q, 10, n % reflectors)
                             for n, q in enumerate(queries)), time.time())
    state.close()


def commits(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as db:
        return int(db.execute("SELECT sum(xact_commit) FROM pg_stat_database").fetchone()[0])


def pg_latencies(url: str, start: float, end: float, legs: bool = False) -> np.ndarray:
    """Per item stored in [start, end], in ms: first seen -> stored; with ``legs``, rows of
    (first seen -> stored, first seen -> matched), as ``hub.latencies``."""
    import msgspec

    from feedmesh.store import ReflectedItem

    decoder = msgspec.msgpack.Decoder(ReflectedItem)
    with psycopg.connect(url) as db:
        rows = db.execute("SELECT data FROM reflector_items WHERE stored_at BETWEEN %s AND %s",
                          (start, end)).fetchall()
    items = [decoder.decode(bytes(r[0])) for r in rows]
    if legs:
        return np.array([(i.stored_at - i.first_seen_at, i.matched_at - i.first_seen_at)
                         for i in items]).reshape(-1, 2) * 1000.0
    return np.array([(i.stored_at - i.first_seen_at) * 1000.0 for i in items])


def queued(process: Process) -> float:
    """Messages waiting for a process's groups on the bus."""
    return sum(value for key, value in _metrics(process.metrics).items()
               if key.startswith("feedmesh_queue_messages"))


def wait_for(check, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not within {timeout:.0f} s")


POLLS_PER_S = 40.0
POLL_PHASE_S = 20.0


def poll_phase(processes: list[Process], data: Path, subs: int, busy: dict, web: str,
               store: str = "") -> dict:
    """Readers polling while the articles flow (each poll a different feed, so each finds news,
    as the provisioner's model assumes): the reflectors' and the web process's CPU per poll,
    beyond their CPU in the window just measured without polls (``busy``)."""
    tokens = FeedTokens(private_feed_key(data, store))   # in PostgreSQL with --store
    order = np.random.default_rng(7).permutation(np.arange(1, subs + 1))
    urls = [f"{web}/f/{tokens.make(int(sub_id), 0)}.rss" for sub_id in order[:5000]]
    serving = [p for p in processes if p.name.startswith("reflector") or p.name == "web"]
    cpu0 = {p.name: cpu_seconds(p.popen.pid) for p in serving}
    answered = asyncio.run(steady_polls(urls, POLLS_PER_S, POLL_PHASE_S))
    elapsed = answered["seconds"]
    extra = {p.name: (cpu_seconds(p.popen.pid) - cpu0[p.name]) / elapsed
             - busy[p.name]["cpu_pct"] / 100 for p in serving}
    per_s = answered["polls"] / elapsed
    reflectors = sum(v for k, v in extra.items() if k.startswith("reflector"))
    return {"polls_per_s": round(per_s, 1), "answered_200": answered["ok"],
            "bytes_per_200": round(answered["bytes"] / max(1, answered["ok"])),
            "items_per_200": round(answered["items"] / max(1, answered["ok"]), 2),
            "reflector_cpu_s_per_poll": round(max(0.0, reflectors) / per_s, 6),
            "web_cpu_s_per_poll": round(max(0.0, extra["web"]) / per_s, 6)}


def run_mode(name: str, feeds: int, subs: int, speed: float, interval: float, window: float,
             filters: int, reflectors: int, serve_feeds: bool = True,
             delivery: str = "ids") -> dict:
    print(f"mode {name}: {feeds} feeds, {subs} subscriptions, 1 crawler, {filters} filters, "
          f"{reflectors} reflectors, 1 web process; NATS + PostgreSQL; {delivery} delivery",
          flush=True)
    folder = Path(tempfile.mkdtemp(prefix="feedmesh-bench-"))
    processes: list[Process] = []
    farm = None
    try:
        with contextlib.ExitStack() as servers:
            nats = servers.enter_context(LocalNats(folder / "nats"))
            pg_folder = tempfile.mkdtemp(prefix="feedmesh-bench-pg-")  # its own: the server's
            servers.callback(shutil.rmtree, pg_folder, True)           # user takes it over
            pg = LocalPostgres(pg_folder, durable=True).start()
            servers.callback(pg.stop)
            url = pg.superuser_login(folder / "secrets" / "superuser.pgpass").url  # no password
            data = folder / "hub"
            data.mkdir(mode=0o700)
            started = time.perf_counter()
            provision(url, subs, reflectors)
            print(f"  provisioned {subs} subscriptions in {time.perf_counter() - started:.0f} s",
                  flush=True)
            config = FarmConfig(feeds=feeds, seed=1, faults="none", hosts=50, speed=speed,
                                origin=ORIGIN, max_age_share=0.0)
            farm = FarmProcess(config, cpu=0).start()
            common = ["--bus", nats.url, "--log-level", "warning"]
            tiers = [*common, "--delivery", delivery]
            reflector_urls = []
            for r in range(reflectors):
                listen = f"127.0.0.1:{_free_port()}"
                processes.append(Process(
                    f"reflector-{r}", ["reflector", *tiers, "--state", url, "--store", url,
                                       "--shard", f"{r}/{reflectors}", "--listen", listen],
                    "feedmesh reflector", folder, f"http://{listen}"))
                reflector_urls.append(f"http://{listen}")
            crawler_port = _free_port()
            crawler_base = f"http://127.0.0.1:{crawler_port}"
            processes.append(Process(
                "crawler", ["crawler", *tiers, "--store", url, "--data", str(data),
                            "--port", str(crawler_port), "--filters", str(filters),
                            "--external-filters", "--reflectors", str(reflectors),
                            "--external-reflectors", ",".join(reflector_urls),
                            "--policy", "interval", "--interval", str(interval),
                            "--allow-network", "127.0.0.0/8", "--per-host", "64",
                            "--opml", farm.opml_url, "--no-backlog"],
                "feedmesh crawler:", folder, crawler_base))
            for f in range(filters):
                metrics = f"127.0.0.1:{_free_port()}"
                processes.append(Process(
                    f"filter-{f}", ["filter", *tiers, "--state", url, "--shard",
                                    f"{f}/{filters}", "--data", str(folder / f"filter-{f}"),
                                    "--metrics", metrics],
                    "feedmesh filter shard", folder, f"http://{metrics}"))
            web_port = _free_port()
            web = f"http://127.0.0.1:{web_port}"
            processes.append(Process(
                "web", ["web", *common, "--store", url, "--data", str(data), "--reflectors",
                        ",".join(reflector_urls), "--listen", f"127.0.0.1:{web_port}",
                        "--feed-rate", "100000", "--feed-burst", "100000"],
                "feedmesh web on", folder, web))

            def stats() -> dict:
                return json.loads(_get(f"{crawler_base}/api/stats", 30))

            started = time.perf_counter()
            wait_for(lambda: (stats()["last_crawl"] or {}).get("feeds_due", 0) >= feeds,
                     "the first crawl", 1800)
            first = time.perf_counter() - started
            print(f"  first crawl done after {first:.0f} s", flush=True)
            cycles = stats()["crawl_cycles"] + 1
            wait_for(lambda: stats()["crawl_cycles"] >= cycles, "a steady cycle",
                     3 * interval + 600)
            window = math.ceil(window / interval) * interval
            before = {p.name: _metrics(p.metrics) for p in processes}
            cpu0 = {p.name: cpu_seconds(p.popen.pid) for p in processes}
            commits0 = commits(url)
            t0 = time.time()
            rss: dict[str, list[float]] = {p.name: [] for p in processes}
            while time.time() - t0 < window:
                for p in processes:
                    rss[p.name].append(rss_bytes(p.popen.pid) / 2**20)
                time.sleep(1.0)
            after = {p.name: _metrics(p.metrics) for p in processes}
            held_pairs = sum(after[p.name].get("feedmesh_reflector_rows_held", 0.0)
                             for p in processes if p.name.startswith("reflector"))
            t1 = time.time()
            elapsed = t1 - t0
            commits1 = commits(url)

            def rate(process: str, key: str) -> float:
                return (after[process].get(key, 0.0) - before[process].get(key, 0.0)) / elapsed

            lat = pg_latencies(url, t0, t1)
            figures: dict = {
                "mode": name, "feeds": feeds, "subscriptions": subs, "filters": filters,
                "reflectors": reflectors, "farm_speed": speed, "crawl_interval_s": interval,
                "first_crawl_s": round(first, 1), "window_s": round(elapsed, 1),
                "articles_per_s": round(rate(
                    "crawler", "feedmesh_tier_articles_out_total{tier=crawler}"), 1),
                "fetches_per_s": round(fetch_rate(before["crawler"], after["crawler"],
                                                  elapsed), 1),
                "latency_samples": len(lat),
                "latency_p50_ms": round(float(np.percentile(lat, 50)), 1) if len(lat) else None,
                "latency_p99_ms": round(float(np.percentile(lat, 99)), 1) if len(lat) else None,
                "bus_bytes_per_s": round(
                    rate("crawler", "feedmesh_tier_bytes_out_total{tier=crawler}")
                    + sum(rate(p.name, "feedmesh_tier_bytes_out_total{tier=filter}")
                          for p in processes if p.name.startswith("filter"))),
                "postgres_commits_per_s": round((commits1 - commits0) / elapsed, 1),
                "delivery": delivery,
                "held_per_subscription": round(held_pairs / subs, 3),
                "processes": {p.name: {
                    "cpu_pct": round(100 * (cpu_seconds(p.popen.pid) - cpu0[p.name]) / elapsed,
                                     1),
                    "rss_mb": round(statistics.median(rss[p.name]), 1)} for p in processes},
            }
            figures["rss_mb"] = round(sum(p["rss_mb"] for p in figures["processes"].values()),
                                      1)
            figures["poll_phase"] = poll_phase(processes, data, subs, figures["processes"],
                                               web, url)
            farm.stop()
            farm = None
            wait_for(lambda: all(queued(p) == 0 for p in processes
                                 if p.name.startswith(("filter", "refl"))),
                     "the queues draining", 600)
            if serve_feeds:
                tokens = FeedTokens(private_feed_key(data, url))
                step = max(1, subs // 500)
                urls = [f"{web}/f/{tokens.make(sub_id, 0)}.rss"
                        for sub_id in range(1, subs, step)]
                samples = asyncio.run(feed_wire_samples(urls))
                figures["feed_200_wire_bytes"] = round(statistics.median(b for _, b in samples))
                figures["feed_answer_fit"] = answer_fit(samples)
                figures.update(feed_rates(urls))
            order = ["web", "crawler", *(f"filter-{f}" for f in range(filters)),
                     *(f"reflector-{r}" for r in range(reflectors))]
            by_name = {p.name: p for p in processes}
            for process in order:  # the crawler drains what it published before the tiers stop
                by_name[process].stop()
    finally:
        for p in processes:
            p.stop()
        if farm is not None:
            farm.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print("  " + json.dumps({k: v for k, v in figures.items() if k != "processes"}), flush=True)
    return figures
