"""Issue 32 item 7: a new follow starts full. Following a feed through the local API answers once
the feed's first fetch (the scheduler's urgent one: one request, nothing more) is archived, so the
local feeds hold the feed's current items at once, each marked as the feed's state when followed
(``fm:backlog``; ``_feedmesh.backlog`` in JSON Feed), not as news."""

from __future__ import annotations

import json
import re

import aiohttp
import msgspec

from feedmesh.feeds import parse_feed
from feedmesh.feeds.render_base import MESH_NAMESPACE
from tests.mesh.peer.conftest import BUSY, LAZY

JSON = {"Content-Type": "application/json"}


async def test_a_new_follow_shows_the_feeds_items_at_once_from_one_fetch(mesh):
    peer = await mesh.peer(0, [BUSY[0]], LAZY)
    added = mesh.url(BUSY[1])
    async with aiohttp.ClientSession() as session:
        async with session.get(added) as response:   # what the feed holds now
            listed = len(parse_feed(await response.read(), url=added).entries)
        assert listed >= 6
        async with session.post(f"{peer.proxy.url}/api/feeds", json={"url": added}) as response:
            assert response.status == 200
            answer = await response.json()
        assert answer["new"] and answer["fetched"] and answer["entries"] >= listed - 1
        # no waiting: the local feed is full as soon as the follow is answered
        async with session.get(answer["rss"]) as response:
            rss = (await response.read()).decode()
        async with session.get(answer["json"]) as response:
            feed = json.loads(await response.read())
    items = rss.count("<item>")
    assert items == answer["entries"] >= listed - 1   # the farm may have posted one meanwhile
    marks = re.findall(r'<fm:backlog xmlns:fm="([^"]+)">true</fm:backlog>', rss)
    assert len(marks) == items and set(marks) == {MESH_NAMESPACE}
    assert [item["_feedmesh"]["backlog"] for item in feed["items"]] == [True] * items
    assert len(mesh.fetches(0, BUSY[1])) == 1   # one fetch of the feed, no more


async def test_following_a_feed_already_followed_answers_without_a_fetch(mesh):
    peer = await mesh.peer(0, [BUSY[0]], LAZY)
    async with aiohttp.ClientSession() as session:
        for _ in range(2):
            async with session.post(f"{peer.proxy.url}/api/feeds",
                                    json={"url": mesh.url(BUSY[1])}) as response:
                answer = await response.json()
    assert not answer["new"] and answer["fetched"]
    assert len(mesh.fetches(0, BUSY[1])) == 1


async def test_a_new_peer_starts_full_even_when_first_fetches_may_spread_over_a_day(mesh):
    # a start used to spread never-fetched feeds' first fetches over first_fetch_spread_s: a
    # reader pointed at the new peer saw nothing for that long
    # a farm day: over two real minutes
    spread = msgspec.structs.replace(LAZY, first_fetch_spread_s=86400.0)
    peer = await mesh.peer(0, list(BUSY), spread)
    async with aiohttp.ClientSession() as session, \
            session.get(f"{peer.proxy.url}/all.rss") as response:
        rss = (await response.read()).decode()
    assert rss.count("<fm:backlog ") == rss.count("<item>") >= 12
    assert [len(mesh.fetches(0, feed)) for feed in BUSY] == [1, 1]
