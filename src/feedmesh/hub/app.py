"""The hub on one machine: crawler -> filter shards -> reflectors, joined by a bus, plus the
operations the web layer offers people (:mod:`feedmesh.hub.web`).

Start-up order matters for "nothing lost, nothing twice":

1. open the stores; load every subscription into its filter shard and its reflector;
2. *replay*: entries the crawler committed after the oldest reflector watermark (a crash between
   the crawler's commit and the reflector's) go through the filters again; the reflector's stores
   are idempotent, so what was already stored is not stored twice;
3. start the tiers, then the crawler.

Shutdown (SIGTERM) runs it backwards: stop the crawler between batches, let the queues drain
through filters and reflectors, then close the stores.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec
from aiohttp.abc import AbstractResolver

from feedmesh.clock import Clock, SystemClock
from feedmesh.crawl import CrawlSettings
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.hub.bus import Bus, MemoryBus
from feedmesh.hub.crawler_tier import CrawlerTier
from feedmesh.hub.db import HubDB, Subscription
from feedmesh.hub.filter import FilterTier
from feedmesh.hub.messages import Article, SubscriptionAdded, SubscriptionRemoved
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector import Reflector, ReflectorSettings
from feedmesh.hub.reflector_store import ReflectorStore
from feedmesh.match import SubscriptionIndex, parse_query
from feedmesh.memory import release_memory
from feedmesh.schedule import SchedulerSettings
from feedmesh.store import SQLiteStore

__all__ = ["Hub", "HubSettings"]

log = logging.getLogger("feedmesh.hub")


class HubSettings(msgspec.Struct, frozen=True, kw_only=True):
    data_dir: str = "var"
    filters: int = 1
    reflectors: int = 1
    crawl_interval_s: float = 900.0
    delivery: str = "ids"
    bus_buffer_bytes: int = 1024 * 1024
    """Per upstream, per group: Cobra's 1 MB buffers."""
    schedule: SchedulerSettings | None = SchedulerSettings(policy="feedmesh",
                                                           budget_per_feed_per_day=96.0)
    """The live fetch policy (Cobra crawled every 15 minutes: 96 fetches a feed a day is the
    budget); None: every feed every ``crawl_interval_s``, each cycle spread over it."""
    forward_backlog: bool = True
    """Match the entries a source already held when it was first crawled. Off for big hubs:
    100,000 new sources would otherwise push a million old articles through the filters."""
    fetch: FetchSettings = FetchSettings()
    crawl: CrawlSettings = CrawlSettings()
    reflector: ReflectorSettings = ReflectorSettings()

    def __post_init__(self) -> None:
        if not 1 <= self.filters <= 64 or not 1 <= self.reflectors <= 64:
            raise ValueError("HubSettings: filters and reflectors must be in 1..64")
        if self.crawl_interval_s <= 0:
            raise ValueError("HubSettings.crawl_interval_s must be > 0")


