"""Per-host politeness as the scheduler decides it, on a manual clock: at most two fetches in
flight to a host, starts spaced by how fast the host answers, slowed by 429/503 and paused by
Retry-After, a feed a person adds at the head of its host's line, and every due time the truth
(issue 33, item 2).

A small driver plays the crawler: it asks for due feeds when the scheduler says something is
due or a fetch ends (no tick), and each fetch takes the host's latency."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from feedmesh.model import FetchOutcome
from feedmesh.schedule import FetchReport, Scheduler, SchedulerSettings
from feedmesh.schedule.kernels import FLAG_IN_FLIGHT, HI_IN_FLIGHT, I_FLAGS

T0 = 1_760_000_000.0


class Run:
    """What a drive saw."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.last_due: dict[str, float] = {}
        self.most_in_flight = 0
        self.worst_past_s = 0.0
        """The most any waiting feed's due time lay before the time it was read at."""


def drive(scheduler: Scheduler, feeds: list[str], *, latency_s: float, start: float,
          until: float, answer: Callable[[str, float], FetchReport] | None = None,
          at: dict[float, Callable[[float], None]] | None = None) -> Run:
    """Fetch ``feeds`` as they fall due until all were fetched once (or ``until``)."""
    run = Run()
    now = start
    ends: list[tuple[float, str]] = []
    actions = sorted((at or {}).items())
    while now <= until and len(run.started) < len(feeds):
        while actions and actions[0][0] <= now:
            actions.pop(0)[1](now)
        for feed in scheduler.pop_due(now):
            run.started.setdefault(feed, now)
            heapq.heappush(ends, (now + latency_s, feed))
        run.most_in_flight = max(run.most_in_flight, len(ends))
        for feed in feeds:
            if feed in run.started:
                continue
            due = scheduler.due_at(feed)
            assert due is not None, feed
            run.last_due[feed] = due
            run.worst_past_s = max(run.worst_past_s, now - due)
        upcoming = [t for t in (scheduler.next_due_at(now), ends[0][0] if ends else None,
                                actions[0][0] if actions else None) if t is not None]
        if not upcoming:
            break
        now = max(now, min(upcoming))
        while ends and ends[0][0] <= now:
            ended, feed = heapq.heappop(ends)
            report = (answer(feed, ended) if answer is not None else
                      FetchReport(feed_id=feed, fetched_at=ended,
                                  outcome=FetchOutcome.NOT_MODIFIED, elapsed_s=latency_s))
            scheduler.record(report)
    return run


def one_host(count: int, **settings) -> tuple[Scheduler, list[str]]:
    scheduler = Scheduler(SchedulerSettings(**settings))
    feeds = [f"f{i}" for i in range(count)]
    window = scheduler.first_fetch_window(count)
    for feed in feeds:
        scheduler.add_feed(feed, now=T0, host="blogs.example", first_fetch_within_s=window)
    return scheduler, feeds


def test_a_fast_host_gets_200_first_fetches_in_seconds_with_two_in_flight_at_most():
    scheduler, feeds = one_host(200)
    run = drive(scheduler, feeds, latency_s=0.005, start=T0, until=T0 + 3600)
    assert len(run.started) == 200
    span = max(run.started.values()) - T0
    # the minimum spacing (0.1 s) is what holds a host answering in 5 ms: 200 x 0.1 s
    assert 19.0 <= span <= 25.0, span
    assert run.most_in_flight <= 2
    assert run.worst_past_s <= 1e-6


def test_a_slow_host_is_paced_by_its_answers_and_kept_two_busy():
    scheduler, feeds = one_host(200)
    run = drive(scheduler, feeds, latency_s=2.0, start=T0, until=T0 + 3600)
    span = max(run.started.values()) - T0
    # 2 s answers, two in flight: a start every second, not one every 0.1 s nor a fixed slot
    assert 190.0 <= span <= 215.0, span
    assert run.most_in_flight == 2
    starts = sorted(run.started.values())
    gaps = [b - a for a, b in itertools.pairwise(starts[20:])]
    assert min(gaps) >= 0.99 * 1.0, min(gaps)


def test_every_waiting_feed_says_when_it_will_be_fetched():
    scheduler, feeds = one_host(100)
    run = drive(scheduler, feeds, latency_s=0.4, start=T0, until=T0 + 3600)
    assert run.worst_past_s <= 1e-6
    late = {feed: run.started[feed] - run.last_due[feed] for feed in feeds}
    # the last due time a feed reported before it started is when it started (give or take the
    # moment the host's pace settled)
    assert max(late.values()) <= 0.25, max(late.values())


