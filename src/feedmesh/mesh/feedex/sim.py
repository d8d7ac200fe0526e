"""FeedEx section 4 as a discrete-event simulation: many real :class:`FeedExNode` cores on the
mesh's one event loop (:class:`~feedmesh.mesh.sansio.EventLoop`).

The same node code that a socket transport drives runs here, through the same dialect
(``receive``, ``fire`` at ``next_deadline()``, ``take``); the network is the loop's timed
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
import math
import random
import time
from dataclasses import dataclass, field, replace

import numpy as np

from feedmesh.farm.catalog import FeedCatalog
from feedmesh.farm.config import FarmConfig
from feedmesh.farm.posting import PROFILES, PostingProcess
from feedmesh.mesh.sansio import EventLoop

from .events import Deliver
from .messages import Address, CheckDid, Entry, PutEntries, size_of
from .node import FeedExNode
from .settings import FeedExSettings
from .tracker import Tracker

__all__ = ["ModeResult", "SimConfig", "SimResult", "simulate"]

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
    farm_seed: int | None = None
    """The publishers' seed (which farm feeds, their posts); None: ``seed``. Holding it at 1
    while ``seed`` varies draws other subscriptions, phases, departures and network points on
    the feeds `benchmarks/mesh_feedex.py` emulates (the farm's seed-1 catalog)."""
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
    phase_floor: bool = False
    """With ``spread_fetches``: each node draws the random phase it would fetch at alone and
    never fetches sooner (``plan_fetch``'s ``earliest``): no more requests than alone in any
    span, by construction."""
    phase_oracle: str = ""
    """A bound, not the protocol: each feed's first fetches are placed by someone who knows every
    follower (but not who will leave): ``even`` (equal spacing over the interval), ``sqrt``
    (density as the square root of the feed's posting rhythm, learned from its two days before
    the start: what minimizes the mean lag) or ``rate`` (density as the rhythm: equal posts per
    gap). "" : the nodes' own phases (random, or ``spread_fetches``)."""
    departure_oracle: bool = False
    """A bound, not the protocol: when a node leaves, every node forgets its fetch plans at once
    (:meth:`FeedExNode.forget_origin`), as if a perfect notice of the departure reached every
    follower; with ``spread_fetches``, the plans not yet made then step into the gaps it left.
    In the protocol a departed node's plans stay known until they age out."""
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
    farm_seed = config.seed if config.farm_seed is None else config.farm_seed
    while True:
        catalog = FeedCatalog(FarmConfig(feeds=pool, seed=farm_seed, faults="none"))
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
        process = PostingProcess(farm_seed, i, spec.rate_per_day, PROFILES[spec.profile])
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
    # and a neighbour per machine, not per /24 (neighbours_per_prefix)
    settings = replace(config.settings, neighbour_prefix_v4=32)
    nodes = [FeedExNode(addresses[i], settings,
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
    loop = EventLoop(start)
    at = loop.at
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
    check_type, put_type = CheckDid, PutEntries
    base, span, bandwidth = config.base_latency_s, config.span_latency_s, config.bandwidth
    exchange = config.exchange

    def latency(i: int, j: int) -> float:
        (x1, y1), (x2, y2) = points[i], points[j]
        return base + span * math.hypot(x1 - x2, y1 - y2)

    def carry(i: int, t: float) -> None:
        """Send what node ``i`` made, count what it delivered, wake it at its next deadline."""
        node = nodes[i]
        for to, message in node.take():
            if i in free and type(message) in (check_type, put_type):
                continue  # a free rider offers nothing
            size = size_of(message)
            traffic[i] += size
            if to == tracker_address:
                reply = tracker.receive(t, addresses[i], message)
                at(t + 2 * (base + span / 2), deliver, i, tracker_address, reply, 0)
                continue
            j = index.get(to)
            if j is None or not alive[j]:
                at(t + config.unreachable_after_s, unreachable, i, to)
                continue
            at(t + latency(i, j) + size / bandwidth, deliver, j, addresses[i], message, size)
        for event in node.take_deliveries():
            if type(event) is Deliver:
                for entry in event.entries:
                    published = entry.published
                    if start <= published < end:
                        xch_sum[i] += t - published
                        xch_count[i] += 1
        deadline = node.next_deadline()
        if deadline is not None:
            loop.wake(i, deadline, fire)

    # the events: each handler is (t, node index, and what the event carries)
    def deliver(t: float, a: int, sender: Address, message, size: int) -> None:
        if not alive[a]:
            return
        if type(message) is check_type:
            checks[a] += 1
        elif type(message) is put_type:
            puts[a] += 1
        traffic[a] += size
        nodes[a].receive(t, sender, message)
        carry(a, t)

    def fire(t: float, a: int) -> None:
        if alive[a]:
            nodes[a].fire(t)
            carry(a, t)

    def fetch(t: float, a: int, b: int, _c, _d) -> None:
        nonlocal fetches
        if not alive[a] or next_fetch[a].get(b) != t:
            return  # left, or moved by a re-plan
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
            node = nodes[a]
            if spread:
                node.fetch_made(t, feed.url)
            node.fetched(t, feed.url, document)
            carry(a, t)
            node.listed(t, feed.url, document)
            carry(a, t)
        next_fetch[a][b] = t + config.interval_s
        at(t + config.interval_s, fetch, a, b)

    def begin(t: float, a: int, _b, _c, _d) -> None:
        if not alive[a]:
            return
        node = nodes[a]
        if exchange:
            node.start(t)
            carry(a, t)
        if spread:  # random phases, advertised; then relaxed every advertisement round
            for k in subs[a]:
                floor = t + rng.random() * config.interval_s if config.phase_floor else None
                planned[a][k] = next_fetch[a][k] = when = node.plan_fetch(
                    t, feeds[k].url, config.interval_s, earliest=floor)
                at(when, fetch, a, k)
            at(t + relax_s * (0.5 + rng.random()), plan, a)
        else:
            for k in subs[a]:
                next_fetch[a][k] = when = t + rng.random() * config.interval_s
                if oracle:
                    next_fetch[a][k] = when = oracle[(a, k)]
                at(when, fetch, a, k)

    def plan(t: float, a: int, _b, _c, _d) -> None:
        if not alive[a]:
            return
        for k in list(planned[a]):
            when = nodes[a].replan_fetch(t, feeds[k].url, config.interval_s)
            if when is not None:
                planned[a][k] = next_fetch[a][k] = when
                at(when, fetch, a, k)
        if planned[a]:
            at(t + relax_s, plan, a)

    def unreachable(t: float, a: int, to: Address, _c, _d) -> None:
        if alive[a]:
            nodes[a].unreachable(t, to)
            carry(a, t)

    def leave(t: float, a: int, _b, _c, _d) -> None:
        if alive[a]:
            alive[a] = False
            tracker.forget(addresses[a])
            if config.departure_oracle:
                for node, up in zip(nodes, alive, strict=True):
                    if up:
                        node.forget_origin(addresses[a])

    for i in range(n):
        at(start + rng.random() * config.join_spread_s, begin, i)
        if i in leaving:
            at(start + rng.random() * (end - start), leave, i)
    loop.run_until(end, inclusive=False)
    events = loop.events

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