class Hub:
    def __init__(self, settings: HubSettings | None = None, *, clock: Clock | None = None,
                 bus: Bus | None = None, fetcher: Fetcher | None = None,
                 resolver: AbstractResolver | None = None) -> None:
        self.settings = s = settings or HubSettings()
        self.clock = clock or SystemClock()
        self.metrics = HubMetrics()
        data = self._data = Path(s.data_dir)
        self.store = SQLiteStore(data / "feedmesh.db")
        self.db = HubDB(data / "hub.db")
        self.bus = bus or MemoryBus(s.bus_buffer_bytes)
        self.metrics.watch_queues(self.bus.depths)
        self.metrics.reflector_memory.set_function(
            lambda: sum(r.memory_bytes() for r in self.reflectors))
        self.fetcher = fetcher or Fetcher(s.fetch, clock=self.clock, resolver=resolver)
        self.filters = [FilterTier(n, s.filters, self.bus, self.clock, self.metrics,
                                   delivery=s.delivery) for n in range(s.filters)]
        self.reflectors = [
            Reflector(n, ReflectorStore(data / f"reflector-{n}.db"), self.bus, self.clock,
                      self.metrics, s.reflector,
                      index=SubscriptionIndex() if s.delivery == "article" else None)
            for n in range(s.reflectors)]
        self.crawler = CrawlerTier(self.store, self.fetcher, self.bus, self.clock, self.metrics,
                                   s.crawl, followers=self.db.followers(),
                                   forward_backlog=s.forward_backlog, schedule=s.schedule,
                                   schedule_path=data / "schedule.bin")
        self._tasks: list[asyncio.Task] = []
        self._stop = asyncio.Event()
        self.started = False

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        columns = self.db.subscription_columns()
        for tier in self.filters:
            tier.load(self.db, columns, self._data)
        for reflector in self.reflectors:
            reflector.load(columns, self.db.queries() if reflector.index is not None else ())
        count = len(columns["id"])
        del columns
        release_memory()  # start-up tables for a million subscriptions are gone: give it back
        self.metrics.subscriptions.set(count)
        await self.crawler.load()
        # What start-up loaded lives as long as the hub: keep it out of the full collections
        # that stop everything else while they run.
        gc.freeze()
        for tier in (*self.filters, *self.reflectors):
            name = f"{type(tier).__name__}-{getattr(tier, 'shard', getattr(tier, 'number', 0))}"
            self._tasks.append(asyncio.create_task(self._supervise(f"{name}.control",
                                                                   tier.run_control)))
            self._tasks.append(asyncio.create_task(self._supervise(name, tier.run)))
        await asyncio.sleep(0)  # let every consumer register before anything is published
        await self._replay()
        self._crawl_task = asyncio.create_task(
            self.crawler.run(self.settings.crawl_interval_s, self._stop))
        self.started = True
        log.info("hub_started feeds=%d subscriptions=%d filters=%d reflectors=%d",
                 len(self.crawler.crawler.states), count,
                 len(self.filters), len(self.reflectors))

    async def _supervise(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        """Run a tier loop for the hub's lifetime: a crash is logged and the loop restarted, so
        one bad message cannot stall the tiers upstream behind a full queue."""
        delay = 0.1
        while not self._stop.is_set():
            try:
                await run()
                if self._stop.is_set():
                    return
                log.error("tier_stopped tier=%s reason=its input closed", name)
                return
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("tier_crashed tier=%s restart_in_s=%.1f", name, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def _replay(self) -> None:
        newest = self.store.max_entry_id()
        start = newest
        for reflector in self.reflectors:
            marks = reflector.store.watermarks()
            for shard in range(len(self.filters)):
                if shard not in marks:  # a fresh reflector starts from now, not from history
                    reflector.store.set_watermarks({shard: newest})
                    marks[shard] = newest
            start = min(start, *marks.values())
        replayed = 0
        titles = {row.id: (row.state.url, row.title, row.info.language if row.info else "")
                  for row in self.store.feeds()} if start < newest else {}
        while start < newest:
            chunk = self.store.entries_after(start, 500)
            if not chunk:
                break
            for item in chunk:
                url, title, language = titles.get(item.feed_id, ("", "", ""))
                await self.bus.publish("articles", Article(
                    entry_id=item.id, feed_id=item.feed_id, feed_url=url, feed_title=title,
                    feed_language=language, entry=item.entry, first_seen_at=item.first_seen_at))
            replayed += len(chunk)
            start = chunk[-1].id
        if replayed:
            log.warning("hub_replayed entries=%d reason=entries committed but not reflected "
                        "before the last stop", replayed)

    async def stop(self) -> None:
        """Finish in-flight work, drain the queues, close everything."""
        self._stop.set()
        if getattr(self, "_crawl_task", None) is not None:
            await self._crawl_task
        await self.drain()
        seq = self.db.change_seq()  # every change up to here reached the filters (drained)
        for tier in self.filters:
            tier.save(self._data / f"filter-{tier.shard}-of-{tier.shards}.index", seq)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.bus.close()
        await self.fetcher.close()
        await self.crawler.aclose()
        for reflector in self.reflectors:
            await reflector.close_async()
        self.store.close()
        self.db.close()

    async def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every bus queue is empty (True) or ``timeout`` passes (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if all(held == 0 for _, held in self.bus.depths().values()):
                return True
            await asyncio.sleep(0.01)
        return False

    # -- operations for the web layer -------------------------------------------------------
    # The web layer changes subscriptions only through the bus (control messages), then waits
    # until every tier has applied the change, so the answer it gives a person is already true.

    def reflector_for(self, account_id: int) -> int:
        return account_id % len(self.reflectors)

    async def _announce(self, message: SubscriptionAdded | SubscriptionRemoved) -> None:
        await self.bus.publish("control", message)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5.0
        while loop.time() < deadline and any(
                held for name, (_, held) in self.bus.depths().items()
                if name.startswith("control/")):
            await asyncio.sleep(0.002)

    def _added(self, sub: Subscription) -> SubscriptionAdded:
        return SubscriptionAdded(sub_id=sub.id, query=sub.query, reflector=sub.reflector,
                                 keep=sub.keep, generation=sub.generation)

    async def add_subscription(self, account_id: int, *, name: str, query: str,
                               keep: int) -> Subscription:
        parsed = parse_query(query)  # raises QueryError with a position and a hint
        sub = self.db.add_subscription(account_id, name=name, query=parsed.text, keep=keep,
                                       reflector=self.reflector_for(account_id),
                                       now=self.clock.now())
        await self._announce(self._added(sub))
        self.metrics.subscriptions.inc()
        return sub

    async def change_subscription(self, sub: Subscription, *, name: str | None,
                                  query: str | None, keep: int | None,
                                  new_url: bool) -> Subscription:
        if query is not None:
            parse_query(query)
        changed = self.db.change_subscription(sub.id, now=self.clock.now(), name=name,
                                              query=query, keep=keep, new_url=new_url)
        assert changed is not None
        await self._announce(self._added(changed))
        return changed

    async def remove_subscription(self, sub: Subscription) -> None:
        self.db.delete_subscription(sub.id)
        await self._announce(SubscriptionRemoved(sub_id=sub.id, reflector=sub.reflector))
        self.metrics.subscriptions.dec()

    def stats(self) -> dict[str, object]:
        """The figures ``/api/stats`` and ``feedmesh stats`` show, from the metrics registry."""
        registry = self.metrics.registry
        figures: dict[str, object] = {}
        for family in registry.collect():
            for sample in family.samples:
                if sample.name.endswith(("_created", "_bucket")):
                    continue
                label = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                figures[f"{sample.name}{{{label}}}" if label else sample.name] = sample.value
        cycle = self.crawler.last_cycle
        return {"feeds": len(self.crawler.crawler.states),
                "subscriptions": sum(r.subs.count() for r in self.reflectors),
                "entries_stored": self.store.entry_count(),
                "last_crawl": msgspec.to_builtins(cycle) if cycle else None,
                "crawl_cycles": self.crawler.cycles,
                "queues": {k: {"messages": m, "bytes": b} for k, (m, b) in self.bus.depths().items()},
                "metrics": figures}

    def feed_token(self, sub: Subscription) -> str:
        return self.db.tokens.make(sub.id, sub.generation)
