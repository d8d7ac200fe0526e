"""What the scheduler does between fetches: refits (learned summaries, clusters, the policy's
new plans and how re-planned feeds move onto them) and the clock (forward and backward jumps,
re-spreading overdue feeds). A mixin of :class:`~.scheduler.Scheduler`, whose state it uses;
kept apart so that each file holds one idea.
"""

from __future__ import annotations

import math

import numpy as np

from . import kernels
from .clusters import assign_clusters, fit_kmeans, normalized_profiles
from .kernels import (
    F_BACKOFF,
    F_DITHER,
    F_DUE,
    F_LAST_FETCH,
    F_LAST_SUCCESS,
    F_PHASE,
    F_WEIGHT,
    FLAG_AWAITING,
    FLAG_GONE,
    FLAG_IN_FLIGHT,
    FLAG_WEBSUB,
    I_FLAGS,
)
from .learning import LearnedSummary
from .policies import Plan, PlanBatch, RefitContext
from .units import DAY_S

__all__ = ["SchedulerUpkeep"]

CLOCK_SKEW_S = 300.0  # declared dates up to this far in the future are still believed
_BACKWARD_JUMP_S = 300.0  # now earlier than the latest now by more than this: a clock jump
_FORWARD_JUMP_S = 3600.0  # no call for this long: overdue feeds are re-spread, not burst
_OVERDUE_S = 60.0
_LABEL_STICKINESS = 1.5  # a feed changes cluster when another centroid is clearly nearer
_INF = math.inf
_NAN = math.nan


