"""FeedEx section 4 as real endpoints on loopback (issue 13): stand-alone (SLN) vs exchange (XCH).

    .venv/bin/python benchmarks/mesh_feedex.py [--quick] [--nodes 160] [--hours 22]
                                               [--speed 160] [--workers 4]

Every node is a whole ``feedmesh peer`` (``mesh/peer``: its archive in its own SQLite file, its
own fetcher, scheduler and FeedEx node on an aiohttp transport) on its own loopback address
(127.0.3.x, then 127.0.4.x) and port; ``--workers`` processes run the nodes, several each, each
process on its own event loop (uvloop when installed). The
farm (a ``feedmesh farm`` process) is the publishers: the first 70 feeds of its seed-1 catalog
that post at least 5 entries a day, with daily rhythms. A tracker joins them. Each node follows
20 random feeds and fetches each every 16 hours (uniform policy, first fetch at a random moment
of the first 16 hours), 15% leave at a random moment; all run on one accelerated clock (farm
time, ``--speed`` x).

SLN and XCH are pairwise on the same nodes and the same fetches (the paper's method): SLN is what
a node's own fetches saw (the farm's request log gives each node's fetch times, its model the
document each fetch got), XCH is what the node's archive holds, with when it first held it. The
farm's model is the ground truth: every post of a node's feeds published while it ran. Figures
are over the nodes that stay. The protocol's timeouts are farm seconds, set to a few real seconds
each. The figures also say what the run cost (worker CPU, calls per real second) and whether
the workers kept up with the clock (their event loops' lag, the load average): at 160x a loop
running 0.5 s late delays a message by 80 farm seconds. Prints a table, then as its LAST line one
JSON object with ``xch_coverage``, ``sln_coverage``, ``xch_lag_min``, ``sln_lag_min``,
``publisher_requests_xch_over_sln`` (fetches made over what stand-alone peers with random phases
would make: 1 + time followed / interval per node and feed) and ``calls_per_node_min``. The nodes
coordinate their fetch phases through the exchange (``share_fetch_times``, ``mesh/peer/phasing.py``)
unless ``--random-phases``. ``--quick`` is the 16 h interval
alone (the only one built), 160 nodes, 22 farm hours at 160x: about 9 minutes of wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import queue
import random
import resource
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HOUR = 3600.0
FEEDS = 70
FEEDS_PER_NODE = 20
MIN_RATE = 5.0
SEED = 1
PAPER = {"xch_coverage": "> 0.90", "sln_coverage": 0.36, "xch_lag_min": 22.0,
         "sln_lag_min": 5.7 * 60, "calls_per_node_min": 0.9 + 6.3}


def node_host(i: int) -> str:
    return f"127.0.{3 + i // 250}.{1 + i % 250}"


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def choose_feeds() -> tuple[int, list[int]]:
    """(farm size, the ids of the FEEDS feeds posting >= MIN_RATE a day), as the simulator."""
    from feedmesh.farm.catalog import FeedCatalog
    from feedmesh.farm.config import FarmConfig
    pool = 4 * FEEDS
    while True:
        catalog = FeedCatalog(FarmConfig(feeds=pool, seed=SEED, faults="none"))
        ids = [i for i in range(pool) if catalog.rates[i] >= MIN_RATE][:FEEDS]
        if len(ids) == FEEDS:
            return pool, ids
        pool *= 2


# -- a worker: several peers in one process ------------------------------------------------------

def worker(plan: dict, results: multiprocessing.Queue) -> None:
    try:
        results.put(_event_loop_runner()(_worker(plan)))
    except BaseException as error:  # noqa: BLE001 (reported to the parent, which must not hang)
        results.put({"worker": plan["worker"], "error": repr(error)})


def _event_loop_runner():
    """uvloop's event loop when installed (the ``fast`` extra): a FeedEx call costs a worker
    about a quarter less CPU on it (measured on loopback), and the workers' CPU is what limits
    how many nodes keep up with the accelerated clock."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


