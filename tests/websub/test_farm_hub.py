"""The farm as a WebSub publisher with its own hub (src/feedmesh/farm/websub.py), and feedmesh's
subscriber receiving its posts by push, both on loopback, on the farm's accelerated clock."""

from __future__ import annotations

import aiohttp

from feedmesh.clock import AcceleratedClock
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.farm.websub import FarmHub
from feedmesh.websub.lease import SubscriberSettings
from tests.eventually import eventually
from tests.websub.test_subscriber_loopback import feedmesh_hub, leases

ORIGIN = 1_760_000_000.0


async def test_farm_feeds_advertise_the_hub_and_it_refuses_foreign_topics():
    async with FarmServer(FarmConfig(feeds=3, faults="none")) as farm, FarmHub(farm) as hub, \
            aiohttp.ClientSession() as session:
        async with session.get(farm.feed_url(1)) as reply:
            assert reply.headers["Link"] == (f'<{hub.url}>; rel="hub", '
                                             f'<{farm.feed_url(1)}>; rel="self"')
        for topic, status in ((farm.feed_url(1) + "x", 400), ("http://elsewhere.test/feeds/1",
                                                               400)):
            async with session.post(hub.url, data={"hub.mode": "subscribe", "hub.topic": topic,
                                                   "hub.callback": "http://127.0.0.9:9/cb"}) as r:
                assert r.status == status
        # a callback that does not echo the challenge is never subscribed
        async with session.post(hub.url, data={"hub.mode": "subscribe",
                                               "hub.topic": farm.feed_url(2),
                                               "hub.callback": farm.feed_url(0)}) as reply:
            assert reply.status == 202
        await eventually(lambda: not hub._tasks, what="the verification attempt ended")
        assert hub.subscriptions.get(2, {}) == {}


async def test_feedmesh_receives_the_farms_posts_by_push(tmp_path):
    speed = 3600.0
    clock = AcceleratedClock(speed=speed, origin=ORIGIN)
    config = FarmConfig(feeds=24, seed=5, faults="none", speed=speed, origin=ORIGIN, hosts=24,
                        format_mix={"atom1.0": 1.0})
    # leases are counted on the farm's clock, an hour a second: ask for a month
    websub = SubscriberSettings(lease_s=30 * 86400)
    async with FarmServer(config, clock=clock) as farm, FarmHub(farm) as farm_hub, \
            feedmesh_hub(str(tmp_path), websub=websub) as (hub, _base):
        ids = await hub.add_feeds([farm.feed_url(i) for i in range(config.feeds)])
        # A hub started empty has a fetch budget of zero until its scheduler next refits (stale
        # plans are refitted at most once a minute): refit now rather than wait for it.
        hub.crawler.scheduled.scheduler.refit(hub.clock.now())
        await eventually(lambda: sum(len(c) for c in farm_hub.subscriptions.values()) == 24,
                         what="every feed subscribed at the farm's hub")
        assert all(lease.state == "active" for lease in leases(hub))
        subscribed_at = clock.now()
        gets = len([r for r in farm.requests() if r.feed is not None])

        def pushed_posts_stored() -> bool:
            # the first new post of three different feeds: each came in a push of its own (one
            # push can carry several posts of one feed when the farm's loop runs late)
            guids = {item.entry.guid for item in hub.store.recent_entries(500)}
            pushed = [farm.model.guid(i, posts[0]) for i in range(config.feeds)
                      if (posts := farm.truth(i, since=subscribed_at))]
            return len(pushed) >= 3 and all(g in guids for g in pushed[:3])

        accepted = hub.crawler.websub.deliveries.labels("accepted")
        await eventually(pushed_posts_stored, timeout=60.0, what="three pushed posts stored")
        # the farm's hub counts a push once it has read the reply, which can come after the
        # subscriber has stored the entries
        await eventually(lambda: farm_hub.pushes >= 3 and accepted._value.get() >= 3,
                         what="three pushes counted at both ends")
        assert farm_hub.push_failures == 0
        # the posts came by push, not by polling: the feeds were not fetched again
        assert len([r for r in farm.requests() if r.feed is not None]) == gets
        assert ids == sorted({lease.feed_id for lease in leases(hub)})
