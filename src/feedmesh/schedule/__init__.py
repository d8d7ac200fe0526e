"""schedule: when to fetch each feed, learned from its history, under a fetch budget.

The front door. The live crawler and the simulator use the same object::

    from feedmesh.schedule import Scheduler, SchedulerSettings, FetchReport, FeedHints

    scheduler = Scheduler(SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=24))
    scheduler.add_feed(feed_id, now=now, host=host, weight=subscribers, hints=hints)
    for feed_id in scheduler.pop_due(now): ...; scheduler.record(FetchReport(...))
    scheduler.next_due_at()                      # when to wake up next
    blob = scheduler.to_bytes(now); Scheduler.restore(blob, now=later)

The package is pure: no clock reads, no I/O (``now`` is always an argument). When to retry a
failed feed is not decided here: a report carries the decision of :mod:`feedmesh.fetch.state`
(``FetchReport.not_before``), and the scheduler follows it.

Layers, bottom-up. A module imports only modules of its own layer or of the layers below it,
never in a cycle; from the rest of feedmesh only ``feedmesh.model`` and ``feedmesh.fetch.state``.
This package's ``__init__`` (this front door) sits above every layer and nothing inside imports
it. The ``schedule-*`` contracts of ``.importlinter`` write this list down, and
``tests/test_architecture.py`` checks the code against them::

    1 foundation: units, errors, policy_names, settings
    2 kernels: kernels, placement_kernel
    3 arrays: table
    4 models: learning, allocation, placement, clusters, hints, records, spend_control
    5 policies: policies.base, policies.paper_rules, policies.uniform, policies.cgm,
      policies.optimal, policies.adaptive, policies.feedmesh_policy, policies
    6 scheduler: scheduler_state, upkeep, posting_times, snapshot, scheduler
    7 replay: trace, synthetic, oracle, simulator
    8 command line: cli

Modules, by layer:

1. ``units`` (seconds in an hour, day, week), ``errors`` (the exception tree),
   ``policy_names`` (the names settings accept), ``settings`` (the validated knobs);
2. ``kernels`` (the compiled hot path over the per-feed arrays: heap, politeness, budget, "fetched
   now: when next?", and the arrays' field indices), ``placement_kernel`` (Theorem 3, compiled);
3. ``table`` (the per-feed and per-host arrays, the heap and the plan pool);
4. ``learning`` (rates and profiles), ``allocation`` (Theorem 1, Cho & Garcia-Molina),
   ``placement`` (Theorems 2-3), ``clusters`` (K-means), ``hints`` (publisher hints),
   ``records`` (fetch reports, statuses, snapshots), ``spend_control`` (the budget's feedback);
5. ``policies``: ``base`` (plans, the refit context, the view a policy reads, the base class),
   ``paper_rules`` (what uniform, cgm-* and optimal share), one file per policy (``uniform``,
   ``cgm``, ``optimal``, ``adaptive``, ``feedmesh_policy``), and the registry (``__init__``);
6. ``scheduler_state`` (the scheduler's data, public), ``upkeep`` (its refits and clock),
   ``posting_times`` (which dates of new entries to believe), ``snapshot`` (its persistence),
   ``scheduler`` (the object above);
7. ``trace``, ``synthetic``, ``oracle``, ``simulator`` (``feedmesh sim``'s replay);
8. ``cli`` (``feedmesh sim``). See docs/scheduling.md.
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
from .policy_names import POLICY_NAMES
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
