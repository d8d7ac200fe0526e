"""The hub on one machine: crawler -> filter shards -> reflectors, joined by a bus, and the
operations the web layer offers people (:class:`~.facade.HubFacade`).

The hub is handed its ports (ingest store, hub state, reflector logs, bus, fetcher, clock) by a
composition root (:func:`feedmesh.compose.embedded_hub`); it constructs none of them.

Start-up order matters for "nothing lost, nothing twice":

1. load every subscription into its filter shard and its reflector;
2. *replay*: entries the crawler committed after the oldest reflector watermark (a crash between
   the crawler's commit and the reflector's) go through the filters again; the reflectors' logs
   are idempotent, so what was already stored is not stored twice;
3. start the tiers, then the crawler.

Shutdown (SIGTERM) runs it backwards: stop the crawler between batches and commit what it
fetched, wait until every tier has acknowledged everything published, then close.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import msgspec
from aiohttp.abc import AbstractResolver

from feedmesh.bus import Bus, BusError
from feedmesh.clock import Clock
from feedmesh.crawl import CrawlSettings
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.fetch.redact import redact_credentials
from feedmesh.hub.crawler_tier import CrawlerTier
from feedmesh.hub.deliveries import Settle
from feedmesh.hub.facade import FeedUnavailable, FeedVersion, SourceView
from feedmesh.hub.filter import FilterTier, StateOpener
from feedmesh.hub.front import HubFront, Owners, RemoteHolders
from feedmesh.hub.messages import (
    FeedMeta,
    FeedsAdded,
    FollowsChanged,
    OwnersChanged,
    article_of,
    encode,
)
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.owners import CrawlerOwnership
from feedmesh.hub.push import PushService, PushSettings
from feedmesh.hub.push_feeds import LocalFeeds
from feedmesh.hub.reflector import Reflector, ReflectorSettings
from feedmesh.hub.reflector_service import ReflectorClient
from feedmesh.hub.supervise import supervise
from feedmesh.hub.tokens import FeedTokens
from feedmesh.hub.websub_subscriber import WebSubSubscriber
from feedmesh.match import SubscriptionIndex
from feedmesh.memory import release_memory
from feedmesh.schedule import SchedulerSettings
from feedmesh.store import (
    FeedOwnership,
    FollowedSource,
    HubState,
    IngestStore,
    ReflectedItem,
    ReflectorLog,
    StoreThread,
)
from feedmesh.websub.lease import SubscriberSettings, Verdict
from feedmesh.websub.subscriber import Delivery

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
    starting_entries: int = 500
    """A new subscription starts with the newest of these most recent stored entries that it
    matches (the preview searches the same)."""
    forward_backlog: bool = True
    """Match the entries a source already held when it was first crawled. Off for big hubs:
    100,000 new sources would otherwise push a million old articles through the filters."""
    external_filters: bool = False
    """The ``filters`` shards run as ``feedmesh filter`` processes (on a NATS bus): this hub runs
    none of them, but creates their groups before it publishes, so nothing is lost while one is
    not running yet."""
    crawler_shard: tuple[int, int] = (0, 1)
    """``(i, n)``: this hub's crawler fetches the feeds whose id is ``i`` modulo ``n``; the
    others are for the ``feedmesh crawler --shard`` processes of the other shares."""
    crawler_name: str = ""
    """This hub's crawler fetches the feeds the feed ownership table gives this name
    (``feedmesh crawler --name``; hub/owners.py), which may move while it runs; instead of
    ``crawler_shard``'s modulo split."""
    external_reflectors: tuple[str, ...] = ()
    """The ``reflectors`` run as ``feedmesh reflector`` processes (on a NATS bus), reached at
    these URLs, one per reflector in order: this hub holds no feed; it asks them."""
    fetch: FetchSettings = FetchSettings()
    crawl: CrawlSettings = CrawlSettings()
    reflector: ReflectorSettings = ReflectorSettings()
    public_url: str = ""
    """Where publishers' WebSub hubs reach this hub's web server (``--public-url``): callbacks
    are ``PUBLIC_URL/websub/<id>``. Empty: no push subscription is made (docs/websub.md)."""
    websub: SubscriberSettings = SubscriberSettings()
    push: PushSettings = PushSettings()
    """The WebSub hub of the private feeds and the webhooks (:mod:`.push`); served only with
    the reflectors in this process."""

    def __post_init__(self) -> None:
        if self.public_url and not self.public_url.startswith(("http://", "https://")):
            raise ValueError(f"public URL {self.public_url!r}: give an http:// or https:// URL "
                             "that publishers' hubs can reach")
        if not 1 <= self.filters <= 64 or not 1 <= self.reflectors <= 64:
            raise ValueError("HubSettings: filters and reflectors must be in 1..64")
        if self.crawl_interval_s <= 0:
            raise ValueError("HubSettings.crawl_interval_s must be > 0")
        if not 0 <= self.crawler_shard[0] < self.crawler_shard[1] <= 64:
            raise ValueError(f"HubSettings.crawler_shard {self.crawler_shard}: need 0 <= i < n "
                             "<= 64")
        if self.crawler_name and self.crawler_shard != (0, 1):
            raise ValueError("a crawler takes its feeds by name (the ownership table) or by "
                             "share (i/n), not both")
        if self.crawler_name and not _NAME.fullmatch(self.crawler_name):
            raise ValueError(f"crawler name {self.crawler_name!r}: use 1-64 letters, digits, "
                             "'-' or '_', starting with a letter")
        if self.external_reflectors and len(self.external_reflectors) != self.reflectors:
            raise ValueError(f"{self.reflectors} reflectors need {self.reflectors} URLs, got "
                             f"{len(self.external_reflectors)}")