async def _worker(plan: dict) -> dict:
    from feedmesh.clock import AcceleratedClock
    from feedmesh.compose import open_archive
    from feedmesh.fetch import Fetcher, FetchSettings
    from feedmesh.mesh.feedex import FeedExSettings
    from feedmesh.mesh.peer import Peer, PeerSettings
    from feedmesh.schedule import Scheduler, SchedulerSettings

    clock = AcceleratedClock(plan["speed"], origin=plan["farm_time"],
                             real_origin=plan["real_time"])
    interval = plan["interval_s"]
    # each node its own random phases (the scheduler's seed): a random moment of the first
    # interval for each feed's first fetch, then one fetch per interval
    def schedule(i: int) -> SchedulerSettings:
        return SchedulerSettings(policy="uniform", budget_per_feed_per_day=86400.0 / interval,
                                 min_interval_s=interval, max_interval_s=interval,
                                 max_delay_target_s=interval, first_fetch_spread_s=interval,
                                 host_min_spacing_s=0.0, host_max_per_minute=1000,
                                 seed=plan["seed"] * 100_003 + i)
    # the scheduler's compiled kernels load on first use (half a second): before the clock
    # starts, not inside the first node's join
    Scheduler(schedule(0)).add_feed("warm-up", now=clock.now())
    # timeouts in farm seconds: a few real seconds each at the benchmark's speed. A call that
    # takes 20 ms of real time takes 3 farm seconds here, a busy event loop's 0.5 s takes 80:
    # the protocol's defaults assume a wide-area network's 0.1-0.2 s, hence check_hold_s too
    # (how long a node answers "seen" after an "unseen", waiting for that put_entries; shorter
    # than the put's real delay, every other offer of the bundle is answered "unseen" again)
    # offer_credit_s likewise: an offer a hop behind the first copy comes a few real seconds
    # later at worst, hundreds of farm seconds
    feedex = FeedExSettings(connect_timeout_s=600.0, reply_timeout_s=600.0, dead_after_s=1800.0,
                            query_timeout_s=600.0, check_hold_s=plan["check_hold_s"],
                            offer_credit_s=plan["check_hold_s"],
                            neighbour_prefix_v4=32,  # each node a machine of its own
                            share_fetch_times=plan["spread"])
    peers: dict[int, Peer] = {}
    stores = {}
    fetchers = {}
    for spec in plan["nodes"]:
        i = spec["index"]
        host = node_host(i)
        data = Path(plan["root"]) / f"node{i}"
        data.mkdir(parents=True)
        stores[i] = open_archive(data / "archive.db")
        fetchers[i] = Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",),
                                            source_address=host, user_agent=f"bench node {i}",
                                            total_timeout_s=30.0), clock=clock)
        # a person's peer saves its neighbours every 5 minutes; 160x faster that would be a
        # file written every 2 s per node, disk churn that tells nothing about the protocol
        settings = PeerSettings(listen=(host, spec["port"]), data=data,
                                local=("127.0.0.1", 0), tracker=tuple(plan["tracker"]),
                                feedex=feedex, schedule=schedule(i), save_interval_s=6 * HOUR)
        peers[i] = Peer(settings, stores[i], fetchers[i], clock)
    lag = _LoopLag(clock, plan["end"])
    lag_task = asyncio.create_task(lag.run())
    joined: dict[int, float] = {}
    gone: dict[int, dict] = {}

    async def life(spec: dict) -> None:
        """One node: joins at its moment (the first 5 farm minutes, as the simulator's nodes),
        leaves at its moment if it is one of those that leave."""
        i = spec["index"]
        if spec["join_at"] > clock.now():
            await clock.sleep(spec["join_at"] - clock.now())
        await peers[i].start(spec["feeds"])
        joined[i] = clock.now()
        leave = plan["leave_at"].get(str(i))
        if leave is not None:
            if leave > clock.now():
                await clock.sleep(leave - clock.now())
            gone[i] = _figures(peers[i])
            await peers[i].stop()

    await asyncio.gather(*(life(spec) for spec in plan["nodes"]))
    end = plan["end"]
    if end > clock.now():
        await clock.sleep(end - clock.now())
    lag_task.cancel()
    nodes = []
    for i, peer in peers.items():
        if i in gone:
            nodes.append({"index": i, "left": True, **gone[i]})
            continue
        figures = _figures(peer)
        first_seen: dict[str, dict[str, float]] = {}
        for url in peer.archive.urls():
            feed_id = peer.archive.feed_id(url)
            rows = await peer.archive.entries(feed_id, 1_000_000)
            first_seen[url] = {row.entry.key: row.first_seen_at for row in rows}
        nodes.append({"index": i, "left": False, "joined": joined[i], "first_seen": first_seen,
                      **figures})
    usage = resource.getrusage(resource.RUSAGE_SELF)
    for i, peer in peers.items():
        if i not in gone:
            await peer.stop()
    for i in peers:
        stores[i].close()
        await fetchers[i].close()
    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
    return {"worker": plan["worker"], "nodes": nodes, "loop": loop,
            "cpu_s": usage.ru_utime + usage.ru_stime, **lag.figures()}


