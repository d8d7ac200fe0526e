"""The hub's metrics, in one Prometheus registry per hub (so tests can run several hubs).

``/metrics`` serves them in the Prometheus text format; ``feedmesh stats`` reads that page and
prints the same figures for a person.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["HubMetrics", "process_rss_bytes"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def process_rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class _Callback(Collector):
    def __init__(self, collect: Callable[[], Iterable[GaugeMetricFamily]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[GaugeMetricFamily]:
        return self._collect()


class HubMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.articles_in = Counter("feedmesh_tier_articles_in", "Articles received by a tier",
                                   ["tier"], registry=r)
        self.articles_out = Counter("feedmesh_tier_articles_out", "Articles sent on by a tier",
                                    ["tier"], registry=r)
        self.bytes_in = Counter("feedmesh_tier_bytes_in", "Bytes received by a tier", ["tier"],
                                registry=r)
        self.bytes_out = Counter("feedmesh_tier_bytes_out", "Bytes sent on by a tier", ["tier"],
                                 registry=r)
        self.fetches = Counter("feedmesh_fetches", "Fetches by outcome", ["outcome"], registry=r)
        self.fenced = Counter("feedmesh_crawl_fenced",
                              "Fetch results dropped at commit because their feed changed hands "
                              "while they ran (ownership fencing)", registry=r)
        self.host_paused = Counter("feedmesh_crawl_host_paused",
                                   "Due feeds not fetched because their host could not be "
                                   "reached lately and is paused", registry=r)
        self.hosts_paused = Gauge("feedmesh_crawl_hosts_paused",
                                  "Hosts paused now because they could not be reached",
                                  registry=r)
        self.match_seconds = Histogram(
            "feedmesh_match_seconds", "Time to match one article against a filter shard",
            buckets=(1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0), registry=r)
        self.matches = Counter("feedmesh_matches", "Subscription matches found", registry=r)
        self.parked = Counter("feedmesh_messages_parked",
                              "Poison messages a tier kept aside on the bus (undecodable, or "
                              "failed every attempt)", ["group"], registry=r)
        self.hub_latency = Histogram(
            "feedmesh_hub_latency_seconds",
            "Intra-hub latency: first seen by the crawler -> stored by the reflector",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=r)
        self.rows_held = Gauge("feedmesh_reflector_rows_held",
                               "(subscription, entry) pairs held by the reflectors", registry=r)
        self.held_pairs: dict[int, Callable[[], int]] = {}
        """Each reflector of this process (by number) counts what it holds when scraped."""
        self.rows_held.set_function(lambda: sum(count() for count in self.held_pairs.values()))
        self.memory = Gauge("feedmesh_process_memory_bytes", "Resident memory of this process",
                            registry=r)
        self.memory.set_function(process_rss_bytes)
        self.cpu = Gauge("feedmesh_process_cpu_seconds",
                         "CPU time (user + system) this process has used, seconds (a rate of it "
                         "is the process's share of a core: `provision --check`)", registry=r)
        self.cpu.set_function(lambda: sum(os.times()[:2]))
        self.reflector_memory = Gauge("feedmesh_reflector_memory_bytes",
                                      "Memory the reflectors hold (newest-k rows, subscription "
                                      "columns, re-match index, SQLite caches)", registry=r)
        self.degraded = Counter("feedmesh_reflector_degraded",
                                "Entries degraded under memory pressure", ["action"], registry=r)
        self.feed_renders = Counter("feedmesh_feed_renders",
                                    "Private feeds rendered (once per version and format; the "
                                    "other 200s are served from memory)", registry=r)
        self.archive_entries_scanned = Counter(
            "feedmesh_archive_entries_scanned", "Stored entry ids looked at to make private "
            "feeds' archive pages (read from the store, never from a reflector)", registry=r)
        self.feed_requests = Counter("feedmesh_feed_requests",
                                     "Personalized feed requests by status", ["status"],
                                     registry=r)
        self.subscriptions = Gauge("feedmesh_subscriptions", "Active subscriptions", registry=r)
        self.feeds = Gauge("feedmesh_source_feeds", "Source feeds crawled", registry=r)
        self.push_targets = Gauge("feedmesh_push_targets",
                                  "WebSub subscribers and webhooks held", ["kind"], registry=r)
        self.push_deliveries = Counter("feedmesh_push_deliveries",
                                       "Deliveries to push targets by kind and result",
                                       ["kind", "result"], registry=r)
        self.push_entries = Counter("feedmesh_push_entries",
                                    "(target, entry) pairs queued for delivery", registry=r)
        self.push_latency = Histogram(
            "feedmesh_push_latency_seconds",
            "First seen by the crawler -> delivered to a push target (the oldest entry sent)",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 120.0),
            registry=r)

    def watch_queues(self, depths: Callable[[], dict[str, tuple[int, int]]]) -> None:
        def collect() -> Iterable[GaugeMetricFamily]:
            messages = GaugeMetricFamily("feedmesh_queue_messages",
                                         "Messages waiting in a bus queue", labels=["queue"])
            size = GaugeMetricFamily("feedmesh_queue_bytes", "Bytes waiting in a bus queue",
                                     labels=["queue"])
            for name, (count, held) in sorted(depths().items()):
                messages.add_metric([name], count)
                size.add_metric([name], held)
            return [messages, size]

        self.registry.register(_Callback(collect))
