"""What the scheduler does between fetches: refits (learned summaries, clusters, the policy's
new plans and how re-planned feeds move onto them) and the clock (forward and backward jumps,
re-spreading overdue feeds).

:class:`Upkeep` is a component of :class:`~.scheduler.Scheduler`: it owns the state of those two
jobs (the clock's high-water mark, when the next refits are due, the clusters) and works on the
scheduler's :class:`~.scheduler_state.SchedulerState` and policy, which it is given.
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
from .policies import Plan, PlanBatch, Policy, PolicyView, RefitContext
from .scheduler_state import SchedulerState
from .units import DAY_S

__all__ = ["CLOCK_SKEW_S", "Upkeep"]

CLOCK_SKEW_S = 300.0  # declared dates up to this far in the future are still believed
_BACKWARD_JUMP_S = 300.0  # now earlier than the latest now by more than this: a clock jump
_FORWARD_JUMP_S = 3600.0  # no call for this long: overdue feeds are re-spread, not burst
_OVERDUE_S = 60.0
_LABEL_STICKINESS = 1.5  # a feed changes cluster when another centroid is clearly nearer
_INF = math.inf
_NAN = math.nan


class Upkeep:
    """Refits and clock handling for one scheduler (also the :class:`~.policies.RefitSource`
    that a refit's context reads the learned arrays from)."""

    def __init__(self, state: SchedulerState, policy: Policy) -> None:
        self.state = state
        self.policy = policy
        self.view = PolicyView(state.table, state.kernel_settings)
        """What the policy reads when it picks a feed's next fetch."""
        self.clock_high = -_INF
        """The latest ``now`` seen (a much earlier one is a backward clock jump)."""
        self.clock_jumps: list[tuple[float, float]] = []
        """(latest now seen, now given) for every backward clock jump handled."""
        self.next_refit_at = -_INF
        """When plans are recomputed next (every ``refit_interval_s``)."""
        self.next_cluster_refit_at = -_INF
        """When the K-means clusters are refit next (every ``cluster_refit_interval_s``)."""
        self.plans_stale = False
        """Feeds were added, removed or changed since the last refit."""
        self.centroids: np.ndarray | None = None
        """The K-means centroids (K x 24) of the last cluster refit."""
        self.labels = np.zeros(0, dtype=np.int64)
        """Each slot's cluster at the last refit (-1: none yet)."""
        self.max_gap = policy.max_gap_s()
        """The longest a healthy feed may go unfetched (the policy's, which may follow the
        budget)."""

    # ------------------------------------------------------------------ refit
    def maintain(self, now: float) -> None:
        """Refit when one is due, feeds wait for a first plan, or plans went stale a while ago."""
        refit_interval_s = self.state.settings.refit_interval_s
        if now >= self.next_refit_at or self.state.awaiting_count or (
                self.plans_stale and now >= self.next_refit_at - refit_interval_s + 60.0):
            self.refit(now)

    def budget_per_day(self) -> float:
        """M: the deployment's total fetches per day for the feeds held now."""
        return self.state.settings.total_budget_per_day(self.state.active_count)

    def base_interval_s(self) -> float:
        """The uniform interval the budget allows (used before a feed has a plan)."""
        s = self.state.settings
        active = max(1, self.state.active_count)
        per_day = self.budget_per_day() / active
        interval = DAY_S / per_day if per_day > 0 else s.max_interval_s
        return min(max(interval, s.min_interval_s), s.max_interval_s)

    def update_kernel_settings(self) -> None:
        """Copy the settings (and what follows from the feeds held) to the kernels' array."""
        s, K = self.state.settings, self.state.kernel_settings
        K[kernels.K_MIN_INTERVAL] = s.min_interval_s
        K[kernels.K_MAX_GAP] = self.max_gap
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
        K[kernels.K_HOST_CONCURRENCY] = s.host_concurrency

    def follow_budget(self, now: float) -> None:
        """Set the budget bucket for the feeds held now, at once (feeds were added or removed):
        without it a scheduler started empty kept a bucket of rate 0 and one token until the
        next refit, a minute later, and an imported list waited that long for all but its first
        fetch."""
        self._set_budget_rate(self.budget_per_day(), now)

    def _set_budget_rate(self, per_day: float, now: float) -> None:
        """The bucket's rate for ``per_day`` fetches a day; a new bucket starts full, and one
        that grows (feeds were added) gains what it grew by (each feed brings its burst)."""
        bucket = self.state.bucket
        kernels.bucket_refill(bucket, now)
        was_unset = bucket[1] <= 0
        grown = 0.0 if was_unset else bucket[2]
        bucket[1] = per_day / DAY_S
        bucket[2] = max(1.0, bucket[1] * self.state.settings.budget_burst_s)
        if was_unset:  # a new one is full
            bucket[0] = bucket[2]
        else:
            bucket[0] = min(bucket[0] + max(0.0, bucket[2] - grown), bucket[2])

    def refit(self, now: float) -> None:
        """Recompute rates, clusters (when due) and every plan at ``now`` (already ticked)."""
        state, s = self.state, self.state.settings
        self.update_kernel_settings()
        slots = state.polled_slots()
        state.learner.ensure_capacity(len(state.feed_ids))
        total = self.budget_per_day()
        held = state.held_slots()
        flags = state.table.I[held, I_FLAGS]
        live = int((((flags & FLAG_WEBSUB) != 0) & ((flags & FLAG_GONE) == 0)).sum())
        nominal = max(total - live * DAY_S / s.websub_safety_interval_s, 0.0)
        budget = nominal * state.spend.update(now, total)
        self._set_budget_rate(total, now)
        context = RefitContext(now=now, settings=s, slots=slots, budget_per_day=budget,
                               source=self, nominal_budget_per_day=nominal)
        plans = self.policy.refit(context)
        self.max_gap = self.policy.max_gap_s()  # it may follow the budget
        state.kernel_settings[kernels.K_MAX_GAP] = self.max_gap
        self._install(plans, now)
        self.plans_stale = False
        self.next_refit_at = now + s.refit_interval_s
        if state.awaiting_count:
            I, F = state.table.I, state.table.F
            waiting = held[(I[held, I_FLAGS] & FLAG_AWAITING) != 0]
            for slot in waiting:
                slot = int(slot)
                I[slot, I_FLAGS] &= ~FLAG_AWAITING
                last = float(F[slot, F_LAST_FETCH])
                due = self.next_planned(slot, last)
                state.push(slot, min(due, last + self.max_gap))
            state.awaiting_count = 0
            self.respread_overdue(now)

    def next_planned(self, slot: int, now: float) -> float:
        """The policy's next instant for ``slot`` after a fetch at ``now`` (dither included)."""
        dither = float(self.state.table.F[slot, F_DITHER])
        return self.policy.next_fetch(self.view, slot, now - dither) + dither

    def _install(self, plans: dict[int, Plan] | list[PlanBatch], now: float) -> None:
        """Store new plans and move each re-planned feed's next fetch onto its new plan."""
        table = self.state.table
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
                           table.heap_slots, table.heap_n, F, I, self.state.kernel_settings,
                           table.pool)

    # -- what a RefitContext reads (computed only when a policy asks) --------------------------
    def column(self, name: str, slots: np.ndarray) -> np.ndarray:
        F = self.state.table.F
        if name == "weight":
            return F[slots, F_WEIGHT].copy()
        if name == "phase":
            return F[slots, F_PHASE].copy()
        if name == "last_fetch_plan_time":
            return F[slots, F_LAST_FETCH] - F[slots, F_DITHER]
        if name == "prior_rate":
            hints = self.state.hints
            return np.array([(h.prior_rate_per_day() if (h := hints[i]) else None) or np.nan
                             for i in slots], dtype=np.float64)
        raise KeyError(name)

    def learned(self, slots: np.ndarray, now: float) -> LearnedSummary:
        return self.state.learner.summary(slots, now)

    def clusters(self, learned: LearnedSummary, now: float) -> tuple[np.ndarray, np.ndarray]:
        s = self.state.settings
        profiles = normalized_profiles(learned.window_hourly)
        if self.centroids is None or now >= self.next_cluster_refit_at:
            enough = learned.window_count >= s.cluster_min_posts
            self.centroids = fit_kmeans(profiles[enough], s.clusters, self.state.rng,
                                        init=self.centroids)
            self.next_cluster_refit_at = now + s.cluster_refit_interval_s
        slots = learned.slots
        size = len(self.state.feed_ids)
        if len(self.labels) < size:
            self.labels = np.concatenate(
                [self.labels, np.full(size - len(self.labels), -1, dtype=np.int64)])
        labels = assign_clusters(profiles, self.centroids, previous=self.labels[slots],
                                 stickiness=_LABEL_STICKINESS)
        self.labels[slots] = labels
        return self.centroids, labels

    def forget_cluster(self, slot: int) -> None:
        """A new feed took ``slot``: it has no cluster yet."""
        if slot < len(self.labels):
            self.labels[slot] = -1

    # ------------------------------------------------------------------ clock
    def tick(self, now: float) -> float:
        """Note a clock reading: a jump forward re-spreads overdue feeds, one backward moves
        every stored instant with it."""
        if not math.isfinite(now):
            raise ValueError(f"now must be a finite epoch time, got {now}")
        high = self.clock_high
        if now >= high:
            if now - high > _FORWARD_JUMP_S and high > -_INF:
                self.clock_high = now
                self.respread_overdue(now)
            self.clock_high = now
            return now
        if high - now > _BACKWARD_JUMP_S:
            self.clock_jumps.append((high, now))
            self._shift_time(now - high)
            self.clock_high = now
        return now

    def report_time(self, fetched_at: float) -> float:
        """The time of a fetch report. Unlike the ``now`` of the other calls it is not a clock
        reading: a fetch that took a while (a slow server, a queue) reports when it was made,
        minutes before the latest ``now`` perhaps, and that is no backward clock jump (taking it
        for one would move the whole schedule back). A later one moves the clock on."""
        if not math.isfinite(fetched_at):
            raise ValueError(f"fetched_at must be a finite epoch time, got {fetched_at}")
        return self.tick(fetched_at) if fetched_at >= self.clock_high else fetched_at

    def _shift_time(self, delta: float) -> None:
        """The clock stepped by ``delta``: move every stored future instant with it."""
        state = self.state
        slots = state.held_slots()
        F = state.table.F
        for field in (F_DUE, F_LAST_FETCH, F_LAST_SUCCESS):
            F[slots, field] += delta  # inf and NaN stay what they are
        backoff = F[slots, F_BACKOFF]
        F[slots, F_BACKOFF] = np.where(backoff != 0.0, backoff + delta, 0.0)
        state.table.shift_heap(delta)
        state.hosts.shift(delta)
        state.spend.shift(delta)
        self.next_refit_at += delta
        self.next_cluster_refit_at += delta
        state.bucket[3] = _NAN

    def respread_overdue(self, now: float) -> None:
        """Feeds due long ago (restart, suspend) are spread over a window instead of all at once."""
        state = self.state
        slots = state.held_slots()
        if len(slots) == 0:
            return
        F, I = state.table.F, state.table.I
        due = F[slots, F_DUE]
        overdue = slots[(due < now - _OVERDUE_S) & ((I[slots, I_FLAGS] & FLAG_IN_FLIGHT) == 0)]
        if len(overdue) == 0:
            return
        rate_per_s = self.budget_per_day() / DAY_S
        count = len(overdue)
        window = max(state.settings.restart_spread_s,
                     count / rate_per_s if rate_per_s > 0 else 0.0)
        overdue = overdue[np.argsort(F[overdue, F_DUE], kind="stable")]  # most overdue first
        for rank, slot in enumerate(overdue):
            jitter = state.random.random() / count
            state.push(int(slot), now + window * (rank / count + jitter))
