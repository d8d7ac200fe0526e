"""``optimal``: the paper's combined policy (Theorem 1 allocation, Theorem 3 placement on K-means
cluster profiles), and its strategies 2 and 3 (placement only, allocation only)."""

from __future__ import annotations

import math

import numpy as np

from ..allocation import round_to_total, sqrt_allocation
from ..placement import place_batch
from ..settings import SchedulerSettings
from ..units import DAY_S, HOUR_S, WEEK_S
from .base import PlanBatch, Policy, RefitContext
from .paper_rules import even_plans, floor_per_day, window_rates

__all__ = ["OptimalPolicy"]

_COUNT_BAND = 0.75  # a planned count changes once the allocation moves this far past it


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
        rates = window_rates(context)
        return sqrt_allocation(context.weights * rates, context.budget_per_day,
                               floors=floor_per_day(context.settings))

    def refit(self, context: RefitContext) -> list[PlanBatch]:
        n = len(context.slots)
        if n == 0:
            return []
        settings = context.settings
        per_day = self.allocation(context)
        if not self.place:
            return even_plans(self, context, per_day, rtol=0.02)
        labels = context.labels
        centroids = np.maximum(context.centroids, 0.0) + 1e-9
        weekly = per_day * 7.0
        counts = np.maximum(round_to_total(weekly), math.ceil(
            7.0 * floor_per_day(settings) - 1e-9))
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
        for label, count in zip(labels[changed], counts[changed], strict=True):
            if (int(count), int(label)) not in placed:
                groups.setdefault(int(count), set()).add(int(label))
        for count, clusters in groups.items():
            order = sorted(clusters)
            if count % 7 == 0:  # k a day: Theorem 3 on the day, as the paper does
                rows = place_batch(centroids[order], HOUR_S, count // 7)
            else:  # Theorem 3 on the daily profile repeated over the week
                rows = place_batch(np.tile(centroids[order], (1, 7)), HOUR_S, count)
            for cluster, row in zip(order, rows, strict=True):
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
