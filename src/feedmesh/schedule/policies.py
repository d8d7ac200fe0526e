"""Fetch policies: one interface, selected by name per deployment.

A policy turns what was learned into *when to fetch*. Most policies are plan-based: at each refit
(daily by default) they compute, for every polled feed at once (numpy), a periodic plan - a period
and the offsets of the fetches within it - and the scheduler then reads the next planned instant
after each fetch in O(log m). The adaptive policies instead react to each fetch (FeedEx 3.3).

======================  ===============================================================
``uniform``             every feed every T, T set by the budget (Miniflux, FreshRSS default)
``adaptive``            FeedEx 3.3 (:mod:`.adaptive`), stable reading: more new entries than f_t
                        -> halve T
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
from itertools import pairwise
from typing import TYPE_CHECKING, ClassVar, Protocol

import msgspec
import numpy as np

from .allocation import (
    cgm_age_allocation,
    cgm_freshness_allocation,
    round_to_total,
    sqrt_allocation,
)
from .kernels import MODE_PLAN
from .learning import LearnedSummary
from .placement import place_batch
from .policy_names import ABLATION_POLICY_NAMES, KNOWN_POLICY_NAMES, POLICY_NAMES
from .settings import SchedulerSettings
from .units import DAY_S, HOUR_S, WEEK_S

if TYPE_CHECKING:
    from .scheduler import Scheduler
    from .table import FeedTable

__all__ = [
    "ABLATION_POLICY_NAMES",
    "KNOWN_POLICY_NAMES",
    "POLICY_NAMES",
    "CgmPolicy",
    "OptimalPolicy",
    "Plan",
    "PlanBatch",
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

    def longest_gap_s(self) -> float:
        """The longest time between two consecutive planned instants."""
        offsets = self.offsets_s
        wrap = offsets[0] + self.period_s - offsets[-1]
        return max(wrap, *(b - a for a, b in pairwise(offsets))) if len(offsets) > 1 \
            else self.period_s

    def next_after(self, t: float) -> float:
        """The first planned instant more than a second after ``t`` (a fetch made at a planned
        instant, give or take float rounding, must not select that instant again)."""
        period = self.period_s
        t1 = t + 1.0  # shifted before flooring: a t a hair before a period boundary is on it
        k = math.floor((t1 - self.origin_s) / period)
        base = self.origin_s + k * period
        x = t1 - base
        for offset in self.offsets_s:  # offsets are few and sorted; a scan beats bisect here
            if offset > x:
                return base + offset
        return base + period + self.offsets_s[0]


class PlanBatch(msgspec.Struct, frozen=True):
    """Plans for many feeds with the same number of fetches per period, as arrays.

    Row i: fetch ``slots[i]`` at ``origin_s[i] + k * period_s[i] + offsets_s[i, j]`` for every
    integer k and every j (offsets sorted, in [0, period)). What :meth:`Policy.refit` returns:
    the scheduler stores and applies a batch without a Python object per feed.
    """

    slots: np.ndarray  # int64[g]
    period_s: np.ndarray  # float64[g]
    offsets_s: np.ndarray  # float64[g, m]
    origin_s: np.ndarray  # float64[g]

    @classmethod
    def of(cls, slots: np.ndarray, period_s: np.ndarray | float, offsets_s: np.ndarray,
           origin_s: np.ndarray | float = 0.0) -> PlanBatch:
        slots = np.asarray(slots, dtype=np.int64)
        g = len(slots)
        offsets = np.asarray(offsets_s, dtype=np.float64).reshape(g, -1)
        return cls(slots=slots, period_s=np.broadcast_to(np.asarray(period_s, np.float64), (g,)),
                   offsets_s=np.sort(offsets, axis=1),
                   origin_s=np.broadcast_to(np.asarray(origin_s, np.float64), (g,)))

    @classmethod
    def from_plans(cls, plans: dict[int, Plan]) -> list[PlanBatch]:
        """Batches for a dict of single plans (grouped by their number of offsets)."""
        groups: dict[int, list[tuple[int, Plan]]] = {}
        for slot, plan in plans.items():
            groups.setdefault(len(plan.offsets_s), []).append((slot, plan))
        return [cls.of(np.array([s for s, _ in rows]), np.array([p.period_s for _, p in rows]),
                       np.array([p.offsets_s for _, p in rows]),
                       np.array([p.origin_s for _, p in rows])) for rows in groups.values()]

    def longest_gaps(self) -> np.ndarray:
        """The longest time between consecutive planned instants, per row."""
        offsets = self.offsets_s
        wrap = offsets[:, :1] + self.period_s[:, None]
        return np.diff(offsets, axis=1, append=wrap).max(axis=1)


Refit = "dict[int, Plan] | list[PlanBatch]"


class RefitContext:
    """Everything a refit may read, computed only when a policy asks (uniform needs no learning).

    Arrays are aligned with ``slots``. ``source`` is the scheduler, which knows how to build them.
    """

    def __init__(self, *, now: float, settings: SchedulerSettings, slots: np.ndarray,
                 budget_per_day: float, source: RefitSource,
                 nominal_budget_per_day: float | None = None) -> None:
        self.now = now
        self.settings = settings
        self.slots = slots
        self.budget_per_day = budget_per_day
        """What the plans made now may spend a day (M, less push-fed feeds' share, scaled by the
        scheduler's spend control)."""
        self.nominal_budget_per_day = budget_per_day if nominal_budget_per_day is None else \
            nominal_budget_per_day
        """The same before the spend control's scale (what the deployment was promised)."""
        self._source = source

    @cached_property
    def weights(self) -> np.ndarray:
        return self._source.column("weight", self.slots)

    @cached_property
    def phases(self) -> np.ndarray:
        """Per-feed fixed phase in [0, 1), for spreading feeds with the same plan."""
        return self._source.column("phase", self.slots)

    @cached_property
    def last_fetch_plan_times(self) -> np.ndarray:
        """When each feed was last fetched, in plan time (the feed's dither removed); NaN when it
        never was. Evenly spaced plans start from here, so a re-plan keeps the rhythm."""
        return self._source.column("last_fetch_plan_time", self.slots)

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

    def values(self, slots: np.ndarray) -> np.ndarray | None:
        """The stored rows of ``slots`` (NaN where none), or None before anything is stored."""
        if self._values.shape[1] == 0:
            return None
        out = np.full((len(slots), self._values.shape[1]), np.nan)
        inside = slots < len(self._values)
        out[inside] = self._values[slots[inside]]
        return out

    def known(self, slots: np.ndarray) -> np.ndarray:
        """Mask of slots that have stored values (a plan was built for them before)."""
        inside = slots < len(self._values)
        out = np.zeros(len(slots), dtype=bool)
        if self._values.shape[1]:
            out[inside] = np.isfinite(self._values[slots[inside]]).all(axis=1)
        return out

    def forget(self, slot: int) -> None:
        if slot < len(self._values):
            self._values[slot] = np.nan


class Policy:
    """Base class. Plan-based policies implement :meth:`refit`; reactive ones override the rest."""

    name: ClassVar[str] = ""
    plan_based: ClassVar[bool] = True
    mode: int = MODE_PLAN
    """How :func:`feedmesh.schedule.kernels.record_success` picks the next fetch for this policy."""

    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        self.tracker = _ChangeTracker()
        self.table: FeedTable | None = None  # the scheduler's arrays (set by the scheduler)

    def refit(self, context: RefitContext) -> dict[int, Plan] | list[PlanBatch]:
        """New plans for (some of) ``context.slots``; slots left out keep their plan. Either a
        dict of :class:`Plan` or (cheaper for many feeds) a list of :class:`PlanBatch`."""
        raise NotImplementedError

    def next_fetch(self, scheduler: Scheduler, slot: int, now: float) -> float:
        """When to fetch ``slot`` next, given that it was fetched at ``now``."""
        plan = scheduler.plan_of(slot)
        if plan is None:
            return now + scheduler.base_interval_s()
        return plan.next_after(now)

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


_COUNT_BAND = 0.75  # a planned count changes once the allocation moves this far past it


def _window_rates(context: RefitContext) -> np.ndarray:
    """The paper's rate estimate, posts in the window / days watched, with the settings'
    pseudo-posts (Jeffreys: half a post) so that a feed without a post in the window is not 0;
    a feed not watched at all counts as watched for a day."""
    learned = context.learned
    smoothing = context.settings.rate_smoothing_posts
    if smoothing == 0:
        return learned.window_rate_per_day
    return (learned.window_count + smoothing) / np.maximum(learned.window_exposure_days, 1.0)


def _floor_per_day(settings: SchedulerSettings) -> float:
    return DAY_S / settings.max_interval_s


def _even_plans(policy: Policy, context: RefitContext, per_day: np.ndarray,
                rtol: float = 0.0) -> list[PlanBatch]:
    """Evenly spaced plans at ``per_day`` fetches a day, each feed at its own phase; only feeds
    whose frequency moved by more than ``rtol`` get a new plan (no churn from noise)."""
    floor = _floor_per_day(context.settings)
    per_day = np.maximum(per_day, floor * 1e-3)
    periods = np.minimum(DAY_S / per_day, context.settings.max_interval_s)
    replanned = policy.tracker.known(context.slots)
    changed = policy.tracker.changed(context.slots, periods, rtol)
    if not changed.any():
        return []
    slots, periods = context.slots[changed], periods[changed]
    # A changed frequency continues from the feed's last fetch: re-phasing it at every refit
    # would make the gaps irregular (a renewal process with random gaps waits longer on average,
    # E[gap^2] / 2 E[gap]) and spend more than the plan when it moves a fetch earlier.
    # A feed's first plan starts at its own phase, so that feeds spread over the period.
    last = context.last_fetch_plan_times[changed]
    anchored = replanned[changed] & np.isfinite(last)
    origins = np.where(anchored, last, context.phases[changed] * periods)
    return [PlanBatch.of(slots, periods, np.zeros((len(slots), 1)), origins)]


class UniformPolicy(Policy):
    """Every feed every T = (feeds / budget) days, at a fixed per-feed phase."""

    name = "uniform"

    def refit(self, context: RefitContext) -> list[PlanBatch]:
        n = len(context.slots)
        if n == 0:
            return []
        return _even_plans(self, context, np.full(n, context.budget_per_day / n), rtol=0.01)


class CgmPolicy(Policy):
    """Cho & Garcia-Molina's optimal-age or optimal-freshness frequencies, evenly spaced."""

    def __init__(self, settings: SchedulerSettings, objective: str) -> None:
        super().__init__(settings)
        self.objective = objective
        self._warm: dict[str, float] = {}  # the last multiplier: tomorrow's is near it

    def refit(self, context: RefitContext) -> list[PlanBatch]:
        if len(context.slots) == 0:
            return []
        rates = _window_rates(context)
        solver = cgm_age_allocation if self.objective == "age" else cgm_freshness_allocation
        per_day = solver(rates, context.weights, context.budget_per_day,
                         floors=_floor_per_day(context.settings), warm=self._warm)
        return _even_plans(self, context, per_day, rtol=0.02)


class OptimalPolicy(Policy):
    """The paper's combined policy: Theorem 1 allocation, Theorem 3 placement, cluster profiles.

    Rates come from the 14-day window, profiles from the feed's K-means cluster centroid. A feed
    allocated m fetches a day gets round(7m) a week (largest-remainder rounding keeps the budget
    exact): 7k fetches a week are k a day at the times Theorem 3 gives for the centroid's day (for
    one fetch, Theorem 2's time), as in the paper; other counts are placed by Theorem 3 on the
    centroid repeated over the week, rotated by whole days by the feed's phase so that feeds do
    not all use the same weekdays. (The paper rounds to whole fetches a day; counting per week
    is finer and no worse.) The floor is one fetch per T_max (the paper's own maximum delay,
    10,073 min, is about a week).

    ``allocate=False`` is the paper's strategy 2 ("retrieval scheduling only": every feed the same
    count, placed by Theorem 3) and ``place=False`` its strategy 3 ("resource allocation only":
    Theorem 1 counts, evenly spaced); Table 1 of the paper measures all four.
    """

    name = "optimal"

    def __init__(self, settings: SchedulerSettings, *, allocate: bool = True,
                 place: bool = True) -> None:
        super().__init__(settings)
        self.allocate = allocate
        self.place = place
        if not allocate:
            self.name = "optimal-timing"  # type: ignore[misc]
        elif not place:
            self.name = "optimal-allocation"  # type: ignore[misc]
        self._placed: dict[tuple[int, int], np.ndarray] = {}  # (fetches a week, cluster)
        self._centroids: np.ndarray | None = None

    def allocation(self, context: RefitContext) -> np.ndarray:
        """Fetches a day per feed: Theorem 1 on the window rates (or the same for every feed)."""
        n = len(context.slots)
        if not self.allocate:
            return np.full(n, context.budget_per_day / n)
        rates = _window_rates(context)
        return sqrt_allocation(context.weights * rates, context.budget_per_day,
                               floors=_floor_per_day(context.settings))

    def refit(self, context: RefitContext) -> list[PlanBatch]:
        n = len(context.slots)
        if n == 0:
            return []
        settings = context.settings
        per_day = self.allocation(context)
        if not self.place:
            return _even_plans(self, context, per_day, rtol=0.02)
        labels = context.labels
        centroids = np.maximum(context.centroids, 0.0) + 1e-9
        weekly = per_day * 7.0
        counts = np.maximum(round_to_total(weekly), math.ceil(
            7.0 * _floor_per_day(settings) - 1e-9))
        # Keep a feed's count while its allocation stays near it (rates from a sliding window
        # wobble; every change of plan can cost a fetch): a count changes once the allocation
        # is _COUNT_BAND past it.
        previous = self.tracker.values(context.slots)
        if previous is not None:
            old = previous[:, 0]
            keep = np.isfinite(old) & (np.abs(weekly - old) <= _COUNT_BAND)
            counts[keep] = old[keep].astype(np.int64)
        changed = self.tracker.changed(context.slots, np.stack([counts, labels], axis=1))
        if not changed.any():
            return []
        if self._centroids is None or not np.array_equal(self._centroids, centroids):
            self._placed.clear()  # placements depend on the centroids only
            self._centroids = centroids.copy()
        placed = self._placed
        groups: dict[int, set[int]] = {}
        for label, count in zip(labels[changed], counts[changed]):
            if (int(count), int(label)) not in placed:
                groups.setdefault(int(count), set()).add(int(label))
        for count, clusters in groups.items():
            order = sorted(clusters)
            if count % 7 == 0:  # k a day: Theorem 3 on the day, as the paper does
                rows = place_batch(centroids[order], HOUR_S, count // 7)
            else:  # Theorem 3 on the daily profile repeated over the week
                rows = place_batch(np.tile(centroids[order], (1, 7)), HOUR_S, count)
            for cluster, row in zip(order, rows):
                placed[(count, cluster)] = row
        batches = []
        rows = np.flatnonzero(changed)
        for count in np.unique(counts[rows]):
            mine = rows[counts[rows] == count]
            offsets = np.stack([placed[(int(count), int(label))] for label in labels[mine]])
            if count % 7 == 0:
                batches.append(PlanBatch.of(context.slots[mine], DAY_S, offsets))
                continue
            # rotated by whole days so that feeds do not all use the same weekdays
            shift = np.floor(context.phases[mine] * 7.0) * DAY_S
            offsets = (offsets + shift[:, None]) % WEEK_S
            batches.append(PlanBatch.of(context.slots[mine], WEEK_S, offsets))
        return batches


def make_policy(settings: SchedulerSettings) -> Policy:
    """The policy named by ``settings.policy``."""
    from .adaptive import AdaptivePolicy  # late imports: both build on this module
    from .ours import FeedmeshPolicy

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
    if name == "optimal-timing":
        return OptimalPolicy(settings, allocate=False)
    if name == "optimal-allocation":
        return OptimalPolicy(settings, place=False)
    if name == "feedmesh":
        return FeedmeshPolicy(settings)
    from .errors import UnknownPolicyError

    raise UnknownPolicyError(
        f"unknown policy {name!r}; known policies: {', '.join(KNOWN_POLICY_NAMES)}")
