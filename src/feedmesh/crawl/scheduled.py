"""The live monitor: fetch each feed when the scheduler says it is due (issue 5's policies, run on
the real or an accelerated clock), instead of every feed every interval.

* At start-up the scheduler is restored from its last snapshot (``schedule.bin``): what it
  learned survives a restart, and overdue feeds are spread out rather than fetched in a burst.
  Without a snapshot every feed is added with what the store knows: the times its entries were
  first seen (postings, the first document's backlog excluded), the publisher's hints from its
  last document, and when it was last fetched.
* The loop asks for due feeds (honouring per-host politeness, hints, backoff and the global budget,
  all decided inside the pure scheduler), fetches each through the ordinary pipeline, and reports
  back what the fetch found once it is committed: new entries and their dates, the document's
  size, Cache-Control, Retry-After, the feed's hints.
* The snapshot is written every few minutes and at shutdown.
* Push: while a feed's WebSub subscription is live (:meth:`ScheduledCrawler.set_live`), its
  hints say so and the scheduler fetches it only as a daily safety net; each pushed document is
  reported like a fetch made when it arrived (:meth:`ScheduledCrawler.record_push`), so the
  posting rate is still learned should push lapse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec

from feedmesh.clock import Clock
from feedmesh.crawl.pipeline import Crawler, CrawlStats, FeedOutcome
from feedmesh.fetch.host_state import host_of
from feedmesh.schedule import FeedHints, FetchReport, Scheduler, SchedulerSettings
from feedmesh.schedule.errors import ScheduleError, UnknownFeedError
from feedmesh.store import IngestStore, StoreError

__all__ = ["ScheduledCrawler"]

log = logging.getLogger("feedmesh.crawl.scheduled")

HISTORY_DAYS = 28
"""How far back the scheduler learns a feed's rhythm from; older postings are pruned."""
PRUNE_INTERVAL_S = 3600.0
"""How often postings older than HISTORY_DAYS are pruned (a posting per new entry: at 200 new
entries a second, 17 million rows a day that nothing reads after four weeks)."""


