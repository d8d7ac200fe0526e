"""The crawler, as a person's source feeds need it (:class:`SourceDesk`): :class:`LocalSources`,
the crawler tier of this process (the embedded hub), and :class:`RemoteSources`, the crawler in
another process (a web process of its own): feeds are added to the shared ingest store and the
crawler is told on the ``feeds`` subject (:class:`FeedsAdded`, :class:`FollowsChanged`), the
answer waiting until it applied them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from feedmesh.bus import Bus
from feedmesh.clock import Clock
from feedmesh.fetch import FeedFetchState
from feedmesh.fetch.redact import redact_credentials
from feedmesh.hub.front.facade import SourceView
from feedmesh.hub.messages import FeedMeta, FeedsAdded, FollowsChanged, encode
from feedmesh.store import FollowedSource, IngestStore, StoreThread

__all__ = ["APPLY_TIMEOUT_S", "LocalCrawler", "LocalSources", "RemoteSources", "SourceDesk"]

log = logging.getLogger("feedmesh.hub")

APPLY_TIMEOUT_S = 5.0
"""How long a person's change waits for every tier to apply it before the answer goes anyway."""


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
        """``feeds``, ``crawl_mode``, ``last_crawl``, ``crawl_running`` (the cycle under way
        so far), ``crawl_cycles``, ``hosts_paused`` (host -> end of its pause) as far as this
        process knows them."""
        ...


class LocalCrawler(Protocol):
    """The crawler tier of this process, as :class:`LocalSources` reads it."""

    feed_meta: Mapping[int, FeedMeta]

    def known_feed(self, url: str) -> int | None: ...
    async def add_feeds(self, urls: list[str]) -> list[int]: ...
    def fetch_state(self, feed_id: int) -> FeedFetchState | None: ...
    def next_fetch_at(self, feed_id: int) -> float | None: ...

    def figures(self) -> dict[str, object]:
        """What :meth:`SourceDesk.figures` answers."""
        ...


class LocalSources:
    """The crawler tier of this process; ``follows`` applies followers gained or lost (the
    crawler's side of it: a feed no account follows any more leaves the crawl)."""

    def __init__(self, crawler: LocalCrawler,
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
                html_url=f.html_url, next_fetch_at=self.crawler.next_fetch_at(f.feed_id),
                last_fetched_at=state.last_fetched_at if state else 0.0,
                errors=state.errors if state else 0))
        return views

    async def metas(self, feed_ids: set[int]) -> dict[int, FeedMeta]:
        meta = self.crawler.feed_meta
        return {fid: meta[fid] for fid in feed_ids if fid in meta}

    async def figures(self) -> dict[str, object]:
        return self.crawler.figures()


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
                html_url=f.html_url, next_fetch_at=None,  # the crawler's plan is not shared
                last_fetched_at=state.last_fetched_at if state else 0.0,
                errors=state.errors if state else 0))
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
        return {"feeds": None, "crawl_mode": None, "last_crawl": None, "crawl_running": None,
                "crawl_cycles": None, "hosts_paused": None}


