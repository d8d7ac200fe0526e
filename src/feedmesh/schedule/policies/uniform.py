"""``uniform``: every feed at the same pace, the budget shared evenly (Miniflux, FreshRSS)."""

from __future__ import annotations

import numpy as np

from .base import PlanBatch, Policy, RefitContext
from .paper_rules import even_plans

__all__ = ["UniformPolicy"]


class UniformPolicy(Policy):
    """Every feed every T = (feeds / budget) days, at a fixed per-feed phase."""

    name = "uniform"

    def refit(self, context: RefitContext) -> list[PlanBatch]:
        n = len(context.slots)
        if n == 0:
            return []
        return even_plans(self, context, np.full(n, context.budget_per_day / n), rtol=0.01)
