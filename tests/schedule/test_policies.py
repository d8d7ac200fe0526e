"""What the policies promise: smoothing, re-planning without long gaps, floors, equal spending."""

from __future__ import annotations

import numpy as np
import pytest

from feedmesh.model import FetchOutcome
from feedmesh.schedule import FetchReport, Scheduler, SchedulerSettings
from feedmesh.schedule.clusters import assign_clusters
from feedmesh.schedule.policies import (
    POLICY_FACTORIES,
    PlanBatch,
    Policy,
    RefitContext,
    make_policy,
)
from feedmesh.schedule.policy_names import KNOWN_POLICY_NAMES
from feedmesh.schedule.simulator import simulate, window_of
from feedmesh.schedule.synthetic import synthetic_trace

T0 = 1_700_000_000.0
DAY = 86400.0


def _context(scheduler: Scheduler, now: float) -> RefitContext:
    slots = scheduler.state.polled_slots()
    return RefitContext(now=now, settings=scheduler.settings, slots=slots,
                        budget_per_day=scheduler.budget_per_day(), source=scheduler.upkeep)


def test_every_name_settings_accept_builds_a_policy():
    # settings validate against the name list, the registry builds from its table: one list
    assert sorted(POLICY_FACTORIES) == sorted(KNOWN_POLICY_NAMES)
    for name in KNOWN_POLICY_NAMES:
        assert isinstance(make_policy(SchedulerSettings(policy=name)), Policy)


def test_a_feed_silent_in_the_window_is_not_rate_zero_unless_asked():
    for smoothing, silent_gets_more in ((0.5, True), (0.0, False)):
        settings = SchedulerSettings(policy="optimal", budget_per_feed_per_day=1,
                                     rate_smoothing_posts=smoothing)
        scheduler = Scheduler(settings)
        scheduler.add_feed("busy", now=T0, history=[T0 - 3600.0 * k for k in range(40)],
                           history_since=T0 - 14 * DAY, last_fetched_at=T0)
        for i in range(20):
            scheduler.add_feed(f"silent{i}", now=T0, history_since=T0 - 14 * DAY,
                               last_fetched_at=T0)
        per_day = scheduler.policy.allocation(_context(scheduler, T0))
        floor = DAY / settings.max_interval_s
        assert per_day.sum() == pytest.approx(21.0)
        assert (per_day[1:].min() > 1.5 * floor) == silent_gets_more


def test_a_changed_plan_never_opens_a_gap_longer_than_its_own():
    # Strategy 2 with daily refits: one fetch a day whose time of day moves when a feed's
    # cluster changes; a move must not skip a day (the paper's maximum is one day).
    window = window_of(synthetic_trace(feeds=300, days=40, seed=9), days=40, train_days=14)
    result = simulate(window, SchedulerSettings(policy="optimal-timing",
                                                budget_per_feed_per_day=1))
    assert result.max_delay_min <= 1440 + 1.0 + 5.0  # a day, the 60 s tick, the dither's drift
    assert result.fetches_per_feed_per_day == pytest.approx(1.0, abs=0.02)


def test_evenly_spaced_plans_continue_from_the_last_fetch_when_their_period_changes():
    scheduler = Scheduler(SchedulerSettings(policy="optimal-allocation", budget_per_feed_per_day=2,
                                            phase_dither_s=0.0))
    for i in range(10):
        scheduler.add_feed(f"f{i}", now=T0, history=[T0 - 7200.0 * k for k in range(i + 1)],
                           history_since=T0 - 14 * DAY, last_fetched_at=T0)
    now = T0
    fetched: dict[str, float] = {}
    while now < T0 + 6 * DAY:
        now = scheduler.next_due_at(now)
        for feed_id in scheduler.pop_due(now):
            fetched[feed_id] = now
            scheduler.record(FetchReport(feed_id=feed_id, fetched_at=now, outcome=FetchOutcome.OK,
                                         new_entries=1, published=(now - 60.0,)))
    batches = scheduler.policy.refit(_context(scheduler, now))  # rates moved: new periods
    assert batches and len(batches[0].slots)
    batch = batches[0]
    for slot, origin in zip(batch.slots, batch.origin_s, strict=True):
        last = fetched[scheduler.feed_id_of(int(slot))]
        assert origin == pytest.approx(last)  # the new rhythm starts at the last fetch
        assert scheduler.plan_of(int(slot)) is not None


def test_cluster_labels_stick_until_another_centroid_is_clearly_nearer():
    centroids = np.array([[1.0, 0.0], [0.0, 1.0]])
    points = np.array([[0.52, 0.48], [0.9, 0.1], [0.2, 0.8]])
    previous = np.array([1, 1, 0])
    labels = assign_clusters(points, centroids, previous=previous, stickiness=1.5)
    assert list(labels) == [1, 0, 1]  # near the middle: kept; clearly elsewhere: moved
    assert list(assign_clusters(points, centroids)) == [0, 0, 1]


def test_feedmesh_floors_follow_the_budget_and_bound_every_gap():
    for budget, gap in ((1.0, 46 * 3600.0), (0.4, 1.9 * 2.5 * DAY)):
        scheduler = Scheduler(SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=budget))
        for i in range(40):
            scheduler.add_feed(f"f{i}", now=T0, history=[T0 - 5000.0 * k for k in range(i % 7)],
                               history_since=T0 - 14 * DAY, last_fetched_at=T0)
        scheduler.refit(T0 + 60.0)
        assert scheduler.policy.max_gap_s() == pytest.approx(gap)
        for slot in range(40):
            plan = scheduler.plan_of(slot)
            assert plan is not None
            assert plan.longest_gap_s() <= gap + 1e-6
            assert len(plan.offsets_s) >= np.ceil(7 * DAY / gap)


def test_plan_batches_know_their_longest_gap():
    batch = PlanBatch.of(np.array([0, 1]), DAY, np.array([[0.0, 3600.0], [7200.0, 50_000.0]]))
    assert list(batch.longest_gaps()) == [DAY - 3600.0, DAY - 50_000.0 + 7200.0]


def test_feedmesh_spends_what_optimal_spends_and_bounds_the_maximum():
    window = window_of(synthetic_trace(feeds=400, days=50, seed=4), days=50, train_days=14)
    results = {p: simulate(window, SchedulerSettings(policy=p, budget_per_feed_per_day=1))
               for p in ("uniform", "optimal", "feedmesh")}
    assert results["feedmesh"].fetches == pytest.approx(results["optimal"].fetches, rel=0.015)
    assert results["feedmesh"].max_delay_min <= 2 * results["uniform"].max_delay_min
    assert results["optimal"].max_delay_min > 2 * results["uniform"].max_delay_min
