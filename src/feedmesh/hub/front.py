"""What the hub offers people (:class:`~.facade.HubFacade`), whichever process serves them.

:class:`HubFront` implements the facade over the hub's state (accounts, subscriptions), the ingest
store (recent entries), the bus (subscription changes to the tiers) and two seams that differ by
deployment:

* :class:`FeedHolders`: where private feeds are held. :class:`LocalHolders`, the reflectors of
  this process; :class:`RemoteHolders`, ``feedmesh reflector`` processes asked over their API.
* :class:`SourceDesk`: the crawler, as a person's source feeds need it. In the embedded hub the
  crawler tier itself (:class:`LocalSources`, in :mod:`.app`); in a web process of its own
  (``feedmesh web``) :class:`RemoteSources`: feeds are added to the shared ingest store and the
  crawler is told on the ``feeds`` subject (:class:`FeedsAdded`, :class:`FollowsChanged`), the
  answer waiting until it applied them.

The embedded :class:`~.app.Hub` is a ``HubFront`` with the tiers' lifecycle added; a web process
(``feedmesh web``) runs a plain ``HubFront`` with the remote seams.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from feedmesh.bus import Bus
from feedmesh.clock import Clock
from feedmesh.feeds.opml import OpmlOutline
from feedmesh.fetch.redact import redact_credentials
from feedmesh.hub.facade import (
    FeedUnavailable,
    FeedVersion,
    FollowLimitError,
    PushRefusedError,
    RecentMatch,
    SourceView,
)
from feedmesh.hub.idcodec import encode_ids
from feedmesh.hub.messages import (
    FeedMeta,
    FeedsAdded,
    FollowsChanged,
    Matched,
    SubscriptionAdded,
    SubscriptionRemoved,
    article_of,
    encode,
)
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector_service import ReflectorClient
from feedmesh.hub.tokens import FeedTokens
from feedmesh.match import (
    Query,
    TokenizedArticle,
    article_from_entry,
    parse_query,
    tokenize_article,
)
from feedmesh.store import (
    Account,
    FollowedSource,
    HubState,
    IngestedEntry,
    IngestStore,
    PushAttempt,
    PushTarget,
    ReflectedItem,
    StoreThread,
    Subscription,
)
from feedmesh.websub.hub_requests import HubRequest, LeaseBounds
from feedmesh.websub.lease import Verdict
from feedmesh.websub.subscriber import Delivery

if TYPE_CHECKING:
    from feedmesh.hub.push import PushService

__all__ = ["APPLY_TIMEOUT_S", "FeedHolders", "HubFront", "Owners", "RemoteHolders",
           "RemoteSources", "SourceDesk", "VersionBatches"]

log = logging.getLogger("feedmesh.hub")

APPLY_TIMEOUT_S = 5.0
"""How long a person's change waits for every tier to apply it before the answer goes anyway."""
RECENT_TTL_S = 5.0
"""How long the newest stored entries, tokenized, serve previews before they are read again."""
_NO_SOURCE = FeedMeta("")


class Owners:
    """Which reflector serves each subscription (-1: none), two bytes per subscription id, so a
    feed request finds its reflector without a lookup in storage."""

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


class FeedHolders(Protocol):
    owners: Owners

    async def version(self, sub_id: int, generation: int) -> FeedVersion | None: ...
    async def items(self, sub_id: int) -> list[ReflectedItem]: ...
    async def held(self) -> int:
        """Subscriptions the reflectors hold, as far as this process can tell."""
        ...

    def forget(self, sub_id: int) -> None:
        """The subscription changed: what is known of its feed is not current."""
        ...


class SourceDesk(Protocol):
    async def count_new(self, urls: Sequence[str], followed: set[int]) -> int:
        """How many of ``urls`` are not among the ``followed`` feed ids."""
        ...

    async def add(self, urls: Sequence[str]) -> list[int]:
        """Crawl these feeds (known ones keep their ids); their ids, in order."""
        ...

    async def follow(self, changes: dict[int, int]) -> None:
        """Feeds gained (+n) or lost (-n) followers."""
        ...

    async def views(self, followed: Sequence[FollowedSource]) -> list[SourceView]: ...
    async def metas(self, feed_ids: set[int]) -> dict[int, FeedMeta]: ...
    async def figures(self) -> dict[str, object]:
        """``feeds``, ``last_crawl``, ``crawl_cycles``, ``hosts_paused`` (host -> end of its
        pause) as far as this process knows them."""
        ...


