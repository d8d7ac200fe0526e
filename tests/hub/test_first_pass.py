"""The first pass of an imported list of 200 feeds on one host, under the hub's scheduled crawl
(what ``feedmesh serve --opml`` runs), against a real farm on loopback (issue 33, item 2: it
took ~15 minutes, a fetch per 5-s tick; a feed added by hand waited minutes; ``next_fetch_at``
lay a minute in the past).

Bounds: the pass within 60 s on loopback (about 20 s: the host's minimum spacing of 0.1 s is
what holds it), never more than two connections open to the host, a feed added by hand during
the pass fetched within a few seconds, and no waiting feed's ``next_fetch_at`` in the past."""

from __future__ import annotations

import time

from feedmesh.compose.embedded import running_hub
from feedmesh.compose.settings import HubSettings
from feedmesh.farm import FarmConfig, FarmServer
from feedmesh.fetch import FetchSettings, StaticResolver
from tests.eventually import eventually

FEEDS = 200


async def test_200_feeds_on_one_host_are_fetched_in_one_quick_polite_pass(tmp_path):
    config = FarmConfig(feeds=FEEDS + 1, seed=3, faults="none", origin=1_760_000_000.0,
                        prerender=True)
    async with FarmServer(config) as farm:
        settings = HubSettings(data_dir=str(tmp_path),  # the serve defaults, loopback allowed
                               fetch=FetchSettings(allow_networks=("127.0.0.0/8",)))
        async with running_hub(settings, "127.0.0.1", 0,
                               resolver=StaticResolver({})) as (hub, _base):
            crawler = hub.crawler
            clock = crawler.crawler.clock
            began = time.monotonic()
            ids = await hub.add_feeds([farm.feed_url(i) for i in range(FEEDS)])
            past: list[float] = []

            def fetched() -> int:
                now = clock.now()
                done = 0
                for fid in ids:
                    state = crawler.fetch_state(fid)
                    if state is not None and state.last_fetched_at:
                        done += 1
                        continue
                    due = crawler.next_fetch_at(fid)
                    if due is not None and due < now:
                        past.append(now - due)
                return done

            await eventually(lambda: fetched() >= FEEDS // 2, timeout=60.0,
                             what="half of the list fetched")
            added_at = time.monotonic()
            [mine] = await hub.add_feeds([farm.feed_url(FEEDS)], operator=False)
            await eventually(lambda: (crawler.fetch_state(mine) or _NONE).last_fetched_at,
                             timeout=10.0, what="the feed added by hand fetched")
            waited = time.monotonic() - added_at
            left = FEEDS - fetched()
            await eventually(lambda: fetched() == FEEDS, timeout=60.0 - (time.monotonic() - began),
                             what="every feed of the list fetched within 60 s")
            took = time.monotonic() - began
    assert took < 60.0, took
    assert waited < 3.0, f"the feed added by hand waited {waited:.1f} s ({left} feeds still queued)"
    assert left > 10, "the hand-added feed was not tested against a queue"
    assert not past, f"next_fetch_at lay up to {max(past):.1f} s in the past"
    assert farm.peak_connections == {farm.addresses[0]: farm.peak_connections[farm.addresses[0]]}
    assert 1 <= farm.peak_connections[farm.addresses[0]] <= 2, farm.peak_connections
    assert len(farm.requests()) >= FEEDS + 1


class _None:
    last_fetched_at = 0.0


_NONE = _None()
