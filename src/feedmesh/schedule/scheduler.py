"""The scheduler: one object per deployment that says which feeds to fetch when.

It holds every feed's learned state (:mod:`.learning`), the chosen policy's plans
(:mod:`.policies`), per-host politeness and the global budget, and an indexed heap of due times,
all as arrays (:mod:`.table`) that the compiled kernels of :mod:`.kernels` work on. It never reads
a clock: every call takes ``now`` (float epoch seconds). The same object runs live inside the
crawler and, with a simulated clock, inside ``feedmesh sim``::

    scheduler = Scheduler(SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=24))
    scheduler.add_feed("f1", now=now, host="example.org")
    while True:
        for feed_id in scheduler.pop_due(now):         # due, polite, within budget
            ...fetch it...
            scheduler.record(FetchReport(feed_id=feed_id, fetched_at=..., outcome=...))
        sleep until scheduler.next_due_at()

After each fetch the next due time is: the policy's next planned instant; at least T_min and at
most T_max later; no earlier than ttl / max-age allow (capped); outside skipHours/skipDays; no
earlier than the report's ``not_before``, the feed's fetch state's decision on backoff,
Retry-After and pages that are not feeds (:mod:`feedmesh.fetch.state`: the scheduler follows it
rather than deciding again); only every safety interval for feeds whose WebSub push is live.
``pop_due`` then holds a due feed back while its host has ``host_concurrency`` fetches in
flight, is inside the spacing its answers set (its smoothed latency: see
:meth:`~.table.HostTable.paced`; a 429, 503 or timeout doubles it), at its per-minute cap if one
is set, or in a server-requested pause (a 429 or Retry-After pauses the host until the feed's
``not_before``), or while the budget bucket is empty. A feed held back by its host takes the
next place in the host's line, and its due time says when that is. A batch of successful fetches can
be reported at once with :meth:`record_batch` (what the simulator does; the crawler may too).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import msgspec
import numpy as np

from feedmesh.fetch.state import wait_after_failure
from feedmesh.model import FetchOutcome

from . import kernels
from .errors import DuplicateFeedError, UnknownFeedError
from .hints import FeedHints
from .kernels import (
    F_BACKOFF,
    F_DITHER,
    F_DUE,
    F_LAST_FETCH,
    F_LAST_SUCCESS,
    F_PHASE,
    F_PLAN_ORIGIN,
    F_PLAN_PERIOD,
    F_WEIGHT,
    FLAG_AWAITING,
    FLAG_GONE,
    FLAG_IN_FLIGHT,
    FLAG_URGENT,
    H_QUEUE,
    I_ERRORS,
    I_FLAGS,
    I_HOST,
)
from .policies import Plan, Policy, make_policy
from .posting_times import PostingTimes
from .records import FeedStatus, FetchReport, SchedulerSnapshot
from .scheduler_state import SchedulerState
from .settings import SchedulerSettings
from .snapshot import decode_snapshot, load_snapshot, take_snapshot
from .units import DAY_S
from .upkeep import CLOCK_SKEW_S, Upkeep

__all__ = ["Scheduler"]

_SUCCESS = frozenset({FetchOutcome.OK, FetchOutcome.DELTA, FetchOutcome.NOT_MODIFIED})
_INF = math.inf
_NAN = math.nan
_EMPTY_F = np.zeros(0)


class Scheduler:
    """Which feeds are due, when; learns from every fetch. Pure: ``now`` is always passed in.

    Its data is :attr:`state` (a :class:`~.scheduler_state.SchedulerState`: feeds, hosts,
    budget, what was learned); :attr:`upkeep` refits the plans and handles the clock;
    :attr:`policy` says when each feed is due next.
    """

    def __init__(self, settings: SchedulerSettings | None = None, *,
                 policy: Policy | None = None) -> None:
        """``policy``: a policy object instead of the one ``settings.policy`` names (a policy
        of your own, or one of ours with other switches); it must take these settings."""
        self.settings = (settings or SchedulerSettings()).validated()
        self.policy = policy if policy is not None else make_policy(self.settings)
        self.state = SchedulerState(self.settings)
        self.policy.attach(self.state.table)
        self.upkeep = Upkeep(self.state, self.policy)
        self.upkeep.update_kernel_settings()
        self._posting_times = PostingTimes(self.state)
        self._no_hint = np.full(64, _NAN)  # max-age of fetches that gave none

    @property
    def clock_jumps(self) -> list[tuple[float, float]]:
        """(latest now seen, now given) for every backward clock jump handled."""
        return self.upkeep.clock_jumps

    # ------------------------------------------------------------------ feeds
    def __len__(self) -> int:
        return len(self.state.slot_of)

    def __contains__(self, feed_id: object) -> bool:
        return feed_id in self.state.slot_of

    def feed_ids(self) -> list[str]:
        return list(self.state.slot_of)

    def add_feed(self, feed_id: str, *, now: float, host: str = "", weight: float = 1.0,
                 hints: FeedHints | None = None, history: Sequence[float] = (),
                 history_since: float | None = None,
                 last_fetched_at: float | None = None,
                 first_fetch_within_s: float | None = None, urgent: bool = False) -> None:
        """Start scheduling ``feed_id``.

        ``history``: publish times of the feed's past posts (e.g. from the store, or a trace's
        training days); learned at once. They are taken as complete from ``history_since``
        (default: the oldest of them) up to ``now``; a feed watched for two weeks without a post
        is evidence of a slow feed, so pass ``history_since`` when you know it. ``last_fetched_at``:
        when the feed was last fetched, if it was; such a feed waits for its first plan and then
        follows it. A feed never fetched gets its first fetch at a random moment within
        ``first_fetch_within_s`` (the caller's: see :meth:`first_fetch_window`), or within
        ``first_fetch_spread_s`` when not given (so finding 100k feeds is not a burst).
        ``urgent``: a person just added it and waits for it; its first fetch is due now and, when
        its host is busy, it waits at the head of the host's line, not at its end.
        """
        state = self.state
        if feed_id in state.slot_of:
            raise DuplicateFeedError(f"feed {feed_id!r} is already scheduled")
        if not (weight >= 0 and math.isfinite(weight)):
            raise ValueError(f"feed {feed_id!r}: weight must be a finite number >= 0, got {weight}")
        now = self.upkeep.tick(now)
        reused = bool(state.free_slots)
        slot = state.new_slot(feed_id, host or feed_id)
        self.upkeep.forget_cluster(slot)
        F = state.table.F
        F[slot, F_WEIGHT] = float(weight)
        F[slot, F_PHASE] = float(state.rng.random())
        F[slot, F_DITHER] = float(state.rng.random()) * self.settings.phase_dither_s
        state.set_hints(slot, hints)
        learner = state.learner
        learner.reset_slot(slot, observed_since=now, reused=reused)
        state.active_count += 1
        trusted = [t for t in history if math.isfinite(t) and t <= now + CLOCK_SKEW_S]
        if trusted:
            learner.observe(slot, [min(t, now) for t in trusted])
            learner.extend_exposure(slot, min(trusted))
        if history_since is not None and math.isfinite(history_since):
            learner.extend_exposure(slot, min(history_since, now))
        if len(trusted) < len(history):
            state.note(slot, "history_dates", "history times in the future were ignored")
        self.upkeep.plans_stale = True
        self.upkeep.update_kernel_settings()
        self.upkeep.follow_budget(now)
        self.policy.on_added(slot, self.base_interval_s())
        if last_fetched_at is not None:
            F[slot, F_LAST_FETCH] = F[slot, F_LAST_SUCCESS] = float(last_fetched_at)
            state.table.I[slot, I_FLAGS] |= FLAG_AWAITING
            state.awaiting_count += 1
        elif urgent:
            state.table.I[slot, I_FLAGS] |= FLAG_URGENT
            state.hosts.urgent(int(state.table.I[slot, I_HOST]), +1)
            state.push(slot, now)
        else:
            window = (self.settings.first_fetch_spread_s if first_fetch_within_s is None
                      else min(max(0.0, first_fetch_within_s), self.settings.first_fetch_spread_s))
            state.push(slot, now + state.random.random() * window)

    def first_fetch_window(self, added: int) -> float:
        """The window over which ``added`` feeds added together get their first fetches: at
        ``new_feeds_per_s``, and never more than ``first_fetch_spread_s``."""
        s = self.settings
        rate = s.new_feeds_per_s
        return s.first_fetch_spread_s if rate <= 0 else min(s.first_fetch_spread_s, added / rate)

    def due_at(self, feed_id: str) -> float | None:
        """When ``feed_id`` is due next (None: not scheduled: gone, or being fetched now)."""
        state = self.state
        slot = state.slot(feed_id)
        if int(state.table.I[slot, I_FLAGS]) & (FLAG_GONE | FLAG_IN_FLIGHT):
            return None
        due = float(state.table.F[slot, F_DUE])
        return due if math.isfinite(due) else None

    def plan_period_s(self, feed_id: str) -> float | None:
        """The period of ``feed_id``'s current plan (None: no plan yet)."""
        state = self.state
        period = float(state.table.F[state.slot(feed_id), F_PLAN_PERIOD])
        return period if period > 0.0 else None

    def last_fetch_at(self, feed_id: str) -> float | None:
        state = self.state
        last = float(state.table.F[state.slot(feed_id), F_LAST_FETCH])
        return None if math.isnan(last) else last

    def rephase(self, feed_id: str, at: float, *, now: float) -> float | None:
        """Move ``feed_id``'s next fetch to ``at`` and its plan with it (the fetches after it
        follow one period apart from there): the network as one monitor placing this node's
        fetch in a gap of the feed's schedule (``mesh/feedex/phases.py``). Clamped to [now,
        last fetch + plan period]: never sooner than now, never a gap longer than the plan's;
        the number of fetches per period stays the plan's. Returns the new due time, or None
        (no plan, never fetched, being fetched, urgent or gone: left as it is)."""
        state = self.state
        slot = state.slot(feed_id)
        table = state.table
        F = table.F
        if int(table.I[slot, I_FLAGS]) & (FLAG_GONE | FLAG_IN_FLIGHT | FLAG_URGENT):
            return None
        period = float(F[slot, F_PLAN_PERIOD])
        due = float(F[slot, F_DUE])
        last = float(F[slot, F_LAST_FETCH])
        if not (period > 0.0 and math.isfinite(due)) or math.isnan(last):
            return None
        at = min(max(at, now), last + period)
        F[slot, F_PLAN_ORIGIN] += at - due
        state.push(slot, at)
        return float(F[slot, F_DUE])

    def remove_feed(self, feed_id: str) -> None:
        """Stop scheduling ``feed_id`` and forget what was learned about it."""
        state = self.state
        slot = state.slot(feed_id)
        del state.slot_of[feed_id]
        table = state.table
        flags = table.I[slot, I_FLAGS]
        if flags & FLAG_IN_FLIGHT:  # its fetch's end reaches no one: its host counts it done
            state.hosts.ended(table.I[[slot], I_HOST])
        if flags & FLAG_URGENT:
            state.hosts.urgent(int(table.I[slot, I_HOST]), -1)
        if not flags & FLAG_GONE:
            state.active_count -= 1
        if flags & FLAG_AWAITING:
            state.awaiting_count -= 1
        self.policy.on_removed(slot)
        state.feed_ids[slot] = None
        table.remove_from_heap(slot)
        table.I[slot, I_FLAGS] = 0
        table.clear_plan(slot)
        state.notes[slot] = None
        state.free_slots.append(slot)
        self.upkeep.plans_stale = True
        self.upkeep.update_kernel_settings()

    def set_hints(self, feed_id: str, hints: FeedHints, now: float | None = None) -> None:
        """Replace a feed's hints (e.g. the WebSub subscription went live or lapsed; ``now``:
        when, which a lapse needs)."""
        slot = self.state.slot(feed_id)
        old = self.state.hints[slot]
        self.state.set_hints(slot, hints)
        if (old.websub_live if old else False) != hints.websub_live:
            self.upkeep.plans_stale = True
            table = self.state.table
            due = float(table.F[slot, F_DUE])
            waiting = int(table.I[slot, I_FLAGS]) & (FLAG_GONE | FLAG_IN_FLIGHT | FLAG_AWAITING)
            if not waiting and math.isfinite(due):
                if hints.websub_live:
                    # Push went live: the next poll moves to the safety net now, not at the
                    # refit.
                    self.state.push(slot, due)
                else:
                    # Push lapsed (denied, expired, failing): what it would have brought may
                    # have been missed; poll now (within the rules every due time obeys), then
                    # by the plan, not at the safety net's day.
                    lapsed_at = self.upkeep.clock_high if now is None else now
                    self.state.push(slot, min(due, max(lapsed_at, 0.0)))

    # ------------------------------------------------------------------ time
    def refit(self, now: float) -> None:
        """Recompute rates, clusters (when due) and every plan now."""
        self.upkeep.refit(self.upkeep.tick(now))

    def budget_per_day(self) -> float:
        """M: the deployment's total fetches per day for the feeds held now."""
        return self.upkeep.budget_per_day()

    def base_interval_s(self) -> float:
        """The uniform interval the budget allows (used before a feed has a plan)."""
        return self.upkeep.base_interval_s()

    def next_due_at(self, now: float | None = None) -> float | None:
        """The earliest instant at which :meth:`pop_due` may return a feed (None: nothing)."""
        upkeep = self.upkeep
        if now is not None:
            upkeep.maintain(upkeep.tick(now))
        elif self.state.awaiting_count:  # feeds added with a last fetch wait for their first plan
            upkeep.refit(upkeep.clock_high)
        table = self.state.table
        if table.heap_n[0] == 0:
            return None
        due = float(table.heap_keys[0])
        tokens, rate, capacity, updated = self.state.bucket
        if not math.isnan(updated) and due > updated:  # tokens as of ``due`` if nothing is spent
            tokens = min(capacity, tokens + (due - updated) * rate)
        if tokens >= 1.0 - 1e-9:
            return due
        if rate <= 0:
            return _INF
        base = due if math.isnan(updated) else max(due, updated)
        return base + max((1.0 - tokens) / rate, 1e-3)

    def pop_due(self, now: float, limit: int | None = None) -> list[str]:
        """Feeds to fetch now (at most ``limit``), marked in flight until :meth:`record`.

        A due feed whose host is not ready is pushed back to the host's ready time; when the
        budget bucket is empty, the rest wait for the next token.
        """
        ids = self.state.feed_ids
        return [ids[slot] for slot in self.pop_due_slots(now, limit)]  # type: ignore[misc]

    def pop_due_slots(self, now: float, limit: int | None = None) -> np.ndarray:
        """:meth:`pop_due` by slot number (the simulator's hot path; ids via :meth:`feed_id_of`)."""
        upkeep, state = self.upkeep, self.state
        now = upkeep.tick(now)
        if now >= upkeep.next_refit_at or state.awaiting_count or upkeep.plans_stale:
            upkeep.maintain(now)
        table, hosts = state.table, state.hosts
        n = kernels.pop_due(now, -1 if limit is None else limit, table.heap_keys,
                            table.heap_slots, table.heap_n, table.F, table.I,
                            state.kernel_settings, hosts.HF, hosts.HI, hosts.ring, state.bucket,
                            table.out)
        state.spend.fetches += n
        return table.out[:n].copy()

    def feed_id_of(self, slot: int) -> str:
        ids = self.state.feed_ids
        feed_id = ids[slot] if 0 <= slot < len(ids) else None
        if feed_id is None:
            raise UnknownFeedError(f"slot {slot} holds no feed")
        return feed_id

    def slot_of(self, feed_id: str) -> int:
        return self.state.slot(feed_id)

    def release(self, feed_id: str, *, now: float) -> None:
        """The crawler dropped an in-flight fetch without a result: schedule the feed again soon."""
        slot = self.state.slot(feed_id)
        I = self.state.table.I
        if I[slot, I_FLAGS] & FLAG_IN_FLIGHT:
            I[slot, I_FLAGS] &= ~FLAG_IN_FLIGHT
            self.state.hosts.ended(I[[slot], I_HOST])
            now = self.upkeep.tick(now)
            self.state.push(slot, now + self.settings.min_interval_s)
            self._respace(int(I[slot, I_HOST]), now)

    def pause_host(self, host: str, until: float) -> None:
        """Start no fetch from ``host`` before ``until`` (it could not be reached lately:
        :mod:`feedmesh.fetch.host_state`); a longer pause already set stands. The feeds in the
        host's line move after the pause (their due times say so)."""
        hosts = self.state.hosts
        hosts.block(host, until)
        self._respace(hosts.row(host), until)

    def _respace(self, row: int, now: float) -> None:
        """The host holds feeds back: give them their places again at the host's pace now,
        from when it is next ready (one of its fetches just ended, or it was paused), feeds
        people just added first, so that each due time stays when the feed will be fetched
        and the host never idles while its line waits on places given at an older, slower
        pace."""
        hosts = self.state.hosts
        if not hosts.holds_back(row):
            return
        table = self.state.table
        hosts.HF[row, H_QUEUE] = kernels.respace_line(
            row, hosts.ready_at(row, now), hosts.step(row), table.heap_keys, table.heap_slots,
            table.heap_n, table.F, table.I, self.state.kernel_settings, hosts.HI)

    # ------------------------------------------------------------------ fetch reports
    def record(self, report: FetchReport) -> float:
        """Learn from one fetch and schedule the feed's next one; returns its due time."""
        slot = self.state.slot(report.feed_id)
        if report.hints is not None:
            self.set_hints(report.feed_id, report.hints)
        return self.record_slot(slot, report.fetched_at, report.outcome, report.new_entries,
                                report.published, report.entries_in_document,
                                max_age_s=report.max_age_s, retry_after_s=report.retry_after_s,
                                not_before=report.not_before, error_streak=report.error_streak,
                                elapsed_s=report.elapsed_s,
                                host_overloaded=report.host_overloaded)

    def record_slot(self, slot: int, fetched_at: float, outcome: FetchOutcome,
                    new_entries: int = 0, published: Sequence[float | None] = (),
                    entries_in_document: int = 0, *, max_age_s: float | None = None,
                    retry_after_s: float | None = None, not_before: float = 0.0,
                    error_streak: int | None = None, elapsed_s: float | None = None,
                    host_overloaded: bool | None = None) -> float:
        """:meth:`record` by slot number, without building a report.

        The next fetch is due no earlier than ``not_before``, the fetch state's decision (see
        :class:`~.records.FetchReport`). A fetch is a failure when its outcome is one or when
        the fetch state counts it as one (``error_streak`` > 0: a page that is not a feed comes
        with HTTP 200); a failed fetch teaches nothing about postings.

        The fetch's host is paced by the answer: ``elapsed_s`` (how long it took) sets the
        spacing of the host's next fetch starts, ``host_overloaded`` (default: a 429 or a
        timeout) doubles it (:meth:`~.table.HostTable.paced`).
        """
        state = self.state
        if host_overloaded is None:
            host_overloaded = outcome in (FetchOutcome.RATE_LIMITED, FetchOutcome.TIMEOUT)
        if state.table.I[slot, I_FLAGS] & FLAG_IN_FLIGHT:  # a fetch's answer (not a push)
            row = int(state.table.I[slot, I_HOST])
            state.hosts.paced(row, elapsed_s, host_overloaded)
            # (``fetched_at`` is when the fetch began; its end is now, the latest time seen)
            self._respace(row, max(self.upkeep.report_time(fetched_at), self.upkeep.clock_high))
        if outcome in _SUCCESS and not error_streak:
            if not_before > 0:  # kernels.push keeps every due time at or after the backoff
                state.table.F[slot, F_BACKOFF] = not_before
            dates = np.array([_NAN if t is None else t for t in published], dtype=np.float64)
            self.record_batch(np.array([slot]), fetched_at, np.array([new_entries]), dates,
                              np.array([0]), np.array([len(dates)]),
                              np.array([entries_in_document]),
                              np.array([_NAN if max_age_s is None else max_age_s]))
            return float(state.table.F[slot, F_DUE])
        now = self.upkeep.report_time(fetched_at)
        F, I = state.table.F, state.table.I
        if I[slot, I_FLAGS] & FLAG_IN_FLIGHT:
            state.hosts.ended(I[[slot], I_HOST])
        I[slot, I_FLAGS] &= ~FLAG_IN_FLIGHT
        F[slot, F_LAST_FETCH] = now
        if outcome is FetchOutcome.GONE:
            I[slot, I_FLAGS] |= FLAG_GONE
            state.active_count -= 1
            state.table.remove_from_heap(slot)
            F[slot, F_DUE] = _INF
            self.upkeep.plans_stale = True
            self.policy.on_removed(slot)
            state.note(slot, "gone", "410 Gone: no longer fetched")
            self.upkeep.update_kernel_settings()
            return _INF
        until = self._retry_not_before(slot, outcome, now, retry_after_s, not_before,
                                       error_streak)
        F[slot, F_BACKOFF] = until
        state.push(slot, max(self.upkeep.next_planned(slot, now), until,
                             now + self.settings.min_interval_s))
        return float(F[slot, F_DUE])

    def record_batch(self, slots: np.ndarray, fetched_at: float, new_entries: np.ndarray,
                     published: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                     entries_in_document: np.ndarray, max_age_s: np.ndarray | None = None) -> None:
        """Several fetches, all made at ``fetched_at``, all successful (OK, delta, 304).

        Fetch i found ``new_entries[i]`` new entries whose declared publish times (NaN where
        absent) are ``published[starts[i]:ends[i]]``; its document listed
        ``entries_in_document[i]`` entries and allowed caching for ``max_age_s[i]`` seconds (NaN:
        no hint). Arrays are int64 / float64; ``published`` may be a larger array (e.g. a whole
        trace) that the slices index into.
        """
        now = self.upkeep.report_time(fetched_at)
        if len(slots) == 0:
            return
        self._posting_times.learn(slots, now, new_entries, published, starts, ends)
        if max_age_s is None:
            if len(self._no_hint) < len(slots):
                self._no_hint = np.full(2 * len(slots), _NAN)
            max_age_s = self._no_hint
        state = self.state
        table = state.table
        flags = table.I[slots, I_FLAGS]
        state.hosts.ended(table.I[slots[(flags & FLAG_IN_FLIGHT) != 0], I_HOST])
        kernels.record_success(slots, now, new_entries, entries_in_document, max_age_s,
                               table.heap_keys, table.heap_slots, table.heap_n, table.F, table.I,
                               state.kernel_settings, table.pool, self.policy.mode,
                               getattr(self.policy, "totals", _EMPTY_F))

    def _retry_not_before(self, slot: int, outcome: FetchOutcome, now: float,
                          retry_after: float | None, not_before: float,
                          error_streak: int | None) -> float:
        """When a failed fetch of ``slot`` may be retried: the fetch state's decision when the
        report carries one, else the same rule (:func:`feedmesh.fetch.state.wait_after_failure`,
        default backoff policy) on the scheduler's own count. A 429 or a Retry-After also pauses
        the feed's host until then: per-host politeness lives in the scheduler's host table."""
        state = self.state
        I = state.table.I
        streak = error_streak if error_streak else int(I[slot, I_ERRORS]) + 1
        I[slot, I_ERRORS] = streak
        asked = retry_after if retry_after is not None and math.isfinite(retry_after) \
            and retry_after >= 0 else None
        if not_before > 0:
            until = not_before
        else:
            until = now + wait_after_failure(outcome, streak, asked, state.random.random())
        if asked is not None and until < now + asked - 1.0:
            state.note(slot, "retry_after",
                       f"Retry-After {asked:.0f}s capped at {until - now:.0f}s")
        if outcome is FetchOutcome.RATE_LIMITED or asked is not None:
            self.pause_host(state.host_names[slot], until)
        return until

    # ------------------------------------------------------------------ inspection
    def plan_of(self, slot: int) -> Plan | None:
        """The current plan of a slot (None before its first)."""
        return self.upkeep.view.plan_of(slot)

    def status(self, feed_id: str) -> FeedStatus:
        state = self.state
        slot = state.slot(feed_id)
        F, I = state.table.F, state.table.I
        flags = int(I[slot, I_FLAGS])
        if flags & FLAG_GONE:
            status = "gone"
        elif flags & FLAG_IN_FLIGHT:
            status = "in_flight"
        elif flags & FLAG_AWAITING:
            status = "waiting_plan"
        else:
            status = "scheduled"
        plan = self.plan_of(slot)
        learned = state.learner.summary(np.array([slot]), max(self.upkeep.clock_high, 0.0))
        due = float(F[slot, F_DUE])
        last, success = float(F[slot, F_LAST_FETCH]), float(F[slot, F_LAST_SUCCESS])
        return FeedStatus(
            feed_id=feed_id, host=state.host_names[slot], weight=float(F[slot, F_WEIGHT]),
            state=status, next_due_at=due if due < _INF else None,
            last_fetch_at=last if not math.isnan(last) else None,
            last_success_at=success if not math.isnan(success) else None,
            error_streak=int(I[slot, I_ERRORS]),
            planned_per_day=(len(plan.offsets_s) * DAY_S / plan.period_s) if plan else None,
            window_rate_per_day=float(learned.window_rate_per_day[0]),
            notes=tuple(sorted((state.notes[slot] or {}).values())))

    def statuses(self, feed_ids: Iterable[str] | None = None) -> list[FeedStatus]:
        return [self.status(f) for f in (self.state.slot_of if feed_ids is None else feed_ids)]

    # ------------------------------------------------------------------ persistence
    def snapshot(self, now: float) -> SchedulerSnapshot:
        """Everything needed to resume: feeds, due times, learned arrays, hosts, RNG states."""
        return take_snapshot(self.state, self.upkeep, self.policy, self.upkeep.tick(now))

    def to_bytes(self, now: float) -> bytes:
        """The snapshot as MessagePack (what the crawler persists)."""
        return msgspec.msgpack.encode(self.snapshot(now))

    @classmethod
    def restore(cls, snapshot: SchedulerSnapshot | bytes, *, now: float,
                settings: SchedulerSettings | None = None) -> Scheduler:
        """A scheduler that continues from ``snapshot`` at ``now``.

        Feeds that fell due while the process was down are spread over ``restart_spread_s`` (or
        longer if the budget needs it) instead of being fetched all at once; fetches that were in
        flight are treated as due. ``settings`` may change the policy or budget (plans are
        recomputed at once); the learning window must stay the same.
        """
        snapshot = decode_snapshot(snapshot)
        scheduler = cls(settings or snapshot.settings)
        load_snapshot(scheduler.state, scheduler.upkeep, scheduler.policy, snapshot, now=now)
        return scheduler