class ScheduledCrawler:
    def __init__(self, crawler: Crawler, store: IngestStore, clock: Clock,
                 settings: SchedulerSettings, *, snapshot_path: Path | None = None,
                 weight: Callable[[int], float] | None = None, concurrency: int = 64,
                 snapshot_interval_s: float = 300.0,
                 on_fetched: Callable[[str, FeedOutcome], None] | None = None) -> None:
        """``on_fetched(feed_id, outcome)`` is called after each fetch is committed and learned
        from (a peer hands what its own fetch found to its neighbours there)."""
        self.crawler = crawler
        self.store = store
        self.clock = clock
        self.settings = settings
        self.snapshot_path = snapshot_path
        self.weight = weight or (lambda feed_id: 1.0)
        self.concurrency = concurrency
        self.snapshot_interval_s = snapshot_interval_s
        self.on_fetched = on_fetched
        self.scheduler = Scheduler(settings)
        self.stats = CrawlStats()
        self._wake = asyncio.Event()
        self._in_flight: set[asyncio.Task[None]] = set()
        self.live: set[int] = set()
        """Feeds whose WebSub subscription is live (polled only as a safety net)."""
        self._pauses_seen = 0

    def _follow_host_pauses(self, now: float) -> None:
        """A host the crawler paused (it could not be reached) is paused in the scheduler's
        host table too, where the other per-host decisions live: none of its feeds is due
        before the pause ends. Read before every grant, so no feed of a host paused by a fetch
        that is still committing is granted meanwhile."""
        hosts = self.crawler.hosts
        if hosts.pauses_begun == self._pauses_seen:
            return
        self._pauses_seen = hosts.pauses_begun
        for host, until in hosts.paused(now).items():
            self.scheduler.pause_host(host, until)

    # -- feeds -------------------------------------------------------------------------------

    def start(self) -> None:
        """Restore the scheduler (or build it from the store) for the crawler's feeds."""
        now = self.clock.now()
        restored = self._restore(now)
        known = set(self.scheduler.feed_ids()) if restored else set()
        wanted = {str(fid) for fid, state in self.crawler.states.items() if state.active}
        for feed_id in known - wanted:
            self.scheduler.remove_feed(feed_id)
        postings = self.store.all_postings(since=now - HISTORY_DAYS * 86400.0)
        infos = {row.id: row for row in self.store.feeds()}
        for feed_id in sorted(wanted - known, key=int):
            self._add(int(feed_id), now, postings.get(int(feed_id), ()), infos.get(int(feed_id)))
        log.info("scheduler_started policy=%s feeds=%d restored=%s", self.settings.policy,
                 len(wanted), restored)

    def _restore(self, now: float) -> bool:
        if self.snapshot_path is None or not self.snapshot_path.exists():
            return False
        try:
            self.scheduler = Scheduler.restore(self.snapshot_path.read_bytes(), now=now,
                                               settings=self.settings)
            return True
        except (ScheduleError, ValueError, OSError) as exc:
            log.warning("scheduler_snapshot_unusable path=%s error=%r; learning again",
                        self.snapshot_path, exc)
            self.scheduler = Scheduler(self.settings)
            return False

    def _add(self, feed_id: int, now: float, postings: Iterable, row: object | None,
             first_fetch_within_s: float | None = None, urgent: bool = False) -> None:
        state = self.crawler.states[feed_id]
        history = [p.first_seen_at for p in postings if not p.backlog]
        info = getattr(row, "info", None)
        self.scheduler.add_feed(
            str(feed_id), now=now, host=host_of(state.url), weight=self.weight(feed_id),
            hints=FeedHints.from_feed_info(info) if info is not None else None,
            history=history,
            history_since=getattr(row, "added_at", None) if history else None,
            last_fetched_at=state.last_fetched_at or None,
            first_fetch_within_s=first_fetch_within_s, urgent=urgent)

    def add_feeds(self, feed_ids: Iterable[int]) -> None:
        """Schedule newly added feeds: the first fetch of one a person just added (or of a few,
        as many as ``new_feeds_per_s``) is due at once and waits for its host at the head of
        its line, so it comes within about a second however many feeds of its host are queued;
        a long list's first fetches are spread out at ``new_feeds_per_s`` (each host's pacing
        applies either way)."""
        now = self.clock.now()
        known = set(self.scheduler.feed_ids())
        new = [f for f in dict.fromkeys(feed_ids)
               if str(f) not in known and f in self.crawler.states]
        window = self.scheduler.first_fetch_window(len(new))
        urgent = window <= 1.0
        for feed_id in new:
            self._add(feed_id, now, (), None, first_fetch_within_s=window, urgent=urgent)
        self._wake.set()

    def adopt(self, feed_ids: Iterable[int]) -> None:
        """Schedule feeds another crawler fetched until now (or nobody yet): learned from the
        store (their postings of the last weeks, the publisher's hints, the last fetch), as at
        a start without snapshot; the other crawler's scheduler state of them is not carried
        over. Feeds never fetched get their first fetch soon, as :meth:`add_feeds` gives."""
        now = self.clock.now()
        known = set(self.scheduler.feed_ids())
        since = now - HISTORY_DAYS * 86400.0
        wanted = [f for f in dict.fromkeys(feed_ids) if str(f) not in known
                  and f in self.crawler.states and self.crawler.states[f].active]
        never = sum(1 for f in wanted if not self.crawler.states[f].last_fetched_at)
        window = self.scheduler.first_fetch_window(never) if never else None
        for feed_id in wanted:
            first = None if self.crawler.states[feed_id].last_fetched_at else window
            self._add(feed_id, now, self.store.postings(feed_id, since=since),
                      self.store.feed(feed_id), first_fetch_within_s=first)
        self._wake.set()

    def remove_feed(self, feed_id: int) -> None:
        """Stop scheduling ``feed_id``."""
        self.live.discard(feed_id)
        with contextlib.suppress(UnknownFeedError):
            self.scheduler.remove_feed(str(feed_id))

    def next_fetch_at(self, feed_id: int) -> float | None:
        """When the scheduler will fetch ``feed_id`` next (None: not scheduled, or being fetched
        now). A feed its host holds back has been given its place in the host's line and says
        when that is; one that is due and about to start says now, never a time past."""
        try:
            due = self.scheduler.due_at(str(feed_id))
        except UnknownFeedError:
            return None
        return None if due is None else max(due, self.clock.now())

    def rephase(self, feed_id: int, at: float) -> float | None:
        """Move ``feed_id``'s next fetch to ``at`` and its plan with it, within what its plan
        allows (:meth:`~feedmesh.schedule.Scheduler.rephase`); the new due time, or None."""
        try:
            due = self.scheduler.rephase(str(feed_id), at, now=self.clock.now())
        except UnknownFeedError:
            return None
        if due is not None:
            self._wake.set()
        return due

    def plan_of_feed(self, feed_id: int) -> tuple[float, float] | None:
        """(its last fetch, its plan's period) once it has both; None before."""
        try:
            last = self.scheduler.last_fetch_at(str(feed_id))
            period = self.scheduler.plan_period_s(str(feed_id))
        except UnknownFeedError:
            return None
        return None if last is None or period is None else (last, period)

    # -- push --------------------------------------------------------------------------------

    def set_live(self, feed_id: int, live: bool) -> None:
        """The feed's push subscription went live (True) or lapsed (False)."""
        if live == (feed_id in self.live):
            return
        if live:
            self.live.add(feed_id)
        else:
            self.live.discard(feed_id)
        try:
            slot = self.scheduler.slot_of(str(feed_id))
        except UnknownFeedError:
            return
        old = self.scheduler.state.hints[slot] or FeedHints()
        self.scheduler.set_hints(str(feed_id), msgspec.structs.replace(
            old, websub_live=live, has_hub=old.has_hub or live), self.clock.now())
        self._wake.set()

    def record_push(self, outcome: FeedOutcome) -> None:
        """Learn from a pushed document as from a fetch made when it arrived. Skipped while the
        feed is being fetched (that fetch reports)."""
        feed_id = str(outcome.feed_id)
        if self.next_fetch_at(outcome.feed_id) is None:
            return
        self.scheduler.record(report_of(feed_id, outcome, live=outcome.feed_id in self.live))
        self._wake.set()

    # -- the loop ----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        next_snapshot = loop.time() + self.snapshot_interval_s
        next_prune = loop.time()  # at start, then hourly
        pruning: asyncio.Task[None] | None = None
        try:
            while not stop.is_set():
                if loop.time() >= next_prune and (pruning is None or pruning.done()):
                    next_prune = loop.time() + PRUNE_INTERVAL_S
                    pruning = asyncio.create_task(self._prune())
                now = self.clock.now()
                self._follow_host_pauses(now)
                room = self.concurrency - len(self._in_flight)
                if room > 0:
                    for feed_id in self.scheduler.pop_due(now, room):
                        task = asyncio.create_task(self._fetch(feed_id))
                        self._in_flight.add(task)
                        task.add_done_callback(self._in_flight.discard)
                await self._wait(stop)
                if loop.time() > next_snapshot:
                    next_snapshot = loop.time() + self.snapshot_interval_s
                    self.save()
        finally:
            if pruning is not None and not pruning.done():
                pruning.cancel()
            if self._in_flight:
                await asyncio.gather(*self._in_flight, return_exceptions=True)
            self.save()

    async def _prune(self) -> None:
        before = self.clock.now() - HISTORY_DAYS * 86400.0
        try:
            pruned = await self.crawler.prune_postings(before)
        except StoreError as exc:  # a busy or full store: next hour, then
            log.warning("postings_prune_failed error=%r", exc)
            return
        if pruned:
            log.info("postings_pruned rows=%d before=%.0f", pruned, before)

    async def _wait(self, stop: asyncio.Event) -> None:
        """Until the next feed is due (room permitting), a fetch ends, new feeds, or stop.

        With every fetch slot taken, a feed already due changes nothing: only the end of a
        fetch does, so that is all to wait for. (Sleeping until the due time, which is past,
        would turn the loop on every iteration, holding the GIL the store thread needs to commit
        the very fetches whose end would make room.)"""
        self._wake.clear()
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
        if len(self._in_flight) >= self.concurrency:
            waiters.append(asyncio.ensure_future(
                asyncio.wait(set(self._in_flight), return_when=asyncio.FIRST_COMPLETED)))
        else:
            now = self.clock.now()
            due = self.scheduler.next_due_at(now)
            seconds = 60.0 if due is None else min(60.0, max(0.0, due - now))
            waiters.append(asyncio.ensure_future(self.clock.sleep(seconds)))
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()

    async def _fetch(self, feed_id: str) -> None:
        try:
            outcome = await self.crawler.fetch_feed(int(feed_id), self.stats)
        except Exception:  # never leave a feed "in flight" for ever
            log.exception("scheduled_fetch_failed feed=%s", feed_id)
            self.scheduler.release(feed_id, now=self.clock.now())
            self._wake.set()
            return
        with contextlib.suppress(UnknownFeedError):  # removed while it was being fetched
            self.scheduler.record(report_of(feed_id, outcome, live=int(feed_id) in self.live))
        self._follow_host_pauses(self.clock.now())  # a pause this fetch began, held at once
        self._wake.set()
        if self.on_fetched is not None:
            self.on_fetched(feed_id, outcome)

    def save(self) -> None:
        if self.snapshot_path is None:
            return
        data = self.scheduler.to_bytes(self.clock.now())
        temporary = self.snapshot_path.with_suffix(".tmp")
        temporary.write_bytes(data)
        os.replace(temporary, self.snapshot_path)


def report_of(feed_id: str, outcome: FeedOutcome, *, live: bool = False) -> FetchReport:
    """What the scheduler learns from one committed fetch, with the fetch state's decision on
    when the feed may be fetched again (backoff, Retry-After, a page that is not a feed), which
    the scheduler follows instead of deciding again. ``live``: the feed's push subscription
    holds (kept in the hints the document's own replace)."""
    new = [item.entry for item in outcome.ingested if not item.updated and not item.backlog]
    hints = FeedHints.from_feed_info(outcome.info) if outcome.info is not None else None
    if hints is not None and live:
        hints = msgspec.structs.replace(hints, websub_live=True, has_hub=True)
    return FetchReport.from_fetch(feed_id, outcome.result, new_entries=new,
                                  entries_in_document=outcome.entries_in_document, hints=hints,
                                  state=outcome.state)
