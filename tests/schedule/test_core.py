"""The compiled hot path against plain references: heap, plan lookup, budget, placement, batches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from feedmesh.model import FetchOutcome
from feedmesh.schedule import FetchReport, Scheduler, SchedulerSettings, kernels
from feedmesh.schedule.placement import RateGrid, expected_delay, place_batch
from feedmesh.schedule.policies import Plan
from feedmesh.schedule.spend_control import SpendControl
from feedmesh.schedule.table import FeedTable

T0 = 1_700_000_000.0
DAY = 86400.0


def test_indexed_heap_pops_in_order_after_random_moves_and_removals():
    rng = np.random.default_rng(5)
    table = FeedTable(capacity=200)
    for slot in range(200):
        table.reset(slot)
    due = {}
    for _ in range(3000):
        slot = int(rng.integers(200))
        if rng.random() < 0.2:
            table.remove_from_heap(slot)
            due.pop(slot, None)
        else:
            when = float(rng.random() * 1000)
            kernels.heap_update(table.heap_keys, table.heap_slots, table.heap_n, table.I, slot,
                                when)
            due[slot] = when
    assert table.heap_n[0] == len(due)
    popped = []
    while table.heap_n[0]:
        top = float(table.heap_keys[0]), int(table.heap_slots[0])
        popped.append(top)
        table.remove_from_heap(top[1])
    assert [t for t, _ in popped] == sorted(due.values())
    assert {s for _, s in popped} == set(due)


def test_plan_lookup_matches_the_plan_record_even_a_hair_before_an_instant():
    rng = np.random.default_rng(2)
    table = FeedTable(capacity=4)
    table.reset(0)
    for _ in range(300):
        period = float(rng.choice([3600.0, DAY, 7 * DAY, 31_137.5]))
        offsets = tuple(sorted(float(x) for x in rng.random(int(rng.integers(1, 6))) * period))
        origin = float(rng.random() * 1e6)
        plan = Plan(period, offsets, origin)
        table.set_plans(np.array([0]), np.array([period]), np.array([offsets]),
                        np.array([origin]))
        instant = origin + 12 * period + offsets[0]
        for t in (T0 + rng.random() * 1e6, instant, np.nextafter(instant, -np.inf),
                  instant - 0.5, instant + 0.5):
            expected = plan.next_after(t)
            assert kernels.plan_next(table.F, table.I, table.pool, 0, t) == pytest.approx(expected)
            assert expected > t + 0.5  # a fetch at (or a hair before) an instant moves on


def test_asking_when_the_next_fetch_is_does_not_mint_budget():
    scheduler = Scheduler(SchedulerSettings(policy="uniform", budget_per_day=24))
    for i in range(200):
        scheduler.add_feed(f"f{i}", now=T0)
    now = T0 + 3600.0  # every first fetch is due (spread over ten minutes)
    assert len(scheduler.pop_due(now)) == 48  # the whole bucket: two days of budget
    assert scheduler.pop_due(now) == []
    tokens = scheduler.state.bucket.copy()
    for _ in range(50):
        scheduler.next_due_at()  # looks ahead to the next token; must not book it
    assert np.array_equal(scheduler.state.bucket, tokens)
    fetched = 0
    end = now + 5 * DAY
    while (due := scheduler.next_due_at()) is not None and due < end:
        for feed_id in scheduler.pop_due(max(due, now)):
            scheduler.record(FetchReport(feed_id=feed_id, fetched_at=max(due, now),
                                         outcome=FetchOutcome.NOT_MODIFIED))
            fetched += 1
        now = max(due, now)
    assert fetched <= 24 * 5 + 2  # at most the budget, once the burst is spent


@pytest.mark.parametrize("m, gap, bins", [(1, None, 24), (3, None, 24), (4, 46.0, 168),
                                          (9, 46.0, 168), (25, None, 168)])
def test_compiled_placement_matches_the_numpy_one(m, gap, bins):
    rates = np.random.default_rng(m).gamma(0.4, 1.0, (40, bins))
    fast = np.sort(place_batch(rates, 1.0, m, max_gap=gap, compiled=True), axis=1)
    slow = place_batch(rates, 1.0, m, max_gap=gap, compiled=False)
    grid = RateGrid(rates, 1.0)
    assert expected_delay(grid, fast) == pytest.approx(expected_delay(grid, slow), rel=1e-9)
    if gap is not None:
        gaps = np.diff(fast, axis=1, append=fast[:, :1] + bins)
        assert gaps.max() <= gap + 1e-6


def test_a_batch_report_is_the_same_as_one_report_per_fetch():
    settings = SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=6, seed=3)
    one, many = Scheduler(settings), Scheduler(settings)
    for scheduler in (one, many):
        for i in range(30):
            scheduler.add_feed(f"f{i}", now=T0, history=[T0 - 3600.0 * k for k in range(i % 4)],
                               history_since=T0 - 14 * DAY)
    now = T0
    for _ in range(200):
        now = min(one.next_due_at(now), many.next_due_at(now))
        a, b = one.pop_due_slots(now), many.pop_due_slots(now)
        assert list(a) == list(b)
        published = np.array([now - 600.0 * (k + 1) for k in range(len(b))])
        for i, slot in enumerate(a):
            one.record_slot(int(slot), now, FetchOutcome.OK, 1, (float(published[i]),), 10)
        many.record_batch(b, now, np.ones(len(b), dtype=np.int64), published,
                          np.arange(len(b)), np.arange(len(b)) + 1, np.full(len(b), 10))
        assert np.array_equal(one.state.table.F[:30, kernels.F_DUE],
                              many.state.table.F[:30, kernels.F_DUE])


def test_spend_control_takes_out_what_plans_do_not_count():
    control = SpendControl()
    t, fetches = T0, 0
    for _ in range(60):
        scale = control.update(t, 1000.0)
        fetches += round(1000 * scale * 1.10)  # plans spend 10% more than they are given
        control.fetches = fetches
        t += DAY
    assert control.scale == pytest.approx(1 / 1.10, rel=0.02)
    steady = SpendControl()
    t, fetches = T0, 0
    for _ in range(30):
        steady.update(t, 1000.0)
        fetches += 1001  # a 0.1% error is noise: left alone
        steady.fetches = fetches
        t += DAY
    assert steady.scale == 1.0


def test_spend_control_measures_a_whole_week_between_uneven_refits():
    def spent(a: float, b: float) -> float:  # a weekly rhythm: two quiet days, five busy ones
        total, t = 0.0, a
        while t < b:
            end = min(b, (math.floor(t / DAY) + 1) * DAY)
            total += 700.0 * (end - t) / DAY * (0.3 if math.floor(t / DAY) % 7 in (2, 3) else 1.28)
            t = end
        return total

    control = SpendControl()
    t = T0
    rng = np.random.default_rng(1)
    for _ in range(80):
        control.update(t, 700.0)
        step = float(rng.uniform(0.5, 1.5)) * DAY  # refits at uneven instants
        control.fetches += round(spent(t, t + step))
        t += step
    assert control.scale == pytest.approx(1.0, abs=0.02)  # M a week: nothing to correct


def test_without_numba_the_same_functions_give_the_same_replay(monkeypatch):
    # numba is an optional extra: the kernels must be right as plain Python too
    from feedmesh.schedule import learning, placement, placement_kernel, simulator
    from feedmesh.schedule.simulator import simulate, window_of
    from feedmesh.schedule.synthetic import synthetic_trace

    window = window_of(synthetic_trace(feeds=40, days=24, seed=8), days=24, train_days=10)
    settings = SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=3)
    compiled = simulate(window, settings)
    if not kernels.HAVE_NUMBA:
        pytest.skip("numba is not installed: everything already ran as plain Python")
    # The same functions uncompiled (placement's numpy version is another algorithm, compared
    # with its compiled loops in test_compiled_placement_matches_the_numpy_one: its positions
    # tie-break differently, enough to move a fetch across the window's end).
    for module in (kernels, learning, simulator, placement_kernel, placement):
        for name, value in list(vars(module).items()):
            if hasattr(value, "py_func"):
                monkeypatch.setattr(module, name, value.py_func)
    plain = simulate(window, settings)
    assert plain.postings == compiled.postings
    assert plain.fetches == compiled.fetches
    assert plain.mean_delay_min == pytest.approx(compiled.mean_delay_min, rel=1e-9)
