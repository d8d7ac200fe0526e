"""A feed a person just added is fetched within seconds, with the learned schedule the hub runs
by default (not at a random moment of the next ten minutes, as bulk lists are spread), and the
page says when each source will be fetched next."""

from __future__ import annotations

import pytest

from feedmesh.schedule import SchedulerSettings
from tests.eventually import eventually


@pytest.fixture
def hub_overrides() -> dict:
    return {"schedule": SchedulerSettings(policy="feedmesh", budget_per_feed_per_day=96.0)}


async def test_a_source_added_by_hand_is_fetched_within_seconds(hub_env, ann):
    farm = hub_env.farm
    feed = 7
    status, body = await ann.call("POST", "/api/sources", {"url": farm.feed_url(feed)})
    assert status == 201, body
    # first_fetch_spread_s is 600: a lone feed must not wait for a random moment in it.
    await eventually(lambda: farm.requests(feed=feed), timeout=10.0,
                     what="the farm served the new feed")

    async def listed() -> dict | None:
        _, answer = await ann.call("GET", "/api/sources")
        source = answer["sources"][0]
        return source if source["last_outcome"] and source["next_fetch_at"] else None

    source = await eventually(listed, timeout=30.0)
    now = hub_env.hub.clock.now()
    assert source["last_outcome"] == "ok"
    assert now < source["next_fetch_at"] < now + 2 * 86400  # planned, not "never"
    # How the crawl of it goes, for the account to see (issue 33, item 15): when it was last
    # fetched, and no failures in a row.
    assert now - 60 < source["last_fetched_at"] <= now and source["errors"] == 0


def test_only_many_feeds_added_together_are_spread():
    from feedmesh.schedule import Scheduler

    scheduler = Scheduler(SchedulerSettings(first_fetch_spread_s=600.0, new_feeds_per_s=5.0))
    assert scheduler.first_fetch_window(1) == pytest.approx(0.2)
    assert scheduler.first_fetch_window(100) == pytest.approx(20.0)
    assert scheduler.first_fetch_window(100_000) == 600.0
    scheduler.add_feed("a", now=1000.0, host="h", first_fetch_within_s=0.2)
    assert 1000.0 <= scheduler.due_at("a") <= 1000.2
    scheduler.add_feed("b", now=1000.0, host="h")  # found at start-up: the whole window
    assert 1000.0 <= scheduler.due_at("b") <= 1600.0
