"""The crawler role: the crawler tier, its WebSub subscriber, the feeds people add and follow, the
ownership of named crawlers, and the start-up replay (:mod:`feedmesh.hub.tiers.crawling`).

Start-up order matters for "nothing lost, nothing twice": the roles that consume what the crawler
publishes (filters, reflectors: in this process or their own) are ready first; then the crawler
loads its feeds, creates the groups of the tiers in processes of their own (durable, they outlive
a member, so nothing is lost while one is not running yet), replays what was committed but not
reflected, and starts crawling. Stopping runs it backwards: the crawl stops between batches and
commits what it fetched, then every tier is waited for until it has acknowledged everything
published (the drain), then the next role stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from aiohttp.abc import AbstractResolver

from feedmesh.bus import Bus
from feedmesh.clock import Clock
from feedmesh.compose.lifecycle import HttpPart, Tasks, cancel
from feedmesh.compose.settings import HubSettings
from feedmesh.fetch import Fetcher
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector_client import ReflectorClient
from feedmesh.hub.tiers.crawler import CrawlerTier
from feedmesh.hub.tiers.crawling import (
    CrawlDesk,
    RemoteWatermarks,
    Watermarks,
    crawler_group,
    schedule_file,
)
from feedmesh.hub.tiers.owners import CrawlerOwnership
from feedmesh.hub.tiers.websub_subscriber import WebSubSubscriber
from feedmesh.secret_file import read_token
from feedmesh.store import FeedOwnership, HubState, IngestStore, StoreThread

__all__ = ["CrawlerRole", "crawler_tier"]

log = logging.getLogger("feedmesh.hub")

DRAIN_TIMEOUT_S = 30.0


def crawler_tier(settings: HubSettings, *, store: IngestStore, state: HubState, bus: Bus,
                 fetcher: Fetcher, clock: Clock, metrics: HubMetrics, data_dir: Path,
                 resolver: AbstractResolver | None = None) -> CrawlerTier:
    """The one place a crawler tier is made, with its WebSub subscriber."""
    s = settings

    def websub(tier: CrawlerTier) -> WebSubSubscriber:
        return WebSubSubscriber(
            s.websub, public_url=s.public_url, state=state, clock=clock, guard=fetcher.guard,
            ingest=tier.ingest_push, set_live=tier.set_websub_live, registry=metrics.registry,
            resolver=resolver, user_agent=s.fetch.user_agent or "feedmesh (WebSub subscriber)")

    return CrawlerTier(store, fetcher, bus, clock, metrics, s.crawl, followers=state.followers(),
                       forward_backlog=s.forward_backlog, schedule=s.schedule,
                       schedule_path=data_dir / schedule_file(s.crawler_shard, s.crawler_name),
                       share=s.crawler_shard, websub=websub)


def reflector_token(path: str) -> bytes | None:
    """The reflectors' bearer token from the file 0600 at ``path`` (None when no path)."""
    return read_token(Path(path), "reflector token") if path else None