class _LoopLag:
    """How late the worker's event loop runs a 50 ms tick: a loop that cannot keep up with the
    accelerated clock delays every message and timer by as much (farm time = lag x speed)."""

    def __init__(self, clock, end: float) -> None:
        self.clock = clock
        self.end = end
        self.lags: list[float] = []

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while self.clock.now() < self.end:
            before = loop.time()
            await asyncio.sleep(0.05)
            self.lags.append(max(0.0, loop.time() - before - 0.05))

    def figures(self) -> dict:
        ordered = sorted(self.lags) or [0.0]
        return {"loop_lag_p50_s": ordered[len(ordered) // 2],
                "loop_lag_p99_s": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
                "loop_lag_max_s": ordered[-1]}


_LINK_STATS = ("dropped_unreachable", "dropped_silent", "not_neighbour_errors",
               "late_connect_replies")
"""The node's counts of how its links end (read with a default: older code lacks them)."""


def _links(nodes: list[dict]) -> dict:
    """At the end, among the nodes that stay: neighbour entries whose other side does not hold
    the node back (half links: one side forwards, the other refuses), and entries that point
    to a node that left."""
    held = {tuple(n["address"]): {tuple(a) for a in n["neighbour_addresses"]}
            for n in nodes if not n["left"]}
    entries = half = gone = 0
    for me, mine in held.items():
        for other in mine:
            entries += 1
            if other not in held:
                gone += 1
            elif me not in held[other]:
                half += 1
    return {"neighbour_entries": entries, "half_links": half, "links_to_departed": gone}


def _figures(peer) -> dict:
    stats = peer.feedex.node.stats
    transport = peer.feedex.transport.stats
    return {"check_did": stats["check_did"], "put_entries": stats["put_entries"],
            "bytes": transport["bytes_in"] + transport["bytes_out"],
            "calls_sent": transport["sent"], "calls_received": transport["received"],
            "deficit_refusals": stats["refused_deficit"],
            "send_failures": transport["send_failures"],
            **{k: transport[k] for k in ("send_timeouts", "send_refused", "send_broken")},
            "neighbours": len(peer.feedex.node.neighbours),
            # who holds whom, for the half links (one side holds the other, not back)
            "address": list(peer.feedex.node.address),
            "neighbour_addresses": [list(a) for a in peer.feedex.node.neighbours],
            **{k: stats.get(k, 0) for k in _LINK_STATS},
            "rate_limited": transport["rate_limited"],
            "own_fetches": peer.archive.own_fetches,
            "phase_moves": peer.phaser.moves if peer.phaser is not None else 0}


# -- the parent: farm, tracker, workers, figures --------------------------------------------------

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="16 h interval, 160 nodes")
    parser.add_argument("--nodes", type=int, default=160)
    parser.add_argument("--hours", type=float, default=22.0)
    parser.add_argument("--interval-hours", type=float, default=16.0)
    parser.add_argument("--speed", type=float, default=160.0, help="farm seconds per second")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--churn", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check-hold-s", type=float, default=600.0,
                        help="FeedEx check_hold_s in farm seconds (default 600: ~4 real s)")
    parser.add_argument("--random-phases", action="store_true",
                        help="FeedEx as the paper: no fetch times shared, each node its own "
                             "random phases (default: the network as one monitor)")
    parser.add_argument("--details", metavar="PATH",
                        help="write each staying node's figures and neighbours here (JSON)")
    parser.add_argument("--warmup-s", type=float, default=20.0,
                        help="real seconds the workers get to start before the first join")
    args = parser.parse_args()
    if args.quick:  # the quick run: the 16 h interval alone, all 160 nodes, 22 h
        args.nodes, args.interval_hours, args.hours = 160, 16.0, 22.0
    if not 2 <= args.nodes <= 250 * 8 or args.workers < 1:
        parser.error("--nodes must be within 2..2000 and --workers >= 1")
    return asyncio.run(run(args))


