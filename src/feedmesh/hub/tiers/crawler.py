"""The crawler tier: the ingestion pipeline, publishing each committed new or updated entry to
the ``articles`` subject. Publishing waits when the filters are behind (backpressure reaches the
fetch workers through the crawler's commit queue).

Two ways to decide what to fetch when: a fetch policy of :mod:`feedmesh.schedule` run live
(:class:`~feedmesh.crawl.scheduled.ScheduledCrawler`; the default), or every feed every interval,
each cycle spread evenly over it (``policy="interval"``; benchmarks and demos use it for its
predictable load)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import msgspec

from feedmesh.bus import Bus, Outgoing
from feedmesh.clock import Clock
from feedmesh.crawl import Crawler, CrawlSettings, CrawlStats, FeedOutcome
from feedmesh.crawl.scheduled import ScheduledCrawler
from feedmesh.fetch import FeedFetchState, Fetcher
from feedmesh.hub.messages import FeedMeta, article_of, encode
from feedmesh.hub.metrics import HubMetrics
from feedmesh.model import FeedInfo, FetchResult, ParsedFeed
from feedmesh.schedule import SchedulerSettings
from feedmesh.store import FeedRow, IngestedEntry, IngestStore

__all__ = ["CrawlerTier", "FeedMeta", "PushedFeeds"]

log = logging.getLogger("feedmesh.hub.crawler")


class PushedFeeds(Protocol):
    """The crawler tier's WebSub subscriber (:mod:`.websub_subscriber`), as the crawl tells it:
    each fetched document (to discover the hubs it advertises) and each feed that leaves."""

    def discovered(self, feed_id: int, result: FetchResult, parsed: ParsedFeed) -> None: ...
    def feed_removed(self, feed_id: int) -> None: ...


class CrawlerTier:
    """The crawl (its :class:`~feedmesh.crawl.Crawler` and, with a policy, its scheduler), and
    what it tells: every committed entry to the filters on ``articles``, every fetched document
    to the WebSub subscriber. ``websub`` makes that subscriber, given this tier (where pushed
    documents go, and which feeds are live)."""

    def __init__(self, store: IngestStore, fetcher: Fetcher, bus: Bus, clock: Clock,
                 metrics: HubMetrics, settings: CrawlSettings | None = None,
                 followers: dict[int, int] | None = None, forward_backlog: bool = True,
                 pace: bool = True, schedule: SchedulerSettings | None = None,
                 schedule_path: Path | None = None, share: tuple[int, int] = (0, 1),
                 websub: Callable[[CrawlerTier], PushedFeeds] | None = None) -> None:
        self.store = store
        self.bus = bus
        self.metrics = metrics
        self._followers = followers if followers is not None else {}
        self.forward_backlog = forward_backlog
        self.pace = pace
        self.feed_meta: dict[int, FeedMeta] = {}
        self._by_source: dict[str, int] = {}  # the URL a feed was added at -> its id
        self.crawler = Crawler(store, fetcher, clock, settings=settings, events=self,
                               subscribers=self._followers.get, share=share)
        self.last_cycle: CrawlStats | None = None
        """With ``policy="interval"``: the last cycle that ended; with a learned policy, the
        last few seconds' fetches (see :meth:`figures`, which says which)."""
        self.running: CrawlStats | None = None
        """With ``policy="interval"``: the cycle under way, so far (None: between cycles)."""
        self._ticks: deque[tuple[float, CrawlStats]] = deque()
        """With a learned policy: what each tick of the last minute fetched."""
        self.cycles = 0
        self.scheduled = (ScheduledCrawler(self.crawler, store, clock, schedule,
                                           snapshot_path=schedule_path,
                                           weight=lambda fid: 1.0 + self._followers.get(fid, 0))
                          if schedule is not None else None)
        self._wake = asyncio.Event()
        self._new_feeds: list[int] = []
        self.next_cycle_at: float | None = None
        """With ``policy="interval"``: when the next cycle starts (None: one is running)."""
        self.websub = websub(self) if websub is not None else None

    async def load(self) -> None:
        await self.crawler.load()
        self._refresh_meta()
        if self.scheduled is not None:
            self.scheduled.start()

    def _refresh_meta(self) -> None:
        rows = self.store.feeds()
        self.feed_meta = {row.id: FeedMeta(row.state.url, row.title,
                                           row.info.language if row.info else "")
                          for row in rows}
        self._by_source = {row.source_url: row.id for row in rows}
        self.metrics.feeds.set(len(self.feed_meta))

    # -- what the crawl tells (CrawlEvents) --------------------------------------------------

    async def ingested(self, entries: list[IngestedEntry]) -> None:
        await self.publish(entries)

    def feed_info(self, feed_id: int, info: FeedInfo) -> None:
        self.feed_meta[feed_id] = FeedMeta(self.crawler.states[feed_id].url, info.title,
                                           info.language)

    def document(self, feed_id: int, result: FetchResult, parsed: ParsedFeed) -> None:
        if self.websub is not None:
            self.websub.discovered(feed_id, result, parsed)

    def deactivated(self, feed_id: int) -> None:
        if self.websub is not None:
            self.websub.feed_removed(feed_id)

    # -- push ------------------------------------------------------------------------------

    async def ingest_push(self, feed_id: int, body: bytes, content_type: str,
                          arrived_at: float) -> FeedOutcome | None:
        """A pushed document through parse -> dedup -> store -> the filters, like a fetch;
        the scheduler learns from it. None: no such feed."""
        outcome = await self.crawler.ingest_push(feed_id, body, content_type, arrived_at)
        if outcome is not None and self.scheduled is not None:
            self.scheduled.record_push(outcome)
        return outcome

    def set_websub_live(self, feed_id: int, live: bool) -> None:
        """Push holds for the feed (poll it only as a safety net), or no longer does."""
        if self.scheduled is not None:
            self.scheduled.set_live(feed_id, live)

    async def remove_feed(self, feed_id: int) -> bool:
        """Stop crawling ``feed_id`` and forget it (its stored entries go with it), unsubscribed
        from its publisher's WebSub hub."""
        if self.websub is not None:
            self.websub.feed_removed(feed_id)
        if self.scheduled is not None and feed_id in self.crawler.states:
            self.scheduled.remove_feed(feed_id)
        if not await self.crawler.remove_feed(feed_id):
            return False
        self.feed_meta.pop(feed_id, None)
        self._by_source = {url: fid for url, fid in self._by_source.items() if fid != feed_id}
        self.metrics.feeds.set(len(self.crawler.states))
        return True

    def feed_count(self) -> int:
        return len(self.crawler.states)

    def fetch_state(self, feed_id: int) -> FeedFetchState | None:
        """The feed's fetch state as the crawler holds it (None: no such feed)."""
        return self.crawler.states.get(feed_id)

    def next_fetch_at(self, feed_id: int) -> float | None:
        """When the feed will be fetched next, as far as it is known: the scheduler's due time,
        or with ``policy="interval"`` the next cycle's start (the cycle takes a while), never
        before the feed's backoff ends. None: not fetched (gone, or being fetched now)."""
        state = self.crawler.states.get(feed_id)
        if state is None or not state.active:
            return None
        if self.scheduled is not None:
            return self.scheduled.next_fetch_at(feed_id)
        upcoming = self.next_cycle_at if self.next_cycle_at is not None else \
            self.crawler.clock.now()
        return max(upcoming, state.not_before, state.min_refresh_at)

    def follow(self, feed_id: int, change: int) -> int:
        """One more (+1) or one fewer (-1) account follows the feed: what the User-Agent tells
        its publisher and what weighs the feed in the fetch budget. Its followers now."""
        count = self._followers[feed_id] = max(0, self._followers.get(feed_id, 0) + change)
        return count

    def sources(self) -> dict[str, int]:
        """Each feed's id by the URL it was added at (a copy)."""
        return dict(self._by_source)

    def known_feed(self, url: str) -> int | None:
        """The id of the feed added at ``url`` (as it was added), None when it never was."""
        return self._by_source.get(url.strip())

    async def add_feeds(self, urls: list[str]) -> list[int]:
        ids = await self.crawler.add_feeds(urls)
        for url, fid in zip(dict.fromkeys(u.strip() for u in urls if u.strip()), ids,
                            strict=True):
            self._by_source[url] = fid
        for fid in ids:
            if fid in self.crawler.states:  # this crawler's share
                self.feed_meta.setdefault(fid, FeedMeta(self.crawler.states[fid].url))
        self.metrics.feeds.set(len(self.crawler.states))
        if self.scheduled is not None:
            self.scheduled.add_feeds(ids)
        self._new_feeds.extend(ids)
        self._wake.set()  # crawl new sources now rather than at the next interval
        return ids

    # -- ownership moving while the crawler runs (named crawlers, hub/tiers/owners.py) -----------

    def gain(self, rows: list[FeedRow], epochs: dict[int, int]) -> None:
        """Start crawling feeds handed to this crawler, from the fetch state the store holds
        (read after their last owner's fetches were committed): their validators and document
        hash, their backoff; ``epochs`` are the ownership table's for them (what this crawler's
        commits of them are fenced with). The scheduler learns them as it learns any feed it
        has no snapshot of: from the postings the store keeps and the time of the last
        fetch."""
        owned = self.crawler.owned
        assert owned is not None, "only a named crawler gains feeds"
        fresh = [row for row in rows if row.id not in owned]
        for row in fresh:
            owned[row.id] = epochs[row.id]
            self.crawler.states[row.id] = row.state
            self.feed_meta[row.id] = FeedMeta(row.state.url, row.title,
                                              row.info.language if row.info else "")
            self._by_source[row.source_url] = row.id
        if not fresh:
            return
        self.metrics.feeds.set(len(self.crawler.states))
        if self.scheduled is not None:
            self.scheduled.adopt([row.id for row in fresh])
        self._new_feeds.extend(row.id for row in fresh)
        self._wake.set()

    async def drop(self, feed_ids: list[int]) -> None:
        """Stop crawling feeds handed to another crawler: no new fetch of them starts, those in
        flight finish and are committed (their entries published), then they are forgotten
        here (the scheduler's knowledge of them with them)."""
        owned = self.crawler.owned
        assert owned is not None, "only a named crawler drops feeds"
        for feed_id in feed_ids:  # fetches in flight keep the epoch they began with
            owned.pop(feed_id, None)
        if self.scheduled is not None:
            for feed_id in feed_ids:
                self.scheduled.remove_feed(feed_id)
        await self.crawler.wait_idle(feed_ids)
        for feed_id in feed_ids:
            self.crawler.states.pop(feed_id, None)
        self.metrics.feeds.set(len(self.crawler.states))

    async def publish(self, ingested: list[IngestedEntry]) -> None:
        """Publish a commit's articles together (:meth:`~feedmesh.bus.Bus.publish_many`): on
        NATS one write and one wait for the server's answers, not a round trip each. The
        commit loop runs the next transaction meanwhile but hands batches on one at a time, so
        a round trip per article held every later fetch's articles back: at case (b) with two
        filter shards the crawler-to-filter leg was 263-318 ms at p50, 54-214 ms with one
        publish, 37 ms once commits and publishes overlapped (docs/measurements.md)."""
        outgoing = []
        for item in ingested:
            if item.backlog and not self.forward_backlog:
                continue
            meta = self.feed_meta.get(item.feed_id, _NO_META)
            outgoing.append(Outgoing("articles", encode(article_of(item, meta.url, meta.title,
                                                                   meta.language))))
        if not outgoing:
            return
        await self.bus.publish_many(outgoing)
        self.metrics.articles_out.labels("crawler").inc(len(outgoing))
        self.metrics.bytes_out.labels("crawler").inc(sum(len(o.data) for o in outgoing))

    async def run(self, interval_s: float, stop: asyncio.Event) -> None:
        if self.scheduled is not None:
            await self._run_scheduled(stop)
            return
        clock = self.crawler.clock
        while not stop.is_set():
            began = clock.now()
            if self._wake.is_set():  # new sources: crawl them now, at full speed
                self._wake.clear()
                fresh, self._new_feeds = self._new_feeds, []
                meter = _Meter(self._meter, clock, running=self._running)
                self._cycle_done(await self.crawler.crawl(fresh, progress=meter, stop=stop))
                continue
            # Spread each cycle over most of the interval: a steady trickle of fetches leaves the
            # filters and reflectors room on a shared core, and is kinder to publishers.
            meter = _Meter(self._meter, clock, running=self._running)
            stats = await self.crawler.crawl(spread_s=0.8 * interval_s if self.pace else 0.0,
                                             progress=meter, stop=stop)
            self._cycle_done(stats)
            wait = max(0.0, began + interval_s - clock.now())
            self.next_cycle_at = clock.now() + wait
            waiters = [asyncio.create_task(clock.sleep(wait)), asyncio.create_task(stop.wait()),
                       asyncio.create_task(self._wake.wait())]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for task in waiters:
                task.cancel()
            self.next_cycle_at = None

    async def _run_scheduled(self, stop: asyncio.Event) -> None:
        """The scheduler decides; every few seconds what it fetched is accounted like a cycle."""
        assert self.scheduled is not None
        runner = asyncio.create_task(self.scheduled.run(stop))
        seen = CrawlStats()
        while not runner.done():
            await asyncio.wait({runner}, timeout=5.0)
            total = msgspec.structs.replace(self.scheduled.stats,
                                            errors=dict(self.scheduled.stats.errors))
            tick = _difference(total, seen)
            self._meter(tick)
            self._cycle_done(tick)
            seen = total
        await runner

    def _cycle_done(self, stats: CrawlStats) -> None:
        self.last_cycle = stats
        self.running = None
        self.cycles += 1
        if self.scheduled is not None:
            now = self.crawler.clock.now()
            self._ticks.append((now, stats))
            while self._ticks and self._ticks[0][0] < now - 60.0:
                self._ticks.popleft()
        log.info("crawl_cycle fetched=%d not_modified=%d new=%d updated=%d errors=%d "
                 "host_paused=%d elapsed_s=%.2f", stats.fetched, stats.not_modified,
                 stats.new_entries, stats.updated_entries, sum(stats.errors.values()),
                 stats.host_paused, stats.elapsed_s)

    def _running(self, stats: CrawlStats) -> None:
        self.running = stats

    def _meter(self, stats: CrawlStats) -> None:
        """Add what was fetched since the last reading to the fetch metrics."""
        m = self.metrics
        m.bytes_in.labels("crawler").inc(stats.wire_bytes)
        for outcome, count in (("ok", stats.ok), ("not_modified", stats.not_modified),
                               ("delta", stats.delta)):
            if count:
                m.fetches.labels(outcome).inc(count)
        for kind, count in stats.errors.items():
            m.fetches.labels(kind).inc(count)
        if stats.fenced:
            m.fenced.inc(stats.fenced)
        if stats.host_paused:
            m.host_paused.inc(stats.host_paused)
        m.hosts_paused.set(len(self.hosts_paused()))

    def figures(self) -> dict[str, object]:
        """The crawl as ``/api/stats`` shows it: feeds, cycles, paused hosts, and what was
        fetched lately: with ``policy="interval"``, the last cycle that ended (``last_crawl``)
        and the one under way so far (``crawl_running``); with a learned policy, which has no
        cycles, the fetches of the last minute, summed (``last_crawl`` with ``elapsed_s`` the
        time they span: ``crawl_mode`` says which)."""
        if self.scheduled is not None:
            cycle = _summed([stats for _, stats in self._ticks])
            mode = "scheduled"
        else:
            cycle, mode = self.last_cycle, "interval"
        return {"feeds": self.feed_count(), "crawl_mode": mode,
                "last_crawl": msgspec.to_builtins(cycle) if cycle else None,
                "crawl_running": (msgspec.to_builtins(self.running)
                                  if self.running is not None else None),
                "crawl_cycles": self.cycles, "hosts_paused": self.hosts_paused()}

    def hosts_paused(self) -> dict[str, float]:
        """The hosts paused now because they could not be reached, with the end of each pause."""
        return self.crawler.hosts.paused(self.crawler.clock.now())

    async def aclose(self) -> None:
        if self.scheduled is not None:
            self.scheduled.save()
        await self.crawler.aclose()


