"""What the hub offers people (:class:`~.facade.HubFacade`), whichever process serves them.

:class:`HubFront` implements the facade over the hub's state (accounts, subscriptions), the ingest
store (recent entries), the bus (subscription changes to the tiers) and the seams that differ by
deployment, each handed to it at construction:

* ``holders`` (:mod:`.holders`): where private feeds are held: the reflectors of this process, or
  ``feedmesh reflector`` processes asked over their API;
* ``sources`` (:mod:`.sources`): the crawler, as a person's source feeds need it: the crawler
  tier of this process, or the crawler of another told on the ``feeds`` subject;
* ``push`` (:class:`PushDesk`): WebSub subscribers of private feeds and webhooks
  (:mod:`feedmesh.hub.push`): delivering where the reflectors run, only taking requests in a web
  process of its own; None: refused with 503;
* ``callbacks`` (:class:`WebSubCallbacks`): publishers' WebSub hubs calling back, answered by
  the crawling hub's subscriber; None (a web process of its own): refused with 503.

:mod:`feedmesh.compose` builds it: the embedded hub with the local seams, ``feedmesh web`` with the
remote ones.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from feedmesh.bus import Bus
from feedmesh.clock import Clock
from feedmesh.feeds.opml import OpmlOutline
from feedmesh.hub.errors import FollowLimitError, PushRefusedError
from feedmesh.hub.front.archive import (
    ARCHIVE_WINDOW_IDS,
    ArchivePage,
    key_data,
    next_boundary,
    read_key,
)
from feedmesh.hub.front.facade import RecentMatch, SourceView
from feedmesh.hub.front.feed_document import archive_key
from feedmesh.hub.front.holders import FeedHolders
from feedmesh.hub.front.sources import APPLY_TIMEOUT_S, SourceDesk
from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.hub.idcodec import encode_ids
from feedmesh.hub.messages import (
    FeedMeta,
    Matched,
    SubscriptionAdded,
    SubscriptionRemoved,
    article_of,
    encode,
)
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector_api import FeedVersion
from feedmesh.match import (
    Query,
    TokenizedArticle,
    article_from_entry,
    parse_query,
    tokenize_article,
)
from feedmesh.store import (
    Account,
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

__all__ = ["HubFront", "PushDesk", "WebSubCallbacks"]

log = logging.getLogger("feedmesh.hub")

RECENT_TTL_S = 5.0
"""How long the newest stored entries, tokenized, serve previews before they are read again."""
_NO_SOURCE = FeedMeta("")


class PushDesk(Protocol):
    """What the front asks of push (:class:`feedmesh.hub.push.PushService`)."""

    def request(self, request: HubRequest, sub_id: int, fmt: str) -> object: ...
    def of_subscription(self, sub_id: int) -> list[PushTarget]: ...
    async def add_webhook(self, sub_id: int, url: str) -> PushTarget: ...
    async def remove(self, target: PushTarget) -> None: ...
    async def set_signature(self, target: PushTarget, method: object) -> PushTarget: ...
    async def attempts(self, target_id: int, limit: int = 20) -> list[PushAttempt]: ...
    def test(self, target: PushTarget) -> None: ...
    async def subscription_changed(self, sub_id: int, new_url: bool) -> None: ...
    def subscription_removed(self, sub_id: int) -> None: ...


class WebSubCallbacks(Protocol):
    """Publishers' WebSub hubs calling back (the crawling hub's subscriber)."""

    async def verification(self, callback_id: str, params: Mapping[str, str]) -> Verdict: ...

    async def content(self, callback_id: str, signature: str | None, content_type: str,
                      body: bytes) -> Delivery: ...


class HubFront:
    """The facade over the hub's state, store and bus, with its two seams (see the module)."""

    def __init__(self, *, state: HubState, store: IngestStore, bus: Bus, clock: Clock,
                 metrics: HubMetrics, tokens: FeedTokens, holders: FeedHolders,
                 sources: SourceDesk, reflectors: int, starting_entries: int,
                 io: StoreThread, push: PushDesk | None = None,
                 callbacks: WebSubCallbacks | None = None,
                 lease_bounds: LeaseBounds | None = None) -> None:
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
        self.push = push
        self.callbacks = callbacks
        self.lease_bounds = lease_bounds or LeaseBounds()

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
        return await self._callbacks().verification(callback_id, params)

    async def websub_deliver(self, callback_id: str, signature: str | None, content_type: str,
                             body: bytes) -> Delivery:
        return await self._callbacks().content(callback_id, signature, content_type, body)

    def _callbacks(self) -> WebSubCallbacks:
        if self.callbacks is None:
            raise PushRefusedError(503, "push_unavailable", "publishers' WebSub hubs are "
                                   "answered by the crawling hub: point its --public-url at "
                                   "that process")
        return self.callbacks

    # -- push: WebSub subscribers of private feeds, webhooks ---------------------------------

    def _pushing(self) -> PushDesk:
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

    async def set_push_signature(self, target: PushTarget, method: object) -> PushTarget:
        return await self._pushing().set_signature(target, method)

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

    # -- archives: older matches, from the store (see :mod:`.archive`) -------------------------

    def archive_key(self, sub: Subscription, before: int) -> str:
        return archive_key(self.tokens.sign, sub, before)

    def archive_sign(self, data: bytes) -> str:
        return self.tokens.sign(data)

    def read_archive_key(self, sub: Subscription, key: str) -> int | None:
        found = read_key(key)
        if found is None:
            return None
        before, tag = found
        data = key_data(sub.id, sub.generation, sub.query, before)
        return before if self.tokens.verify(data, tag) else None

    async def archive_reach(self) -> float | None:
        lowest = await self._io.call(self.store.entries_after, 0, 1)
        return lowest[0].first_seen_at if lowest else None

    async def feed_archive(self, sub: Subscription, before: int, *, page_entries: int,
                           scan_ids: int) -> ArchivePage:
        query = parse_query(sub.query)
        lowest_rows = await self._io.call(self.store.entries_after, 0, 1)
        lowest = lowest_rows[0].id if lowest_rows else before
        found: list[ReflectedItem] = []
        high, scanned = before, 0
        while high > lowest and scanned < scan_ids and len(found) < page_entries:
            low = max(lowest, high - min(ARCHIVE_WINDOW_IDS, scan_ids - scanned))
            rows = [row for row in await self._io.call(self.store.entries_after, low - 1,
                                                       high - low) if row.id < high]
            scanned += high - low
            high = low
            meta = await self.desk.metas({row.feed_id for row in rows})
            # Tokenizing is CPU: off the event loop, and off the store's thread (other reads).
            matched = await asyncio.to_thread(_archived_matches, query, rows, meta)
            found.extend(matched[:page_entries - len(found)])
        self.metrics.archive_entries_scanned.inc(scanned)
        return ArchivePage(before, found, next_boundary(found, page_entries, high, lowest),
                           scanned)

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
                "crawl_mode": crawl.get("crawl_mode"),
                "last_crawl": crawl["last_crawl"],
                "crawl_running": crawl.get("crawl_running"),
                "crawl_cycles": crawl["crawl_cycles"],
                "hosts_paused": crawl["hosts_paused"],
                "queues": {k: {"messages": m, "bytes": b}
                           for k, (m, b) in self.bus.depths().items()},
                "metrics": figures}

    async def aclose(self) -> None:
        """Close what the front holds of its own (its role closes the stores and the bus)."""
        await self.holders.close()
        self._io.close()


def _archived_matches(query: Query, rows: Sequence[IngestedEntry],
                      meta: Mapping[int, FeedMeta]) -> list[ReflectedItem]:
    """The rows ``query`` matches, newest first, as a feed shows them."""
    out = []
    for row in sorted(rows, key=lambda r: r.id, reverse=True):
        source = meta.get(row.feed_id, _NO_SOURCE)
        if query.matches(tokenize_article(article_from_entry(row.entry, source.url,
                                                             source.language))):
            out.append(ReflectedItem(entry_id=row.id, feed_id=row.feed_id, feed_url=source.url,
                                     feed_title=source.title, first_seen_at=row.first_seen_at,
                                     stored_at=row.first_seen_at, entry=row.entry))
    return out
