"""The ``feedmesh`` policy: the paper's two theorems, fed better estimates, under a delay bound.

What it changes against ``optimal`` (the paper's combined policy), and why:

1. **Bayesian rates.** Posts over a decayed long memory (half-life 28 days) with exposure, shrunk
   towards an empirical-Bayes Gamma prior fitted to the whole population (method of moments,
   Poisson noise removed): lambda = (alpha + N) / (beta + E). A feed with no post in 14 days is not
   "rate 0" (the paper then starves it); a feed with 3 posts in 3 days watched is not 3/14 a day.
   A publisher's sy:updatePeriod, when present, moves the prior mean.
2. **Per-feed weekly profile.** lambda_i(t) over a week = rate x daily profile x weekday factor.
   The daily profile is the feed's own decayed hourly histogram plus its K-means cluster's
   centroid as pseudo-counts (sparse feeds borrow their cluster's shape, busy ones keep theirs);
   the weekday factors likewise shrink to the population's weekly rhythm, and that to flat.
3. **Floors that bound the maximum delay.** Every feed gets at least ceil(week / gap) fetches a
   week and placement never leaves a gap longer than ``gap`` = ``max_delay_target_s`` (46 h),
   or 1.9 uniform intervals when the budget is too small for that (below one fetch per feed a
   day), so the floors never take more than about half the budget and the maximum delay stays
   within twice uniform's at any budget; the allocation (water-filled with the floors) shares
   what is left.
4. **Placement over the week** (Theorem 3 on 168 hourly bins, with the gap bound), so weekends
   and nights get fewer fetches, and fractional daily allocations become exact weekly counts.

Plans change only when a feed's weekly count moves past a band around it, or its weekly shape
moves (cheap refits for 100k feeds, and every change of plan can cost a fetch); the scheduler's
spend control keeps the total at the budget.
"""

from __future__ import annotations

import math

import numpy as np

from ..allocation import round_to_total, sqrt_allocation
from ..clusters import normalized_profiles
from ..placement import place_batch
from ..settings import SchedulerSettings
from ..units import DAY_S, HOUR_S, WEEK_S
from .base import PlanBatch, Policy, RefitContext

__all__ = ["FeedmeshPolicy", "gamma_prior"]

_MONDAY_ORIGIN_S = 4 * DAY_S  # 1970-01-05 00:00 UTC was a Monday
_PROFILE_PSEUDO_POSTS = 12.0
_WEEKDAY_PSEUDO_POSTS = 14.0
_POPULATION_WEEK_PSEUDO_POSTS = 70.0  # the population's weekly rhythm, itself shrunk to flat
_SHAPE_CHANGE = 0.3  # L1 distance of the weekly shape that triggers a re-placement
_COUNT_BAND = 0.75  # a weekly count changes once the allocation moves this far past it
_UNIFORM_GAPS = 1.9  # the largest gap allowed is at least this many uniform intervals


def gamma_prior(counts: np.ndarray, exposure_days: np.ndarray) -> tuple[float, float]:
    """(alpha, beta) of a Gamma prior on posts/day fitted to a population by moments.

    The spread of observed rates N/E overstates the spread of true rates by the Poisson noise
    (mean of lambda / E), which is removed before matching moments.
    """
    watched = exposure_days > 0.5
    if watched.sum() < 2:
        return 0.5, 1.0  # one post every two days, worth one day of watching
    rates = counts[watched] / exposure_days[watched]
    mean = float(rates.mean())
    if mean <= 0:
        return 0.05, 10.0
    noise = float((rates / exposure_days[watched]).mean())
    variance = max(float(rates.var()) - noise, mean * mean / 50.0)
    alpha = mean * mean / variance
    return alpha, alpha / mean


