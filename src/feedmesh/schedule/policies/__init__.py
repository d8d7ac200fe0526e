"""Fetch policies: one interface (:mod:`.base`), one file per policy, selected by name.

A policy turns what was learned into *when to fetch*. Most policies are plan-based: at each refit
(daily by default) they compute, for every polled feed at once (numpy), a periodic plan - a period
and the offsets of the fetches within it - and the scheduler then reads the next planned instant
after each fetch in O(log m). The adaptive policies instead react to each fetch (FeedEx 3.3).

======================  ===============================================================
``uniform``             every feed every T, T set by the budget (Miniflux, FreshRSS default)
``adaptive``            FeedEx 3.3 (:mod:`.adaptive`), stable reading: more new entries than f_t
                        -> halve T
``adaptive-literal``    FeedEx 3.3 as printed (fewer new entries -> halve T): a ratchet
``cgm-age``             Cho & Garcia-Molina optimal-age frequencies, evenly spaced (:mod:`.cgm`)
``cgm-freshness``       Cho & Garcia-Molina optimal-freshness frequencies, evenly spaced
``optimal``             the paper: m ~ sqrt(w lambda) (Thm 1), Theorem 3 placement on the
                        feed's K-means cluster profile, 14-day window rates (:mod:`.optimal`)
``feedmesh``            ours (:mod:`.feedmesh_policy`)
======================  ===============================================================

Every policy spends the same global budget (the scheduler hands each refit M fetches per day for
the feeds it polls), and every policy floors a feed at one fetch per T_max, the scheduler's safety
net; politeness, hints and error backoff are applied by the scheduler after the policy speaks.
No policy imports the scheduler: it reads what it needs through :class:`~.base.RefitContext` and
:class:`~.base.ScheduleView`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import UnknownPolicyError
from ..policy_names import ABLATION_POLICY_NAMES, KNOWN_POLICY_NAMES, POLICY_NAMES
from ..settings import SchedulerSettings
from .adaptive import AdaptivePolicy
from .base import Plan, PlanBatch, Policy, PolicyView, RefitContext, RefitSource, ScheduleView
from .cgm import CgmPolicy
from .feedmesh_policy import FeedmeshPolicy
from .optimal import OptimalPolicy
from .uniform import UniformPolicy

__all__ = [
    "ABLATION_POLICY_NAMES",
    "KNOWN_POLICY_NAMES",
    "POLICY_NAMES",
    "AdaptivePolicy",
    "CgmPolicy",
    "FeedmeshPolicy",
    "OptimalPolicy",
    "Plan",
    "PlanBatch",
    "Policy",
    "PolicyView",
    "RefitContext",
    "RefitSource",
    "ScheduleView",
    "UniformPolicy",
    "make_policy",
]

POLICY_FACTORIES: dict[str, Callable[[SchedulerSettings], Policy]] = {
    "uniform": UniformPolicy,
    "adaptive": lambda settings: AdaptivePolicy(settings, literal=False),
    "adaptive-literal": lambda settings: AdaptivePolicy(settings, literal=True),
    "cgm-age": lambda settings: CgmPolicy(settings, "age"),
    "cgm-freshness": lambda settings: CgmPolicy(settings, "freshness"),
    "optimal": OptimalPolicy,
    "optimal-timing": lambda settings: OptimalPolicy(settings, allocate=False),
    "optimal-allocation": lambda settings: OptimalPolicy(settings, place=False),
    "feedmesh": FeedmeshPolicy,
}
"""Every known policy name (:data:`KNOWN_POLICY_NAMES`, which settings validate against) and
how to build it."""


def make_policy(settings: SchedulerSettings) -> Policy:
    """The policy named by ``settings.policy``."""
    factory = POLICY_FACTORIES.get(settings.policy)
    if factory is None:
        raise UnknownPolicyError(f"unknown policy {settings.policy!r}; known policies: "
                                 f"{', '.join(KNOWN_POLICY_NAMES)}")
    return factory(settings)
