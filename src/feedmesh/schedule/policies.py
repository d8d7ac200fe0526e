"""Fetch policies: one interface, selected by name per deployment.

A policy turns what was learned into *when to fetch*. Most policies are plan-based: at each refit
(daily by default) they compute, for every polled feed at once (numpy), a periodic plan - a period
and the offsets of the fetches within it - and the scheduler then reads the next planned instant
after each fetch in O(log m). The adaptive policies instead react to each fetch (FeedEx 3.3).

======================  ===============================================================
``uniform``             every feed every T, T set by the budget (Miniflux, FreshRSS default)
``adaptive``            FeedEx 3.3, stable reading: more new entries than f_t -> halve T
``adaptive-literal``    FeedEx 3.3 as printed (fewer new entries -> halve T): a ratchet
``cgm-age``             Cho & Garcia-Molina optimal-age frequencies, evenly spaced
``cgm-freshness``       Cho & Garcia-Molina optimal-freshness frequencies, evenly spaced
``optimal``             the paper: m ~ sqrt(w lambda) (Thm 1), Theorem 3 placement on the
                        feed's K-means cluster profile, 14-day window rates
``feedmesh``            ours (see :mod:`feedmesh.schedule.ours`)
======================  ===============================================================

Every policy spends the same global budget (the scheduler hands each refit M fetches per day for
the feeds it polls), and every policy floors a feed at one fetch per T_max, the scheduler's safety
net; politeness, hints and error backoff are applied by the scheduler after the policy speaks.
"""

from __future__ import annotations

import math
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, Protocol

import msgspec
import numpy as np

from .allocation import cgm_age_allocation, cgm_freshness_allocation, round_to_total, sqrt_allocation
from .learning import LearnedSummary
from .placement import place_batch
from .settings import DAY_S, HOUR_S, WEEK_S, SchedulerSettings

if TYPE_CHECKING:
    from .scheduler import Scheduler

__all__ = [
    "POLICY_NAMES",
    "AdaptivePolicy",
    "CgmPolicy",
    "OptimalPolicy",
    "Plan",
    "Policy",
    "RefitContext",
    "UniformPolicy",
    "make_policy",
]


class Plan(msgspec.Struct, frozen=True):
    """Fetch at ``origin + k * period + offset`` for every integer k and every offset."""

    period_s: float
    offsets_s: tuple[float, ...]
    origin_s: float = 0.0

    def next_after(self, t: float) -> float:
        """The first planned instant more than a second after ``t`` (a fetch made at a planned
        instant, give or take float rounding, must not select that instant again)."""
        period = self.period_s
        k = math.floor((t - self.origin_s) / period)
        base = self.origin_s + k * period
        x = t - base + 1.0
        for offset in self.offsets_s:  # offsets are few and sorted; a scan beats bisect here
            if offset > x:
                return base + offset
        return base + period + self.offsets_s[0]


class RefitContext:
    """Everything a refit may read, computed only when a policy asks (uniform needs no learning).

    Arrays are aligned with ``slots``. ``source`` is the scheduler, which knows how to build them.
    """

    def __init__(self, *, now: float, settings: SchedulerSettings, slots: np.ndarray,
                 budget_per_day: float, source: RefitSource) -> None:
        self.now = now
        self.settings = settings
        self.slots = slots
        self.budget_per_day = budget_per_day
        self._source = source

    @cached_property
    def weights(self) -> np.ndarray:
        return self._source.column("weight", self.slots)

    @cached_property
    def phases(self) -> np.ndarray:
        """Per-feed fixed phase in [0, 1), for spreading feeds with the same plan."""
        return self._source.column("phase", self.slots)

    @cached_property
    def prior_rates(self) -> np.ndarray:
        """Publisher-declared posts/day (sy:updatePeriod), NaN where none."""
        return self._source.column("prior_rate", self.slots)

    @cached_property
    def learned(self) -> LearnedSummary:
        return self._source.learned(self.slots, self.now)

    @cached_property
    def _clusters(self) -> tuple[np.ndarray, np.ndarray]:
        return self._source.clusters(self.learned, self.now)

    @property
    def centroids(self) -> np.ndarray:
        """K-means centroids (K x 24) of normalized daily profiles."""
        return self._clusters[0]

    @property
    def labels(self) -> np.ndarray:
        """The cluster of each feed."""
        return self._clusters[1]