async def run(args: argparse.Namespace) -> int:
    from feedmesh.clock import AcceleratedClock
    from feedmesh.farm.config import FarmConfig
    from feedmesh.farm.documents import FarmModel
    from feedmesh.farm.process import FarmProcess
    from feedmesh.mesh.feedex import Tracker
    from feedmesh.mesh.peer import TrackerServer

    wall = time.perf_counter()
    pool, feed_ids = choose_feeds()
    config = FarmConfig(feeds=pool, seed=SEED, faults="none", speed=args.speed,
                        origin=1_760_000_000.0)
    rng = random.Random(args.seed)
    with FarmProcess(config).start() as farm, tempfile.TemporaryDirectory() as root:
        real_time, farm_time = _farm_clock(farm.base_url)
        clock = AcceleratedClock(args.speed, origin=farm_time, real_origin=real_time)
        start = clock.now() + args.warmup_s * args.speed  # for the workers to start
        end = start + args.hours * HOUR
        tracker = TrackerServer("127.0.5.1", free_port("127.0.5.1"), clock,
                                # each emulated node a machine, though 250 share a /24
                                tracker=Tracker(ttl_s=args.hours * HOUR, rng=rng,
                                                prefix_v4=32))
        await tracker.start()
        urls = {i: f"{farm.base_url}/feeds/{i}" for i in feed_ids}
        nodes = []
        for i in range(args.nodes):
            feeds = rng.sample(feed_ids, FEEDS_PER_NODE)
            nodes.append({"index": i, "port": free_port(node_host(i)),
                          "feeds": [urls[f] for f in feeds], "feed_ids": feeds,
                          "join_at": start + rng.uniform(0, 300.0)})
        leaving = rng.sample(range(args.nodes), round(args.churn * args.nodes))
        leave_at = {i: rng.uniform(start + 600.0, end - 600.0) for i in leaving}
        context = multiprocessing.get_context("spawn")
        results: multiprocessing.Queue = context.Queue()
        processes = []
        for w in range(args.workers):
            mine = nodes[w::args.workers]
            plan = {"worker": w, "seed": args.seed, "speed": args.speed, "farm_time": farm_time,
                    "real_time": real_time, "interval_s": args.interval_hours * HOUR,
                    "check_hold_s": args.check_hold_s, "spread": not args.random_phases,
                    "root": root, "tracker": list(tracker.address), "end": end,
                    "nodes": [{k: v for k, v in n.items() if k != "feed_ids"} for n in mine],
                    "leave_at": {str(i): at for i, at in leave_at.items()
                                 if any(n["index"] == i for n in mine)}}
            process = context.Process(target=worker, args=(plan, results))
            process.start()
            processes.append(process)
        outputs = []
        deadline = time.monotonic() + (end - clock.now()) / args.speed + 600.0
        while len(outputs) < args.workers and time.monotonic() < deadline:
            try:
                outputs.append(await asyncio.to_thread(results.get, True, 5.0))
            except queue.Empty:  # keep waiting, unless a worker died
                if any(p.exitcode not in (None, 0) for p in processes):
                    break
                continue
            if "error" in outputs[-1]:
                break
        for process in processes:
            process.join(timeout=60 if len(outputs) == args.workers else 1)
            if process.is_alive():
                process.kill()
        await tracker.stop()
        errors = [o for o in outputs if "error" in o]
        if errors or len(outputs) < args.workers:
            codes = [p.exitcode for p in processes]
            print(f"workers failed: {errors or 'timed out'}; exit codes {codes}",
                  file=sys.stderr)
            return 1
        # the workers read their archives after the end while the nodes still run (seconds of
        # real time, many farm minutes): what came or was fetched after the end does not count
        requests = {agent: [(at, feed) for at, feed in rows if at < end]
                    for agent, rows in _requests(farm.base_url).items()}
        model = FarmModel(config, farm.base_urls)
        all_nodes = [n for o in outputs for n in o["nodes"]]
        figures = _measure(args, model, nodes, all_nodes, requests, start, end)
        per_node = figures.pop("_per_node")
        if args.details:
            await asyncio.to_thread(Path(args.details).write_text, json.dumps(per_node))
        # what stand-alone peers would have asked for: each feed's first fetch at the join, then
        # one every interval P from a random phase, E = 1 + (time followed) / P per node and feed
        interval_s = args.interval_hours * HOUR
        alone = sum(FEEDS_PER_NODE * (1 + (min(end, leave_at.get(n["index"], end))
                                           - n["join_at"]) / interval_s) for n in nodes)
        made = fetch_total(requests)
        figures["publisher_requests_sln_expected"] = round(alone)
        figures["publisher_requests"] = made
        figures["publisher_requests_xch_over_sln"] = round(made / alone, 4)
        figures["spread_fetches"] = not args.random_phases
        figures.update(_load(outputs, all_nodes, end - start, args.speed))
    figures["wall_s"] = round(time.perf_counter() - wall, 1)
    _print(figures)
    return 0