class CrawlerRole:
    """The crawling hub's crawler (see the module). ``local_reflectors``: the watermarks of the
    reflectors of this process (the embedded hub), beside those of ``settings``' external
    ones."""

    def __init__(self, settings: HubSettings, tier: CrawlerTier, *, store: IngestStore,
                 bus: Bus, metrics: HubMetrics, fetcher: Fetcher, io: StoreThread,
                 ownership: FeedOwnership | None = None,
                 local_reflectors: Sequence[Watermarks] = ()) -> None:
        self.settings = s = settings
        self.tier = tier
        self.name = "crawler"
        self.ready = asyncio.Event()
        self.metrics = metrics
        self.bus = bus
        self.fetcher = fetcher
        owners = (CrawlerOwnership(s.crawler_name, ownership, tier, store, io)
                  if ownership is not None else None)
        self.desk = CrawlDesk(tier, store, bus, metrics,
                              group=crawler_group(s.crawler_name or s.crawler_shard[0]),
                              filters=s.filters, owners=owners, name=s.crawler_name)
        token = reflector_token(s.reflector_token_file)
        self.remote_reflectors = [ReflectorClient(n, url, token=token)
                                  for n, url in enumerate(s.external_reflectors)]
        self._watermarks = [*local_reflectors,
                            *(RemoteWatermarks(c, s.reflectors) for c in self.remote_reflectors)]
        self._loops: list[asyncio.Task] = []
        self._feeds_loop: asyncio.Task | None = None
        self._crawl: asyncio.Task | None = None
        self._crawl_stop = asyncio.Event()

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return self.metrics.registry

    def http(self) -> HttpPart:
        return HttpPart()

    async def start(self, tasks: Tasks) -> None:
        s, desk = self.settings, self.desk
        await self.bus.last_seq("control")  # a bus that cannot be reached fails here, once
        handed_over = await desk.owners.start() if desk.owners is not None else False
        await self.tier.load()
        self._feeds_loop = tasks.spawn("crawler.feeds", desk.run_feed_changes)
        await desk.feeds_joined.wait()  # a bus keeps messages only for the groups that exist
        if handed_over:  # feeds staged away while this crawler was down: tell their owners
            await desk.owners_changed()
        groups = []  # of the tiers in processes of their own: durable, they outlive a member
        if s.external_filters:
            groups += [(subject, f"filter-{shard}") for shard in range(s.filters)
                       for subject in ("control", "articles")]
        groups += [(subject, f"reflector-{r.number}") for r in self.remote_reflectors
                   for subject in ("control", f"matches.{r.number}")]
        for subject, group in groups:
            await (await self.bus.consumer(subject, group)).close()
        await desk.replay(self._watermarks)
        websub = self.tier.websub
        if websub is not None:
            await websub.start()
            self._loops.append(tasks.spawn("websub", lambda: websub.run(tasks.stop)))
        self._crawl = asyncio.create_task(self.tier.run(s.crawl_interval_s, self._crawl_stop))
        self.ready.set()
        log.info("crawler_started feeds=%d filters=%d reflectors=%d", self.tier.feed_count(),
                 s.filters, s.reflectors)

    async def stop_crawling(self) -> None:
        """No fetch begins any more; those in flight finish (the role goes on otherwise)."""
        self._crawl_stop.set()
        if self._crawl is not None:
            await self._crawl

    async def stop(self) -> None:
        """The crawl stops between batches and commits what it fetched; every tier has then
        acknowledged everything published (or the next start replays it)."""
        await self.stop_crawling()
        await cancel(self._loops)
        if self.tier.websub is not None:
            await self.tier.websub.close()
        await self.tier.aclose()  # commits what was fetched, publishes its entries
        if not await self.drain():
            log.warning("hub_stop_undrained reason=tiers did not process everything in time; "
                        "the next start replays it")
        # Last: a handover in hand (feeds staged away, taken over) completes meanwhile.
        await cancel([self._feeds_loop] if self._feeds_loop is not None else [])
        for remote in self.remote_reflectors:
            await remote.close()
        await self.fetcher.close()

    async def drain(self, timeout: float = DRAIN_TIMEOUT_S) -> bool:
        """Wait until every tier has acknowledged every message published so far (True), or
        ``timeout`` seconds pass (False). Articles first: a filter acknowledges an article once
        it has published its matches, so the matches are waited for after."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        subjects = ["control", "articles",
                    *(f"matches.{n}" for n in range(self.settings.reflectors))]
        for subject in subjects:
            seq = await self.bus.last_seq(subject)
            if not await self.bus.wait_acked(subject, seq,
                                             timeout=max(0.0, deadline - loop.time())):
                return False
        return True

    async def add_feeds(self, urls: Sequence[str], *, operator: bool = True) -> list[int]:
        return await self.desk.add_feeds(urls, operator=operator)