class FeedmeshPolicy(Policy):
    """Bayesian rates, per-feed weekly profiles, max-delay floors, weekly Theorem 3 placement.

    The keyword switches take one idea out at a time (for the ablation in
    ``benchmarks/schedule.py --ablation``): ``bayes_rates=False`` uses the paper's window rates
    (with the settings' smoothing), ``own_profiles=False`` the cluster centroid alone,
    ``weekly=False`` the same rhythm every day of the week.
    """

    name = "feedmesh"

    def __init__(self, settings: SchedulerSettings, *, bayes_rates: bool = True,
                 own_profiles: bool = True, weekly: bool = True) -> None:
        super().__init__(settings)
        self.bayes_rates, self.own_profiles, self.weekly = bayes_rates, own_profiles, weekly
        self._gap_s = min(settings.max_delay_target_s, settings.max_interval_s)
        # per slot: the weekly count and shape its plan was placed with (-1: no plan)
        self._count = np.zeros(0, dtype=np.int64)
        self._shape = np.zeros((0, 168))

    def rates_and_shapes(self, context: RefitContext) -> tuple[np.ndarray, np.ndarray]:
        """Posterior posts/day and the normalized weekly shape (168 bins) of every polled feed."""
        learned = context.learned
        counts, exposure = learned.long_count, learned.long_exposure_days
        alpha, beta = gamma_prior(counts, exposure)
        prior_mean = np.full(len(counts), alpha / beta)
        declared = np.isfinite(context.prior_rates)
        prior_mean[declared] = np.sqrt(prior_mean[declared] * context.prior_rates[declared])
        rates = (prior_mean * beta + counts) / (beta + exposure)
        if not self.bayes_rates:
            smoothing = context.settings.rate_smoothing_posts
            rates = (learned.window_count + smoothing) / \
                np.maximum(learned.window_exposure_days, 1.0)

        centroids = np.maximum(context.centroids, 0.0)
        centroids = centroids / np.maximum(centroids.sum(axis=1, keepdims=True), 1e-12)
        own = learned.long_hourly if self.own_profiles else 0.0
        daily = normalized_profiles(own + _PROFILE_PSEUDO_POSTS * centroids[context.labels])
        population = learned.long_weekday.sum(axis=0)
        population = (population + _POPULATION_WEEK_PSEUDO_POSTS / 7.0) / \
            (population.sum() + _POPULATION_WEEK_PSEUDO_POSTS)
        weekly = normalized_profiles(learned.long_weekday
                                     + _WEEKDAY_PSEUDO_POSTS * population[None, :])
        if not self.weekly:
            weekly = np.full_like(weekly, 1.0 / 7.0)
        shape = (weekly[:, :, None] * daily[:, None, :]).reshape(len(counts), 168)
        return rates, shape

    def refit(self, context: RefitContext) -> list[PlanBatch]:
        n = len(context.slots)
        if n == 0:
            return []
        settings = context.settings
        rates, shape = self.rates_and_shapes(context)
        # The delay bound follows the budget: never tighter than the setting, and at least
        # _UNIFORM_GAPS of the uniform interval, so that the floors take at most about half the
        # budget and the maximum stays within twice uniform's at any budget.
        uniform_interval = DAY_S * n / max(context.nominal_budget_per_day, 1e-9)
        self._gap_s = min(max(settings.max_delay_target_s, _UNIFORM_GAPS * uniform_interval),
                          settings.max_interval_s)
        max_gap = self._gap_s
        floor_per_week = max(1, math.ceil(WEEK_S / max_gap))
        floor_per_week = max(floor_per_week, math.ceil(WEEK_S / settings.max_interval_s))
        budget_per_week = context.budget_per_day * 7.0
        per_week = sqrt_allocation(context.weights * rates, budget_per_week,
                                   floors=float(floor_per_week),
                                   caps=WEEK_S / settings.min_interval_s)
        counts = round_to_total(per_week, round(min(budget_per_week, float(per_week.sum()))))
        counts = np.maximum(counts, floor_per_week)

        # Re-place only the feeds whose count moved past its band or whose shape moved.
        slots = context.slots
        self._grow(int(slots.max()) + 1)
        old_counts = self._count[slots]
        known = old_counts >= 0
        within = known & (np.abs(per_week - old_counts) <= _COUNT_BAND) & \
            (old_counts >= floor_per_week)
        counts[within] = old_counts[within]
        moved = np.abs(self._shape[slots] - shape).sum(axis=1) >= _SHAPE_CHANGE
        todo = ~within | moved
        batches = []
        for count in np.unique(counts[todo]):
            rows = np.flatnonzero(todo & (counts == count))
            gap = max_gap if count * max_gap >= WEEK_S else None
            offsets = place_batch(shape[rows] * 168.0, HOUR_S, int(count), max_gap=gap)
            batches.append(PlanBatch.of(slots[rows], WEEK_S, offsets, _MONDAY_ORIGIN_S))
        self._count[slots[todo]] = counts[todo]
        self._shape[slots[todo]] = shape[todo]
        return batches

    def _grow(self, size: int) -> None:
        if size > len(self._count):
            new = max(size, 2 * len(self._count), 64)
            count = np.full(new, -1, dtype=np.int64)
            count[: len(self._count)] = self._count
            shape = np.zeros((new, 168))
            shape[: len(self._shape)] = self._shape
            self._count, self._shape = count, shape

    def _forget(self, slot: int) -> None:
        if slot < len(self._count):
            self._count[slot] = -1

    def on_removed(self, slot: int) -> None:
        super().on_removed(slot)
        self._forget(slot)

    def max_gap_s(self) -> float:
        return self._gap_s

    def on_added(self, slot: int, base_interval_s: float) -> None:
        super().on_added(slot, base_interval_s)
        self._forget(slot)