VERSION_TTL_S = 1.0
"""How long a web process reuses a feed's version from its reflector. A reader may be told 304
for up to this long after the feed changed (its Cache-Control allows 60 s); in return a poll
that finds nothing new costs no round trip to the reflector."""
VERSIONS_KEPT = 200_000


class VersionBatches:
    """The versions one reflector is asked for, sent together: a lookup that finds no request
    in flight goes at once; those that arrive while one is in flight wait for it to end and
    go as the next request, all of them (DataLoader's batching). Under load, the feeds polled
    in the same few milliseconds cost one round trip instead of one each; alone, a lookup
    waits for nothing. Lookups of the same feed share one answer."""

    def __init__(self, client: ReflectorClient) -> None:
        self.client = client
        self._waiting: dict[tuple[int, int], asyncio.Future[FeedVersion | None]] = {}
        self._sending = False
        self._sender: asyncio.Task[None] | None = None  # held: the loop keeps weak references
        self.requests = 0
        """Round trips made, for the tests and the figures."""

    async def get(self, sub_id: int, generation: int) -> FeedVersion | None:
        key = (sub_id, generation)
        future = self._waiting.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            # An answer nobody waits for any more (its reader left) is still retrieved.
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._waiting[key] = future
            if not self._sending:
                self._sending = True
                self._sender = asyncio.get_running_loop().create_task(self._send())
        # One reader leaving must not cancel the answer others wait for.
        return await asyncio.shield(future)

    async def _send(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                self.requests += 1
                try:
                    found = await self.client.feed_versions(list(batch))
                except Exception as exc:  # noqa: BLE001 - every waiter gets it, as one lookup would
                    for future in batch.values():
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for future, version in zip(batch.values(), found, strict=True):
                    if not future.done():
                        future.set_result(version)
        finally:
            self._sending = False


class RemoteHolders:
    """Reflectors in processes of their own (``feedmesh reflector``), asked over their API. The
    owner of a subscription this process has not heard of is read from the hub's state once;
    a feed's version is reused for ``VERSION_TTL_S``, and the versions asked of a reflector at
    the same time go in one request (:class:`VersionBatches`)."""

    def __init__(self, clients: Sequence[ReflectorClient], state: HubState,
                 io: StoreThread) -> None:
        self.clients = list(clients)
        self.owners = Owners()
        self._state = state
        self._io = io
        self._versions: dict[tuple[int, int], tuple[float, FeedVersion | None]] = {}
        self.batches = [VersionBatches(client) for client in self.clients]

    async def _owner(self, sub_id: int) -> int:
        owner = self.owners.get(sub_id)
        if owner < 0:
            sub = await self._io.call(self._state.subscription, sub_id)
            if sub is None or not 0 <= sub.reflector < len(self.clients):
                return -1
            owner = sub.reflector
            self.owners.set(sub_id, owner)
        return owner

    async def version(self, sub_id: int, generation: int) -> FeedVersion | None:
        now = time.monotonic()
        cached = self._versions.get((sub_id, generation))
        if cached is not None and cached[0] > now:
            return cached[1]
        owner = await self._owner(sub_id)
        found = await self.batches[owner].get(sub_id, generation) if owner >= 0 else None
        now = time.monotonic()  # the answer is as fresh as its arrival
        if len(self._versions) >= VERSIONS_KEPT:
            self._versions.clear()  # the next second fills it again with what is polled
        self._versions[(sub_id, generation)] = (now + VERSION_TTL_S, found)
        return found

    def forget(self, sub_id: int) -> None:
        """A subscription changed here: ask its reflector afresh."""
        for key in [k for k in self._versions if k[0] == sub_id]:
            del self._versions[key]

    async def items(self, sub_id: int) -> list[ReflectedItem]:
        owner = await self._owner(sub_id)
        return await self.clients[owner].items(sub_id) if owner >= 0 else []

    async def held(self) -> int:
        count = 0
        for client in self.clients:
            try:
                status = await client.status()
            except FeedUnavailable:  # a reflector that is down holds nothing we can serve
                status = None
            count += status.subscriptions if status is not None else 0
        return count

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


class RemoteSources:
    """The crawler in another process: feeds are added to the shared ingest store here (so their
    ids are known at once) and the crawler is told on ``feeds``; what a web process knows of a
    feed's fetching is what the crawler last stored."""

    def __init__(self, store: IngestStore, bus: Bus, clock: Clock, io: StoreThread) -> None:
        self.store = store
        self.bus = bus
        self.clock = clock
        self._io = io
        self._meta: dict[int, FeedMeta] = {}

    async def _tell(self, message: FeedsAdded | FollowsChanged) -> None:
        seq = await self.bus.publish("feeds", encode(message))
        if not await self.bus.wait_acked("feeds", seq, timeout=APPLY_TIMEOUT_S):
            log.warning("feeds_change_not_applied seq=%d timeout_s=%.0f reason=the crawler has "
                        "not acknowledged it (not running?); it will when it starts", seq,
                        APPLY_TIMEOUT_S)

    async def count_new(self, urls: Sequence[str], followed: set[int]) -> int:
        def followed_urls() -> set[str]:
            rows = (self.store.feed(feed_id) for feed_id in followed)
            return {row.source_url for row in rows if row is not None}

        known = await self._io.call(followed_urls)
        return len({u.strip() for u in urls if u.strip()} - known)

    async def add(self, urls: Sequence[str]) -> list[int]:
        rows = await self._io.call(self.store.add_feeds, list(urls), self.clock.now())
        await self._tell(FeedsAdded(urls=tuple(urls)))
        return [row.id for row in rows]

    async def follow(self, changes: dict[int, int]) -> None:
        if changes:
            await self._tell(FollowsChanged(changes=changes))

    async def views(self, followed: Sequence[FollowedSource]) -> list[SourceView]:
        rows = await self._io.call(lambda: [self.store.feed(f.feed_id) for f in followed])
        views = []
        for f, row in zip(followed, rows, strict=True):
            state = row.state if row is not None else None
            views.append(SourceView(
                id=f.feed_id, url=redact_credentials(state.url) if state else "",
                title=(row.title if row else "") or f.title, added_at=f.added_at,
                active=bool(state and state.active),
                last_outcome=state.last_outcome if state else "",
                last_error=state.last_error if state else "", category=f.category,
                html_url=f.html_url, next_fetch_at=None))  # the crawler's plan is not shared
        return views

    async def metas(self, feed_ids: set[int]) -> dict[int, FeedMeta]:
        missing = [fid for fid in feed_ids if fid not in self._meta]
        if missing:
            rows = await self._io.call(lambda: [self.store.feed(fid) for fid in missing])
            for fid, row in zip(missing, rows, strict=True):
                if row is not None:
                    self._meta[fid] = FeedMeta(row.state.url, row.title,
                                               row.info.language if row.info else "")
        return {fid: self._meta[fid] for fid in feed_ids if fid in self._meta}

    async def figures(self) -> dict[str, object]:
        return {"feeds": None, "last_crawl": None, "crawl_cycles": None, "hosts_paused": None}


class HubFront:
    """The facade over the hub's state, store and bus, with its two seams (see the module)."""

    def __init__(self, *, state: HubState, store: IngestStore, bus: Bus, clock: Clock,
                 metrics: HubMetrics, tokens: FeedTokens, holders: FeedHolders,
                 sources: SourceDesk, reflectors: int, starting_entries: int,
                 io: StoreThread) -> None:
        self.state = state
        self.store = store
        self.bus = bus
        self.clock = clock
        self.metrics = metrics
        self.tokens = tokens
        self.holders = holders
        self.desk = sources
        self.reflector_count = reflectors
        self.starting_entries = starting_entries
        self._io = io  # the web layer's reads and writes, off the event loop
        self._recent: tuple[float, int, list] = (-float("inf"), 0, [])
        self.push: PushService | None = None
        """WebSub subscribers and webhooks (:mod:`.push`): delivering where the reflectors run
        (the embedded hub), taking requests and saving targets in a web process of its own."""
        self.lease_bounds = LeaseBounds()

    # -- accounts ---------------------------------------------------------------------------

    async def create_account(self, name: str) -> tuple[Account, str]:
        return await self._io.call(self.state.create_account, name, self.clock.now())

    async def authenticate(self, token: str) -> Account | None:
        return await self._io.call(self.state.authenticate, token)

    async def rotate_token(self, account_id: int) -> str:
        return await self._io.call(self.state.rotate_token, account_id)

    # -- subscriptions ----------------------------------------------------------------------
    # Changes go to the tiers as control messages; the answer waits until every tier has
    # acknowledged (applied) them, so what the web layer tells a person is already true.

    def reflector_for(self, account_id: int) -> int:
        return account_id % self.reflector_count

    async def _announce(self, message: SubscriptionAdded | SubscriptionRemoved) -> None:
        seq = await self.bus.publish("control", encode(message))
        if not await self.bus.wait_acked("control", seq, timeout=APPLY_TIMEOUT_S):
            log.warning("control_not_applied seq=%d sub=%d timeout_s=%.0f", seq,
                        message.sub_id, APPLY_TIMEOUT_S)

    @staticmethod
    def _added(sub: Subscription) -> SubscriptionAdded:
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
        self.holders.owners.set(sub.id, sub.reflector)
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
        self.holders.forget(sub.id)
        if self.push is not None:
            await self.push.subscription_changed(sub.id, new_url)
        return changed

    async def remove_subscription(self, sub: Subscription) -> None:
        await self._io.call(self.state.delete_subscription, sub.id)
        await self._announce(SubscriptionRemoved(sub_id=sub.id, reflector=sub.reflector))
        if self.push is not None:
            self.push.subscription_removed(sub.id)
        self.holders.owners.set(sub.id, -1)
        self.holders.forget(sub.id)
        self.metrics.subscriptions.dec()

    # -- WebSub callbacks: publishers' hubs pushing to the crawler ---------------------------

    async def websub_verify(self, callback_id: str, params: dict[str, str]) -> Verdict:
        raise PushRefusedError(503, "push_unavailable", "publishers' WebSub hubs are answered "
                               "by the crawling hub: point its --public-url at that process")

    async def websub_deliver(self, callback_id: str, signature: str | None, content_type: str,
                             body: bytes) -> Delivery:
        raise PushRefusedError(503, "push_unavailable", "publishers' WebSub hubs are answered "
                               "by the crawling hub: point its --public-url at that process")

    # -- push: WebSub subscribers of private feeds, webhooks ---------------------------------

    def _pushing(self) -> PushService:
        if self.push is None:
            raise PushRefusedError(503, "push_unavailable", "WebSub and webhooks are served "
                                   "by the process that runs the reflectors (feedmesh serve), "
                                   "not by this one yet", retry_after_s=60)
        return self.push

    def websub_request(self, request: HubRequest, sub_id: int, fmt: str) -> None:
        self._pushing().request(request, sub_id, fmt)

    def push_targets(self, sub_id: int) -> list[PushTarget]:
        return self.push.of_subscription(sub_id) if self.push is not None else []

    async def add_webhook(self, sub_id: int, url: str) -> PushTarget:
        return await self._pushing().add_webhook(sub_id, url)

    async def remove_push_target(self, target: PushTarget) -> None:
        await self._pushing().remove(target)

    async def push_attempts(self, target_id: int) -> list[PushAttempt]:
        return await self._pushing().attempts(target_id)

    def test_webhook(self, target: PushTarget) -> None:
        self._pushing().test(target)

    # -- private feeds ----------------------------------------------------------------------

    def feed_token(self, sub: Subscription) -> str:
        return self.feed_token_of(sub.id, sub.generation)

    def feed_token_of(self, sub_id: int, generation: int) -> str:
        return self.tokens.make(sub_id, generation)

    def read_feed_token(self, token: str) -> tuple[int, int] | None:
        return self.tokens.read(token)

    async def feed_version(self, sub_id: int, generation: int) -> FeedVersion | None:
        return await self.holders.version(sub_id, generation)

    async def feed_items(self, sub_id: int) -> list[ReflectedItem]:
        return await self.holders.items(sub_id)

    # -- source feeds -----------------------------------------------------------------------

    async def sources(self, account_id: int) -> list[SourceView]:
        followed = await self._io.call(self.state.sources, account_id)
        return await self.desk.views(followed)

    async def follow_sources(self, account_id: int, outlines: Sequence[OpmlOutline], *,
                             limit: int | None = None) -> list[tuple[int, bool]]:
        if limit is not None:  # checked before anything is added to the crawl
            followed = {f.feed_id for f in await self._io.call(self.state.sources, account_id)}
            adding = await self.desk.count_new([o.url for o in outlines], followed)
            if len(followed) + adding > limit:
                raise FollowLimitError(len(followed), adding, limit)
        ids = await self.desk.add([o.url for o in outlines])
        now = self.clock.now()

        def follow() -> list[bool]:
            return [self.state.follow_source(account_id, feed_id, outline.title, now,
                                             category=outline.category,
                                             html_url=outline.html_url)
                    for feed_id, outline in zip(ids, outlines, strict=True)]

        news = await self._io.call(follow)
        changes: dict[int, int] = {}
        for feed_id, new in zip(ids, news, strict=True):
            if new:
                changes[feed_id] = changes.get(feed_id, 0) + 1
        await self.desk.follow(changes)
        return list(zip(ids, news, strict=True))

    async def unfollow_source(self, account_id: int, feed_id: int) -> bool:
        if not await self._io.call(self.state.unfollow_source, account_id, feed_id):
            return False
        await self.desk.follow({feed_id: -1})
        return True

    # -- previews ---------------------------------------------------------------------------

    async def _recent_tokenized(self, searched: int) -> list[tuple[IngestedEntry, FeedMeta,
                                                                    TokenizedArticle]]:
        """The ``searched`` newest stored entries, tokenized once for every query that asks
        within a few seconds (a person typing a query asks for a preview at each pause)."""
        stamp, size, cached = self._recent
        now = self.clock.now()
        if now - stamp < RECENT_TTL_S and size == searched:
            return cached
        rows = await self._io.call(self.store.recent_entries, searched)
        meta = await self.desk.metas({row.feed_id for row in rows})
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
        _, found = await self.recent_matches(query, self.starting_entries)
        chosen = sorted(found, key=lambda m: m.item.id)[-sub.keep:]
        if not chosen:
            return
        subject, seq = f"matches.{sub.reflector}", 0
        ids = encode_ids(np.array([sub.id], dtype=np.int64))
        now = self.clock.now()
        for match in chosen:
            article = article_of(match.item, match.feed_url, match.feed_title,
                                 match.feed_language, tokenized=False)
            seq = await self.bus.publish(subject, encode(Matched(
                article=article, sub_ids=ids, shard=-sub.id, matched_at=now)))
        if not await self.bus.wait_acked(subject, seq, timeout=APPLY_TIMEOUT_S):
            log.warning("subscription_start_not_stored sub=%d entries=%d timeout_s=%.0f",
                        sub.id, len(chosen), APPLY_TIMEOUT_S)

    # -- figures ----------------------------------------------------------------------------

    async def stats(self) -> dict[str, object]:
        figures: dict[str, object] = {}
        for family in self.metrics.registry.collect():
            for sample in family.samples:
                if sample.name.endswith(("_created", "_bucket")):
                    continue
                label = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                figures[f"{sample.name}{{{label}}}" if label else sample.name] = sample.value
        crawl = await self.desk.figures()
        return {"feeds": crawl["feeds"],
                "subscriptions": await self.holders.held(),
                "entries_stored": await self._io.call(self.store.entry_count),
                "last_crawl": crawl["last_crawl"],
                "crawl_cycles": crawl["crawl_cycles"],
                "hosts_paused": crawl["hosts_paused"],
                "queues": {k: {"messages": m, "bytes": b}
                           for k, (m, b) in self.bus.depths().items()},
                "metrics": figures}

    async def aclose(self) -> None:
        """Close what a web process's facade holds (the hub's :meth:`~.app.Hub.stop` closes
        its own)."""
        if self.push is not None:
            await self.push.close()
        await self.bus.close()
        close = getattr(self.holders, "close", None)
        if close is not None:
            await close()
        self._io.close()
        self.store.close()
        self.state.close()
