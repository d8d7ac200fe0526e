"""The ingestion pipeline: fetch -> parse -> dedup -> store, for many feeds at once.

Steps 2-4 of the data flow (docs/architecture.md). For each feed that is due:

1. a conditional GET through the polite :class:`~feedmesh.fetch.Fetcher` (a 304 ends the trip);
2. the whole-document hash drops a body identical to the last one we parsed;
3. the parser turns a changed body into entries (never raising);
4. a :class:`~feedmesh.store.FeedUpdate` intent carries the new fetch state and the entries to
   the store, which keeps only new and updated entries, in batches committed atomically;
5. after each commit, the ingested entries are handed to :meth:`CrawlEvents.ingested` (the hub's
   crawler tier publishes them to the filters)
   while the next batch commits, in the order they were stored, one batch at a time. A slow
   consumer makes the batch queue fill up and the fetch workers wait: backpressure.

A commit reported as failed may have been stored all the same: a connection to PostgreSQL that
breaks during ``COMMIT`` leaves the outcome unknown. Its fetches are made again, but their entries
are then known to the store and would never be handed on. So after a failed commit, the next one
that succeeds first hands on this crawler's entries stored since the last it handed on
(:meth:`Crawler._stored_unseen`). An *edit* to a known entry in such a commit keeps its id and is
not found that way: the reflectors show the earlier text until the entry changes again. Entries
found that way go on as not *backlog* (the store keeps no such mark per entry), as the hub's
start-up replay sends them. Entries stored but not handed on because ``ingested`` raised (a bug
downstream) are found the same way by the next commit, and the fetches queued behind such a
failure are forgotten and made again rather than left waiting.

A cycle never fetches one URL twice, however many feed rows point at it. Failures of one feed
(network, HTTP, parse) become typed outcomes in the stats and never stop the others. A host that
cannot be reached several times in a row is paused (:mod:`feedmesh.fetch.host_state`): a cycle
skips its feeds, leaving their fetch state as it was, until a probe finds it answering again.

A document a publisher's WebSub hub *pushed* (:meth:`Crawler.ingest_push`) takes steps 3-5 like a
fetched one, stamped with its arrival time; it changes nothing of the feed's fetch state (its
validators and document hash still describe the document fetched last).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import msgspec

from feedmesh.clock import Clock
from feedmesh.feeds import parse_feed
from feedmesh.fetch import BackoffPolicy, FeedFetchState, Fetcher, FetchRequest, next_fetch_state
from feedmesh.fetch.host_state import HostHealth, HostPolicy, host_of
from feedmesh.fetch.redact import redact_credentials
from feedmesh.fetch.state import not_a_feed
from feedmesh.logs import Throttled
from feedmesh.model import (
    Entry,
    FeedInfo,
    FetchError,
    FetchOutcome,
    FetchResult,
    ParsedFeed,
)
from feedmesh.store import (
    FeedUpdate,
    IngestedEntry,
    IngestStore,
    StoreError,
    StoreThread,
    document_hash,
)

__all__ = ["CrawlSettings", "CrawlStats", "Crawler", "FeedOutcome"]

log = logging.getLogger("feedmesh.crawl")
_commit_log = Throttled(log)
class CrawlEvents(Protocol):
    """What a :class:`Crawler` tells the part that consumes its crawl (the hub's crawler tier),
    given to it at construction. Each method is called on the event loop and must not block."""

    async def ingested(self, entries: list[IngestedEntry]) -> None:
        """A committed batch's new and updated entries, in the order they were stored; the next
        batch waits until this returns (backpressure)."""
        ...

    def feed_info(self, feed_id: int, info: FeedInfo) -> None:
        """A feed's title, language and hints as its last parsed document has them."""
        ...

    def document(self, feed_id: int, result: FetchResult, parsed: ParsedFeed) -> None:
        """Each fetched document that parsed as a feed (WebSub discovery reads it)."""
        ...

    def deactivated(self, feed_id: int) -> None:
        """A fetch deactivated the feed (410 Gone and the like)."""
        ...
_encoder = msgspec.msgpack.Encoder()


class CrawlSettings(msgspec.Struct, frozen=True, kw_only=True):
    concurrency: int = 200
    """Fetches in flight at once (per-host limits apply inside the fetcher)."""
    batch_size: int = 200
    """Feed updates committed per store transaction."""
    batch_interval_s: float = 0.0
    """Longest a finished fetch waits for others to share its transaction. 0 (the default) is
    group commit: each transaction takes every update waiting when the last one ended, so batches
    grow with the load and a lone fetch is committed at once."""
    quiet_batch_interval_s: float = 0.0
    """Longest a batch of fetches that brought nothing new (not modified, unchanged) waits for
    others to share its transaction; the first update with entries ends the wait. Nearly every
    fetch is one of these and their state is no one's news, so on a store where a transaction
    costs round trips (PostgreSQL) they can share one without delaying a single article."""
    conditional: bool = True
    """Send validators. Off only to measure what conditional GET saves (Cobra Figure 8)."""
    document_hash: bool = True
    """Skip parsing a body identical to the last parsed one."""
    mark_backlog: bool = False
    """Store the entries of a feed's first document with ``Entry.backlog`` set: what the feed
    held when it was followed, not news (a peer's local feeds show the mark, ``fm:backlog``)."""
    backoff: BackoffPolicy = BackoffPolicy()
    hosts: HostPolicy = HostPolicy()
    """When a host that cannot be reached is paused (``failures_to_pause=0``: never)."""
    seed: int = 0
    stop_grace_s: float = 1.0
    """Once a cycle is told to stop (Ctrl-C, SIGTERM), how long the fetches in flight may take
    to end before they are given up (nothing of theirs is stored; they are made again)."""

    def __post_init__(self) -> None:
        if (self.concurrency < 1 or self.batch_size < 1 or self.batch_interval_s < 0
                or self.quiet_batch_interval_s < 0 or self.stop_grace_s < 0):
            raise ValueError("CrawlSettings: concurrency, batch_size >= 1 and "
                             "batch_interval_s, quiet_batch_interval_s, stop_grace_s >= 0 are "
                             "required")


class CrawlStats(msgspec.Struct, kw_only=True):
    """Counters of one or more cycles. ``errors`` is keyed by outcome or parse problem kind."""

    feeds_due: int = 0
    fetched: int = 0
    ok: int = 0
    not_modified: int = 0
    delta: int = 0
    unchanged_documents: int = 0
    parsed: int = 0
    entries_parsed: int = 0
    entries_parsed_bytes: int = 0
    new_entries: int = 0
    updated_entries: int = 0
    out_bytes: int = 0
    """Size of what the crawler hands downstream (the ingested entries, encoded)."""
    wire_bytes: int = 0
    decoded_bytes: int = 0
    skipped: int = 0
    """Due feeds not fetched: deactivated, backing off, or a URL already fetched this cycle."""
    host_paused: int = 0
    """Due feeds not fetched because their host is paused (it could not be reached lately)."""
    fenced: int = 0
    """Fetches whose results were dropped at commit: their feed changed hands meanwhile."""
    errors: dict[str, int] = msgspec.field(default_factory=dict)
    elapsed_s: float = 0.0

    def add_error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


async def _pause(clock: Clock, seconds: float, stop: asyncio.Event | None) -> None:
    """Sleep on ``clock``, waking early when ``stop`` is set."""
    if stop is None:
        await clock.sleep(seconds)
        return
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    stopper = asyncio.ensure_future(stop.wait())
    await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
    sleeper.cancel()
    stopper.cancel()


class FeedOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What fetching one feed did, once its update was committed (the scheduler learns from it)."""

    feed_id: int
    result: FetchResult
    """The fetch (its body dropped)."""
    state: FeedFetchState
    """The feed's fetch state after it, as committed (or the state before it, when the commit
    failed): its ``not_before`` is the one decision on backoff and Retry-After
    (:mod:`feedmesh.fetch.state`), which the scheduler follows."""
    ingested: tuple[IngestedEntry, ...] = ()
    """The entries the store kept as new or updated."""
    entries_in_document: int = 0
    info: FeedInfo | None = None
    listed: tuple[Entry, ...] | None = None
    """Every entry of the fetched document when it was a whole new document that parsed as a feed
    (None: not modified, unchanged, a delta, an error): what the publisher lists right now (a
    peer checks entries its neighbours sent against it)."""


class _Pending:
    __slots__ = ("future", "previous", "pushed", "stats", "update")

    def __init__(self, update: FeedUpdate, previous: FeedFetchState, stats: CrawlStats,
                 pushed: bool = False) -> None:
        self.update = update
        self.previous = previous
        self.stats = stats
        self.pushed = pushed
        self.future: asyncio.Future[list[IngestedEntry]] = (
            asyncio.get_running_loop().create_future())


class Crawler:
    """Crawls the feeds of a store: ``await load()``, then ``await crawl()`` per cycle or
    ``await fetch_feed(id)`` feed by feed (a scheduler's way); ``await aclose()`` at the end.

    Updates from every fetch go through one committer that batches them into store transactions;
    a fetch's outcome is returned once its update is committed.
    """

    def __init__(self, store: IngestStore, fetcher: Fetcher, clock: Clock, *,
                 settings: CrawlSettings | None = None, events: CrawlEvents | None = None,
                 subscribers: Callable[[int], int | None] | None = None,
                 share: tuple[int, int] = (0, 1)) -> None:
        self.store = store
        self.share = share
        """``(i, n)``: this crawler fetches the feeds whose id is ``i`` modulo ``n`` (Cobra's
        split of the feeds over crawlers); the others are in the store for other crawlers."""
        self.owned: dict[int, int] | None = None
        """A named crawler's feeds and the epoch at which the ownership table gave each
        (``share`` is then unused); None: the modulo split."""
        self.owner_name = ""
        """A named crawler's name: each of its fetch intents carries it and the feed's epoch
        when the fetch began, so that the store drops the commit of a fetch that outlived the
        crawler's hold on the feed (fencing, :class:`~feedmesh.store.FeedUpdate`)."""
        self.fetcher = fetcher
        self.clock = clock
        self.settings = settings or CrawlSettings()
        self.events = events
        """Who consumes the crawl (None: nobody; what is stored is only stored)."""
        self.subscribers = subscribers
        self.hosts = HostHealth(self.settings.hosts)
        """The hosts that could not be reached lately (:mod:`feedmesh.fetch.host_state`); a
        scheduled crawl reads the pauses from it (:mod:`.scheduled`)."""
        self.states: dict[int, FeedFetchState] = {}
        self._rng = random.Random(self.settings.seed)
        self._db = StoreThread()
        self._queue: asyncio.Queue[_Pending | None] | None = None
        self._committer: asyncio.Task[None] | None = None
        self._fetching: dict[int, int] = {}  # feed id -> fetches of it not yet committed
        self._fetch_ended = asyncio.Event()
        self._handed_upto: int | None = None
        """Every entry this crawler stored with an id up to this one has been handed on (None:
        not read yet; the entries before this crawler's start are the start-up replay's)."""
        self._unsure = False  # a commit failed since: it may have been stored all the same

    async def load(self) -> int:
        """Read every feed's fetch state from the store (on start-up and after feeds change)."""
        rows = await self._db.call(self.store.feeds)
        self.states = {row.id: row.state for row in rows if self.owns(row.id)}
        return len(self.states)

    def owns(self, feed_id: int) -> bool:
        """Whether this crawler fetches ``feed_id`` (its share of the feeds)."""
        if self.owned is not None:
            return feed_id in self.owned
        return feed_id % self.share[1] == self.share[0]

    async def wait_idle(self, feed_ids: Iterable[int]) -> None:
        """Until no fetch of these feeds is in flight: each one started has been committed (or
        its commit failed) and its entries handed on."""
        feeds = set(feed_ids)
        while feeds.intersection(self._fetching):
            self._fetch_ended.clear()
            await self._fetch_ended.wait()

    async def add_feeds(self, urls: Iterable[str]) -> list[int]:
        """Add feeds to the store (known ones keep their ids) and crawl this crawler's share of
        them; every one's id, in order."""
        rows = await self._db.call(self.store.add_feeds, list(urls), self.clock.now())
        for row in rows:
            if self.owns(row.id):
                self.states.setdefault(row.id, row.state)
        return [row.id for row in rows]

    async def remove_feed(self, feed_id: int) -> bool:
        """Forget ``feed_id`` here and in the store (its entries with it); False: unknown."""
        if self.states.pop(feed_id, None) is None:
            return False
        await self._db.call(self.store.remove_feed, feed_id)
        return True

    def due(self, now: float) -> list[int]:
        """Active feeds whose backoff, Retry-After and freshness hints allow a fetch now."""
        return [fid for fid, s in self.states.items()
                if s.active and s.not_before <= now and s.min_refresh_at <= now]

    async def crawl(self, feed_ids: Sequence[int] | None = None,
                    progress: Callable[[CrawlStats], None] | None = None,
                    spread_s: float = 0.0, stop: asyncio.Event | None = None) -> CrawlStats:
        """One cycle: fetch every due feed once (or the given ones), commit, hand on entries.

        ``spread_s`` > 0 paces the fetches evenly over that many seconds (of the injected clock)
        instead of as fast as possible: publishers and the tiers downstream see a steady trickle
        rather than a burst every interval. Once ``stop`` is set no new fetch starts; those in
        flight get ``settings.stop_grace_s`` to finish and be committed, then are given up.
        """
        start = asyncio.get_running_loop().time()
        now = self.clock.now()
        stats = CrawlStats()
        candidates = list(feed_ids) if feed_ids is not None else list(self.states)
        due = set(self.due(now))
        paused = self.hosts.paused(now)
        todo: list[int] = []
        urls_this_cycle: set[str] = set()
        for fid in candidates:
            state = self.states.get(fid)
            if state is None:
                continue
            stats.feeds_due += 1
            if fid not in due or state.url in urls_this_cycle:
                stats.skipped += 1
                continue
            if paused and host_of(state.url) in paused:
                stats.host_paused += 1  # takes no slot of the cycle's pace
                continue
            urls_this_cycle.add(state.url)
            todo.append(fid)

        work = iter(todo)
        pace = spread_s / len(todo) if spread_s > 0 and todo else 0.0
        began = self.clock.now()
        started = 0

        async def worker() -> None:
            nonlocal started
            for fid in work:
                state = self.states.get(fid)
                if state is not None and self.hosts.troubled() and self.hosts.paused_until(
                        host_of(state.url), self.clock.now()):
                    stats.host_paused += 1  # paused since the cycle began: takes no slot
                    continue
                if pace:
                    slot = began + started * pace
                    started += 1
                    wait = slot - self.clock.now()
                    if wait > 0:
                        await _pause(self.clock, wait, stop)
                if stop is not None and stop.is_set():
                    break
                state = self.states.get(fid)
                if state is None or not self.owns(fid):
                    continue  # handed to another crawler since the cycle began
                if self.hosts.troubled() and \
                        not self.hosts.may_fetch(host_of(state.url), self.clock.now()):
                    stats.host_paused += 1  # paused while this waited, or its probe is out
                    continue
                await self.fetch_feed(fid, stats)
                if progress is not None:
                    progress(stats)

        workers = [asyncio.create_task(worker())
                   for _ in range(min(self.settings.concurrency, max(1, len(todo))))]
        try:
            await self._until_done_or_stopped(workers, stop)
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        stats.elapsed_s = asyncio.get_running_loop().time() - start
        if progress is not None:
            progress(stats)
        return stats

    async def _until_done_or_stopped(self, workers: list[asyncio.Task],
                                     stop: asyncio.Event | None) -> None:
        """Until every worker is done, or ``stop`` is set: then no fetch begins any more, and
        those in flight get ``stop_grace_s`` to end before they are given up (their feeds'
        state stays as it was: they are fetched again next time; what was committed is kept)."""
        everything = asyncio.gather(*workers)
        if stop is None:
            await everything
            return
        stopped = asyncio.ensure_future(stop.wait())
        try:
            done, _ = await asyncio.wait({everything, stopped},
                                         return_when=asyncio.FIRST_COMPLETED)
            if everything not in done:
                done, _ = await asyncio.wait({everything}, timeout=self.settings.stop_grace_s)
                if everything not in done:
                    log.info("crawl_stopped in_flight_given_up=%d grace_s=%.1f",
                             sum(1 for w in workers if not w.done()),
                             self.settings.stop_grace_s)
                    everything.cancel()
                    await asyncio.gather(everything, return_exceptions=True)
                    return
            await everything  # a worker's failure is the cycle's
        finally:
            stopped.cancel()

    async def prune_postings(self, before: float, pause_s: float = 0.05,
                             batch: int = 10_000) -> int:
        """Forget the postings first seen before ``before`` (the scheduler learns from the last
        weeks only), a batch at a time on the store's thread with a pause between, so the
        commits of fetches are not held up; how many went."""
        pruned = 0
        while True:
            gone = await self._db.call(self.store.prune_postings, before, batch)
            pruned += gone
            if gone < batch:
                return pruned
            await asyncio.sleep(pause_s)

    async def fetch_feed(self, feed_id: int, stats: CrawlStats | None = None) -> FeedOutcome:
        """Fetch one feed now, whatever its backoff says (the caller decided), and return what
        it brought once committed. Never raises for the feed's own failures."""
        stats = stats if stats is not None else CrawlStats()
        previous = self.states[feed_id]
        fence = self._fence(feed_id)  # the hold on the feed now, when the fetch begins
        self._fetching[feed_id] = self._fetching.get(feed_id, 0) + 1
        try:
            return await self._fetch_and_commit(feed_id, previous, stats, fence)
        finally:
            left = self._fetching.pop(feed_id) - 1
            if left:
                self._fetching[feed_id] = left
            self._fetch_ended.set()

    def _fence(self, feed_id: int) -> dict[str, object]:
        """What a fetch intent of ``feed_id`` begun now carries to be fenced: nothing for a
        crawler of the modulo split."""
        if self.owned is None or not self.owner_name:
            return {}
        return {"owner": self.owner_name, "epoch": self.owned.get(feed_id, -1)}

    async def _fetch_and_commit(self, feed_id: int, previous: FeedFetchState,
                                stats: CrawlStats, fence: dict[str, object]) -> FeedOutcome:
        try:
            update, result = await self._crawl_one(feed_id, stats)
        except Exception as exc:  # a bug must cost one feed one fetch, nothing more
            url = redact_credentials(previous.url)
            log.exception("crawl_failed feed=%s url=%s", feed_id, url)
            stats.add_error("internal")
            error = FetchError(outcome=FetchOutcome.PROTOCOL_ERROR,
                               message=f"{url}: internal error: {exc!r}")
            result = FetchResult(url=previous.url, outcome=FetchOutcome.PROTOCOL_ERROR,
                                 fetched_at=self.clock.now(), error=error)
            update = FeedUpdate(feed_id=feed_id, seen_at=result.fetched_at,
                                state=msgspec.structs.replace(previous,
                                                              last_error=error.message))
        if fence:
            update = msgspec.structs.replace(update, **fence)
        ingested = await self._submit(update, previous, stats)
        if previous.active and not self.states.get(feed_id, previous).active \
                and self.events is not None:
            self.events.deactivated(feed_id)
        whole = result.outcome == FetchOutcome.OK and update.info is not None
        return FeedOutcome(feed_id=feed_id, result=msgspec.structs.replace(result, body=b""),
                           state=self.states.get(feed_id, update.state),
                           ingested=tuple(ingested), entries_in_document=len(update.entries),
                           info=update.info, listed=update.entries if whole else None)

    async def ingest_push(self, feed_id: int, body: bytes, content_type: str,
                          arrived_at: float) -> FeedOutcome | None:
        """A document a WebSub hub pushed for ``feed_id``: parsed, deduplicated and stored like
        a fetched one, seen at ``arrived_at``; the new entries once committed (None: no such
        feed). A body that is not a feed is counted and dropped."""
        state = self.states.get(feed_id)
        if state is None:
            return None
        stats = CrawlStats()
        parsed = parse_feed(body, url=state.url, content_type=content_type)
        result = FetchResult(url=state.url, outcome=FetchOutcome.OK, fetched_at=arrived_at,
                             status=200, content_type=content_type, decoded_bytes=len(body))
        if not parsed.is_feed:
            log.warning("push_not_a_feed feed=%s error=%s", feed_id,
                        parsed.error.message if parsed.error else "")
            return FeedOutcome(feed_id=feed_id, result=result, state=state)
        update = FeedUpdate(feed_id=feed_id, state=state, seen_at=arrived_at,
                            entries=parsed.entries, **self._fence(feed_id))
        ingested = await self._submit(update, state, stats, pushed=True)
        return FeedOutcome(feed_id=feed_id, result=result, state=self.states.get(feed_id, state),
                           ingested=tuple(ingested), entries_in_document=len(parsed.entries))

    async def ingest(self, feed_id: int, entries: Sequence[Entry],
                     seen_at: float) -> list[IngestedEntry]:
        """Store entries that came from elsewhere than a fetch of the feed (a peer's exchange, an
        archive pulled from peers): the store keeps the new ones, as for a fetch. They go through
        the same committer as fetches, with the feed's fetch state as it is now, so a fetch
        committed meanwhile never has its validators overwritten by older ones."""
        state = self.states[feed_id]
        update = FeedUpdate(feed_id=feed_id, state=state, seen_at=seen_at, entries=tuple(entries),
                            **self._fence(feed_id))
        return await self._submit(update, state, CrawlStats())

    async def _submit(self, update: FeedUpdate, previous: FeedFetchState,
                      stats: CrawlStats, pushed: bool = False) -> list[IngestedEntry]:
        if self._committer is None or self._committer.done():
            self._queue = asyncio.Queue(maxsize=2 * self.settings.batch_size)
            self._committer = asyncio.create_task(self._commit_loop(self._queue))
        pending = _Pending(update, previous, stats, pushed)
        await self._queue.put(pending)  # waits when the store or downstream is behind
        return await pending.future

    async def _crawl_one(self, feed_id: int, stats: CrawlStats) -> tuple[FeedUpdate, FetchResult]:
        state = self.states[feed_id]
        request = FetchRequest(
            url=state.url,
            etag=state.etag if self.settings.conditional else "",
            last_modified=state.last_modified if self.settings.conditional else "",
            subscribers=self.subscribers(feed_id) if self.subscribers else None,
        )
        result = await self.fetcher.fetch(request)
        now = self.clock.now()
        self._host_health(result, now)
        stats.fetched += 1
        stats.wire_bytes += result.wire_bytes
        stats.decoded_bytes += result.decoded_bytes
        new_state = next_fetch_state(state, result, now, self._rng.random(), self.settings.backoff)
        if not result.ok:
            if result.outcome == FetchOutcome.NOT_MODIFIED:
                stats.not_modified += 1
            else:
                stats.add_error(str(result.outcome))
            return self._remember(feed_id, FeedUpdate(feed_id=feed_id, state=new_state,
                                                      seen_at=now)), result
        return self._remember(feed_id, self._process_body(feed_id, state, new_state, result,
                                                          now, stats)), result

    def _host_health(self, result: FetchResult, now: float) -> None:
        """Learn from a fetch what it says of its host (of the last hop's, after redirects: the
        host that redirected answered); log a host paused or answering again."""
        host = host_of(result.final_url or result.url)
        if result.final_url:
            first = host_of(result.url)
            if first and first != host:
                self._host_learns(first, FetchOutcome.OK, "", now)
        if host:
            self._host_learns(host, result.outcome,
                              result.error.message if result.error else "", now)

    def _host_learns(self, host: str, outcome: FetchOutcome, error: str, now: float) -> None:
        """One outcome for one host, in the host rule; the scheduler is told of a pause."""
        was_paused = self.hosts.pauses(host)
        pause = self.hosts.record(host, outcome, now, error)
        if pause is not None:
            log.warning("host_paused host=%s failures_in_a_row=%d pause=%d pause_s=%.0f "
                        "last_error=%r: its feeds are not fetched until a probe reaches it",
                        host, pause.failures, pause.pauses, pause.until - now,
                        redact_credentials(pause.last_error))
        elif was_paused and not self.hosts.pauses(host):
            log.info("host_answering host=%s outcome=%s: its feeds are fetched again",
                     host, outcome)

    def _process_body(self, feed_id: int, old: FeedFetchState, state: FeedFetchState,
                      result: FetchResult, now: float, stats: CrawlStats) -> FeedUpdate:
        is_delta = result.outcome == FetchOutcome.DELTA
        if is_delta:
            stats.delta += 1
        else:
            stats.ok += 1
            doc_hash = document_hash(result.body)
            if self.settings.document_hash and doc_hash == old.doc_hash:
                stats.unchanged_documents += 1
                return FeedUpdate(feed_id=feed_id, state=state, seen_at=now)
            state = msgspec.structs.replace(state, doc_hash=doc_hash)
        parsed = parse_feed(result.body, url=result.final_url or old.url,
                            content_type=result.content_type)
        stats.parsed += 1
        if not parsed.is_feed or (parsed.error is not None and parsed.error.kind == "forbidden"
                                  and not parsed.entries):
            stats.add_error(f"parse:{parsed.error.kind}")
            state = not_a_feed(state, old, now,
                               redact_credentials(f"{old.url}: {parsed.error.message}"),
                               self._rng.random(), self.settings.backoff)
            return FeedUpdate(feed_id=feed_id, state=state, seen_at=now)
        if parsed.error is not None:
            stats.add_error(f"parse:{parsed.error.kind}")  # recovered: entries still count
        if self.events is not None:
            self.events.feed_info(feed_id, parsed.feed)
            if not is_delta:
                self.events.document(feed_id, result, parsed)
        stats.entries_parsed += len(parsed.entries)
        stats.entries_parsed_bytes += sum(len(_encoder.encode(e)) for e in parsed.entries)
        backlog = old.last_fetched_at == 0.0
        entries = parsed.entries
        if backlog and self.settings.mark_backlog:
            entries = tuple(msgspec.structs.replace(e, backlog=True) for e in entries)
        return FeedUpdate(feed_id=feed_id, state=state, seen_at=now, info=parsed.feed,
                          entries=entries, backlog=backlog)

    def _remember(self, feed_id: int, update: FeedUpdate) -> FeedUpdate:
        if feed_id in self.states:
            self.states[feed_id] = update.state
        return update

    async def _commit_loop(self, queue: asyncio.Queue[_Pending | None]) -> None:
        """Takes the waiting updates a batch at a time and commits them. A batch's entries are
        handed on (:meth:`CrawlEvents.ingested`) while the next batch commits, so the store and the
        bus work
        at the same time; they still leave in the order they were stored (a batch's hand-on
        begins once the one before it has ended), and at most one batch waits to be handed on
        (backpressure reaches the fetches as before). Taking turns instead, at case (b) with
        two filter shards the committer was busy 92% of the time and a fetch's entries waited
        82 ms at the median for it to be free (docs/measurements.md)."""
        handing: asyncio.Task[None] | None = None
        finished = False
        batch: list[_Pending] = []  # taken off the queue, its fetches not yet told
        try:
            while not finished:
                batch = []  # a new list: the one before is the hand-on's
                finished = await self._take_batch(queue, batch)
                if not batch:
                    break
                committed = await self._commit(batch)
                if handing is not None:
                    previous, handing = handing, None
                    try:
                        await previous  # the batch before leaves first
                    except BaseException:
                        if committed is not None:  # stored, not handed on: found again later
                            self._not_handed(committed[0])
                            self._tell(batch, committed[1])
                        raise
                if committed is not None:
                    handing = asyncio.create_task(self._hand_on(batch, *committed))
        except BaseException as exc:
            # A bug downstream (or a cancellation): the fetches queued behind must not wait
            # forever. Like a failed commit's, they are forgotten and made again; the next
            # update starts a new committer. A batch cancelled while it was taken or in the
            # middle of its commit (which the store thread finishes: it may be stored all the
            # same) likewise; the next commit looks for what was stored and not handed on.
            for pending in batch:
                if not pending.future.done():
                    self._forget(pending, "internal")
                    self._unsure = True
            waiting = 0
            while not queue.empty():
                pending = queue.get_nowait()
                if pending is not None:
                    self._forget(pending, "internal")
                    waiting += 1
            if not isinstance(exc, asyncio.CancelledError):
                log.error("commit_loop_failed error=%r queued=%d; the queued fetches are "
                          "forgotten and made again", exc, waiting)
            raise
        finally:
            if handing is not None:
                await handing

    async def _take_batch(self, queue: asyncio.Queue[_Pending | None],
                          batch: list[_Pending]) -> bool:
        """Take the next batch into ``batch`` (waiting for its first update; filled in place,
        so that a cancellation meanwhile leaves what was taken where the caller sees it), and
        whether the end was met."""
        settings = self.settings
        loop = asyncio.get_running_loop()
        item = await queue.get()
        if item is None:
            return True
        batch.append(item)
        started = loop.time()
        news = bool(item.update.entries)
        while len(batch) < settings.batch_size:
            deadline = started + (settings.batch_interval_s if news
                                  else max(settings.batch_interval_s,
                                           settings.quiet_batch_interval_s))
            try:
                if queue.empty() and loop.time() < deadline:
                    item = await asyncio.wait_for(queue.get(), deadline - loop.time())
                else:
                    item = queue.get_nowait()
            except (TimeoutError, asyncio.QueueEmpty):
                break
            if item is None:
                return True
            batch.append(item)
            news = news or bool(item.update.entries)
        return False

    async def _commit(self, batch: list[_Pending]
                      ) -> tuple[list[IngestedEntry], dict[int, list[IngestedEntry]]] | None:
        """Store ``batch``; what to hand on (the entries this commit stored, after those of an
        earlier commit found stored) and this commit's entries by feed. None: nothing stored,
        and every fetch of the batch has been told."""
        for pending in batch:
            if pending.pushed:  # a push keeps the fetch state as the fetches left it, now
                update = pending.update
                current = self.states.get(update.feed_id, update.state)
                pending.update = msgspec.structs.replace(update, state=current)
        try:
            if self._handed_upto is None and self.events is not None:
                self._handed_upto = await self._db.call(self.store.max_entry_id)
            fenced: list[int] = []
            ingested = await self._db.call(self.store.apply, [p.update for p in batch], fenced)
        except Exception as exc:  # noqa: BLE001 - whatever stopped the commit, the batch is redone
            # Nothing of this batch is stored: forget what its fetches taught us too (their
            # validators would hide the uncommitted entries behind 304s), and tell each caller.
            _commit_log.log(logging.ERROR, type(exc).__name__,
                            "commit_failed feeds=%d error=%s; their fetches are forgotten and "
                            "made again", len(batch), exc)
            self._unsure = True
            for pending in batch:
                self._forget(pending, "store")
            return None
        if fenced:
            gone = set(fenced)
            for pending in batch:
                if pending.update.feed_id in gone:
                    pending.stats.fenced += 1
            owner = next((p.update.owner for p in batch if p.update.owner), "")
            _commit_log.log(logging.WARNING, "fenced",
                            "fenced_off feeds=%d owner=%s first=%s: these feeds changed hands "
                            "while their fetches ran; the results are dropped (the new owner "
                            "fetches them)", len(fenced), owner, sorted(gone)[:5])
        by_feed: dict[int, list[IngestedEntry]] = {}
        for item in ingested:
            by_feed.setdefault(item.feed_id, []).append(item)
        for pending in batch:
            mine = by_feed.get(pending.update.feed_id, [])
            stats = pending.stats
            for item in mine:
                if item.updated:
                    stats.updated_entries += 1
                else:
                    stats.new_entries += 1
                stats.out_bytes += len(_encoder.encode(item))
        found: list[IngestedEntry] = []
        if self._unsure and self.events is not None:
            self._unsure = False  # first: a hand-on failing meanwhile sets it again
            try:
                found = await self._db.call(self._stored_unseen, ingested, self._handed_upto)
            except StoreError as exc:
                # This batch is stored: hand it on. The next commit looks again from the same
                # place (it may hand this batch on again: downstream drops it as a copy).
                self._unsure = True
                _commit_log.log(logging.ERROR, "unseen", "commit_check_failed error=%s; the "
                                "next commit looks again", exc)
        handed = found + ingested  # oldest first
        if handed and self._handed_upto is not None and not self._unsure:
            self._handed_upto = max(self._handed_upto, max(item.id for item in handed))
        return handed, by_feed

    async def _hand_on(self, batch: list[_Pending], handed: list[IngestedEntry],
                       by_feed: dict[int, list[IngestedEntry]]) -> None:
        """Give a committed batch's entries to the crawl's consumer, then tell its fetches."""
        try:
            if handed and self.events is not None:
                await self.events.ingested(handed)
        except BaseException:
            self._not_handed(handed)
            raise
        finally:
            self._tell(batch, by_feed)

    def _not_handed(self, items: list[IngestedEntry]) -> None:
        """Stored entries that were not handed on (its consumer failed, or the committer
        ended before their turn): the next commit looks for them, as after a failed commit
        (those handed on meanwhile may go again: downstream drops them as copies)."""
        if items and self._handed_upto is not None:
            self._handed_upto = min(self._handed_upto, min(item.id for item in items) - 1)
            self._unsure = True

    def _forget(self, pending: _Pending, error: str) -> None:
        """An update that was not stored: its fetch's state goes back to what it was before,
        and the fetch hears back with nothing ingested."""
        if not pending.pushed:  # a push changed no fetch state
            self.states[pending.update.feed_id] = pending.previous
        pending.stats.add_error(error)
        if not pending.future.done():
            pending.future.set_result([])

    @staticmethod
    def _tell(batch: list[_Pending], by_feed: dict[int, list[IngestedEntry]]) -> None:
        for pending in batch:
            if not pending.future.done():
                pending.future.set_result(by_feed.get(pending.update.feed_id, []))

    def _stored_unseen(self, ingested: list[IngestedEntry],
                       handed_upto: int | None) -> list[IngestedEntry]:
        """(In the store thread, after a commit that followed a failed one.) This crawler's
        entries stored after ``handed_upto`` (the last it handed on), other than ``ingested``
        (this commit's): those of a commit reported as failed that was stored all the same, or
        of a hand-on that failed. Oldest first."""
        assert handed_upto is not None
        mine = {item.id for item in ingested}
        found: list[IngestedEntry] = []
        after = handed_upto
        while chunk := self.store.entries_after(after, 500):
            found.extend(item for item in chunk
                         if item.id not in mine and self.owns(item.feed_id))
            after = chunk[-1].id
        if found:
            _commit_log.log(logging.WARNING, "unseen",
                            "commit_found_stored entries=%d first=%d: stored but not handed "
                            "on (a commit reported as failed, or a hand-on that failed); "
                            "handed on now",
                            len(found), found[0].id)
        return found

    async def aclose(self) -> None:
        """Commit what is queued, then release the store thread."""
        if self._committer is not None and not self._committer.done():
            await self._queue.put(None)
            await self._committer
        self._db.close()