_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


def crawler_group(shard: int | str) -> str:
    """The group of the ``feeds`` subject of crawler shard ``shard``, or of the crawler named
    ``shard`` (each gets every message)."""
    return f"crawler-{shard}"


def _schedule_file(share: tuple[int, int], name: str = "") -> str:
    if name:
        return f"schedule-{name}.bin"
    return "schedule.bin" if share == (0, 1) else f"schedule-{share[0]}-of-{share[1]}.bin"


class LocalHolders:
    """The reflectors of this process: a feed's version from memory, its items from its log."""

    def __init__(self, reflectors: Sequence[Reflector]) -> None:
        self.reflectors = reflectors
        self.owners = Owners()

    def serving(self, sub_id: int, generation: int | None = None) -> Reflector | None:
        owner = self.owners.get(sub_id)
        if owner < 0:
            return None
        reflector = self.reflectors[owner]
        if generation is None:
            return reflector if reflector.subs.is_active(sub_id) else None
        return reflector if reflector.serves(sub_id, generation) else None

    async def version(self, sub_id: int, generation: int) -> FeedVersion | None:
        reflector = self.serving(sub_id, generation)
        return FeedVersion(*reflector.version(sub_id)) if reflector is not None else None

    async def items(self, sub_id: int) -> list[ReflectedItem]:
        reflector = self.serving(sub_id)
        return await reflector.items(sub_id) if reflector is not None else []

    async def held(self) -> int:
        return sum(r.subs.count() for r in self.reflectors)

    def forget(self, sub_id: int) -> None:
        """Nothing is cached: versions are read from the reflectors' memory."""


class LocalSources:
    """The crawler tier of this process, as a person's source feeds need it; ``follows``
    applies followers gained or lost (:meth:`Hub.follows_changed`)."""

    def __init__(self, crawler: CrawlerTier,
                 follows: Callable[[dict[int, int]], Awaitable[None]]) -> None:
        self.crawler = crawler
        self._follows = follows

    async def count_new(self, urls: Sequence[str], followed: set[int]) -> int:
        return sum(1 for url in urls if self.crawler.known_feed(url) not in followed)

    async def add(self, urls: Sequence[str]) -> list[int]:
        return await self.crawler.add_feeds(list(urls))

    async def follow(self, changes: dict[int, int]) -> None:
        await self._follows(changes)

    async def views(self, followed: Sequence[FollowedSource]) -> list[SourceView]:
        views = []
        for f in followed:
            state = self.crawler.fetch_state(f.feed_id)
            meta = self.crawler.feed_meta.get(f.feed_id)
            views.append(SourceView(
                id=f.feed_id, url=redact_credentials(state.url) if state else "",
                title=(meta.title if meta else "") or f.title, added_at=f.added_at,
                active=bool(state and state.active),
                last_outcome=state.last_outcome if state else "",
                last_error=state.last_error if state else "", category=f.category,
                html_url=f.html_url, next_fetch_at=self.crawler.next_fetch_at(f.feed_id)))
        return views

    async def metas(self, feed_ids: set[int]) -> dict[int, FeedMeta]:
        meta = self.crawler.feed_meta
        return {fid: meta[fid] for fid in feed_ids if fid in meta}

    async def figures(self) -> dict[str, object]:
        cycle = self.crawler.last_cycle
        return {"feeds": self.crawler.feed_count(),
                "last_crawl": msgspec.to_builtins(cycle) if cycle else None,
                "crawl_cycles": self.crawler.cycles,
                "hosts_paused": self.crawler.hosts_paused()}


