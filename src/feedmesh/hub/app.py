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
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np
from aiohttp.abc import AbstractResolver

from feedmesh.bus import Bus, BusError
from feedmesh.clock import Clock
from feedmesh.crawl import CrawlSettings
from feedmesh.feeds.opml import OpmlOutline
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.fetch.redact import redact_credentials
from feedmesh.hub.crawler_tier import CrawlerTier, FeedMeta
from feedmesh.hub.facade import FeedVersion, FollowLimitError, RecentMatch, SourceView
from feedmesh.hub.filter import FilterTier, StateOpener
from feedmesh.hub.idcodec import encode_ids
from feedmesh.hub.messages import (
    Matched,
    SubscriptionAdded,
    SubscriptionRemoved,
    article_of,
    encode,
)
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector import Reflector, ReflectorSettings
from feedmesh.hub.supervise import supervise
from feedmesh.hub.tokens import FeedTokens
from feedmesh.hub.websub_subscriber import WebSubSubscriber
from feedmesh.match import (
    Query,
    SubscriptionIndex,
    TokenizedArticle,
    article_from_entry,
    parse_query,
    tokenize_article,
)
from feedmesh.memory import release_memory
from feedmesh.schedule import SchedulerSettings
from feedmesh.store import (
    Account,
    FollowedSource,
    HubState,
    IngestedEntry,
    IngestStore,
    ReflectedItem,
    ReflectorLog,
    StoreThread,
    Subscription,
)
from feedmesh.websub.lease import SubscriberSettings, Verdict
from feedmesh.websub.subscriber import Delivery

__all__ = ["Hub", "HubSettings"]

log = logging.getLogger("feedmesh.hub")

APPLY_TIMEOUT_S = 5.0
"""How long a person's change waits for every tier to apply it before the answer goes anyway."""
RECENT_TTL_S = 5.0
"""How long the newest stored entries, tokenized, serve previews before they are read again."""
_NO_SOURCE = FeedMeta("")


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
    fetch: FetchSettings = FetchSettings()
    crawl: CrawlSettings = CrawlSettings()
    reflector: ReflectorSettings = ReflectorSettings()
    public_url: str = ""
    """Where publishers' WebSub hubs reach this hub's web server (``--public-url``): callbacks
    are ``PUBLIC_URL/websub/<id>``. Empty: no push subscription is made (docs/websub.md)."""
    websub: SubscriberSettings = SubscriberSettings()

    def __post_init__(self) -> None:
        if self.public_url and not self.public_url.startswith(("http://", "https://")):
            raise ValueError(f"public URL {self.public_url!r}: give an http:// or https:// URL "
                             "that publishers' hubs can reach")
        if not 1 <= self.filters <= 64 or not 1 <= self.reflectors <= 64:
            raise ValueError("HubSettings: filters and reflectors must be in 1..64")
        if self.crawl_interval_s <= 0:
            raise ValueError("HubSettings.crawl_interval_s must be > 0")


class _Owners:
    """Which reflector serves each subscription (-1: none), one byte-pair per subscription id,
    so a feed request finds its reflector without a lookup in storage."""

    def __init__(self) -> None:
        self._of = np.full(1024, -1, dtype=np.int16)

    def set(self, sub_ids: np.ndarray | int, reflector: np.ndarray | int) -> None:
        top = int(np.max(sub_ids)) if np.size(sub_ids) else -1
        if top >= len(self._of):
            grown = np.full(max(top + 1, 2 * len(self._of)), -1, dtype=np.int16)
            grown[: len(self._of)] = self._of
            self._of = grown
        self._of[sub_ids] = reflector

    def get(self, sub_id: int) -> int:
        return int(self._of[sub_id]) if 0 <= sub_id < len(self._of) else -1