def _load(outputs: list[dict], nodes: list[dict], farm_s: float, speed: float) -> dict:
    """What the emulation cost this machine, and whether it kept up with the clock."""
    cpu = sum(o["cpu_s"] for o in outputs)
    calls = sum(n["calls_sent"] for n in nodes)
    return {"worker_cpu_s": round(cpu, 1),
            "calls_per_real_s": round(calls / (farm_s / speed), 1),
            "cpu_us_per_call": round(1e6 * cpu / max(1, calls)),
            "send_failures": sum(n["send_failures"] for n in nodes),
            "deficit_refusals": sum(n["deficit_refusals"] for n in nodes),
            "phase_moves": sum(n.get("phase_moves", 0) for n in nodes),
            **{k: sum(n[k] for n in nodes) for k in ("send_timeouts", "send_refused",
                                                     "send_broken")},
            **{k: sum(n.get(k, 0) for n in nodes) for k in (*_LINK_STATS, "rate_limited")},
            **_links(nodes),
            "loop_lag_p99_s": round(max(o["loop_lag_p99_s"] for o in outputs), 3),
            "loop_lag_max_s": round(max(o["loop_lag_max_s"] for o in outputs), 3),
            "event_loop": outputs[0]["loop"],
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def _farm_clock(base_url: str) -> tuple[float, float]:
    """(a real instant, the farm's time then): every worker's clock is set from it."""
    before = time.time()
    with urllib.request.urlopen(f"{base_url}/_farm/stats") as response:
        farm_time = json.loads(response.read())["farm_time"] + 0.0
    return (before + time.time()) / 2, farm_time


def _requests(base_url: str) -> dict[str, list[tuple[float, int]]]:
    """(farm time, feed id) of every fetch, per node user agent."""
    by_agent: dict[str, list[tuple[float, int]]] = {}
    since = 0
    while True:
        with urllib.request.urlopen(f"{base_url}/_farm/requests?since={since}") as response:
            page = json.loads(response.read())
        for r in page["requests"]:
            if r["feed"] is not None and r["status"] in (200, 226, 304):
                by_agent.setdefault(r["user_agent"], []).append((r["farm_time"], r["feed"]))
        if page["next"] == since or not page["requests"]:
            return by_agent
        since = page["next"]


def fetch_total(requests: dict[str, list]) -> int:
    return sum(len(v) for k, v in requests.items() if k.startswith("bench node"))


_DETAIL_KEYS = ("neighbours", "neighbour_addresses", "address", "deficit_refusals",
                "send_failures", "send_timeouts", "send_refused", "calls_sent", "own_fetches",
                *_LINK_STATS)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _measure(args, model, plans: list[dict], results: list[dict],
             requests: dict[str, list[tuple[float, int]]], start: float, end: float) -> dict:
    plan_of = {p["index"]: p for p in plans}
    url_of = {}
    xch_cov, sln_cov, xch_lag, sln_lag = [], [], [], []
    per_node: list[dict] = []
    # what any node's fetch saw, and first when: the ceiling of these fetches (an entry that
    # reached every follower the moment one fetched it), as the simulator's reachable coverage
    seen_by_any: dict[str, float] = {}
    for agent, rows in requests.items():
        if agent.startswith("bench node"):
            for at, feed in rows:
                spec = model.spec(feed)
                for post in model.process(feed).last_posts(at, spec.entries_cap,
                                                           at - model.lookback_s):
                    key = model.guid(feed, post)
                    if at < seen_by_any.get(key, float("inf")):
                        seen_by_any[key] = at
    reach_cov, reach_lag = [], []
    for node in results:
        if node["left"]:
            continue
        plan = plan_of[node["index"]]
        fetches: dict[int, list[float]] = {}
        for at, feed in requests.get(f"bench node {node['index']}", []):
            fetches.setdefault(feed, []).append(at)
        posts_total = xch_got = sln_got = reach_got = 0
        x_lags, s_lags, r_lags = [], [], []
        for feed in plan["feed_ids"]:
            url = plan["feeds"][plan["feed_ids"].index(feed)]
            url_of[feed] = url
            held = {key: at for key, at in node["first_seen"].get(url, {}).items()
                    if at < end}
            spec = model.spec(feed)
            process = model.process(feed)
            seen_alone: dict[str, float] = {}
            for at in sorted(fetches.get(feed, [])):
                for post in process.last_posts(at, spec.entries_cap, at - model.lookback_s):
                    seen_alone.setdefault(model.guid(feed, post), at)
            for post in model.posts(feed, node["joined"], end):
                key = model.guid(feed, post)
                posts_total += 1
                if key in held:
                    xch_got += 1
                    x_lags.append(max(0.0, held[key] - post.time))
                if key in seen_by_any:
                    reach_got += 1
                    r_lags.append(max(0.0, seen_by_any[key] - post.time))
                if key in seen_alone:
                    sln_got += 1
                    s_lags.append(max(0.0, seen_alone[key] - post.time))
        if posts_total:
            per_node.append({"index": node["index"], "xch_coverage": xch_got / posts_total,
                             "xch_lag_min": statistics.fmean(x_lags) / 60 if x_lags else None,
                             **{k: node.get(k) for k in _DETAIL_KEYS}})
            xch_cov.append(xch_got / posts_total)
            reach_cov.append(reach_got / posts_total)
            sln_cov.append(sln_got / posts_total)
        if x_lags:
            xch_lag.append(statistics.fmean(x_lags) / 60)
        if r_lags:
            reach_lag.append(statistics.fmean(r_lags) / 60)
        if s_lags:
            sln_lag.append(statistics.fmean(s_lags) / 60)
    if not xch_lag or not sln_lag:
        held = sum(len(v) for n in results if not n["left"] for v in n["first_seen"].values())
        raise SystemExit(f"nothing to measure: {fetch_total(requests)} fetches logged, "
                         f"{sum(n['own_fetches'] for n in results)} made, {held} entries held, "
                         f"{len(xch_cov)} nodes with posts")
    minutes = (end - start) / 60
    fetch_count = sum(len(v) for k, v in requests.items() if k.startswith("bench node"))
    calls = [(n["check_did"] + n["put_entries"]) / minutes for n in results if not n["left"]]
    checks = [n["check_did"] / minutes for n in results if not n["left"]]
    puts = [n["put_entries"] / minutes for n in results if not n["left"]]
    traffic = [n["bytes"] / minutes for n in results if not n["left"]]
    days = (end - start) / 86400
    followed = len({f for p in plans for f in p["feed_ids"]})
    return {
        "nodes": args.nodes, "surviving_nodes": len(xch_cov), "hours": args.hours,
        "interval_hours": args.interval_hours, "speed": args.speed, "workers": args.workers,
        "xch_coverage": round(statistics.fmean(xch_cov), 4),
        "sln_coverage": round(statistics.fmean(sln_cov), 4),
        "reachable_coverage": round(statistics.fmean(reach_cov), 4),
        "reachable_lag_min": round(statistics.fmean(reach_lag), 2) if reach_lag else None,
        "xch_lag_min": round(statistics.fmean(xch_lag), 2),
        "xch_lag_p5_min": round(_pct(xch_lag, 0.05), 2),
        "xch_lag_p95_min": round(_pct(xch_lag, 0.95), 2),
        "sln_lag_min": round(statistics.fmean(sln_lag), 2),
        "sln_lag_p5_min": round(_pct(sln_lag, 0.05), 2),
        "sln_lag_p95_min": round(_pct(sln_lag, 0.95), 2),
        "publisher_requests_per_feed_day": round(fetch_count / followed / days, 2),
        # the same fetches serve both modes (pairwise, the paper's method); against stand-alone
        # peers' random phases: publisher_requests_xch_over_sln, set by run()
        "check_per_node_min": round(statistics.fmean(checks), 3),
        "put_per_node_min": round(statistics.fmean(puts), 3),
        "calls_per_node_min": round(statistics.fmean(calls), 3),
        "bytes_per_node_min": round(statistics.fmean(traffic)),
        "median_neighbours": statistics.median(n["neighbours"] for n in results
                                               if not n["left"]),
        "_per_node": per_node,
    }


def _print(f: dict) -> None:
    print(f"FeedEx on loopback: {f['nodes']} nodes ({f['surviving_nodes']} stay), "
          f"{f['interval_hours']:g} h interval, {f['hours']:g} farm hours at {f['speed']:g}x, "
          f"{f['workers']} worker processes, {f['wall_s']} s wall")
    rows = [("entries a node gets, XCH", f"{f['xch_coverage']:.1%}", PAPER["xch_coverage"]),
            ("entries a node gets, SLN", f"{f['sln_coverage']:.1%}", PAPER["sln_coverage"]),
            ("mean lag XCH, min (p5-p95)",
             f"{f['xch_lag_min']} ({f['xch_lag_p5_min']}-{f['xch_lag_p95_min']})",
             PAPER["xch_lag_min"]),
            ("mean lag SLN, min (p5-p95)",
             f"{f['sln_lag_min']} ({f['sln_lag_p5_min']}-{f['sln_lag_p95_min']})",
             PAPER["sln_lag_min"]),
            ("publisher requests / feed / day", f["publisher_requests_per_feed_day"], "as SLN"),
            ("check_did / put_entries per node-min",
             f"{f['check_per_node_min']} / {f['put_per_node_min']}", "6.3 / 0.9"),
            ("bytes per node-min", f["bytes_per_node_min"], ""),
            ("median neighbours", f["median_neighbours"], "8-10"),
            ("worker CPU s (us per call)", f"{f['worker_cpu_s']} ({f['cpu_us_per_call']})", ""),
            ("calls per real second", f["calls_per_real_s"], ""),
            ("event loop lag p99 / max, s",
             f"{f['loop_lag_p99_s']} / {f['loop_lag_max_s']}", ""),
            ("load average (1, 5, 15 min)", " ".join(map(str, f["load_average"])), "")]
    print(f"{'':40} {'feedmesh':>24} {'paper':>10}")
    for name, ours, paper in rows:
        print(f"{name:40} {ours!s:>24} {paper!s:>10}")
    print(json.dumps(f))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
