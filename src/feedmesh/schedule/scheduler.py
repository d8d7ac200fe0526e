"""The scheduler: one object per deployment that says which feeds to fetch when.

It holds every feed's learned state (:mod:`.learning`), the chosen policy's plans
(:mod:`.policies`), per-host politeness and the global budget (:mod:`.limits`), and a heap of
due times. It never reads a clock: every call takes ``now`` (float epoch seconds). The same object
runs live inside the crawler and, with a simulated clock, inside ``feedmesh sim``::

    scheduler = Scheduler(SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=24))
    scheduler.add_feed("f1", now=now, host="example.org")
    while True:
        for feed_id in scheduler.pop_due(now):         # due, polite, within budget
            ...fetch it...
            scheduler.record(FetchReport(feed_id=feed_id, fetched_at=..., outcome=...))
        sleep until scheduler.next_due_at()

After each fetch the next due time is: the policy's next planned instant; at least T_min and at
most T_max later; no earlier than ttl / max-age allow (capped); outside skipHours/skipDays; after
any error backoff or Retry-After (capped, see ``record``); only every safety interval for feeds
whose WebSub push is live. ``pop_due`` then holds a due feed back while its host is inside its
minimum spacing, its per-minute cap or a server-requested pause, or while the budget bucket is
empty.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Iterable, Sequence

import msgspec
import numpy as np

from feedmesh.model import FetchOutcome

from .clusters import assign_clusters, fit_kmeans, normalized_profiles
from .errors import DuplicateFeedError, SnapshotError, UnknownFeedError
from .hints import FeedHints, next_allowed_time
from .learning import LearnedState, LearnedSummary
from .limits import BudgetBucket, HostLimiter
from .policies import Plan, RefitContext, make_policy
from .records import SNAPSHOT_FORMAT, FeedRecord, FeedStatus, FetchReport, SchedulerSnapshot
from .settings import DAY_S, SchedulerSettings

__all__ = ["Scheduler"]

_SUCCESS = frozenset({FetchOutcome.OK, FetchOutcome.DELTA, FetchOutcome.NOT_MODIFIED})
_CLOCK_SKEW_S = 300.0  # declared dates up to this far in the future are still believed
_BACKWARD_JUMP_S = 300.0  # now earlier than the latest now by more than this: a clock jump
_FORWARD_JUMP_S = 3600.0  # no call for this long: overdue feeds are re-spread, not burst
_OVERDUE_S = 60.0
_INF = math.inf


class Scheduler:
    """Which feeds are due, when; learns from every fetch. Pure: ``now`` is always passed in."""

    def __init__(self, settings: SchedulerSettings | None = None) -> None:
        self.settings = (settings or SchedulerSettings()).validated()
        s = self.settings
        self.policy = make_policy(s)
        self._rng = np.random.default_rng(s.seed)
        self._random = random.Random(s.seed)
        self._learner = LearnedState(window_days=s.rate_window_days,
                                     half_life_days=s.memory_half_life_days)
        self._hosts = HostLimiter(s.host_min_spacing_s, s.host_max_per_minute)
        self._bucket = BudgetBucket(0.0, s.budget_burst_s)
        self._heap: list[tuple[float, int, int]] = []
        self._slot_of: dict[str, int] = {}
        self._free: list[int] = []
        # per-slot state (Python lists: the hot path reads scalars)
        self._ids: list[str | None] = []
        self._host: list[str] = []
        self._weight: list[float] = []
        self._hints: list[FeedHints | None] = []
        self._due: list[float] = []
        self._version: list[int] = []
        self._in_flight: list[bool] = []
        self._gone: list[bool] = []
        self._awaiting_plan: list[bool] = []
        self._last_fetch: list[float | None] = []
        self._last_success: list[float | None] = []
        self._errors: list[int] = []
        self._rate_limited: list[int] = []
        self._backoff_until: list[float] = []
        self._phase: list[float] = []
        self._dither: list[float] = []
        self._plan: list[Plan | None] = []
        self._notes: list[dict[str, str] | None] = []
        self._centroids: np.ndarray | None = None
        self._clock_high = -_INF
        self._next_refit_at = -_INF
        self._next_cluster_refit_at = -_INF
        self._plans_stale = False
        self._awaiting_count = 0
        self._active_count = 0  # feeds held and not gone
        self._max_gap = self.policy.max_gap_s()
        self.clock_jumps: list[tuple[float, float]] = []
        """(latest now seen, now given) for every backward clock jump handled."""

    # ------------------------------------------------------------------ feeds
    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, feed_id: object) -> bool:
        return feed_id in self._slot_of

    def feed_ids(self) -> list[str]:
        return list(self._slot_of)

    def add_feed(self, feed_id: str, *, now: float, host: str = "", weight: float = 1.0,
                 hints: FeedHints | None = None, history: Sequence[float] = (),
                 history_since: float | None = None,
                 last_fetched_at: float | None = None) -> None:
        """Start scheduling ``feed_id``.

        ``history``: publish times of the feed's past posts (e.g. from the store, or a trace's
        training days); learned at once. They are taken as complete from ``history_since``
        (default: the oldest of them) up to ``now``; a feed watched for two weeks without a post
        is evidence of a slow feed, so pass ``history_since`` when you know it. ``last_fetched_at``:
        when the feed was last fetched, if it was; such a feed waits for its first plan and then
        follows it. A feed never fetched gets its first fetch spread over the next
        ``first_fetch_spread_s`` (so adding 100k feeds is not a burst).
        """
        if feed_id in self._slot_of:
            raise DuplicateFeedError(f"feed {feed_id!r} is already scheduled")
        if not (weight >= 0 and math.isfinite(weight)):
            raise ValueError(f"feed {feed_id!r}: weight must be a finite number >= 0, got {weight}")
        now = self._tick(now)
        reused = bool(self._free)
        slot = self._new_slot(feed_id)
        self._host[slot] = host or feed_id
        self._weight[slot] = float(weight)
        self._hints[slot] = hints
        self._phase[slot] = float(self._rng.random())
        self._dither[slot] = float(self._rng.random()) * self.settings.phase_dither_s
        self._learner.reset_slot(slot, observed_since=now, reused=reused)
        self._active_count += 1
        if hints is not None and hints.skips_everything:
            self._note(slot, "skip_hints", "skipHours/skipDays cover every hour; ignored")
        trusted = [t for t in history if math.isfinite(t) and t <= now + _CLOCK_SKEW_S]
        if trusted:
            self._learner.observe(slot, [min(t, now) for t in trusted])
            self._learner.extend_exposure(slot, min(trusted))
        if history_since is not None and math.isfinite(history_since):
            self._learner.extend_exposure(slot, min(history_since, now))
        if len(trusted) < len(history):
            self._note(slot, "history_dates", "history times in the future were ignored")
        self._plans_stale = True
        self.policy.on_added(slot, self.base_interval_s())
        if last_fetched_at is not None:
            self._last_fetch[slot] = float(last_fetched_at)
            self._last_success[slot] = float(last_fetched_at)
            self._awaiting_plan[slot] = True
            self._awaiting_count += 1
        else:
            self._push(slot, now + self._random.random() * self.settings.first_fetch_spread_s)

    def remove_feed(self, feed_id: str) -> None:
        """Stop scheduling ``feed_id`` and forget what was learned about it."""
        slot = self._slot(feed_id)
        del self._slot_of[feed_id]
        if not self._gone[slot]:
            self._active_count -= 1
        if self._awaiting_plan[slot]:
            self._awaiting_count -= 1
        self.policy.on_removed(slot)
        self._ids[slot] = None
        self._version[slot] += 1
        self._plan[slot] = None
        self._notes[slot] = None
        self._free.append(slot)
        self._plans_stale = True

    def set_weight(self, feed_id: str, weight: float) -> None:
        """Change a feed's importance (subscribers); used from the next refit on."""
        if not (weight >= 0 and math.isfinite(weight)):
            raise ValueError(f"feed {feed_id!r}: weight must be a finite number >= 0, got {weight}")
        self._weight[self._slot(feed_id)] = float(weight)
        self._plans_stale = True

    def set_hints(self, feed_id: str, hints: FeedHints) -> None:
        """Replace a feed's hints (e.g. the WebSub subscription went live or lapsed)."""
        slot = self._slot(feed_id)
        old = self._hints[slot]
        self._hints[slot] = hints
        if hints.skips_everything:
            self._note(slot, "skip_hints", "skipHours/skipDays cover every hour; ignored")
        if (old.websub_live if old else False) != hints.websub_live:
            self._plans_stale = True

    def set_host_limits(self, host: str, *, min_spacing_s: float | None = None,
                        max_per_minute: int | None = None) -> None:
        """Per-host politeness overrides (e.g. robots.txt Crawl-delay)."""
        self._hosts.set_limits(host, min_spacing_s=min_spacing_s, max_per_minute=max_per_minute)

    def note_push(self, feed_id: str, *, now: float, published: Sequence[float | None] = ()) -> None:
        """Entries arrived by WebSub push: learn from them like from a fetch."""
        slot = self._slot(feed_id)
        now = self._tick(now)
        self._learn(slot, len(published), published, now, self._last_fetch[slot])

    # ------------------------------------------------------------------ time
    def next_due_at(self, now: float | None = None) -> float | None:
        """The earliest instant at which :meth:`pop_due` may return a feed (None: nothing)."""
        if now is not None:
            self._maintain(self._tick(now))
        elif self._awaiting_count:  # feeds added with a last fetch wait for their first plan
            self._refit(self._clock_high)
        heap = self._heap
        while heap:
            due, slot, version = heap[0]
            if version == self._version[slot]:
                if self._bucket.tokens < 1.0 - 1e-9:
                    return max(due, self._bucket.next_token_at(due))
                return due
            heapq.heappop(heap)
        return None

    def pop_due(self, now: float, limit: int | None = None) -> list[str]:
        """Feeds to fetch now (at most ``limit``), marked in flight until :meth:`record`.

        A due feed whose host is not ready is pushed back to the host's ready time; when the
        budget bucket is empty, the rest wait for the next token.
        """
        ids = self._ids
        return [ids[slot] for slot in self.pop_due_slots(now, limit)]  # type: ignore[misc]

    def pop_due_slots(self, now: float, limit: int | None = None) -> list[int]:
        """:meth:`pop_due` by slot number (the simulator's hot path; ids via :meth:`feed_id_of`)."""
        now = self._tick(now)
        if now >= self._next_refit_at or self._awaiting_count or self._plans_stale:
            self._maintain(now)
        heap, versions, host_of = self._heap, self._version, self._host
        hosts = self._hosts
        host_states = hosts.states
        bucket = self._bucket
        bucket.refill(now)
        out: list[int] = []
        while heap and heap[0][0] <= now:
            if limit is not None and len(out) >= limit:
                break
            if bucket.tokens < 1.0 - 1e-9:
                break  # out of budget: everyone keeps their place in the queue
            _, slot, version = heapq.heappop(heap)
            if version != versions[slot]:
                continue
            host = host_of[slot]
            state = host_states.get(host)
            if state is None:
                state = hosts.state(host)
            else:
                ready = state.last_fetch_at + state.min_spacing_s
                if state.blocked_until > ready:
                    ready = state.blocked_until
                recent = state.recent
                if len(recent) == state.max_per_minute and recent[0] + 60.0 > ready:
                    ready = recent[0] + 60.0
                if ready > now:
                    self._push(slot, hosts.defer(host, ready))
                    continue
            bucket.tokens -= 1.0
            state.last_fetch_at = now
            state.recent.append(now)
            versions[slot] += 1
            self._due[slot] = _INF
            self._in_flight[slot] = True
            out.append(slot)
        return out

    def feed_id_of(self, slot: int) -> str:
        feed_id = self._ids[slot]
        if feed_id is None:
            raise UnknownFeedError(f"slot {slot} holds no feed")
        return feed_id

    def slot_of(self, feed_id: str) -> int:
        return self._slot(feed_id)

    def release(self, feed_id: str, *, now: float) -> None:
        """The crawler dropped an in-flight fetch without a result: schedule the feed again soon."""
        slot = self._slot(feed_id)
        if self._in_flight[slot]:
            self._in_flight[slot] = False
            self._push(slot, self._tick(now) + self.settings.min_interval_s)

    def record(self, report: FetchReport) -> float:
        """Learn from one fetch and schedule the feed's next one; returns its due time."""
        slot = self._slot(report.feed_id)
        if report.hints is not None:
            self.set_hints(report.feed_id, report.hints)
        return self.record_slot(slot, report.fetched_at, report.outcome, report.new_entries,
                                report.published, report.entries_in_document,
                                max_age_s=report.max_age_s, retry_after_s=report.retry_after_s)

    def record_slot(self, slot: int, fetched_at: float, outcome: FetchOutcome,
                    new_entries: int = 0, published: Sequence[float | None] = (),
                    entries_in_document: int = 0, *, max_age_s: float | None = None,
                    retry_after_s: float | None = None) -> float:
        """:meth:`record` by slot number, without building a report (the simulator's hot path)."""
        now = self._tick(fetched_at)
        s = self.settings
        self._in_flight[slot] = False
        previous_fetch = self._last_fetch[slot]
        self._last_fetch[slot] = now
        if outcome in _SUCCESS:
            self._errors[slot] = 0
            self._rate_limited[slot] = 0
            self._last_success[slot] = now
            if new_entries or published:
                self._learn(slot, new_entries, published, now, previous_fetch)
            policy = self.policy
            dither = self._dither[slot]
            if policy.plan_based and (plan := self._plan[slot]) is not None:
                due = plan.next_after(now - dither) + dither
            else:
                policy.on_result(slot, new_entries, entries_in_document, True)
                due = policy.next_fetch(self, slot, now - dither) + dither
            hint = max_age_s
            hints = self._hints[slot]
            if hints is not None and hints.ttl_s is not None:
                hint = max(hint or 0.0, hints.ttl_s)
            if hint is not None and hint > 0:
                due = max(due, now + min(hint, s.hint_max_s))
            limit = now + self._max_gap
            if due > limit:
                due = limit
        elif outcome is FetchOutcome.GONE:
            self._gone[slot] = True
            self._active_count -= 1
            self._version[slot] += 1
            self._due[slot] = _INF
            self._plans_stale = True
            self.policy.on_removed(slot)
            self._note(slot, "gone", "410 Gone: no longer fetched")
            return _INF
        else:
            due = self._after_error(slot, outcome, retry_after_s, now)
        floor = now + s.min_interval_s
        self._push(slot, due if due > floor else floor)
        return self._due[slot]

    def _after_error(self, slot: int, outcome: FetchOutcome, retry_after: float | None,
                     now: float) -> float:
        s = self.settings
        self._errors[slot] += 1
        streak = self._errors[slot]
        wait = min(s.backoff_base_s * 2.0 ** min(streak - 1, 60), s.backoff_max_s)
        wait *= 1.0 + s.backoff_jitter * self._random.random()
        if outcome is FetchOutcome.RATE_LIMITED or retry_after is not None:
            self._rate_limited[slot] += 1
            cap = min(s.retry_after_max_s * 2.0 ** min(self._rate_limited[slot] - 1, 60),
                      s.max_interval_s)
            if retry_after is not None and math.isfinite(retry_after) and retry_after >= 0:
                if retry_after > cap:
                    self._note(slot, "retry_after",
                               f"Retry-After {retry_after:.0f}s capped at {cap:.0f}s "
                               "(the cap doubles while the server keeps asking)")
                wait = min(retry_after, cap)
            self._hosts.block(self._host[slot], now + wait)
        self._backoff_until[slot] = now + wait
        planned = self.policy.next_fetch(self, slot, now - self._dither[slot]) + self._dither[slot]
        return max(planned, now + wait)

    def _learn(self, slot: int, count: int, published: Sequence[float | None], now: float,
               previous_fetch: float | None) -> None:
        """Turn new entries into posting times: declared dates when believable, else a guess."""
        lower = (previous_fetch - DAY_S) if previous_fetch is not None else (
            now - self.settings.rate_window_days * DAY_S)
        upper = now + _CLOCK_SKEW_S
        times: list[float] = [t for t in published if t is not None and lower <= t <= now]
        untrusted = 0
        if len(times) < len(published):  # the rare path: some dates are odd
            times = []
            for t in published:
                if t is not None and lower <= t <= upper:
                    times.append(t if t <= now else now)
                else:
                    untrusted += 1
        untrusted += max(0, count - len(published))
        if previous_fetch is None:
            if times:  # the first fetch shows history: the record is complete from its oldest
                self._learner.extend_exposure(slot, min(times))
            if untrusted:
                self._note(slot, "dates", "entries without believable dates on the first fetch "
                           "were not counted as posts")
        elif untrusted:
            # Posted some time since the previous fetch; the midpoint is the unbiased guess.
            guess = 0.5 * (max(previous_fetch, now - DAY_S) + now)
            times.extend([guess] * untrusted)
            self._note(slot, "dates", "entries with missing, future or absurd dates were "
                       "placed between the two fetches")
        if times:
            self._learner.observe(slot, times)

    # ------------------------------------------------------------------ refit
    def refit(self, now: float) -> None:
        """Recompute rates, clusters (when due) and every plan now."""
        now = self._tick(now)
        self._refit(now)

    def _maintain(self, now: float) -> None:
        if now >= self._next_refit_at or self._awaiting_count or (
                self._plans_stale and now >= self._next_refit_at - self.settings.refit_interval_s
                + 60.0):
            self._refit(now)

    def _polled_slots(self) -> np.ndarray:
        slots = [slot for slot in self._slot_of.values()
                 if not self._gone[slot] and not self._websub_live(slot)]
        return np.asarray(sorted(slots), dtype=np.int64)

    def _websub_live(self, slot: int) -> bool:
        hints = self._hints[slot]
        return hints is not None and hints.websub_live

    def budget_per_day(self) -> float:
        """M: the deployment's total fetches per day for the feeds held now."""
        return self.settings.total_budget_per_day(self._active_count)

    def base_interval_s(self) -> float:
        """The uniform interval the budget allows (used before a feed has a plan)."""
        active = max(1, self._active_count)
        per_day = self.budget_per_day() / active
        interval = DAY_S / per_day if per_day > 0 else self.settings.max_interval_s
        return min(max(interval, self.settings.min_interval_s), self.settings.max_interval_s)

    def _refit(self, now: float) -> None:
        s = self.settings
        slots = self._polled_slots()
        self._learner.ensure_capacity(len(self._ids))
        total = self.budget_per_day()
        live = sum(1 for slot in self._slot_of.values()
                   if not self._gone[slot] and self._websub_live(slot))
        budget = max(total - live * DAY_S / s.websub_safety_interval_s, 0.0)
        self._bucket.set_rate(total, now)
        context = RefitContext(now=now, settings=s, slots=slots, budget_per_day=budget,
                               source=self)
        max_gap = self._max_gap
        for slot, plan in self.policy.refit(context).items():
            previous = self._plan[slot]
            self._plan[slot] = plan
            if previous is None or plan == previous or self._in_flight[slot] or \
                    self._awaiting_plan[slot] or self._backoff_until[slot] > now:
                continue
            # The new plan applies from now on, not after the fetch the old plan had scheduled
            # (moving both ways keeps the spend at the budget), within the policy's largest gap.
            dither = self._dither[slot]
            due = plan.next_after(now - dither) + dither
            last = self._last_fetch[slot]
            if last is not None:
                due = min(due, max(last + max_gap, now))
            self._push(slot, due)
        self._plans_stale = False
        self._next_refit_at = now + s.refit_interval_s
        if self._awaiting_count:
            waiting = [slot for slot in self._slot_of.values() if self._awaiting_plan[slot]]
            for slot in waiting:
                self._awaiting_plan[slot] = False
                last = self._last_fetch[slot]
                assert last is not None
                dither = self._dither[slot]
                due = self.policy.next_fetch(self, slot, last - dither) + dither
                self._push(slot, min(due, last + self._max_gap))
            self._awaiting_count = 0
            self._respread_overdue(now)

    # -- what a RefitContext reads (computed only when a policy asks) --------------------------
    def column(self, name: str, slots: np.ndarray) -> np.ndarray:
        if name == "weight":
            return np.array([self._weight[i] for i in slots], dtype=np.float64)
        if name == "phase":
            return np.array([self._phase[i] for i in slots], dtype=np.float64)
        if name == "prior_rate":
            return np.array([(h.prior_rate_per_day() if (h := self._hints[i]) else None) or np.nan
                             for i in slots], dtype=np.float64)
        raise KeyError(name)

    def learned(self, slots: np.ndarray, now: float) -> LearnedSummary:
        return self._learner.summary(slots, now)

    def clusters(self, learned: LearnedSummary, now: float) -> tuple[np.ndarray, np.ndarray]:
        s = self.settings
        profiles = normalized_profiles(learned.window_hourly)
        if self._centroids is None or now >= self._next_cluster_refit_at:
            enough = learned.window_count >= s.cluster_min_posts
            self._centroids = fit_kmeans(profiles[enough], s.clusters, self._rng,
                                         init=self._centroids)
            self._next_cluster_refit_at = now + s.cluster_refit_interval_s
        return self._centroids, assign_clusters(profiles, self._centroids)

    # ------------------------------------------------------------------ clock
    def _tick(self, now: float) -> float:
        if not math.isfinite(now):
            raise ValueError(f"now must be a finite epoch time, got {now}")
        high = self._clock_high
        if now >= high:
            if now - high > _FORWARD_JUMP_S and high > -_INF:
                self._clock_high = now
                self._respread_overdue(now)
            self._clock_high = now
            return now
        if high - now > _BACKWARD_JUMP_S:
            self.clock_jumps.append((high, now))
            self._shift_time(now - high)
            self._clock_high = now
        return now

    def _shift_time(self, delta: float) -> None:
        """The clock stepped by ``delta``: move every stored future instant with it."""
        for slot in self._slot_of.values():
            if self._due[slot] < _INF:
                self._due[slot] += delta
            if self._backoff_until[slot]:
                self._backoff_until[slot] += delta
            for series in (self._last_fetch, self._last_success):
                if series[slot] is not None:
                    series[slot] += delta  # type: ignore[operator]
        self._heap = [(d + delta, slot, v) for d, slot, v in self._heap]
        heapq.heapify(self._heap)
        self._hosts.shift(delta)
        self._next_refit_at += delta
        self._next_cluster_refit_at += delta
        self._bucket.updated_at = None

    def _respread_overdue(self, now: float) -> None:
        """Feeds due long ago (restart, suspend) are spread over a window instead of all at once."""
        overdue = [slot for slot in self._slot_of.values()
                   if self._due[slot] < now - _OVERDUE_S and not self._in_flight[slot]]
        if not overdue:
            return
        rate_per_s = self.budget_per_day() / DAY_S
        window = max(self.settings.restart_spread_s, len(overdue) / rate_per_s
                     if rate_per_s > 0 else 0.0)
        overdue.sort(key=lambda slot: self._due[slot])  # the most overdue go first
        for rank, slot in enumerate(overdue):
            jitter = self._random.random() / len(overdue)
            self._push(slot, now + window * (rank / len(overdue) + jitter))

    # ------------------------------------------------------------------ helpers
    def _slot(self, feed_id: str) -> int:
        slot = self._slot_of.get(feed_id)
        if slot is None:
            raise UnknownFeedError(f"no feed {feed_id!r} is scheduled")
        return slot

    def _new_slot(self, feed_id: str) -> int:
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self._ids)
            for series, default in (
                (self._ids, None), (self._host, ""), (self._weight, 1.0), (self._hints, None),
                (self._due, _INF), (self._version, 0), (self._in_flight, False),
                (self._gone, False), (self._awaiting_plan, False), (self._last_fetch, None),
                (self._last_success, None), (self._errors, 0), (self._rate_limited, 0),
                (self._backoff_until, 0.0), (self._phase, 0.0), (self._dither, 0.0),
                (self._plan, None), (self._notes, None),
            ):
                series.append(default)  # type: ignore[attr-defined]
            self._learner.ensure_capacity(slot + 1)
        self._ids[slot] = feed_id
        self._slot_of[feed_id] = slot
        self._due[slot] = _INF
        self._version[slot] += 1
        self._in_flight[slot] = self._gone[slot] = self._awaiting_plan[slot] = False
        self._last_fetch[slot] = self._last_success[slot] = None
        self._errors[slot] = self._rate_limited[slot] = 0
        self._backoff_until[slot] = 0.0
        self._plan[slot] = None
        self._notes[slot] = None
        return slot

    def _push(self, slot: int, due: float) -> None:
        hints = self._hints[slot]
        if hints is not None:
            s = self.settings
            last = self._last_fetch[slot]
            if hints.websub_live and last is not None:
                due = max(due, last + s.websub_safety_interval_s)
            if s.honour_skip_hours and (hints.skip_hours_mask or hints.skip_days_mask):
                due = next_allowed_time(due, hints)
        backoff = self._backoff_until[slot]
        if backoff > due:
            due = backoff
        version = self._version[slot] + 1
        self._version[slot] = version
        self._due[slot] = due
        heapq.heappush(self._heap, (due, slot, version))

    def _note(self, slot: int, kind: str, message: str) -> None:
        notes = self._notes[slot]
        if notes is None:
            notes = self._notes[slot] = {}
        notes[kind] = message

    def plan_of(self, slot: int) -> Plan | None:
        """The current plan of a slot (policies call this)."""
        return self._plan[slot]

    # ------------------------------------------------------------------ inspection
    def status(self, feed_id: str) -> FeedStatus:
        slot = self._slot(feed_id)
        if self._gone[slot]:
            state = "gone"
        elif self._in_flight[slot]:
            state = "in_flight"
        elif self._awaiting_plan[slot]:
            state = "waiting_plan"
        else:
            state = "scheduled"
        plan = self._plan[slot]
        learned = self._learner.summary(np.array([slot]), max(self._clock_high, 0.0))
        due = self._due[slot]
        return FeedStatus(
            feed_id=feed_id, host=self._host[slot], weight=self._weight[slot], state=state,
            next_due_at=due if due < _INF else None, last_fetch_at=self._last_fetch[slot],
            last_success_at=self._last_success[slot], error_streak=self._errors[slot],
            planned_per_day=(len(plan.offsets_s) * DAY_S / plan.period_s) if plan else None,
            window_rate_per_day=float(learned.window_rate_per_day[0]),
            notes=tuple(sorted((self._notes[slot] or {}).values())))

    def statuses(self, feed_ids: Iterable[str] | None = None) -> list[FeedStatus]:
        return [self.status(f) for f in (self._slot_of if feed_ids is None else feed_ids)]

    # ------------------------------------------------------------------ persistence
    def snapshot(self, now: float) -> SchedulerSnapshot:
        """Everything needed to resume: feeds, due times, learned arrays, hosts, RNG states."""
        now = self._tick(now)
        slots = sorted(self._slot_of.values())
        feeds = []
        for slot in slots:
            due = self._due[slot]
            feeds.append(FeedRecord(
                feed_id=self._ids[slot], slot=slot, host=self._host[slot],  # type: ignore[arg-type]
                weight=self._weight[slot], hints=self._hints[slot],
                next_due_at=due if due < _INF else None, in_flight=self._in_flight[slot],
                gone=self._gone[slot], awaiting_plan=self._awaiting_plan[slot],
                last_fetch_at=self._last_fetch[slot], last_success_at=self._last_success[slot],
                error_streak=self._errors[slot], rate_limit_streak=self._rate_limited[slot],
                backoff_until=self._backoff_until[slot], phase=self._phase[slot],
                dither_s=self._dither[slot],
                notes=tuple(f"{k}={v}" for k, v in sorted((self._notes[slot] or {}).items()))))
        return SchedulerSnapshot(
            format=SNAPSHOT_FORMAT, saved_at=now, settings=self.settings, feeds=feeds,
            hosts=self._hosts.records(), learned=self._learner.to_state(np.asarray(slots)),
            centroids=None if self._centroids is None else self._centroids.tolist(),
            budget_tokens=self._bucket.tokens, clock_high=self._clock_high,
            next_refit_at=self._next_refit_at, next_cluster_refit_at=self._next_cluster_refit_at,
            policy_state=self.policy.state(),
            rng_state=_ints_to_text(self._rng.bit_generator.state),
            random_state=list(self._random.getstate()))

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
        if isinstance(snapshot, (bytes, bytearray, memoryview)):
            try:
                snapshot = msgspec.msgpack.decode(snapshot, type=SchedulerSnapshot)
            except (msgspec.DecodeError, msgspec.ValidationError) as error:
                raise SnapshotError(f"cannot decode scheduler snapshot: {error}") from error
        if snapshot.format != SNAPSHOT_FORMAT:
            raise SnapshotError(f"snapshot format {snapshot.format} is not supported "
                                f"(this version reads {SNAPSHOT_FORMAT})")
        scheduler = cls(settings or snapshot.settings)
        for record in snapshot.feeds:
            slot = scheduler._new_slot(record.feed_id)
            scheduler._active_count += 0 if record.gone else 1
            scheduler._host[slot] = record.host
            scheduler._weight[slot] = record.weight
            scheduler._hints[slot] = record.hints
            scheduler._gone[slot] = record.gone
            scheduler._last_fetch[slot] = record.last_fetch_at
            scheduler._last_success[slot] = record.last_success_at
            scheduler._errors[slot] = record.error_streak
            scheduler._rate_limited[slot] = record.rate_limit_streak
            scheduler._backoff_until[slot] = record.backoff_until
            scheduler._phase[slot] = record.phase
            scheduler._dither[slot] = record.dither_s
            scheduler._notes[slot] = dict(n.split("=", 1) for n in record.notes) or None
            scheduler.policy.on_added(slot, 86400.0)
        slots = np.arange(len(snapshot.feeds))
        scheduler._learner.ensure_capacity(len(slots))
        try:
            scheduler._learner.load_state(snapshot.learned, slots)
        except (KeyError, ValueError, TypeError) as error:
            raise SnapshotError(f"learned state in the snapshot is unusable: {error}") from error
        scheduler._hosts.load(list(snapshot.hosts))
        if snapshot.centroids is not None:
            scheduler._centroids = np.asarray(snapshot.centroids, dtype=np.float64)
        scheduler._next_cluster_refit_at = snapshot.next_cluster_refit_at
        scheduler._bucket.tokens = snapshot.budget_tokens
        slot_map = {record.slot: new for new, record in enumerate(snapshot.feeds)}
        scheduler.policy.load_state(snapshot.policy_state, slot_map)
        scheduler._rng.bit_generator.state = _text_to_ints(snapshot.rng_state)
        state = snapshot.random_state
        scheduler._random.setstate((state[0], tuple(state[1]), state[2]))  # type: ignore[arg-type]
        scheduler._clock_high = -_INF
        now = scheduler._tick(now)
        scheduler._refit(now)
        for new, record in enumerate(snapshot.feeds):
            if record.gone:
                continue
            due = record.next_due_at
            if record.in_flight or record.awaiting_plan or due is None:
                due = now - 2 * _OVERDUE_S  # fetch soon, spread with the other overdue feeds
            scheduler._push(new, due)
        scheduler._respread_overdue(now)
        return scheduler


def _ints_to_text(value: object) -> object:
    """numpy's PCG64 state holds 128-bit integers; MessagePack holds 64. Store them as text."""
    if isinstance(value, dict):
        return {k: _ints_to_text(v) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool):
        return f"int:{value}"
    return value


def _text_to_ints(value: object) -> object:
    if isinstance(value, dict):
        return {k: _text_to_ints(v) for k, v in value.items()}
    if isinstance(value, str) and value.startswith("int:"):
        return int(value[4:])
    return value