class RefitSource(Protocol):
    """What a :class:`RefitContext` reads from (the scheduler)."""

    def column(self, name: str, slots: np.ndarray) -> np.ndarray: ...

    def learned(self, slots: np.ndarray, now: float) -> LearnedSummary: ...

    def clusters(self, learned: LearnedSummary, now: float) -> tuple[np.ndarray, np.ndarray]: ...


class _ChangeTracker:
    """Per-slot memory of the inputs a plan was built from, to rebuild only what changed."""

    def __init__(self) -> None:
        self._values: np.ndarray = np.full((0, 0), np.nan)

    def changed(self, slots: np.ndarray, values: np.ndarray, rtol: float = 0.0) -> np.ndarray:
        """Mask of rows whose ``values`` (n x k) differ from those stored, then store them."""
        values = np.asarray(values, dtype=np.float64).reshape(len(slots), -1)
        need = int(slots.max()) + 1 if len(slots) else 0
        if self._values.shape[1] != values.shape[1]:
            self._values = np.full((need, values.shape[1]), np.nan)
        if need > len(self._values):
            grown = np.full((max(need, 2 * len(self._values)), values.shape[1]), np.nan)
            grown[: len(self._values)] = self._values
            self._values = grown
        old = self._values[slots]
        same = np.abs(old - values) <= rtol * np.abs(old)
        mask = ~same.all(axis=1)
        self._values[slots[mask]] = values[mask]
        return mask

    def forget(self, slot: int) -> None:
        if slot < len(self._values):
            self._values[slot] = np.nan


class Policy:
    """Base class. Plan-based policies implement :meth:`refit`; reactive ones override the rest."""

    name: ClassVar[str] = ""
    plan_based: ClassVar[bool] = True

    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        self.tracker = _ChangeTracker()

    def refit(self, context: RefitContext) -> dict[int, Plan]:
        """New plans for (some of) ``context.slots``; slots left out keep their plan."""
        raise NotImplementedError

    def next_fetch(self, scheduler: Scheduler, slot: int, now: float) -> float:
        """When to fetch ``slot`` next, given that it was fetched at ``now``."""
        plan = scheduler.plan_of(slot)
        if plan is None:
            return now + scheduler.base_interval_s()
        return plan.next_after(now)

    def on_result(self, slot: int, new_entries: int, entries_in_document: int,
                  success: bool) -> None:
        """Feedback from one fetch (only the adaptive policies use it)."""

    def max_gap_s(self) -> float:
        """The longest the scheduler may leave a healthy feed unfetched under this policy."""
        return self.settings.max_interval_s

    def on_added(self, slot: int, base_interval_s: float) -> None:
        """A feed took ``slot``."""
        self.tracker.forget(slot)

    def on_removed(self, slot: int) -> None:
        """The feed in ``slot`` is no longer polled."""
        self.tracker.forget(slot)

    def state(self) -> dict[str, object]:
        """Per-policy state worth a snapshot (plans are recomputed on restore)."""
        return {}

    def load_state(self, state: dict[str, object], slot_map: dict[int, int]) -> None:
        """Inverse of :meth:`state`; ``slot_map`` maps snapshot slot -> new slot."""


def _floor_per_day(settings: SchedulerSettings) -> float:
    return DAY_S / settings.max_interval_s


def _even_plans(policy: Policy, context: RefitContext, per_day: np.ndarray,
                rtol: float = 0.0) -> dict[int, Plan]:
    """Evenly spaced plans at ``per_day`` fetches a day, each feed at its own phase; only feeds
    whose frequency moved by more than ``rtol`` get a new plan (no churn from noise)."""
    floor = _floor_per_day(context.settings)
    per_day = np.maximum(per_day, floor * 1e-3)
    periods = np.minimum(DAY_S / per_day, context.settings.max_interval_s)
    changed = policy.tracker.changed(context.slots, periods, rtol)
    if not changed.any():
        return {}
    slots, periods = context.slots[changed], periods[changed]
    offsets = context.phases[changed] * periods
    return {int(slot): Plan(float(p), (float(o),)) for slot, p, o in zip(slots, periods, offsets)}