class Hub:
    """The embedded hub. Implements :class:`~.facade.HubFacade` for the web layer."""

    def __init__(self, settings: HubSettings, *, ingest: IngestStore, state: HubState,
                 reflector_logs: Sequence[ReflectorLog], bus: Bus, fetcher: Fetcher,
                 clock: Clock, open_state: StateOpener, data_dir: Path,
                 feed_secret: bytes, resolver: AbstractResolver | None = None) -> None:
        if len(reflector_logs) != settings.reflectors:
            raise ValueError(f"{settings.reflectors} reflectors need as many logs, "
                             f"got {len(reflector_logs)}")
        self.settings = s = settings
        self.clock = clock
        self.metrics = HubMetrics()
        self.store = ingest
        self.state = state
        self.bus = bus
        self.fetcher = fetcher
        self.tokens = FeedTokens(feed_secret)
        self._data = data_dir
        self._open_state = open_state
        self._io = StoreThread()  # the web layer's reads and writes, off the event loop
        self._owners = _Owners()
        self._recent: tuple[float, int, list] = (-float("inf"), 0, [])
        self.metrics.watch_queues(self.bus.depths)
        self.metrics.reflector_memory.set_function(
            lambda: sum(r.memory_bytes() for r in self.reflectors))
        self.filters = [] if s.external_filters else [
            FilterTier(n, s.filters, self.bus, self.clock, self.metrics, delivery=s.delivery)
            for n in range(s.filters)]
        self.reflectors = [
            Reflector(n, reflector_log, self.bus, self.clock, self.metrics, s.reflector,
                      index=SubscriptionIndex() if s.delivery == "article" else None)
            for n, reflector_log in enumerate(reflector_logs)]
        self.crawler = CrawlerTier(self.store, self.fetcher, self.bus, self.clock, self.metrics,
                                   s.crawl, followers=state.followers(),
                                   forward_backlog=s.forward_backlog, schedule=s.schedule,
                                   schedule_path=data_dir / "schedule.bin")
        self.websub = WebSubSubscriber(
            s.websub, public_url=s.public_url, state=state, clock=clock, guard=fetcher.guard,
            ingest=self.crawler.ingest_push, set_live=self.crawler.set_websub_live,
            registry=self.metrics.registry, resolver=resolver,
            user_agent=s.fetch.user_agent or "feedmesh (WebSub subscriber)")
        self.crawler.on_document = self.websub.discovered
        self.crawler.on_deactivated = self.websub.feed_removed
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
        self._owners.set(columns["id"], columns["reflector"])
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
            self._tasks.append(asyncio.create_task(
                supervise(f"{name}.control", tier.run_control, self._stop)))
            self._tasks.append(asyncio.create_task(supervise(name, tier.run, self._stop)))
        await self._joined()  # a bus keeps messages only for the groups that exist
        if self.settings.external_filters:
            for shard in range(self.settings.filters):
                for subject in ("control", "articles"):  # durable: they outlive the member
                    await (await self.bus.consumer(subject, f"filter-{shard}")).close()
        await self._replay()
        await self.websub.start()
        self._websub_task = asyncio.create_task(
            supervise("websub", lambda: self.websub.run(self._stop), self._stop))
        self._crawl_task = asyncio.create_task(
            self.crawler.run(self.settings.crawl_interval_s, self._stop))
        self.started = True
        log.info("hub_started feeds=%d subscriptions=%d filters=%d reflectors=%d",
                 self.crawler.feed_count(), count, self.settings.filters, len(self.reflectors))

    async def _joined(self, timeout: float = 60.0) -> None:
        """Wait until every tier's groups exist on the bus (at once in-process; a network round
        trip or a server being waited for on NATS)."""
        events = [event for tier in (*self.filters, *self.reflectors)
                  for event in (tier.control_joined, tier.stream_joined)]
        try:
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), timeout)
        except TimeoutError:
            raise BusError(f"the tiers did not join the bus within {timeout:.0f} s") from None

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
        replayed = 0
        meta = self.crawler.feed_meta
        while start < newest:
            chunk = self.store.entries_after(start, 500)
            if not chunk:
                break
            for item in chunk:
                source = meta.get(item.feed_id)
                article = (article_of(item, source.url, source.title, source.language)
                           if source is not None else article_of(item, "", ""))
                await self.bus.publish("articles", encode(article))
            replayed += len(chunk)
            start = chunk[-1].id
        if replayed:
            log.warning("hub_replayed entries=%d reason=entries committed but not reflected "
                        "before the last stop", replayed)

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
        await self.bus.close()
        await self.fetcher.close()
        for reflector in self.reflectors:
            await reflector.close_async()
        self._io.close()
        self.store.close()
        self.state.close()

    async def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every tier has acknowledged every message published so far (True), or
        ``timeout`` seconds pass (False). Articles first: a filter acknowledges an article once
        it has published its matches, so the matches are waited for after."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        subjects = ["control", "articles", *(f"matches.{r.number}" for r in self.reflectors)]
        for subject in subjects:
            seq = await self.bus.last_seq(subject)
            if not await self.bus.wait_acked(subject, seq,
                                             timeout=max(0.0, deadline - loop.time())):
                return False
        return True

    async def add_feeds(self, urls: Sequence[str]) -> list[int]:
        """Crawl these feeds (an operator's list, followed by no account); their ids."""
        return await self.crawler.add_feeds(list(urls))

    async def remove_feeds(self, feed_ids: Sequence[int]) -> int:
        """Stop crawling these feeds (unsubscribing from their WebSub hubs); how many were."""
        removed = 0
        for feed_id in feed_ids:
            self.websub.feed_removed(feed_id)
            removed += await self.crawler.remove_feed(feed_id)
        return removed

    # -- HubFacade: WebSub callbacks ------------------------------------------------------

    async def websub_verify(self, callback_id: str, params: dict[str, str]) -> Verdict:
        return await self.websub.verification(callback_id, params)

    async def websub_deliver(self, callback_id: str, signature: str | None, content_type: str,
                             body: bytes) -> Delivery:
        return await self.websub.content(callback_id, signature, content_type, body)

    # -- HubFacade: accounts ----------------------------------------------------------------

    async def create_account(self, name: str) -> tuple[Account, str]:
        return await self._io.call(self.state.create_account, name, self.clock.now())

    async def authenticate(self, token: str) -> Account | None:
        return await self._io.call(self.state.authenticate, token)

    async def rotate_token(self, account_id: int) -> str:
        return await self._io.call(self.state.rotate_token, account_id)

    # -- HubFacade: subscriptions -----------------------------------------------------------
    # Changes go to the tiers as control messages; the answer waits until every tier has
    # acknowledged (applied) them, so what the web layer tells a person is already true.

    def reflector_for(self, account_id: int) -> int:
        return account_id % len(self.reflectors)

    async def _announce(self, message: SubscriptionAdded | SubscriptionRemoved) -> None:
        seq = await self.bus.publish("control", encode(message))
        if not await self.bus.wait_acked("control", seq, timeout=APPLY_TIMEOUT_S):
            log.warning("control_not_applied seq=%d sub=%d timeout_s=%.0f", seq,
                        message.sub_id, APPLY_TIMEOUT_S)

    def _added(self, sub: Subscription) -> SubscriptionAdded:
        return SubscriptionAdded(sub_id=sub.id, query=sub.query, reflector=sub.reflector,
                                 keep=sub.keep, generation=sub.generation)

    async def subscriptions(self, account_id: int) -> list[Subscription]:
        return await self._io.call(self.state.subscriptions, account_id)

    async def subscription(self, sub_id: int) -> Subscription | None:
        return await self._io.call(self.state.subscription, sub_id)

    async def count_subscriptions(self, account_id: int) -> int:
        return await self._io.call(self.state.count_subscriptions, account_id)

    async def add_subscription(self, account_id: int, *, name: str, query: str,
                               keep: int) -> Subscription:
        parsed = parse_query(query)  # raises QueryError with a position and a hint
        sub = await self._io.call(
            lambda: self.state.add_subscription(account_id, name=name, query=parsed.text,
                                                keep=keep, now=self.clock.now(),
                                                reflector=self.reflector_for(account_id)))
        self._owners.set(sub.id, sub.reflector)
        await self._announce(self._added(sub))
        self.metrics.subscriptions.inc()
        await self._start_full(sub, parsed)
        return sub

    async def change_subscription(self, sub: Subscription, *, name: str | None,
                                  query: str | None, keep: int | None,
                                  new_url: bool) -> Subscription:
        if query is not None:
            parse_query(query)
        changed = await self._io.call(
            lambda: self.state.change_subscription(sub.id, now=self.clock.now(), name=name,
                                                   query=query, keep=keep, new_url=new_url))
        if changed is None:  # deleted meanwhile (another request of the same account)
            return sub
        await self._announce(self._added(changed))
        return changed

    async def remove_subscription(self, sub: Subscription) -> None:
        await self._io.call(self.state.delete_subscription, sub.id)
        await self._announce(SubscriptionRemoved(sub_id=sub.id, reflector=sub.reflector))
        self._owners.set(sub.id, -1)
        self.metrics.subscriptions.dec()

    # -- HubFacade: private feeds -----------------------------------------------------------

    def feed_token(self, sub: Subscription) -> str:
        return self.tokens.make(sub.id, sub.generation)

    def read_feed_token(self, token: str) -> tuple[int, int] | None:
        return self.tokens.read(token)

    def _serving(self, sub_id: int, generation: int | None = None) -> Reflector | None:
        owner = self._owners.get(sub_id)
        if owner < 0:
            return None
        reflector = self.reflectors[owner]
        if generation is None:
            return reflector if reflector.subs.is_active(sub_id) else None
        return reflector if reflector.serves(sub_id, generation) else None

    def feed_version(self, sub_id: int, generation: int) -> FeedVersion | None:
        reflector = self._serving(sub_id, generation)
        if reflector is None:
            return None
        return FeedVersion(*reflector.version(sub_id))

    async def feed_items(self, sub_id: int) -> list[ReflectedItem]:
        reflector = self._serving(sub_id)
        return await reflector.items(sub_id) if reflector is not None else []

    # -- HubFacade: source feeds ------------------------------------------------------------

    def _source_view(self, followed: FollowedSource) -> SourceView:
        feed_id = followed.feed_id
        state = self.crawler.fetch_state(feed_id)
        meta = self.crawler.feed_meta.get(feed_id)
        return SourceView(id=feed_id, url=redact_credentials(state.url) if state else "",
                          title=(meta.title if meta else "") or followed.title,
                          added_at=followed.added_at, active=bool(state and state.active),
                          last_outcome=state.last_outcome if state else "",
                          last_error=state.last_error if state else "",
                          category=followed.category, html_url=followed.html_url,
                          next_fetch_at=self.crawler.next_fetch_at(feed_id))

    async def sources(self, account_id: int) -> list[SourceView]:
        followed = await self._io.call(self.state.sources, account_id)
        return [self._source_view(f) for f in followed]

    async def follow_sources(self, account_id: int, outlines: Sequence[OpmlOutline], *,
                             limit: int | None = None) -> list[tuple[int, bool]]:
        if limit is not None:  # checked before anything is added to the crawl
            followed = {f.feed_id for f in await self._io.call(self.state.sources, account_id)}
            adding = sum(1 for o in outlines
                         if self.crawler.known_feed(o.url) not in followed)
            if len(followed) + adding > limit:
                raise FollowLimitError(len(followed), adding, limit)
        ids = await self.crawler.add_feeds([o.url for o in outlines])
        now = self.clock.now()

        def follow() -> list[bool]:
            return [self.state.follow_source(account_id, feed_id, outline.title, now,
                                             category=outline.category,
                                             html_url=outline.html_url)
                    for feed_id, outline in zip(ids, outlines, strict=True)]

        news = await self._io.call(follow)
        for feed_id, new in zip(ids, news, strict=True):
            if new:
                self.crawler.follow(feed_id, +1)
        return list(zip(ids, news, strict=True))

    async def unfollow_source(self, account_id: int, feed_id: int) -> bool:
        if not await self._io.call(self.state.unfollow_source, account_id, feed_id):
            return False
        self.crawler.follow(feed_id, -1)
        return True

    # -- HubFacade: the rest ----------------------------------------------------------------

    async def _recent_tokenized(self, searched: int) -> list[tuple[IngestedEntry, FeedMeta,
                                                                    TokenizedArticle]]:
        """The ``searched`` newest stored entries, tokenized once for every query that asks
        within a few seconds (a person typing a query asks for a preview at each pause)."""
        stamp, size, cached = self._recent
        now = self.clock.now()
        if now - stamp < RECENT_TTL_S and size == searched:
            return cached
        rows = await self._io.call(self.store.recent_entries, searched)
        meta = self.crawler.feed_meta
        recent = []
        for row in rows:
            source = meta.get(row.feed_id, _NO_SOURCE)
            recent.append((row, source, tokenize_article(
                article_from_entry(row.entry, source.url, source.language))))
        self._recent = (now, searched, recent)
        return recent

    async def recent_matches(self, query: Query, searched: int) -> tuple[int, list[RecentMatch]]:
        recent = await self._recent_tokenized(searched)
        return len(recent), [
            RecentMatch(row, source.url, source.title, source.language,
                        tuple(query.matched_terms(tokenized)))
            for row, source, tokenized in recent if query.matches(tokenized)]

    async def _start_full(self, sub: Subscription, query: Query) -> None:
        """Give a new subscription the newest stored entries it matches, through its reflector's
        log like any match (shard ``-sub_id``: logged once, no watermark), and wait until they
        are stored, so that its feed is full when the person first reads it."""
        _, found = await self.recent_matches(query, self.settings.starting_entries)
        chosen = sorted(found, key=lambda m: m.item.id)[-sub.keep:]
        if not chosen:
            return
        subject, seq = f"matches.{sub.reflector}", 0
        ids = encode_ids(np.array([sub.id], dtype=np.int64))
        now = self.clock.now()
        for match in chosen:
            article = article_of(match.item, match.feed_url, match.feed_title,
                                 match.feed_language)
            seq = await self.bus.publish(subject, encode(Matched(
                article=article, sub_ids=ids, shard=-sub.id, matched_at=now)))
        if not await self.bus.wait_acked(subject, seq, timeout=APPLY_TIMEOUT_S):
            log.warning("subscription_start_not_stored sub=%d entries=%d timeout_s=%.0f",
                        sub.id, len(chosen), APPLY_TIMEOUT_S)

    async def stats(self) -> dict[str, object]:
        registry = self.metrics.registry
        figures: dict[str, object] = {}
        for family in registry.collect():
            for sample in family.samples:
                if sample.name.endswith(("_created", "_bucket")):
                    continue
                label = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                figures[f"{sample.name}{{{label}}}" if label else sample.name] = sample.value
        cycle = self.crawler.last_cycle
        return {"feeds": self.crawler.feed_count(),
                "subscriptions": sum(r.subs.count() for r in self.reflectors),
                "entries_stored": await self._io.call(self.store.entry_count),
                "last_crawl": msgspec.to_builtins(cycle) if cycle else None,
                "crawl_cycles": self.crawler.cycles,
                "queues": {k: {"messages": m, "bytes": b}
                           for k, (m, b) in self.bus.depths().items()},
                "metrics": figures}
