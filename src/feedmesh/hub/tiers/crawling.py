"""What a crawler process does besides fetching: the feeds people add and follow, feeds changing
hands between named crawlers, and the start-up replay.

* **Feeds people add and follow** reach it as :class:`FeedsAdded` and :class:`FollowsChanged` on
  the ``feeds`` subject (from web processes of their own), or directly (the embedded hub's front).
  A feed that accounts brought to the crawl and that none of them follows any more leaves it; the
  operator's feeds (``--opml``, :meth:`CrawlDesk.add_feeds` with ``operator``) stay.
* **Ownership** (``feedmesh crawler --name``): :class:`OwnersChanged` makes the named crawler read
  the table again (:mod:`.owners`); when it hands feeds over, every named crawler is told.
* **Replay**: entries the crawler committed after the oldest reflector watermark (a crash between
  the crawler's commit and the reflector's) go through the filters again; the reflectors' logs
  are idempotent, so what was already stored is not stored twice.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Protocol

from feedmesh.bus import Bus, BusError
from feedmesh.hub.deliveries import Settle
from feedmesh.hub.errors import FeedUnavailable
from feedmesh.hub.messages import FeedsAdded, FollowsChanged, OwnersChanged, article_of, encode
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector_client import ReflectorClient
from feedmesh.hub.tiers.crawler import CrawlerTier
from feedmesh.hub.tiers.owners import CrawlerOwnership
from feedmesh.store import IngestStore, ReflectorLog

__all__ = ["CRAWLER_NAME", "CrawlDesk", "LocalWatermarks", "RemoteWatermarks", "Watermarks",
           "crawler_group", "schedule_file"]

log = logging.getLogger("feedmesh.hub")

CRAWLER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
"""What a named crawler may be called."""


def crawler_group(shard: int | str) -> str:
    """The group of the ``feeds`` subject of crawler shard ``shard``, or of the crawler named
    ``shard`` (each gets every message)."""
    return f"crawler-{shard}"


def schedule_file(share: tuple[int, int], name: str = "") -> str:
    """The file a crawler keeps its scheduler's snapshot in, in its data folder."""
    if name:
        return f"schedule-{name}.bin"
    return "schedule.bin" if share == (0, 1) else f"schedule-{share[0]}-of-{share[1]}.bin"


class Watermarks(Protocol):
    """One reflector's newest stored entry id per filter shard, as the replay reads them."""

    async def marks(self, shards: int, newest: int) -> dict[int, int]:
        """Its marks for shards ``0 .. shards-1``; a shard it has stored nothing of yet starts
        from ``newest`` (now), not from history."""
        ...


class LocalWatermarks:
    """A reflector of this process: a shard it has no mark for gets ``newest``, recorded, so a
    crash before its first match of that shard replays from here."""

    def __init__(self, log_: ReflectorLog) -> None:
        self.log = log_

    async def marks(self, shards: int, newest: int) -> dict[int, int]:
        marks = self.log.watermarks()
        for shard in range(shards):
            if shard not in marks:
                self.log.set_watermarks({shard: newest})
                marks[shard] = newest
        return {shard: marks[shard] for shard in range(shards)}


class RemoteWatermarks:
    """A reflector process, asked over its API; waited for (one log line) while it is not up."""

    def __init__(self, client: ReflectorClient, reflectors: int,
                 timeout_s: float = 120.0) -> None:
        self.client = client
        self.reflectors = reflectors
        self.timeout_s = timeout_s

    async def marks(self, shards: int, newest: int) -> dict[int, int]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        waiting = False
        remote = self.client
        while True:
            try:
                marks = await remote.watermarks()
                if waiting:
                    log.info("reflector_reached reflector=%d url=%s", remote.number, remote.url)
                return {shard: marks.get(shard, newest) for shard in range(shards)}
            except FeedUnavailable as exc:
                if loop.time() > deadline:
                    raise BusError(f"{exc}; start it (feedmesh reflector --shard "
                                   f"{remote.number}/{self.reflectors}) before the "
                                   "hub") from None
                if not waiting:
                    log.warning("reflector_waiting reflector=%d error=%r", remote.number,
                                str(exc))
                    waiting = True
                await asyncio.sleep(0.5)