def test_a_feed_added_by_hand_waits_at_the_head_of_its_hosts_line():
    scheduler, feeds = one_host(200)
    added_at = T0 + 10.0

    def add(now: float) -> None:
        scheduler.add_feed("mine", now=now, host="blogs.example", urgent=True)
        feeds.append("mine")

    run = drive(scheduler, feeds, latency_s=0.3, start=T0, until=T0 + 3600,
                at={added_at: add})
    assert run.started["mine"] - added_at <= 0.5, run.started["mine"] - added_at
    assert sum(1 for t in run.started.values() if t > run.started["mine"]) > 100
    assert run.most_in_flight <= 2


def test_429_with_retry_after_pauses_the_host_and_moves_its_line_after_the_pause():
    scheduler, feeds = one_host(50)
    answered: list[str] = []

    def answer(feed: str, at: float) -> FetchReport:
        answered.append(feed)
        if len(answered) == 5:
            return FetchReport(feed_id=feed, fetched_at=at, outcome=FetchOutcome.RATE_LIMITED,
                               status=429, retry_after_s=60.0, not_before=at + 60.0,
                               elapsed_s=0.05)
        return FetchReport(feed_id=feed, fetched_at=at, outcome=FetchOutcome.NOT_MODIFIED,
                           elapsed_s=0.05)

    run = drive(scheduler, feeds, latency_s=0.05, start=T0, until=T0 + 3600, answer=answer)
    starts = sorted(run.started.values())
    fifth_end = starts[4] + 0.05
    after = [t for t in starts if t > fifth_end]
    assert after and min(after) >= fifth_end + 60.0 - 1e-6
    assert run.worst_past_s <= 1e-6  # the line said so while it waited
    # and the host starts again slower than before the 429, then comes back to its pace
    tail = after[:3]
    assert tail[1] - tail[0] >= 0.15, tail


def in_flight(scheduler: Scheduler, feed: str) -> None:
    """Mark ``feed`` in flight to its host, as a pop would have (its due time aside)."""
    scheduler.state.table.I[scheduler.slot_of(feed), I_FLAGS] |= FLAG_IN_FLIGHT
    scheduler.state.hosts.HI[scheduler.state.hosts.row("blogs.example"), HI_IN_FLIGHT] += 1


def test_503_and_timeouts_slow_the_host_down_and_answers_bring_it_back():
    scheduler, _ = one_host(1)
    hosts = scheduler.state.hosts
    row = hosts.row("blogs.example")
    assert hosts.spacing(row) == 0.1
    [feed] = scheduler.pop_due(T0 + 60)
    scheduler.record(FetchReport(feed_id=feed, fetched_at=T0 + 61,
                                 outcome=FetchOutcome.SERVER_ERROR, status=503, elapsed_s=0.1))
    assert hosts.spacing(row) == 1.0
    for outcome, status in ((FetchOutcome.SERVER_ERROR, 503), (FetchOutcome.TIMEOUT, None)):
        in_flight(scheduler, feed)
        before = hosts.spacing(row)
        scheduler.record(FetchReport(feed_id=feed, fetched_at=T0 + 62, outcome=outcome,
                                     status=status, elapsed_s=0.1))
        assert hosts.spacing(row) == 2 * before
    for _ in range(40):
        in_flight(scheduler, feed)
        scheduler.record(FetchReport(feed_id=feed, fetched_at=T0 + 63,
                                     outcome=FetchOutcome.NOT_MODIFIED, elapsed_s=0.01))
    assert hosts.spacing(row) == 0.1
    assert hosts.in_flight(row) == 0


def test_a_scheduler_started_empty_fetches_an_imported_list_without_waiting_for_a_refit():
    """Its budget bucket had rate 0 and one token until the refit a minute later."""
    scheduler = Scheduler(SchedulerSettings())
    scheduler.pop_due(T0)  # started before any feed, as the crawler's loop does
    for i in range(20):
        scheduler.add_feed(f"f{i}", now=T0 + 1, host=f"h{i}", first_fetch_within_s=0.0)
    assert len(scheduler.pop_due(T0 + 1.5)) == 20


def test_the_per_minute_cap_still_holds_when_an_operator_sets_one():
    scheduler, feeds = one_host(40, host_max_per_minute=10)
    run = drive(scheduler, feeds, latency_s=0.005, start=T0, until=T0 + 3600)
    starts = sorted(run.started.values())
    for i in range(len(starts) - 10):
        assert starts[i + 10] - starts[i] >= 60.0 - 1e-6
    assert run.worst_past_s <= 1e-6
