"""FeedEx section 4 as a discrete-event simulation: many real :class:`FeedExNode` cores, one heap.

The same node code that a socket transport drives runs here; the network is a heap of timed
deliveries. What is simulated and how:

* **Publishers**: ``feeds`` (70) feeds of the farm's catalog (``farm/catalog.py``) posting at least
  ``min_rate`` (5) entries a day, each a periodic inhomogeneous Poisson process with a daily rhythm
  (``farm/posting.py``, the farm's own posting model: its posting log is the ground truth). A fetch
  at t returns the feed's ``entries_cap`` latest posts at or before t (the farm's document).
* **Nodes**: each subscribes to ``subscriptions`` (20) random feeds and fetches each every
  ``interval_s`` from a random phase (or, with ``spread_fetches``, from a phase chosen to fill the
  largest gap in what neighbours advertised: :mod:`.phases`). They join over the first
  ``join_spread_s`` through a :class:`Tracker`; ``churn`` (15%) of them leave at a random moment
  and do not come back. Figures are over the nodes that stayed (as the paper's).
* **Network**: one-way latency = ``base_latency_s`` + ``span_latency_s`` x the distance between
  two nodes' random points in a unit square, + bytes / ``bandwidth``; a message to a node that
  left makes the sender's transport report it unreachable after ``unreachable_after_s``.
* **SLN vs XCH**, pairwise on the same nodes and the same fetches (the paper's method): SLN is
  what each node's own fetches alone would have given (entries scrolled out between two fetches
  are missed); XCH is what the node got with the exchange.

Measured per surviving node, then averaged: coverage (entries of its feeds published in the
window that it got by the end), mean time lag, check_did and put_entries calls it received per
minute, bytes it sent and received per minute; and requests to publishers per feed per day.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
import time
from dataclasses import dataclass, field

import numpy as np

from feedmesh.farm.catalog import FeedCatalog
from feedmesh.farm.config import FarmConfig
from feedmesh.farm.posting import PROFILES, PostingProcess

from .events import Deliver, Send
from .messages import Address, CheckDid, Entry, PutEntries, size_of
from .node import FeedExNode
from .settings import FeedExSettings
from .tracker import Tracker

__all__ = ["ModeResult", "SimConfig", "SimResult", "simulate"]

_DELIVER, _TIMER, _FETCH, _LEAVE, _UNREACHABLE, _START, _PLAN = range(7)
_DAY = 86400.0


@dataclass(frozen=True)
class SimConfig:
    nodes: int = 160
    feeds: int = 70
    subscriptions: int = 20
    interval_s: float = 16 * 3600.0
    hours: float = 22.0
    churn: float = 0.15
    min_rate: float = 5.0
    seed: int = 1
    start: float = 20_454 * _DAY + 6 * 3600.0
    """Simulated start (Unix seconds): a Wednesday, 06:00 UTC."""
    join_spread_s: float = 300.0
    base_latency_s: float = 0.01
    span_latency_s: float = 0.12
    bandwidth: float = 1_000_000.0
    unreachable_after_s: float = 3.0
    summary_bytes: int = 300
    """Text per entry besides title and link (the farm's median article is ~770 bytes)."""
    exchange: bool = True
    free_riders: float = 0.0
    """Share of nodes that receive but never offer or forward anything (3.5)."""
    spread_fetches: bool = False
    """Nodes share fetch plans and fill the largest gaps (:mod:`.phases`); needs
    ``settings.share_fetch_times``."""
    phase_oracle: str = ""
    """A bound, not the protocol: each feed's first fetches are placed by someone who knows every
    follower (but not who will leave): ``even`` (equal spacing over the interval), ``sqrt``
    (density as the square root of the feed's posting rhythm, learned from its two days before
    the start: what minimizes the mean lag) or ``rate`` (density as the rhythm: equal posts per
    gap). "" : the nodes' own phases (random, or ``spread_fetches``)."""
    settings: FeedExSettings = field(default_factory=FeedExSettings)


@dataclass(frozen=True)
class ModeResult:
    """One mode's figures over the surviving nodes (lags in minutes)."""

    coverage: float
    lag_min: float
    lag_p5_min: float
    lag_p95_min: float
    missing: float


@dataclass(frozen=True)
class SimResult:
    config: SimConfig
    xch: ModeResult
    sln: ModeResult
    publisher_requests_per_feed_day: float
    check_per_node_min: float
    put_per_node_min: float
    bytes_per_node_min: float
    entries_published: int
    reachable_coverage: float
    """Coverage if every entry that any node's fetch saw reached every follower at once: what
    the exchange can reach at most with these fetches."""
    surviving_nodes: int
    events: int
    seconds: float
    free_rider: ModeResult | None = None
    """XCH figures of the free riders alone (when there are any)."""
    cooperator_deficit_cuts: int = 0
    entries_judged_fake: int = 0
    """Entries from neighbours that a node's own fetch judged fake (every node is honest here:
    each one would be a false accusation)."""
    entries_confirmed: int = 0

    @property
    def calls_per_node_min(self) -> float:
        return self.check_per_node_min + self.put_per_node_min


class _Feed:
    __slots__ = ("cap", "entries", "prefix", "times", "url")

    def __init__(self, url: str, cap: int, posts: list, summary: str) -> None:
        self.url = url
        self.cap = cap
        self.times = [float(p.time) for p in posts]
        self.prefix = np.concatenate([[0.0], np.cumsum(self.times)]).tolist()
        self.entries = [Entry(p.key, float(p.time), f"Post {p.key} of {url}",
                              f"{url}/{p.key}", summary) for p in posts]

    def document(self, t: float) -> list[Entry]:
        j = bisect.bisect_right(self.times, t)
        return self.entries[max(0, j - self.cap):j]


def _publishers(config: SimConfig) -> list[_Feed]:
    """The first ``feeds`` farm feeds posting at least ``min_rate`` a day, posts generated for the
    window plus two days before (documents at the start are full) and a day after."""
    pool = max(4 * config.feeds, 64)
    while True:
        catalog = FeedCatalog(FarmConfig(feeds=pool, seed=config.seed, faults="none"))
        ids = [i for i in range(pool) if catalog.rates[i] >= config.min_rate][:config.feeds]
        if len(ids) == config.feeds:
            break
        pool *= 2
    summary = ("lorem ipsum dolor sit amet " * (config.summary_bytes // 27 + 1))[
        :config.summary_bytes]
    end = config.start + config.hours * 3600.0
    feeds = []
    for i in ids:
        spec = catalog.spec(i)
        process = PostingProcess(config.seed, i, spec.rate_per_day, PROFILES[spec.profile])
        posts = process.posts_between(config.start - 2 * _DAY, end + _DAY)
        feeds.append(_Feed(f"http://{spec.host}{spec.path}", max(1, spec.entries_cap), posts,
                           summary))
    return feeds


def _oracle_phases(feed: _Feed, followers: int, base: float, interval_s: float, start: float,
                   mode: str, rng: random.Random) -> list[float]:
    """``followers`` first-fetch times in [base, base + interval_s), spread as ``mode`` says
    (see :attr:`SimConfig.phase_oracle`)."""
    offset = rng.random()
    if mode == "even":
        return [base + (offset + j) / followers * interval_s for j in range(followers)]
    if mode not in ("sqrt", "rate"):
        raise ValueError(f"phase_oracle must be even, sqrt or rate, got {mode!r}")
    # the posting rhythm by hour of day, from the two days before the start, smoothed
    hours = np.zeros(24)
    for t in feed.times:
        if start - 2 * _DAY <= t < start:
            hours[int(t // 3600) % 24] += 1.0
    hours = (np.roll(hours, 1) + 2 * hours + np.roll(hours, -1)) / 4 + 0.05
    minutes = np.arange(0, interval_s, 60.0) + base
    # the rhythm at the first fetch only: weighting the first hours twice (their second fetch
    # still falls within the run) would crowd the fetches there, more requests within the run
    weight = hours[(minutes // 3600).astype(int) % 24]
    density = np.sqrt(weight) if mode == "sqrt" else weight
    cumulative = np.concatenate([[0.0], np.cumsum(density)])
    targets = (offset + np.arange(followers)) / followers * cumulative[-1]
    grid = np.concatenate([minutes, [base + interval_s]])
    return np.interp(targets, cumulative, grid).tolist()


def _address(i: int) -> Address:
    return (f"127.3.{i // 250}.{1 + i % 250}", 8400)


def simulate(config: SimConfig) -> SimResult:
    """Run one simulation; deterministic for a given config."""
    began = time.perf_counter()
    rng = random.Random(config.seed)
    feeds = _publishers(config)
    n = config.nodes
    start, end = config.start, config.start + config.hours * 3600.0
    addresses = [_address(i) for i in range(n)]
    index = {a: i for i, a in enumerate(addresses)}
    tracker_address: Address = ("127.3.255.254", 8400)
    # (every emulated node is a machine of its own, though 250 share a loopback /24)
    tracker = Tracker(ttl_s=2 * config.settings.tracker_refresh_s, rng=random.Random(config.seed),
                      prefix_v4=32)
    points = [(rng.random(), rng.random()) for _ in range(n)]
    subs = [rng.sample(range(len(feeds)), config.subscriptions) for _ in range(n)]
    leaving = set(rng.sample(range(n), round(config.churn * n)))
    free = set(rng.sample(range(n), round(config.free_riders * n)))
    alive = [True] * n
    nodes = [FeedExNode(addresses[i], config.settings,
                        weights={feeds[f].url: 1.0 for f in subs[i]}, tracker=tracker_address,
                        rng=random.Random(rng.getrandbits(64))) for i in range(n)]
    spread = config.spread_fetches and config.exchange
    planned: list[dict[int, float]] = [{} for _ in range(n)]  # first fetches not yet made
    next_fetch: list[dict[int, float]] = [{} for _ in range(n)]
    relax_s = config.settings.advertise_interval_s
    oracle: dict[tuple[int, int], float] = {}
    if config.phase_oracle:
        oracle_rng = random.Random(config.seed * 7919 + 1)
        for k, feed in enumerate(feeds):
            followers = [i for i in range(n) if k in subs[i]]
            oracle_rng.shuffle(followers)
            if followers:
                at = _oracle_phases(feed, len(followers), start + config.join_spread_s,
                                    config.interval_s, start, config.phase_oracle,
                                    oracle_rng)
                oracle.update({(i, k): a for i, a in zip(followers, at, strict=True)})
    heap: list = []
    seq = 0

    def push(t: float, kind: int, a, b=None, c=None, d=0) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, kind, a, b, c, d))

    for i in range(n):
        push(start + rng.random() * config.join_spread_s, _START, i)
        if i in leaving:
            push(start + rng.random() * (end - start), _LEAVE, i)
    timer_at: list[float | None] = [None] * n
    # window: posts published in [start, end)
    window = [(bisect.bisect_left(f.times, start), bisect.bisect_left(f.times, end))
              for f in feeds]
    sln_seen = [[-1] * len(feeds) for _ in range(n)]  # last post index each node's fetches got
    for i in range(n):
        for k in subs[i]:
            sln_seen[i][k] = bisect.bisect_right(feeds[k].times, start) - 1
    captured = [np.zeros(len(f.times), dtype=bool) for f in feeds]  # by any node's fetch
    sln_sum = [0.0] * n
    sln_count = [0] * n
    xch_sum = [0.0] * n
    xch_count = [0] * n
    checks = [0] * n
    puts = [0] * n
    traffic = [0] * n
    fetches = 0
    events = 0
    check_type, put_type = CheckDid, PutEntries
    base, span, bandwidth = config.base_latency_s, config.span_latency_s, config.bandwidth
    exchange = config.exchange

    def latency(i: int, j: int) -> float:
        (x1, y1), (x2, y2) = points[i], points[j]
        return base + span * math.hypot(x1 - x2, y1 - y2)

    def carry(i: int, t: float, outputs: list) -> None:
        for output in outputs:
            if type(output) is Send:
                message = output.message
                if i in free and type(message) in (check_type, put_type):
                    continue  # a free rider offers nothing
                size = size_of(message)
                traffic[i] += size
                if output.to == tracker_address:
                    reply = tracker.receive(t, addresses[i], message)
                    push(t + 2 * (base + span / 2), _DELIVER, i, tracker_address, reply)
                    continue
                j = index.get(output.to)
                if j is None or not alive[j]:
                    push(t + config.unreachable_after_s, _UNREACHABLE, i, output.to)
                    continue
                push(t + latency(i, j) + size / bandwidth, _DELIVER, j, addresses[i], message, size)
            elif type(output) is Deliver:
                for entry in output.entries:
                    published = entry.published
                    if start <= published < end:
                        xch_sum[i] += t - published
                        xch_count[i] += 1
        node_timer = nodes[i].next_timer()
        if node_timer is not None and (timer_at[i] is None or node_timer < timer_at[i]):
            timer_at[i] = node_timer
            push(max(node_timer, t), _TIMER, i)

    while heap:
        t, _, kind, a, b, c, d = heapq.heappop(heap)
        if t >= end:
            break
        events += 1
        if not alive[a]:
            continue
        node = nodes[a]
        if kind == _DELIVER:
            if type(c) is check_type:
                checks[a] += 1
            elif type(c) is put_type:
                puts[a] += 1
            traffic[a] += d
            carry(a, t, node.receive(t, b, c))
        elif kind == _TIMER:
            if timer_at[a] != t:
                continue
            timer_at[a] = None
            carry(a, t, node.handle_timer(t))
        elif kind == _FETCH:
            if next_fetch[a].get(b) != t:
                continue  # moved by a re-plan
            planned[a].pop(b, None)
            fetches += 1
            feed = feeds[b]
            j = bisect.bisect_right(feed.times, t)
            seen = sln_seen[a][b]
            visible = max(seen + 1, j - feed.cap)
            lo, hi = max(visible, window[b][0]), min(j, window[b][1])
            if hi > lo:
                sln_count[a] += hi - lo
                sln_sum[a] += (hi - lo) * t - (feed.prefix[hi] - feed.prefix[lo])
            sln_seen[a][b] = max(seen, j - 1)
            captured[b][max(0, j - feed.cap):j] = True
            if exchange:
                document = feed.document(t)
                carry(a, t, node.fetched(t, feed.url, document))
                carry(a, t, node.listed(t, feed.url, document))
            next_fetch[a][b] = t + config.interval_s
            push(t + config.interval_s, _FETCH, a, b)
        elif kind == _START:
            if exchange:
                carry(a, t, node.start(t))
            if spread:  # random phases, advertised; then relaxed every advertisement round
                for k in subs[a]:
                    planned[a][k] = next_fetch[a][k] = at = node.plan_fetch(
                        t, feeds[k].url, config.interval_s)
                    push(at, _FETCH, a, k)
                push(t + relax_s * (0.5 + rng.random()), _PLAN, a)
            else:
                for k in subs[a]:
                    next_fetch[a][k] = at = t + rng.random() * config.interval_s
                    if oracle:
                        next_fetch[a][k] = at = oracle[(a, k)]
                    push(at, _FETCH, a, k)
        elif kind == _PLAN:
            for k in list(planned[a]):
                at = node.replan_fetch(t, feeds[k].url, config.interval_s)
                if at is not None:
                    planned[a][k] = next_fetch[a][k] = at
                    push(at, _FETCH, a, k)
            if planned[a]:
                push(t + relax_s, _PLAN, a)
        elif kind == _UNREACHABLE:
            carry(a, t, node.unreachable(t, b))
        elif kind == _LEAVE:
            alive[a] = False
            tracker.forget(addresses[a])

    stay = [i for i in range(n) if i not in leaving]
    published = [hi - lo for lo, hi in window]
    stay_coop = [i for i in stay if i not in free]
    stay_free = [i for i in stay if i in free]

    def mode(sums: list[float], counts: list[int], group: list[int]) -> ModeResult:
        if not group:
            return ModeResult(0.0, 0.0, 0.0, 0.0, 0.0)
        total = np.array([sum(published[k] for k in subs[i]) for i in group], dtype=float)
        got = np.array([counts[i] for i in group], dtype=float)
        lags = np.array([sums[i] / counts[i] / 60.0 for i in group if counts[i]])
        coverage = float(np.mean(got / np.maximum(total, 1)))
        return ModeResult(coverage, float(lags.mean()) if len(lags) else 0.0,
                          float(np.percentile(lags, 5)) if len(lags) else 0.0,
                          float(np.percentile(lags, 95)) if len(lags) else 0.0, 1.0 - coverage)

    minutes = (end - start) / 60.0
    reach = [int(captured[k][lo:hi].sum()) for k, (lo, hi) in enumerate(window)]
    reachable = float(np.mean([sum(reach[k] for k in subs[i]) / max(1, sum(published[k]
                                                                         for k in subs[i]))
                               for i in stay_coop])) if stay_coop else 0.0
    return SimResult(
        config=config,
        xch=mode(xch_sum, xch_count, stay_coop) if exchange else mode(sln_sum, sln_count,
                                                                       stay_coop),
        sln=mode(sln_sum, sln_count, stay_coop),
        publisher_requests_per_feed_day=fetches / len(feeds) / (config.hours / 24.0),
        check_per_node_min=float(np.mean([checks[i] for i in stay])) / minutes,
        put_per_node_min=float(np.mean([puts[i] for i in stay])) / minutes,
        bytes_per_node_min=float(np.mean([traffic[i] for i in stay])) / minutes,
        entries_published=int(sum(published)),
        reachable_coverage=reachable,
        surviving_nodes=len(stay),
        events=events,
        seconds=time.perf_counter() - began,
        free_rider=mode(xch_sum, xch_count, stay_free) if stay_free else None,
        cooperator_deficit_cuts=sum(nodes[i].stats["refused_deficit"] for i in stay_coop),
        entries_judged_fake=sum(node.stats["fake_entries"] for node in nodes),
        entries_confirmed=sum(node.stats["confirmed_entries"] for node in nodes),
    )