_NO_META = FeedMeta("")


class _Meter:
    """A crawl's progress callback: hands the fetch metrics what a running cycle has done, at
    most once a second and at its end, so that `/metrics` follows a cycle that is spread over
    minutes instead of jumping when it ends."""

    def __init__(self, sink: Callable[[CrawlStats], None], clock: Clock,
                 every_s: float = 1.0,
                 running: Callable[[CrawlStats], None] | None = None) -> None:
        self.sink = sink
        self.running = running
        self.clock = clock
        self.every_s = every_s
        self.seen = CrawlStats()
        self.last = clock.now()

    def __call__(self, stats: CrawlStats) -> None:
        now = self.clock.now()
        if self.running is not None and not stats.elapsed_s:
            self.running(stats)  # the cycle's own counters, read when figures are asked for
        # the final call comes with elapsed_s set: always account it
        if now - self.last < self.every_s and not stats.elapsed_s:
            return
        self.last = now
        self.sink(_difference(stats, self.seen))
        self.seen = msgspec.structs.replace(stats, errors=dict(stats.errors))


def _difference(now: CrawlStats, before: CrawlStats) -> CrawlStats:
    """What happened between two readings of cumulative stats."""
    fields = {f: getattr(now, f) - getattr(before, f) for f in now.__struct_fields__
              if f != "errors"}
    errors = {k: v - before.errors.get(k, 0) for k, v in now.errors.items()
              if v - before.errors.get(k, 0)}
    return CrawlStats(**fields, errors=errors)


def _summed(ticks: list[CrawlStats]) -> CrawlStats | None:
    """Several readings of what was fetched, as one (None: none)."""
    if not ticks:
        return None
    total = CrawlStats()
    for tick in ticks:
        for field in total.__struct_fields__:
            if field == "errors":
                for kind, count in tick.errors.items():
                    total.errors[kind] = total.errors.get(kind, 0) + count
            else:
                setattr(total, field, getattr(total, field) + getattr(tick, field))
    return total