class SchedulerUpkeep:
    """Refits and clock handling (mixed into :class:`~.scheduler.Scheduler`)."""

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

    def _held(self) -> np.ndarray:
        """Slots that hold a feed, in order."""
        return np.asarray(sorted(self._slot_of.values()), dtype=np.int64)

    def _polled_slots(self) -> np.ndarray:
        slots = self._held()
        flags = self._table.I[slots, I_FLAGS]
        return slots[(flags & (FLAG_GONE | FLAG_WEBSUB)) == 0]

    def budget_per_day(self) -> float:
        """M: the deployment's total fetches per day for the feeds held now."""
        return self.settings.total_budget_per_day(self._active_count)

    def base_interval_s(self) -> float:
        """The uniform interval the budget allows (used before a feed has a plan)."""
        active = max(1, self._active_count)
        per_day = self.budget_per_day() / active
        interval = DAY_S / per_day if per_day > 0 else self.settings.max_interval_s
        return min(max(interval, self.settings.min_interval_s), self.settings.max_interval_s)

    def _update_kernel_settings(self) -> None:
        s, K = self.settings, self._K
        K[kernels.K_MIN_INTERVAL] = s.min_interval_s
        K[kernels.K_MAX_GAP] = self._max_gap
        K[kernels.K_HINT_MAX] = s.hint_max_s
        K[kernels.K_WEBSUB_S] = s.websub_safety_interval_s
        K[kernels.K_HONOUR_SKIP] = 1.0 if s.honour_skip_hours else 0.0
        K[kernels.K_BASE_INTERVAL] = self.base_interval_s()
        K[kernels.K_TARGET_SHARE] = s.adaptive_target_new_share
        K[kernels.K_T_MIN] = s.min_interval_s
        K[kernels.K_T_MAX] = s.max_interval_s
        K[kernels.K_SKEW] = CLOCK_SKEW_S
        K[kernels.K_DAY] = DAY_S
        K[kernels.K_WINDOW_DAYS] = s.rate_window_days

    def _set_budget_rate(self, per_day: float, now: float) -> None:
        bucket = self._bucket_state
        kernels.bucket_refill(bucket, now)
        was_unset = bucket[1] <= 0
        bucket[1] = per_day / DAY_S
        bucket[2] = max(1.0, bucket[1] * self.settings.budget_burst_s)
        bucket[0] = bucket[2] if was_unset else min(bucket[0], bucket[2])  # a new one is full

    def _refit(self, now: float) -> None:
        s = self.settings
        self._update_kernel_settings()
        slots = self._polled_slots()
        self._learner.ensure_capacity(len(self._ids))
        total = self.budget_per_day()
        held = self._held()
        flags = self._table.I[held, I_FLAGS]
        live = int((((flags & FLAG_WEBSUB) != 0) & ((flags & FLAG_GONE) == 0)).sum())
        nominal = max(total - live * DAY_S / s.websub_safety_interval_s, 0.0)
        budget = nominal * self._spend.update(now, total)
        self._set_budget_rate(total, now)
        context = RefitContext(now=now, settings=s, slots=slots, budget_per_day=budget,
                               source=self, nominal_budget_per_day=nominal)
        plans = self.policy.refit(context)
        self._max_gap = self.policy.max_gap_s()  # it may follow the budget
        self._K[kernels.K_MAX_GAP] = self._max_gap
        self._install(plans, now)
        self._plans_stale = False
        self._next_refit_at = now + s.refit_interval_s
        if self._awaiting_count:
            I, F = self._table.I, self._table.F
            waiting = held[(I[held, I_FLAGS] & FLAG_AWAITING) != 0]
            for slot in waiting:
                slot = int(slot)
                I[slot, I_FLAGS] &= ~FLAG_AWAITING
                last = float(F[slot, F_LAST_FETCH])
                due = self._next_planned(slot, last)
                self._push(slot, min(due, last + self._max_gap))
            self._awaiting_count = 0
            self._respread_overdue(now)

    def _install(self, plans: dict[int, Plan] | list[PlanBatch], now: float) -> None:
        """Store new plans and move each re-planned feed's next fetch onto its new plan."""
        table = self._table
        batches = plans if isinstance(plans, list) else PlanBatch.from_plans(plans)
        for batch in batches:
            if len(batch.slots) == 0:
                continue
            had, changed = table.set_plans(batch.slots, batch.period_s, batch.offsets_s,
                                           batch.origin_s)
            move = had & changed
            if not move.any():
                continue
            moved = batch.slots[move]
            F, I = table.F, table.I
            ready = ((I[moved, I_FLAGS] & (FLAG_IN_FLIGHT | FLAG_AWAITING | FLAG_GONE)) == 0) & \
                (F[moved, F_BACKOFF] <= now)
            kernels.replan(moved[ready], now, batch.longest_gaps()[move][ready], table.heap_keys,
                        table.heap_slots, table.heap_n, F, I, self._K, table.pool)

    # -- what a RefitContext reads (computed only when a policy asks) --------------------------
    def column(self, name: str, slots: np.ndarray) -> np.ndarray:
        F = self._table.F
        if name == "weight":
            return F[slots, F_WEIGHT].copy()
        if name == "phase":
            return F[slots, F_PHASE].copy()
        if name == "last_fetch_plan_time":
            return F[slots, F_LAST_FETCH] - F[slots, F_DITHER]
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
        slots = learned.slots
        if len(self._labels) < len(self._ids):
            self._labels = np.concatenate(
                [self._labels, np.full(len(self._ids) - len(self._labels), -1, dtype=np.int64)])
        labels = assign_clusters(profiles, self._centroids, previous=self._labels[slots],
                                 stickiness=_LABEL_STICKINESS)
        self._labels[slots] = labels
        return self._centroids, labels

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

    def _report_time(self, fetched_at: float) -> float:
        """The time of a fetch report. Unlike the ``now`` of the other calls it is not a clock
        reading: a fetch that took a while (a slow server, a queue) reports when it was made,
        minutes before the latest ``now`` perhaps, and that is no backward clock jump (taking it
        for one would move the whole schedule back). A later one moves the clock on."""
        if not math.isfinite(fetched_at):
            raise ValueError(f"fetched_at must be a finite epoch time, got {fetched_at}")
        return self._tick(fetched_at) if fetched_at >= self._clock_high else fetched_at

    def _shift_time(self, delta: float) -> None:
        """The clock stepped by ``delta``: move every stored future instant with it."""
        slots = self._held()
        F = self._table.F
        for field in (F_DUE, F_LAST_FETCH, F_LAST_SUCCESS):
            F[slots, field] += delta  # inf and NaN stay what they are
        backoff = F[slots, F_BACKOFF]
        F[slots, F_BACKOFF] = np.where(backoff != 0.0, backoff + delta, 0.0)
        self._table.shift_heap(delta)
        self._hosts.shift(delta)
        self._spend.shift(delta)
        self._next_refit_at += delta
        self._next_cluster_refit_at += delta
        self._bucket_state[3] = _NAN

    def _respread_overdue(self, now: float) -> None:
        """Feeds due long ago (restart, suspend) are spread over a window instead of all at once."""
        slots = self._held()
        if len(slots) == 0:
            return
        F, I = self._table.F, self._table.I
        due = F[slots, F_DUE]
        overdue = slots[(due < now - _OVERDUE_S) & ((I[slots, I_FLAGS] & FLAG_IN_FLIGHT) == 0)]
        if len(overdue) == 0:
            return
        rate_per_s = self.budget_per_day() / DAY_S
        count = len(overdue)
        window = max(self.settings.restart_spread_s, count / rate_per_s if rate_per_s > 0 else 0.0)
        overdue = overdue[np.argsort(F[overdue, F_DUE], kind="stable")]  # most overdue first
        for rank, slot in enumerate(overdue):
            jitter = self._random.random() / count
            self._push(int(slot), now + window * (rank / count + jitter))