class UniformPolicy(Policy):
    """Every feed every T = (feeds / budget) days, at a fixed per-feed phase."""

    name = "uniform"

    def refit(self, context: RefitContext) -> dict[int, Plan]:
        n = len(context.slots)
        if n == 0:
            return {}
        return _even_plans(self, context, np.full(n, context.budget_per_day / n))


class CgmPolicy(Policy):
    """Cho & Garcia-Molina's optimal-age or optimal-freshness frequencies, evenly spaced."""

    def __init__(self, settings: SchedulerSettings, objective: str) -> None:
        super().__init__(settings)
        self.objective = objective

    def refit(self, context: RefitContext) -> dict[int, Plan]:
        if len(context.slots) == 0:
            return {}
        rates = context.learned.window_rate_per_day
        solver = cgm_age_allocation if self.objective == "age" else cgm_freshness_allocation
        per_day = solver(rates, context.weights, context.budget_per_day,
                         floors=_floor_per_day(context.settings))
        return _even_plans(self, context, per_day, rtol=0.02)


class OptimalPolicy(Policy):
    """The paper's combined policy: Theorem 1 allocation, Theorem 3 placement, cluster profiles.

    Rates come from the 14-day window, profiles from the feed's K-means cluster centroid. A feed
    allocated m >= 1 fetches a day gets round(m) a day placed within the day (Theorem 3); a feed
    allocated less gets round(7m) a week, placed by Theorem 3 on its centroid repeated over the
    week (for one fetch, Theorem 2's time) on days spread by the feed's phase. Largest-remainder
    rounding keeps the budget exact. The floor is one fetch per T_max (the paper's own maximum
    delay, 10,073 min, is about a week).
    """

    name = "optimal"

    def __init__(self, settings: SchedulerSettings) -> None:
        super().__init__(settings)
        self._placed: dict[tuple[bool, int, int], np.ndarray] = {}  # (daily, count, cluster)
        self._centroids: np.ndarray | None = None

    def refit(self, context: RefitContext) -> dict[int, Plan]:
        n = len(context.slots)
        if n == 0:
            return {}
        settings = context.settings
        rates = context.learned.window_rate_per_day
        per_day = sqrt_allocation(context.weights * rates, context.budget_per_day,
                                  floors=_floor_per_day(settings))
        labels = context.labels
        centroids = np.maximum(context.centroids, 0.0) + 1e-9
        daily = per_day >= 1.0
        counts = np.zeros(n, dtype=np.int64)
        if daily.any():
            counts[daily] = np.maximum(round_to_total(per_day[daily]), 1)
        if (~daily).any():
            weekly = per_day[~daily] * 7.0
            counts[~daily] = np.maximum(round_to_total(weekly), math.ceil(
                7.0 * _floor_per_day(settings) - 1e-9))
        changed = self.tracker.changed(context.slots, np.stack([daily, counts, labels], axis=1))
        if not changed.any():
            return {}
        if self._centroids is None or not np.array_equal(self._centroids, centroids):
            self._placed.clear()  # placements depend on the centroids only
            self._centroids = centroids.copy()
        placed = self._placed
        groups: dict[tuple[bool, int], set[int]] = {}
        for is_daily, label, count in zip(daily[changed], labels[changed], counts[changed]):
            if (bool(is_daily), int(count), int(label)) not in placed:
                groups.setdefault((bool(is_daily), int(count)), set()).add(int(label))
        for (is_daily, count), clusters in groups.items():
            order = sorted(clusters)
            shapes = centroids[order] if is_daily else np.tile(centroids[order], (1, 7))
            for cluster, row in zip(order, place_batch(shapes, HOUR_S, count)):
                placed[(is_daily, count, cluster)] = row
        plans: dict[int, Plan] = {}
        for i in np.flatnonzero(changed):
            slot = context.slots[i]
            key = (bool(daily[i]), int(counts[i]), int(labels[i]))
            if daily[i]:
                plans[int(slot)] = Plan(DAY_S, tuple(float(x) for x in placed[key]))
            else:  # the week's fetches, rotated by whole days so feeds do not share a weekday
                shift = math.floor(float(context.phases[i]) * 7.0) * DAY_S
                offsets = sorted((float(x) + shift) % WEEK_S for x in placed[key])
                plans[int(slot)] = Plan(WEEK_S, tuple(offsets))
        return plans


