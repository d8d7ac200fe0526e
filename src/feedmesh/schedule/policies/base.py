"""What every fetch policy shares: plans, the refit context, the view of the schedule a policy
reads, and the :class:`Policy` base class.

A policy sees the scheduler only through two small things, never the scheduler itself:

* at a refit, a :class:`RefitContext`: the polled slots, the budget, and the learned arrays,
  computed only when asked (from a :class:`RefitSource`, the scheduler's upkeep);
* after a fetch, a :class:`ScheduleView`: a feed's current plan and the budget's uniform interval.

Plan-based policies return :class:`PlanBatch` arrays from :meth:`Policy.refit`; the scheduler
stores them in its table and its compiled kernels read the next planned instant after each fetch.
"""

from __future__ import annotations

import math
from functools import cached_property
from itertools import pairwise
from typing import ClassVar, Protocol

import msgspec
import numpy as np

from ..kernels import F_PLAN_ORIGIN, F_PLAN_PERIOD, K_BASE_INTERVAL, MODE_PLAN
from ..learning import LearnedSummary
from ..settings import SchedulerSettings
from ..table import FeedTable

__all__ = [
    "Plan",
    "PlanBatch",
    "Policy",
    "PolicyView",
    "RefitContext",
    "RefitSource",
    "ScheduleView",
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


class ScheduleView(Protocol):
    """What a policy may read of the schedule when it picks a feed's next fetch."""

    def plan_of(self, slot: int) -> Plan | None:
        """The slot's current plan (None before its first one)."""
        ...

    def base_interval_s(self) -> float:
        """The uniform interval the budget allows (for feeds without a plan)."""
        ...


class PolicyView:
    """The :class:`ScheduleView` the scheduler hands its policy: reads its table and the kernel
    settings (where the uniform interval is kept current), and nothing else of it."""

    __slots__ = ("_kernel_settings", "_table")

    def __init__(self, table: FeedTable, kernel_settings: np.ndarray) -> None:
        self._table = table
        self._kernel_settings = kernel_settings

    def plan_of(self, slot: int) -> Plan | None:
        table = self._table
        period = float(table.F[slot, F_PLAN_PERIOD])
        if not period > 0:
            return None
        return Plan(period, tuple(float(x) for x in table.plan_offsets(slot)),
                    float(table.F[slot, F_PLAN_ORIGIN]))

    def base_interval_s(self) -> float:
        return float(self._kernel_settings[K_BASE_INTERVAL])


class RefitContext:
    """Everything a refit may read, computed only when a policy asks (uniform needs no learning).

    Arrays are aligned with ``slots``. ``source`` (the scheduler's upkeep) knows how to build them.
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
    """What a :class:`RefitContext` reads from (the scheduler's upkeep)."""

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
    mode: int = MODE_PLAN
    """How :func:`feedmesh.schedule.kernels.record_success` picks the next fetch for this policy."""

    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        self.tracker = _ChangeTracker()
        self.table: FeedTable | None = None
        """The scheduler's arrays, attached by the scheduler (a policy may keep per-feed state in
        a column that the compiled kernels update, as adaptive does)."""

    def attach(self, table: FeedTable) -> None:
        """The scheduler that runs this policy keeps its per-feed arrays in ``table``."""
        self.table = table

    def refit(self, context: RefitContext) -> dict[int, Plan] | list[PlanBatch]:
        """New plans for (some of) ``context.slots``; slots left out keep their plan. Either a
        dict of :class:`Plan` or (cheaper for many feeds) a list of :class:`PlanBatch`."""
        raise NotImplementedError

    def next_fetch(self, view: ScheduleView, slot: int, now: float) -> float:
        """When to fetch ``slot`` next, given that it was fetched at ``now``."""
        plan = view.plan_of(slot)
        if plan is None:
            return now + view.base_interval_s()
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
