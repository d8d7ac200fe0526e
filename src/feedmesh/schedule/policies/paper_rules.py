"""What the paper-era policies (uniform, cgm-*, optimal) share: the paper's window rate estimate,
the floor of one fetch per T_max, and evenly spaced plans that keep their rhythm across refits."""

from __future__ import annotations

import numpy as np

from ..settings import SchedulerSettings
from ..units import DAY_S
from .base import PlanBatch, Policy, RefitContext

__all__ = ["even_plans", "floor_per_day", "window_rates"]


def window_rates(context: RefitContext) -> np.ndarray:
    """The paper's rate estimate, posts in the window / days watched, with the settings'
    pseudo-posts (Jeffreys: half a post) so that a feed without a post in the window is not 0;
    a feed not watched at all counts as watched for a day."""
    learned = context.learned
    smoothing = context.settings.rate_smoothing_posts
    if smoothing == 0:
        return learned.window_rate_per_day
    return (learned.window_count + smoothing) / np.maximum(learned.window_exposure_days, 1.0)


def floor_per_day(settings: SchedulerSettings) -> float:
    """Fetches a day that one fetch per T_max (``max_interval_s``) amounts to."""
    return DAY_S / settings.max_interval_s


def even_plans(policy: Policy, context: RefitContext, per_day: np.ndarray,
                rtol: float = 0.0) -> list[PlanBatch]:
    """Evenly spaced plans at ``per_day`` fetches a day, each feed at its own phase; only feeds
    whose frequency moved by more than ``rtol`` get a new plan (no churn from noise)."""
    floor = floor_per_day(context.settings)
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
