"""FeedEx's adaptive fetching (section 3.3): each feed's interval halves or doubles with the share
of new entries a fetch finds. Reactive, not plan-based: the update itself runs in the compiled
:func:`feedmesh.schedule.kernels.record_success`; this class keeps the intervals' bookkeeping.
"""

from __future__ import annotations

import numpy as np

from ..kernels import F_INTERVAL, MODE_ADAPTIVE, MODE_ADAPTIVE_LITERAL
from ..settings import SchedulerSettings
from ..units import DAY_S
from .base import PlanBatch, Policy, RefitContext, ScheduleView

__all__ = ["AdaptivePolicy"]


class AdaptivePolicy(Policy):
    """FeedEx 3.3: halve or double each feed's interval from the share f of new entries per fetch.

    ``stable`` (ours, the default): f > f_t means we polled too slowly, so halve; f < f_t double.
    ``literal`` (as printed): f < f_t halves, f > f_t doubles; fewer new entries then make the
    interval shorter still, so every feed ratchets to T_min or T_max.
    Intervals live in [T_min, T_max]; to spend the same global budget as every other policy, all
    intervals are multiplied by one factor s with sum(1 / (s T_i)) = M (kept up to date in O(1)).
    The per-fetch update runs in :func:`feedmesh.schedule.kernels.record_success`; the intervals
    are the column ``F_INTERVAL`` of the scheduler's table, ``totals`` = [sum 1/T_i, M per s].
    """

    def __init__(self, settings: SchedulerSettings, *, literal: bool) -> None:
        super().__init__(settings)
        self.literal = literal
        self.name = "adaptive-literal" if literal else "adaptive"  # type: ignore[misc]
        self.mode = MODE_ADAPTIVE_LITERAL if literal else MODE_ADAPTIVE
        self.totals = np.zeros(2)

    def _intervals(self) -> np.ndarray:
        assert self.table is not None, "the scheduler attaches its table first"
        return self.table.F[:, F_INTERVAL]

    def refit(self, context: RefitContext) -> list[PlanBatch]:
        self.totals[1] = context.budget_per_day / DAY_S
        intervals = self._intervals()
        polled = np.zeros(len(intervals), dtype=bool)
        polled[context.slots] = True
        for slot in np.flatnonzero(np.isfinite(intervals) & ~polled):
            self.on_removed(int(slot))
        return []

    def on_added(self, slot: int, base_interval_s: float) -> None:
        super().on_added(slot, base_interval_s)
        interval = min(max(base_interval_s, self.settings.min_interval_s),
                       self.settings.max_interval_s)
        self.on_removed(slot)
        self._intervals()[slot] = interval
        self.totals[0] += 1.0 / interval

    def on_removed(self, slot: int) -> None:
        intervals = self._intervals()
        old = intervals[slot]
        if np.isfinite(old):
            self.totals[0] -= 1.0 / old
            intervals[slot] = np.nan

    def next_fetch(self, view: ScheduleView, slot: int, now: float) -> float:
        interval = self._intervals()[slot]
        if not np.isfinite(interval):
            return now + view.base_interval_s()
        rate_sum, budget_per_s = self.totals
        scale = rate_sum / budget_per_s if budget_per_s > 0 else 1.0
        effective = min(max(interval * scale, self.settings.min_interval_s),
                        self.settings.max_interval_s)
        return now + effective

    def state(self) -> dict[str, object]:
        intervals = self._intervals()
        return {"intervals": {str(int(k)): float(intervals[k])
                              for k in np.flatnonzero(np.isfinite(intervals))}}

    def load_state(self, state: dict[str, object], slot_map: dict[int, int]) -> None:
        intervals = state.get("intervals", {})
        assert isinstance(intervals, dict)
        for old, value in intervals.items():
            new = slot_map.get(int(old))
            if new is not None:
                self.on_removed(new)
                self._intervals()[new] = float(value)
                self.totals[0] += 1.0 / float(value)
