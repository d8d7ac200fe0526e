"""A live peer's fetch phases: the FeedEx node chooses, the scheduler carries out, within the
plan's window (mesh/peer/phasing.py and Scheduler.rephase), on a manual clock."""

from __future__ import annotations

import itertools
import random

from feedmesh.mesh.feedex import FeedExNode, FeedExSettings
from feedmesh.mesh.feedex.messages import Connect, UpdateSubset
from feedmesh.mesh.peer.phasing import FetchPhaser
from feedmesh.model import FetchOutcome
from feedmesh.schedule import FetchReport, Scheduler, SchedulerSettings

T = 16 * 3600.0
FEED = "http://pub.test/feed/1"


class Scheduled:
    """The peer's ScheduledCrawler's three calls, over a real Scheduler."""

    def __init__(self, scheduler: Scheduler, clock: list[float]) -> None:
        self.scheduler = scheduler
        self.clock = clock

    def plan_of_feed(self, feed_id: int):
        last = self.scheduler.last_fetch_at(str(feed_id))
        period = self.scheduler.plan_period_s(str(feed_id))
        return None if last is None or period is None else (last, period)

    def next_fetch_at(self, feed_id: int):
        return self.scheduler.due_at(str(feed_id))

    def rephase(self, feed_id: int, at: float):
        return self.scheduler.rephase(str(feed_id), at, now=self.clock[0])


def _fetch(scheduler: Scheduler, now: float) -> list[str]:
    due = scheduler.pop_due(now)
    for feed_id in due:
        scheduler.record(FetchReport(feed_id=feed_id, fetched_at=now, outcome=FetchOutcome.OK))
    return due


def test_the_node_places_the_next_fetch_and_a_liar_cannot_push_it_out_of_the_plans_window():
    clock = [1_000_000.0]
    scheduler = Scheduler(SchedulerSettings(
        policy="uniform", budget_per_feed_per_day=86400.0 / T, min_interval_s=T,
        max_interval_s=T, max_delay_target_s=T, host_min_spacing_s=0.0, seed=3))
    scheduler.add_feed("1", now=clock[0], urgent=True)
    assert _fetch(scheduler, clock[0]) == ["1"]   # the first fetch: a new follow starts full
    first = clock[0]
    node = FeedExNode(("127.0.8.1", 8400), FeedExSettings(share_fetch_times=True),
                      weights={FEED: 1.0}, rng=random.Random(2))
    liar = ("127.0.8.2", 8400)
    node.receive(clock[0], liar, Connect({FEED: 0}))
    node.take()

    def act(call):
        return call(node, clock[0])

    phaser = FetchPhaser(act, Scheduled(scheduler, clock))
    fetches = [first]
    for _ in range(int(3 * T / 150)):   # three intervals of rounds; the liar crowds us each one
        clock[0] += 150.0
        mine = node.fetch_plans.get(FEED, clock[0])
        node.receive(clock[0], liar, UpdateSubset(fetch_times={FEED: mine + 1.0},
                                                  relayed_times={FEED: [mine - 5.0] * 64}))
        node.take()
        phaser.step(clock[0], [(FEED, 1)])
        if _fetch(scheduler, clock[0]):
            fetches.append(clock[0])
    assert phaser.moves >= 1   # the node moved the scheduler's fetch...
    gaps = [b - a for a, b in itertools.pairwise(fetches)]
    # ...but never past the plan's period after the fetch before (no starving), and never a
    # fetch more than the plan's: one per period once the phase is set
    assert gaps and max(gaps) <= T + 150.0
    assert all(g >= T - 150.0 for g in gaps[1:])
    assert len(fetches) <= 1 + 3 + 1
