"""schedule: when to fetch each feed, learned from its history, under a fetch budget.

The front door. The live crawler and the simulator use the same object::

    from feedmesh.schedule import Scheduler, SchedulerSettings, FetchReport, FeedHints

    scheduler = Scheduler(SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=24))
    scheduler.add_feed(feed_id, now=now, host=host, weight=subscribers, hints=hints)
    for feed_id in scheduler.pop_due(now): ...; scheduler.record(FetchReport(...))
    scheduler.next_due_at()                      # when to wake up next
    blob = scheduler.to_bytes(now); Scheduler.restore(blob, now=later)

The package is pure: no clock reads, no I/O (``now`` is always an argument). Modules:
``settings`` (the validated knobs), ``hints`` (publisher hints), ``learning`` (rates and
profiles), ``clusters`` (K-means), ``allocation`` (Theorem 1, Cho & Garcia-Molina),
``placement`` and ``placement_kernel`` (Theorems 2-3), ``policies``, ``adaptive`` and ``ours``
(the policies), ``table`` and ``core`` (the per-feed arrays and the compiled hot path: heap,
politeness, budget), ``limits`` (spend control), ``scheduler`` (the object above), ``upkeep``
(its refits and clock) and ``snapshot`` (its persistence),
``trace``/``synthetic``/``simulator``/``oracle`` (``feedmesh sim``). See docs/scheduling.md.
"""

from .errors import (
    DuplicateFeedError,
    ScheduleError,
    SettingsError,
    SnapshotError,
    TraceError,
    UnknownFeedError,
    UnknownPolicyError,
)
from .hints import FeedHints
from .policies import POLICY_NAMES
from .records import FeedStatus, FetchReport, SchedulerSnapshot
from .scheduler import Scheduler
from .settings import SchedulerSettings

__all__ = [
    "POLICY_NAMES",
    "DuplicateFeedError",
    "FeedHints",
    "FeedStatus",
    "FetchReport",
    "ScheduleError",
    "Scheduler",
    "SchedulerSettings",
    "SchedulerSnapshot",
    "SettingsError",
    "SnapshotError",
    "TraceError",
    "UnknownFeedError",
    "UnknownPolicyError",
]
