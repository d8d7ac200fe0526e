"""``cgm-age`` and ``cgm-freshness``: Cho & Garcia-Molina's optimal-age and optimal-freshness
frequencies (TODS 2003, the allocations the paper compares against), evenly spaced."""

from __future__ import annotations

from ..allocation import cgm_age_allocation, cgm_freshness_allocation
from ..settings import SchedulerSettings
from .base import PlanBatch, Policy, RefitContext
from .paper_rules import even_plans, floor_per_day, window_rates

__all__ = ["CgmPolicy"]


class CgmPolicy(Policy):
    """Cho & Garcia-Molina's optimal-age or optimal-freshness frequencies, evenly spaced."""

    def __init__(self, settings: SchedulerSettings, objective: str) -> None:
        super().__init__(settings)
        self.objective = objective
        self._warm: dict[str, float] = {}  # the last multiplier: tomorrow's is near it

    def refit(self, context: RefitContext) -> list[PlanBatch]:
        if len(context.slots) == 0:
            return []
        rates = window_rates(context)
        solver = cgm_age_allocation if self.objective == "age" else cgm_freshness_allocation
        per_day = solver(rates, context.weights, context.budget_per_day,
                         floors=floor_per_day(context.settings), warm=self._warm)
        return even_plans(self, context, per_day, rtol=0.02)