class AdaptivePolicy(Policy):
    """FeedEx 3.3: halve or double each feed's interval from the share f of new entries per fetch.

    ``stable`` (ours, the default): f > f_t means we polled too slowly, so halve; f < f_t double.
    ``literal`` (as printed): f < f_t halves, f > f_t doubles; fewer new entries then make the
    interval shorter still, so every feed ratchets to T_min or T_max.
    Intervals live in [T_min, T_max]; to spend the same global budget as every other policy, all
    intervals are multiplied by one factor s with sum(1 / (s T_i)) = M (kept up to date in O(1)).
    """

    plan_based = False

    def __init__(self, settings: SchedulerSettings, *, literal: bool) -> None:
        super().__init__(settings)
        self.literal = literal
        self.name = "adaptive-literal" if literal else "adaptive"  # type: ignore[misc]
        self.intervals: dict[int, float] = {}
        self.rate_sum = 0.0  # sum of 1 / interval over polled slots (per second)
        self.budget_per_s = 0.0

    def refit(self, context: RefitContext) -> dict[int, Plan]:
        self.budget_per_s = context.budget_per_day / DAY_S
        polled = {int(s) for s in context.slots}
        for slot in list(self.intervals):
            if slot not in polled:
                self.on_removed(slot)
        return {}

    def on_added(self, slot: int, base_interval_s: float) -> None:
        super().on_added(slot, base_interval_s)
        interval = min(max(base_interval_s, self.settings.min_interval_s),
                       self.settings.max_interval_s)
        self.on_removed(slot)
        self.intervals[slot] = interval
        self.rate_sum += 1.0 / interval

    def on_removed(self, slot: int) -> None:
        old = self.intervals.pop(slot, None)
        if old is not None:
            self.rate_sum -= 1.0 / old

    def on_result(self, slot: int, new_entries: int, entries_in_document: int,
                  success: bool) -> None:
        interval = self.intervals.get(slot)
        if interval is None or not success:
            return
        share = new_entries / entries_in_document if entries_in_document > 0 else 0.0
        target = self.settings.adaptive_target_new_share
        if share == target:
            return
        faster = share < target if self.literal else share > target
        updated = interval / 2.0 if faster else interval * 2.0
        updated = min(max(updated, self.settings.min_interval_s), self.settings.max_interval_s)
        self.rate_sum += 1.0 / updated - 1.0 / interval
        self.intervals[slot] = updated

    def next_fetch(self, scheduler: Scheduler, slot: int, now: float) -> float:
        interval = self.intervals.get(slot)
        if interval is None:
            return now + scheduler.base_interval_s()
        scale = self.rate_sum / self.budget_per_s if self.budget_per_s > 0 else 1.0
        effective = min(max(interval * scale, self.settings.min_interval_s),
                        self.settings.max_interval_s)
        return now + effective

    def state(self) -> dict[str, object]:
        return {"intervals": {str(k): v for k, v in self.intervals.items()}}

    def load_state(self, state: dict[str, object], slot_map: dict[int, int]) -> None:
        intervals = state.get("intervals", {})
        assert isinstance(intervals, dict)
        for old, value in intervals.items():
            new = slot_map.get(int(old))
            if new is not None:
                self.on_removed(new)
                self.intervals[new] = float(value)
                self.rate_sum += 1.0 / float(value)


def make_policy(settings: SchedulerSettings) -> Policy:
    """The policy named by ``settings.policy``."""
    from .ours import FeedmeshPolicy  # late import: ours builds on this module

    name = settings.policy
    if name == "uniform":
        return UniformPolicy(settings)
    if name == "adaptive":
        return AdaptivePolicy(settings, literal=False)
    if name == "adaptive-literal":
        return AdaptivePolicy(settings, literal=True)
    if name == "cgm-age":
        return CgmPolicy(settings, "age")
    if name == "cgm-freshness":
        return CgmPolicy(settings, "freshness")
    if name == "optimal":
        return OptimalPolicy(settings)
    if name == "feedmesh":
        return FeedmeshPolicy(settings)
    from .errors import UnknownPolicyError

    raise UnknownPolicyError(f"unknown policy {name!r}; known policies: {', '.join(POLICY_NAMES)}")


POLICY_NAMES: tuple[str, ...] = (
    "uniform", "adaptive", "adaptive-literal", "cgm-age", "cgm-freshness", "optimal", "feedmesh",
)
