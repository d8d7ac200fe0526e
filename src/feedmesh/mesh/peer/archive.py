"""The peer's archive: every entry it sees of the feeds it follows, whoever brought it.

Built from what feedmesh already has, not copied: the ingest store (SQLite, kept whole: see
:func:`feedmesh.compose.open_archive`), the polite :class:`~feedmesh.crawl.Crawler` (conditional
GET, backoff, Retry-After) and the :class:`~feedmesh.crawl.scheduled.ScheduledCrawler` running
one of ``schedule/``'s policies (FeedEx's adaptive interval by default). Entries from elsewhere
(an exchange protocol, an archive pulled from peers) go through :meth:`Archive.keep`, the same
committer as fetches. Every exchange protocol of the peer shares this one archive, and the local
proxy reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from feedmesh.clock import Clock
from feedmesh.crawl import Crawler, CrawlSettings
from feedmesh.crawl.pipeline import FeedOutcome
from feedmesh.crawl.scheduled import ScheduledCrawler
from feedmesh.fetch import Fetcher
from feedmesh.model import Entry, FeedInfo
from feedmesh.schedule import SchedulerSettings
from feedmesh.store import FeedRow, IngestedEntry, IngestStore, StoreThread

__all__ = ["Archive", "OnDocument", "OnFetched", "OnLinks", "OnListed"]

log = logging.getLogger("feedmesh.mesh.peer")

OnFetched = Callable[[str, list[Entry]], None]
"""``(feed URL, entries our own fetch found new)``: what a peer offers its neighbours."""

OnListed = Callable[[str, list[Entry]], None]
"""``(feed URL, every entry of the whole document our own fetch got)``: what the publisher lists
now, against which entries from neighbours are checked."""

OnLinks = Callable[[str, str], None]
"""``(feed URL, the Link: header of the publisher's reply to our fetch)``: a publisher may list
its recent FeedEx clients there."""

OnDocument = Callable[[str, FeedInfo], None]
"""``(feed URL, the feed-level data of the document our own fetch got)``: e.g. its
``<subscribe>`` element."""


class Archive:
    """``await start(urls)``, ``await stop()``. Feeds are known by the URL the person gave."""

    def __init__(self, store: IngestStore, fetcher: Fetcher, clock: Clock,
                 schedule: SchedulerSettings, *, snapshot_path: Path | None = None,
                 on_fetched: OnFetched | None = None,
                 on_document: OnDocument | None = None,
                 on_listed: OnListed | None = None,
                 on_links: OnLinks | None = None) -> None:
        self.store = store
        self.clock = clock
        self.on_fetched = on_fetched
        self.on_document = on_document
        self.on_listed = on_listed
        self.on_links = on_links
        # what a feed's first document holds is its state when followed, not news: marked so
        self.crawler = Crawler(store, fetcher, clock,
                               settings=CrawlSettings(concurrency=16, mark_backlog=True))
        self.scheduled = ScheduledCrawler(self.crawler, store, clock, schedule,
                                          snapshot_path=snapshot_path, concurrency=16,
                                          on_fetched=self._fetched)
        self._db = StoreThread()
        self._url_of: dict[int, str] = {}
        self._id_of: dict[str, int] = {}
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._first: dict[int, asyncio.Event] = {}
        """Feeds followed whose first fetch has not ended yet (:meth:`first_fetch`)."""
        self._live_after_first: dict[int, bool] = {}
        """:meth:`set_pushed` of a feed awaiting its first fetch, applied once it has ended."""
        self.received: dict[str, int] = {}
        """Entries kept per source ("host:port" of a peer), new to the archive when they came."""
        self.own_fetches = 0

    async def start(self, urls: Iterable[str]) -> None:
        await self.crawler.load()
        await self.crawler.add_feeds(urls)
        rows = await self._db.call(self.store.feeds)
        self._remember(rows)
        never = []
        for row in rows:   # never fetched yet: their first fetch is awaited (first_fetches)
            state = self.crawler.states.get(row.id)
            if state is not None and state.active and not state.last_fetched_at:
                self._first.setdefault(row.id, asyncio.Event())
                never.append(row.id)
        self.scheduled.start()
        # a start schedules feeds without history over first_fetch_spread_s (10 min by
        # default): the person's new feeds are rescheduled as just added instead, due at
        # new_feeds_per_s (a few feeds: at once), so a new peer starts full
        for feed_id in never:
            self.scheduled.remove_feed(feed_id)
        self.scheduled.add_feeds(never)
        self._task = asyncio.create_task(self.scheduled.run(self._stop))

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        await self.crawler.aclose()
        self._db.close()

    def _remember(self, rows: Iterable[FeedRow]) -> None:
        for row in rows:
            self._url_of[row.id] = row.source_url
            self._id_of[row.source_url] = row.id

    # -- feeds ---------------------------------------------------------------------------------

    def urls(self) -> list[str]:
        return list(self._id_of)

    def feed_id(self, url: str) -> int | None:
        return self._id_of.get(url)

    def url_of(self, feed_id: int) -> str | None:
        return self._url_of.get(feed_id)

    async def add_feed(self, url: str) -> tuple[int, bool]:
        """Follow ``url`` (fetched soon, then on the policy); (its id, whether it is new)."""
        known = url in self._id_of
        ids = await self.crawler.add_feeds([url])
        rows = await self._db.call(self.store.feeds)
        self._remember(rows)
        if not known and not self.crawler.states[ids[0]].last_fetched_at:
            self._first.setdefault(ids[0], asyncio.Event())
        self.scheduled.add_feeds(ids)
        return ids[0], not known

    async def first_fetches(self, timeout_s: float) -> int:
        """Wait (at most ``timeout_s`` in all) until every feed never fetched before has had its
        first fetch (the scheduler's, spread at ``new_feeds_per_s``); how many still have not."""
        waiting = [event.wait() for event in self._first.values()]
        if waiting:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*waiting), timeout_s)
        return len(self._first)

    async def first_fetch(self, feed_id: int, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``) until the first fetch of a feed just followed has ended
        and its entries are in the archive; whether it has (True at once for any other feed).
        The fetch is the scheduler's own, urgent one: waiting makes no extra request."""
        event = self._first.get(feed_id)
        if event is None:
            return True
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def set_pushed(self, url: str, pushed: bool) -> None:
        """``url``'s new entries arrive pushed (a multicast group the peer is attached to) or no
        longer do: while pushed, the scheduler polls it only as a safety net (the WebSub "live"
        hint, ``websub_safety_interval_s``)."""
        feed_id = self._id_of.get(url)
        if feed_id is None:
            return
        if feed_id in self._first:
            # not before its first fetch: pushed entries are news only, the feed's current
            # items come from that one fetch (a new follow starts full)
            self._live_after_first[feed_id] = pushed
            return
        self.scheduled.set_live(feed_id, pushed)

    async def feeds(self) -> list[FeedRow]:
        return await self._db.call(self.store.feeds)

    # -- entries -------------------------------------------------------------------------------

    def _fetched(self, feed_id: str, outcome: FeedOutcome) -> None:
        self.own_fetches += 1
        first = self._first.pop(int(feed_id), None)
        if first is not None:
            first.set()
            live = self._live_after_first.pop(int(feed_id), None)
            if live is not None:
                self.scheduled.set_live(int(feed_id), live)
        url = self._url_of.get(int(feed_id))
        new = [item.entry for item in outcome.ingested if not item.updated]
        if url is not None and new and self.on_fetched is not None:
            self.on_fetched(url, new)
        if url is not None and outcome.result.links and self.on_links is not None:
            self.on_links(url, outcome.result.links)
        if url is not None and outcome.listed is not None and self.on_listed is not None:
            self.on_listed(url, list(outcome.listed))
        if url is not None and outcome.info is not None and self.on_document is not None:
            self.on_document(url, outcome.info)

    async def keep(self, url: str, entries: Sequence[Entry], source: str) -> int:
        """Store ``entries`` of feed ``url`` that ``source`` brought; returns how many were new."""
        feed_id = self._id_of.get(url)
        if feed_id is None or feed_id not in self.crawler.states or not entries:
            return 0
        ingested = await self.crawler.ingest(feed_id, entries, self.clock.now())
        # the committer answers every update of a feed in one batch with the batch's entries
        # of that feed: count only ours
        ours = {entry.key for entry in entries}
        new = sum(1 for item in ingested if not item.updated and item.entry.key in ours)
        self.received[source] = self.received.get(source, 0) + new
        return new

    async def entries(self, feed_id: int, limit: int = 100) -> list[IngestedEntry]:
        """The feed's entries, newest first (by publish time, else when first seen)."""
        rows = await self._db.call(self.store.entries, feed_id, limit)
        return sorted(rows, key=_newest_first)

    async def recent(self, limit: int = 200) -> list[IngestedEntry]:
        rows = await self._db.call(self.store.recent_entries, limit)
        return sorted(rows, key=_newest_first)

    async def info(self, feed_id: int) -> FeedInfo | None:
        row = await self._db.call(self.store.feed, feed_id)
        return row.info if row is not None else None

    async def info_of(self, url: str) -> FeedInfo | None:
        """The feed-level data of ``url``'s last fetched document (None: not fetched yet)."""
        feed_id = self._id_of.get(url)
        return None if feed_id is None else await self.info(feed_id)

    async def between(self, url: str, since: float | None, until: float | None,
                      limit: int) -> list[Entry]:
        """Entries of ``url`` published in [since, until] (undated ones only when no range is
        given), newest first, at most ``limit``."""
        feed_id = self._id_of.get(url)
        if feed_id is None:
            return []
        rows = await self._db.call(self.store.entries, feed_id, 1_000_000)
        lo = float("-inf") if since is None else since
        hi = float("inf") if until is None else until
        chosen = []
        for row in sorted(rows, key=_newest_first):
            published = row.entry.published
            if published is None:
                if since is None and until is None:
                    chosen.append(row.entry)
            elif lo <= published.timestamp() <= hi:
                chosen.append(row.entry)
            if len(chosen) >= limit:
                break
        return chosen

    async def count(self, url: str) -> int:
        feed_id = self._id_of.get(url)
        if feed_id is None:
            return 0
        return len(await self._db.call(self.store.entries, feed_id, 1_000_000))


def _newest_first(row: IngestedEntry) -> tuple[float, int]:
    published = row.entry.published
    return (-(published.timestamp() if published else row.first_seen_at), -row.id)
