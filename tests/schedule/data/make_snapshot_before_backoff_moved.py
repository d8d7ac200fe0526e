"""Run against the code before the backoff change (commit f6e88e0) to write a snapshot whose
settings carry the removed backoff fields and whose feeds carry a rate-limit streak."""
import sys

from feedmesh.model import FetchOutcome
from feedmesh.schedule import FetchReport, Scheduler, SchedulerSettings

T0 = 1_700_000_000.0
settings = SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=4, backoff_base_s=600.0,
                             backoff_max_s=7200.0, backoff_jitter=0.1, retry_after_max_s=3600.0,
                             seed=11)
scheduler = Scheduler(settings)
for i in range(6):
    scheduler.add_feed(f"f{i}", now=T0, host=f"h{i % 2}",
                       history=[T0 - 5000.0 * k for k in range(i)],
                       history_since=T0 - 14 * 86400.0)
scheduler.set_host_limits("h0", min_spacing_s=5.0, max_per_minute=10)  # fields since removed
now = T0
outcomes = {"f1": FetchOutcome.SERVER_ERROR, "f2": FetchOutcome.RATE_LIMITED}
for _ in range(40):
    now = scheduler.next_due_at(now)
    for feed_id in scheduler.pop_due(now):
        outcome = outcomes.get(feed_id, FetchOutcome.OK)
        scheduler.record(FetchReport(feed_id=feed_id, fetched_at=now, outcome=outcome,
                                     retry_after_s=(600.0 if outcome is FetchOutcome.RATE_LIMITED
                                                    else None),
                                     new_entries=1 if outcome is FetchOutcome.OK else 0,
                                     published=(now - 60.0,) if outcome is FetchOutcome.OK else ()))
sys.stdout.buffer.write(scheduler.to_bytes(now))
