"""The Scheduler's contract: politeness, budget, hints, errors, bad input, restart."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import pytest

from feedmesh.fetch.state import BackoffPolicy, FeedFetchState, next_fetch_state, not_a_feed
from feedmesh.model import FeedInfo, FetchOutcome, FetchResult
from feedmesh.schedule import (
    FeedHints,
    FetchReport,
    Scheduler,
    SchedulerSettings,
    SettingsError,
    SnapshotError,
    UnknownFeedError,
    UnknownPolicyError,
)
from feedmesh.schedule.policies import POLICY_NAMES

T0 = 1_700_000_000.0
DAY = 86400.0


def run(scheduler: Scheduler, until: float, outcome=FetchOutcome.NOT_MODIFIED, start=T0,
        **report) -> dict[str, list[float]]:
    """Drive the scheduler like a crawler whose fetches all end with ``outcome``."""
    fetched: dict[str, list[float]] = defaultdict(list)
    now = start
    while True:
        due = scheduler.next_due_at(now)
        if due is None or due > until:
            return fetched
        now = max(now, due)
        for feed_id in scheduler.pop_due(now):
            fetched[feed_id].append(now)
            scheduler.record(FetchReport(feed_id=feed_id, fetched_at=now, outcome=outcome,
                                         **report))


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_every_policy_spends_about_the_budget_and_stays_polite(policy):
    settings = SchedulerSettings(policy=policy, budget_per_feed_per_day=2, host_min_spacing_s=5,
                                 host_max_per_minute=3)
    scheduler = Scheduler(settings)
    for i in range(40):
        scheduler.add_feed(f"f{i}", now=T0, host=f"host{i % 4}",
                           history=[T0 - 3600.0 * k for k in range(i % 5)],
                           history_since=T0 - 14 * DAY)
    # a week, because feedmesh plans a week at a time (fewer fetches on quiet weekdays)
    fetched = run(scheduler, T0 + 7 * DAY, outcome=FetchOutcome.OK, entries_in_document=10)
    total = sum(len(v) for v in fetched.values())
    assert 0.8 * 40 * 2 * 7 <= total <= 1.15 * 40 * 2 * 7 + 40
    by_host: dict[str, list[float]] = defaultdict(list)
    for feed_id, times in fetched.items():
        by_host[f"host{int(feed_id[1:]) % 4}"].extend(times)
    for times in by_host.values():
        times.sort()
        assert min(b - a for a, b in pairwise(times)) >= 5.0 - 1e-6
        assert all(times[i + 3] - times[i] >= 60.0 - 1e-6 for i in range(len(times) - 3))


def test_new_feeds_get_their_first_fetch_spread_not_at_once():
    scheduler = Scheduler(SchedulerSettings(policy="uniform", first_fetch_spread_s=600))
    for i in range(200):
        scheduler.add_feed(f"f{i}", now=T0)
    firsts = sorted(scheduler.status(f"f{i}").next_due_at for i in range(200))
    assert firsts[0] >= T0 and firsts[-1] <= T0 + 600
    assert firsts[-1] - firsts[0] > 400


def test_a_report_without_a_decision_backs_off_by_the_fetch_states_default_rule():
    # Reports built by hand (the trace simulator, tests) carry no not_before: the scheduler asks
    # feedmesh.fetch.state's rule with its default policy, never settings of its own. A plan of
    # one fetch every 5 minutes, so that the backoff is what decides.
    policy = BackoffPolicy()
    settings = SchedulerSettings(policy="uniform", budget_per_feed_per_day=288, seed=7)
    waits = []
    for _ in range(2):
        scheduler = Scheduler(settings)
        scheduler.add_feed("f", now=T0)
        now, series = T0, []
        for _ in range(4):
            now = scheduler.next_due_at(now)
            assert scheduler.pop_due(now) == ["f"]
            due = scheduler.record(FetchReport(feed_id="f", fetched_at=now,
                                               outcome=FetchOutcome.SERVER_ERROR))
            series.append(due - now)
        waits.append(series)
        assert scheduler.status("f").error_streak == 4
    assert waits[0] == waits[1]  # the same seed gives the same jitter
    for k, wait in enumerate(waits[0]):
        assert policy.base_s * 2**k <= wait <= policy.base_s * 2**k * (1 + policy.jitter) + 1e-6
    now = scheduler.next_due_at(now)
    scheduler.pop_due(now)
    scheduler.record(FetchReport(feed_id="f", fetched_at=now, outcome=FetchOutcome.OK))
    assert scheduler.status("f").error_streak == 0


def test_a_week_long_retry_after_is_capped_and_noted_and_blocks_the_host():
    cap = BackoffPolicy().retry_after_cap_s  # the fetch state's cap, without a decision
    scheduler = Scheduler(SchedulerSettings(policy="uniform", budget_per_feed_per_day=24))
    scheduler.add_feed("a", now=T0, host="h")
    scheduler.add_feed("b", now=T0, host="h")
    now = scheduler.next_due_at(T0)
    first = scheduler.pop_due(now, limit=1)[0]
    due = scheduler.record(FetchReport(feed_id=first, fetched_at=now,
                                       outcome=FetchOutcome.RATE_LIMITED,
                                       retry_after_s=7 * DAY))
    assert due == pytest.approx(now + cap)
    assert any("Retry-After" in note for note in scheduler.status(first).notes)
    other = "b" if first == "a" else "a"
    assert scheduler.pop_due(now + 3600) == []  # the host is paused for both feeds
    assert scheduler.status(other).next_due_at >= now + cap - 1


def test_gone_feeds_are_no_longer_scheduled():
    scheduler = Scheduler(SchedulerSettings(policy="uniform"))
    scheduler.add_feed("f", now=T0)
    now = scheduler.next_due_at(T0)
    scheduler.pop_due(now)
    assert scheduler.record(FetchReport(feed_id="f", fetched_at=now,
                                        outcome=FetchOutcome.GONE)) == float("inf")
    assert scheduler.status("f").state == "gone"
    assert scheduler.next_due_at(now + DAY) is None


def test_skip_hours_are_honoured_and_a_whole_day_of_them_is_ignored():
    info = FeedInfo(skip_hours=tuple(range(12)), skip_days=("Saturday",))
    hints = FeedHints.from_feed_info(info)
    scheduler = Scheduler(SchedulerSettings(policy="uniform", budget_per_feed_per_day=48))
    scheduler.add_feed("f", now=T0, hints=hints)
    for times in run(scheduler, T0 + 7 * DAY).values():
        for t in times:
            hour, weekday = int(t // 3600) % 24, (int(t // DAY) + 3) % 7
            assert hour >= 12 and weekday != 5
    everything = FeedHints.from_feed_info(FeedInfo(skip_hours=tuple(range(24))))
    assert everything.skips_everything
    scheduler = Scheduler(SchedulerSettings(policy="uniform", budget_per_feed_per_day=24))
    scheduler.add_feed("g", now=T0, hints=everything)
    assert len(run(scheduler, T0 + DAY)["g"]) >= 20
    assert any("skipHours" in note for note in scheduler.status("g").notes)


def test_ttl_and_max_age_delay_the_next_fetch_up_to_the_cap():
    scheduler = Scheduler(SchedulerSettings(policy="uniform", budget_per_feed_per_day=96))
    scheduler.add_feed("f", now=T0, hints=FeedHints(ttl_s=3 * 3600))
    now = scheduler.next_due_at(T0)
    scheduler.pop_due(now)
    due = scheduler.record(FetchReport(feed_id="f", fetched_at=now, outcome=FetchOutcome.OK))
    assert due >= now + 3 * 3600
    now = due
    scheduler.pop_due(now)
    due = scheduler.record(FetchReport(feed_id="f", fetched_at=now, outcome=FetchOutcome.OK,
                                       max_age_s=365 * DAY))
    assert now + 3 * 3600 <= due <= now + DAY + 1


def test_websub_live_feeds_are_polled_only_as_a_safety_net():
    scheduler = Scheduler(SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=24))
    scheduler.add_feed("push", now=T0, hints=FeedHints(has_hub=True, websub_live=True))
    scheduler.add_feed("poll", now=T0)
    fetched = run(scheduler, T0 + 3 * DAY)
    assert len(fetched["push"]) <= 4
    assert len(fetched["poll"]) > 20


def test_a_feed_going_live_moves_its_next_poll_to_the_safety_net_at_once():
    scheduler = Scheduler(SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=96))
    scheduler.add_feed("f", now=T0, hints=FeedHints(has_hub=True))
    now = scheduler.next_due_at(T0)
    scheduler.pop_due(now)
    due = scheduler.record(FetchReport(feed_id="f", fetched_at=now, outcome=FetchOutcome.OK))
    assert due < now + DAY / 2
    scheduler.set_hints("f", FeedHints(has_hub=True, websub_live=True))  # no refit in between
    assert scheduler.due_at("f") >= now + DAY
    assert scheduler.next_due_at() >= now + DAY


def test_a_lapsed_subscription_puts_the_feed_back_on_the_poll_schedule_at_once():
    """Issue 33, item 1: the publisher's hub went away, the lease lapsed; the feed was not
    fetched for a day (its next poll stayed at the safety net)."""
    scheduler = Scheduler(SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=96))
    scheduler.add_feed("f", now=T0, hints=FeedHints(has_hub=True, websub_live=True))
    now = scheduler.next_due_at(T0)
    scheduler.pop_due(now)
    scheduler.record(FetchReport(feed_id="f", fetched_at=now, outcome=FetchOutcome.OK))
    assert scheduler.due_at("f") >= now + DAY  # live: polled as the safety net
    lapsed = now + 2 * 3600
    scheduler.set_hints("f", FeedHints(has_hub=True, websub_live=False), lapsed)
    assert scheduler.due_at("f") == lapsed
    assert scheduler.next_due_at(lapsed) == lapsed
    assert scheduler.pop_due(lapsed) == ["f"]


def test_future_and_absurd_dates_are_not_believed():
    scheduler = Scheduler(SchedulerSettings(policy="feedmesh"))
    scheduler.add_feed("f", now=T0)
    now = scheduler.next_due_at(T0)
    scheduler.pop_due(now)
    scheduler.record(FetchReport(feed_id="f", fetched_at=now, outcome=FetchOutcome.OK,
                                 new_entries=2, published=(now - 3600, now + 30 * DAY)))
    later = now + 3600  # fetched again an hour later
    scheduler.record(FetchReport(feed_id="f", fetched_at=later, outcome=FetchOutcome.OK,
                                 new_entries=1, published=(0.0,)))
    notes = " ".join(scheduler.status("f").notes)
    assert "dates" in notes
    assert scheduler.status("f").window_rate_per_day > 0


def test_a_backward_clock_jump_moves_the_schedule_with_it():
    scheduler = Scheduler(SchedulerSettings(policy="uniform", budget_per_feed_per_day=24))
    scheduler.add_feed("f", now=T0)
    before = scheduler.status("f").next_due_at
    scheduler.next_due_at(T0 - 2 * 3600)  # the clock stepped back two hours
    assert scheduler.clock_jumps
    assert scheduler.status("f").next_due_at == pytest.approx(before - 2 * 3600)


def test_restore_resumes_without_a_burst():
    settings = SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=2)
    scheduler = Scheduler(settings)
    for i in range(300):
        scheduler.add_feed(f"f{i}", now=T0, history=[T0 - 7200.0 * (i % 3)])
    run(scheduler, T0 + DAY, outcome=FetchOutcome.OK)
    data = scheduler.to_bytes(T0 + DAY)
    same = Scheduler.restore(data, now=T0 + DAY)
    assert [same.status(f).next_due_at for f in ("f1", "f2")] == \
        [scheduler.status(f).next_due_at for f in ("f1", "f2")]
    later = Scheduler.restore(data, now=T0 + 5 * DAY)  # down for four days: all overdue
    dues = sorted(later.status(f).next_due_at for f in later.feed_ids())
    assert dues[0] >= T0 + 5 * DAY
    assert sum(1 for d in dues if d < T0 + 5 * DAY + 60) < 10
    with pytest.raises(SnapshotError):
        Scheduler.restore(b"not a snapshot", now=T0)


def test_bad_settings_and_unknown_names_raise_typed_errors():
    with pytest.raises(UnknownPolicyError, match="known policies"):
        Scheduler(SchedulerSettings(policy="fastest"))
    with pytest.raises(SettingsError, match="budget_per_feed_per_day"):
        Scheduler(SchedulerSettings(budget_per_feed_per_day=-1))
    with pytest.raises(SettingsError, match="not both"):
        Scheduler(SchedulerSettings(budget_per_feed_per_day=1, budget_per_day=10))
    with pytest.raises(UnknownFeedError, match="nope"):
        Scheduler().status("nope")


def test_a_budget_below_the_floors_still_fetches_every_feed():
    scheduler = Scheduler(SchedulerSettings(policy="optimal", budget_per_day=10))
    for i in range(100):  # 10 fetches a day for 100 feeds: fewer than one per feed per T_max
        scheduler.add_feed(f"f{i}", now=T0, last_fetched_at=T0)
    fetched = run(scheduler, T0 + 20 * DAY)
    assert len(fetched) == 100  # every feed, at the pace the budget allows
    burst = 10 * scheduler.settings.budget_burst_s / DAY  # what the full bucket holds at start
    assert sum(len(v) for v in fetched.values()) <= 10 * 20 + burst + 1


def test_a_late_fetch_report_is_not_a_backward_clock_jump():
    # A fetch made at t reports fetched_at = t even when other calls have seen a later now (a
    # slow server, a queue); moving the whole schedule back each time made the live crawler
    # fetch 50% more than its budget.
    scheduler = Scheduler(SchedulerSettings(policy="uniform", budget_per_feed_per_day=24))
    for i in range(20):
        scheduler.add_feed(f"f{i}", now=T0)
    first = scheduler.next_due_at(T0)
    fetching = scheduler.pop_due(first, limit=1)
    later = first + 3600.0
    others = {f: scheduler.status(f).next_due_at for f in scheduler.feed_ids()
              if f not in fetching}
    scheduler.next_due_at(later)  # the crawler's clock moved on
    scheduler.record(FetchReport(feed_id=fetching[0], fetched_at=first + 1200.0,
                                 outcome=FetchOutcome.OK))
    assert not scheduler.clock_jumps
    assert {f: scheduler.status(f).next_due_at for f in others} == others
    assert scheduler.status(fetching[0]).next_due_at >= first + 1200.0 + 300.0


def _fetch_now(scheduler: Scheduler) -> tuple[str, float]:
    """Pop the next due feed, as a crawler would: (its id, when)."""
    now = scheduler.next_due_at()
    assert now is not None
    (feed_id,) = scheduler.pop_due(now, limit=1)
    return feed_id, now


def test_the_scheduler_follows_the_fetch_states_decision_after_any_outcome():
    # One authority for backoff: feedmesh.fetch.state decides, the report carries the decision,
    # the scheduler's next due time is max(its plan, not_before, now + T_min).
    scheduler = Scheduler(SchedulerSettings(policy="uniform", budget_per_feed_per_day=96))
    scheduler.add_feed("f", now=T0)
    _, now = _fetch_now(scheduler)
    due = scheduler.record(FetchReport(feed_id="f", fetched_at=now,
                                       outcome=FetchOutcome.SERVER_ERROR,
                                       not_before=now + 3 * 3600, error_streak=7))
    assert due == pytest.approx(now + 3 * 3600)  # neither the plan (15 min) nor its own backoff
    assert scheduler.status("f").error_streak == 7
    _, now = _fetch_now(scheduler)
    assert now == pytest.approx(due)
    due = scheduler.record(FetchReport(feed_id="f", fetched_at=now, outcome=FetchOutcome.OK,
                                       error_streak=0))
    assert due <= now + 15 * 60 + 1 and scheduler.status("f").error_streak == 0
    _, now = _fetch_now(scheduler)
    due = scheduler.record(FetchReport(feed_id="f", fetched_at=now, outcome=FetchOutcome.OK,
                                       not_before=now + 5 * 3600))
    assert due == pytest.approx(now + 5 * 3600)  # a success follows it too


def test_a_rate_limited_fetch_pauses_its_host_until_the_states_not_before():
    scheduler = Scheduler(SchedulerSettings(policy="uniform", budget_per_feed_per_day=96))
    scheduler.add_feed("a", now=T0, host="h")
    scheduler.add_feed("b", now=T0, host="h")
    first, now = _fetch_now(scheduler)
    scheduler.record(FetchReport(feed_id=first, fetched_at=now,
                                 outcome=FetchOutcome.RATE_LIMITED, not_before=now + 7200,
                                 error_streak=1))
    assert scheduler.pop_due(now + 7100) == []  # the other feed is due, its host is not ready
    other = "b" if first == "a" else "a"
    assert scheduler.status(other).next_due_at >= now + 7200
    assert scheduler.pop_due(now + 7200 + 60)


def test_a_page_that_is_not_a_feed_is_not_fetched_before_the_states_backoff():
    # HTTP 200 with an HTML page: the outcome is OK, but the fetch state backs off (not_a_feed);
    # the scheduler must not fetch it again at its plan's pace.
    scheduler = Scheduler(SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=96))
    scheduler.add_feed("f", now=T0)
    _, now = _fetch_now(scheduler)
    result = FetchResult(url="http://h/f", outcome=FetchOutcome.OK, fetched_at=now)
    before = FeedFetchState(url="http://h/f")
    state = not_a_feed(next_fetch_state(before, result, now, 0.5), before, now, "an HTML page",
                       0.5)
    assert state.not_before > now + 300
    report = FetchReport.from_fetch("f", result, state=state)
    assert (report.not_before, report.error_streak) == (state.not_before, 1)
    assert scheduler.record(report) == pytest.approx(state.not_before)
    status = scheduler.status("f")
    assert status.error_streak == 1 and status.last_success_at is None


def test_a_snapshot_written_before_backoff_moved_to_the_fetch_state_still_restores():
    # Written by the code before this change (data/make_snapshot_before_backoff_moved.py): its
    # settings carry backoff_base_s & co., its feeds a rate_limit_streak, a host custom limits.
    data = (Path(__file__).parent / "data" / "snapshot_before_backoff_moved.msgpack").read_bytes()
    saved_at = 1700162199.2766657
    scheduler = Scheduler.restore(data, now=saved_at + 60)
    assert scheduler.settings.budget_per_feed_per_day == 4 and scheduler.settings.seed == 11
    assert sorted(scheduler.feed_ids()) == [f"f{i}" for i in range(6)]
    assert scheduler.status("f1").error_streak == 5
    assert scheduler.status("f1").next_due_at >= 1700163038.0  # its backoff still holds
    assert scheduler.next_due_at(saved_at + 60) is not None