class CrawlDesk:
    """A crawler process's side of the feeds people add and follow, of feed ownership, and of
    the replay (see the module). ``name``: the crawler's name when it takes its feeds by name
    (``owners`` then follows the table), else empty."""

    def __init__(self, crawler: CrawlerTier, store: IngestStore, bus: Bus,
                 metrics: HubMetrics, *, group: str, filters: int,
                 owners: CrawlerOwnership | None = None, name: str = "") -> None:
        self.crawler = crawler
        self.store = store
        self.bus = bus
        self.group = group
        self.filters = filters
        self.owners = owners
        self.name = name
        self.feeds_joined = asyncio.Event()
        self.operator_feeds: set[int] = set()
        """Feeds the operator listed (``add_feeds``) since start: never abandoned."""
        self._settle = Settle(bus, group, metrics)

    async def run_feed_changes(self) -> None:
        """Apply what web processes of their own ask of the crawler on ``feeds``: feeds to
        crawl (already in the shared store), followers gained or lost."""
        consumer = await self.bus.consumer("feeds", self.group)
        self.feeds_joined.set()
        async for delivery in consumer:
            message = await self._settle.decoded(delivery)
            if isinstance(message, FeedsAdded):
                await self.add_feeds(list(message.urls), operator=False)
            elif isinstance(message, FollowsChanged):
                await self.follows_changed(message.changes)
            elif (isinstance(message, OwnersChanged) and self.owners is not None
                  and await self.owners.reconcile()):
                await self.owners_changed()  # it handed feeds over: the gainers take them
            await delivery.ack()

    async def owners_changed(self) -> None:
        """Tell every named crawler that this one handed feeds over (the gainers load them)."""
        await self.bus.publish("feeds", encode(OwnersChanged(by=self.name)))

    async def add_feeds(self, urls: Sequence[str], *, operator: bool = True) -> list[int]:
        """Crawl these feeds (``operator``: the operator's list, followed by no account, which
        stays in the crawl whoever follows it; else feeds accounts follow, added by a web
        process); their ids. A named crawler gives those without owner one (:mod:`.owners`)
        and crawls those that are its."""
        ids = await self.crawler.add_feeds(list(urls))
        if operator:
            self.operator_feeds.update(ids)
        if self.owners is not None and ids:
            await self.owners.claim(ids)
            if await self.owners.reconcile():
                await self.owners_changed()
        return ids

    async def follows_changed(self, changes: dict[int, int]) -> None:
        """Feeds gained (+n) or lost (-n) followers. A feed that accounts brought to the crawl
        and that none of them follows any more leaves it (unsubscribed from its WebSub hub);
        the operator's feeds stay."""
        abandoned = [feed_id for feed_id, change in changes.items()
                     if self.crawler.follow(feed_id, change) == 0 and change < 0
                     and feed_id not in self.operator_feeds]
        if abandoned:
            removed = await self.remove_feeds(abandoned)
            log.info("feeds_abandoned feeds=%s removed=%d reason=no account follows them",
                     ",".join(map(str, abandoned)), removed)

    async def remove_feeds(self, feed_ids: Sequence[int]) -> int:
        """Stop crawling these feeds (unsubscribing from their WebSub hubs); how many were."""
        removed = 0
        for feed_id in feed_ids:
            removed += await self.crawler.remove_feed(feed_id)
        return removed

    async def replay(self, reflectors: Sequence[Watermarks]) -> int:
        """Publish again what this crawler committed after the oldest of the ``reflectors``'
        watermarks; how many entries were read."""
        newest = self.store.max_entry_id()
        start = newest
        for reflector in reflectors:
            marks = await reflector.marks(self.filters, newest)
            start = min(start, *marks.values()) if marks else start
        replayed = 0
        meta = self.crawler.feed_meta
        while start < newest:
            chunk = self.store.entries_after(start, 500)
            if not chunk:
                break
            for item in chunk:
                if not self.crawler.crawler.owns(item.feed_id):
                    continue  # another crawler's feed: that crawler replays it
                source = meta.get(item.feed_id)
                article = (article_of(item, source.url, source.title, source.language)
                           if source is not None else article_of(item, "", ""))
                await self.bus.publish("articles", encode(article))
            replayed += len(chunk)
            start = chunk[-1].id
        if replayed:
            log.warning("hub_replayed entries=%d reason=entries committed but not reflected "
                        "before the last stop", replayed)
        return replayed