class Hub(HubFront):
    """The embedded hub: the tiers of this process, and the facade (:class:`~.front.HubFront`)
    the web layer uses."""

    def __init__(self, settings: HubSettings, *, ingest: IngestStore, state: HubState,
                 reflector_logs: Sequence[ReflectorLog], bus: Bus, fetcher: Fetcher,
                 clock: Clock, open_state: StateOpener, data_dir: Path,
                 tokens: FeedTokens, resolver: AbstractResolver | None = None,
                 ownership: FeedOwnership | None = None) -> None:
        if bool(settings.crawler_name) != (ownership is not None):
            raise ValueError("a named crawler needs the feed ownership table, and only it")
        local = 0 if settings.external_reflectors else settings.reflectors
        if len(reflector_logs) != local:
            raise ValueError(f"{local} reflectors in this process need as many logs, "
                             f"got {len(reflector_logs)}")
        self.settings = s = settings
        metrics = HubMetrics()
        self.fetcher = fetcher
        self._data = data_dir
        self._open_state = open_state
        io = StoreThread()  # the web layer's reads and writes, off the event loop
        self.crawler = CrawlerTier(ingest, fetcher, bus, clock, metrics,
                                   s.crawl, followers=state.followers(),
                                   forward_backlog=s.forward_backlog, schedule=s.schedule,
                                   schedule_path=data_dir / _schedule_file(
                                       s.crawler_shard, s.crawler_name),
                                   share=s.crawler_shard)
        self.reflectors = [
            Reflector(n, reflector_log, bus, clock, metrics, s.reflector,
                      index=SubscriptionIndex() if s.delivery == "article" else None)
            for n, reflector_log in enumerate(reflector_logs)]
        self.remote_reflectors = [ReflectorClient(n, url)
                                  for n, url in enumerate(s.external_reflectors)]
        holders: LocalHolders | RemoteHolders = (
            RemoteHolders(self.remote_reflectors, state, io) if self.remote_reflectors
            else LocalHolders(self.reflectors))
        super().__init__(state=state, store=ingest, bus=bus, clock=clock, metrics=metrics,
                         tokens=tokens, holders=holders,
                         sources=LocalSources(self.crawler, self.follows_changed),
                         reflectors=s.reflectors,
                         starting_entries=s.starting_entries, io=io)
        self.metrics.watch_queues(self.bus.depths)
        self.feeds_joined = asyncio.Event()
        self._group = crawler_group(s.crawler_name or s.crawler_shard[0])
        self._feeds_settle = Settle(bus, self._group, metrics)
        self.ownership = ownership
        self.feed_owners = (CrawlerOwnership(s.crawler_name, ownership, self.crawler, ingest, io)
                            if ownership is not None else None)
        self.metrics.reflector_memory.set_function(
            lambda: sum(r.memory_bytes() for r in self.reflectors))
        self.filters = [] if s.external_filters else [
            FilterTier(n, s.filters, self.bus, self.clock, self.metrics, delivery=s.delivery)
            for n in range(s.filters)]
        self.lease_bounds = s.push.lease
        if self.reflectors:  # push follows the reflectors' batches, so it runs beside them
            feeds = LocalFeeds(holders.serving if isinstance(holders, LocalHolders)
                               else lambda sub_id: None)
            self.push = feeds.push = PushService(
                state, s.push, s.fetch, clock, self.metrics, document=feeds.document,
                held=feeds.held, resolver=resolver, tokens=self.tokens)
            for reflector in self.reflectors:
                reflector.on_applied = self.push.matched
        else:  # the reflectors' processes deliver; this one takes requests (docs/distributed.md)
            self.push = PushService(state, msgspec.structs.replace(
                s.push, sync_interval_s=s.push.sync_interval_s or 1.0), s.fetch, clock,
                self.metrics, document=None, resolver=resolver)
        self.websub = WebSubSubscriber(
            s.websub, public_url=s.public_url, state=state, clock=clock, guard=fetcher.guard,
            ingest=self.crawler.ingest_push, set_live=self.crawler.set_websub_live,
            registry=self.metrics.registry, resolver=resolver,
            user_agent=s.fetch.user_agent or "feedmesh (WebSub subscriber)")
        self.crawler.on_document = self.websub.discovered
        self.crawler.on_deactivated = self.websub.feed_removed
        self.operator_feeds: set[int] = set()
        """Feeds the operator listed (``add_feeds``) since start: never abandoned."""
        self._tasks: list[asyncio.Task] = []
        self._stop = asyncio.Event()
        self._crawl_task: asyncio.Task[None] | None = None
        self._websub_task: asyncio.Task[None] | None = None
        self.started = False

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        # A bus that cannot be reached fails here, as one error, rather than in every tier.
        await self.bus.last_seq("control")
        columns = self.state.subscription_columns()
        for tier in self.filters:
            tier.load(self.state, columns, self._data, self._open_state)
        for reflector in self.reflectors:
            reflector.load(columns, self.state.queries() if reflector.index is not None else ())
        self.holders.owners.set(columns["id"], columns["reflector"])
        count = len(columns["id"])
        del columns
        release_memory()  # start-up tables for a million subscriptions are gone: give it back
        self.metrics.subscriptions.set(count)
        handed_over = await self.feed_owners.start() if self.feed_owners is not None else False
        await self.crawler.load()
        # What start-up loaded lives as long as the hub: keep it out of the full collections
        # that stop everything else while they run.
        gc.freeze()
        for tier in (*self.filters, *self.reflectors):
            name = f"{type(tier).__name__}-{getattr(tier, 'shard', getattr(tier, 'number', 0))}"
            self._tasks.append(asyncio.create_task(
                supervise(f"{name}.control", tier.run_control, self._stop)))
            self._tasks.append(asyncio.create_task(supervise(name, tier.run, self._stop)))
        self._tasks.append(asyncio.create_task(
            supervise("crawler.feeds", self.run_feed_changes, self._stop)))
        await self._joined()  # a bus keeps messages only for the groups that exist
        if handed_over:  # feeds staged away while this crawler was down: tell their owners
            await self._owners_changed()
        groups = []  # of the tiers in processes of their own: durable, they outlive a member
        if self.settings.external_filters:
            groups += [(subject, f"filter-{shard}") for shard in range(self.settings.filters)
                       for subject in ("control", "articles")]
        groups += [(subject, f"reflector-{r.number}") for r in self.remote_reflectors
                   for subject in ("control", f"matches.{r.number}")]
        for subject, group in groups:
            await (await self.bus.consumer(subject, group)).close()
        if self.push is not None:
            await self.push.load()
            push = self.push
            self._tasks.append(asyncio.create_task(
                supervise("push", lambda: push.run(self._stop), self._stop)))
        await self._replay()
        await self.websub.start()
        self._websub_task = asyncio.create_task(
            supervise("websub", lambda: self.websub.run(self._stop), self._stop))
        self._crawl_task = asyncio.create_task(
            self.crawler.run(self.settings.crawl_interval_s, self._stop))
        self.started = True
        log.info("hub_started feeds=%d subscriptions=%d filters=%d reflectors=%d",
                 self.crawler.feed_count(), count, self.settings.filters,
                 self.settings.reflectors)

    async def _joined(self, timeout: float = 60.0) -> None:
        """Wait until every tier's groups exist on the bus (at once in-process; a network round
        trip or a server being waited for on NATS)."""
        events = [event for tier in (*self.filters, *self.reflectors)
                  for event in (tier.control_joined, tier.stream_joined)]
        events.append(self.feeds_joined)
        try:
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), timeout)
        except TimeoutError:
            raise BusError(f"the tiers did not join the bus within {timeout:.0f} s") from None

    async def run_feed_changes(self) -> None:
        """Apply what web processes of their own ask of the crawler on ``feeds``: feeds to
        crawl (already in the shared store), followers gained or lost."""
        consumer = await self.bus.consumer("feeds", self._group)
        self.feeds_joined.set()
        async for delivery in consumer:
            message = await self._feeds_settle.decoded(delivery)
            if isinstance(message, FeedsAdded):
                await self.add_feeds(list(message.urls), operator=False)
            elif isinstance(message, FollowsChanged):
                await self.follows_changed(message.changes)
            elif (isinstance(message, OwnersChanged) and self.feed_owners is not None
                  and await self.feed_owners.reconcile()):
                await self._owners_changed()  # it handed feeds over: the gainers take them
            await delivery.ack()

    async def _owners_changed(self) -> None:
        """Tell every named crawler that this one handed feeds over (the gainers load them)."""
        await self.bus.publish("feeds", encode(OwnersChanged(by=self.settings.crawler_name)))

    async def _replay(self) -> None:
        newest = self.store.max_entry_id()
        start = newest
        for reflector in self.reflectors:
            marks = reflector.log.watermarks()
            for shard in range(self.settings.filters):
                if shard not in marks:  # a fresh reflector starts from now, not from history
                    reflector.log.set_watermarks({shard: newest})
                    marks[shard] = newest
            start = min(start, *marks.values())
        for remote in self.remote_reflectors:
            marks = await self._remote_watermarks(remote)
            # A shard it has stored nothing of yet: it starts from now, not from history.
            start = min(start, *(marks.get(shard, newest)
                                 for shard in range(self.settings.filters)))
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

    async def _remote_watermarks(self, remote: ReflectorClient,
                                 timeout_s: float = 120.0) -> dict[int, int]:
        """A reflector process's watermarks, waiting (one log line) while it is not up yet."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        waiting = False
        while True:
            try:
                marks = await remote.watermarks()
                if waiting:
                    log.info("reflector_reached reflector=%d url=%s", remote.number, remote.url)
                return marks
            except FeedUnavailable as exc:
                if loop.time() > deadline:
                    raise BusError(f"{exc}; start it (feedmesh reflector --shard "
                                   f"{remote.number}/{self.settings.reflectors}) before the "
                                   "hub") from None
                if not waiting:
                    log.warning("reflector_waiting reflector=%d error=%r", remote.number,
                                str(exc))
                    waiting = True
                await asyncio.sleep(0.5)

    async def stop(self) -> None:
        """Finish in-flight work, let every tier process what was published, close everything."""
        self._stop.set()
        if self._crawl_task is not None:
            await self._crawl_task
        if self._websub_task is not None:
            await self._websub_task
        await self.websub.close()
        await self.crawler.aclose()  # commits what was fetched, publishes its entries
        if not await self.drain():
            log.warning("hub_stop_undrained reason=tiers did not process everything in time; "
                        "the next start replays it")
        seq = self.state.change_seq()  # every change up to here reached the filters (drained)
        for tier in self.filters:
            tier.save(self._data / f"filter-{tier.shard}-of-{tier.shards}.index", seq)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.push is not None:
            await self.push.close()
        await self.bus.close()
        await self.fetcher.close()
        for reflector in self.reflectors:
            await reflector.close_async()
        for remote in self.remote_reflectors:
            await remote.close()
        self._io.close()
        self.store.close()
        self.state.close()
        if self.ownership is not None:
            self.ownership.close()

    async def drain(self, timeout: float = 30.0) -> bool:
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
        """Crawl these feeds (``operator``: the operator's list, followed by no account, which
        stays in the crawl whoever follows it; else feeds accounts follow, added by a web
        process); their ids. A named crawler gives those without owner one (hub/owners.py) and
        crawls those that are its."""
        ids = await self.crawler.add_feeds(list(urls))
        if operator:
            self.operator_feeds.update(ids)
        if self.feed_owners is not None and ids:
            await self.feed_owners.claim(ids)
            if await self.feed_owners.reconcile():
                await self._owners_changed()
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
            self.websub.feed_removed(feed_id)
            removed += await self.crawler.remove_feed(feed_id)
        return removed

    # -- HubFacade: WebSub callbacks (publishers' hubs pushing to the crawler) --------------

    async def websub_verify(self, callback_id: str, params: dict[str, str]) -> Verdict:
        return await self.websub.verification(callback_id, params)

    async def websub_deliver(self, callback_id: str, signature: str | None, content_type: str,
                             body: bytes) -> Delivery:
        return await self.websub.content(callback_id, signature, content_type, body)
