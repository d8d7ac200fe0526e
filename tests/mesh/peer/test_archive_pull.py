"""Archive pulling (FeedEx 3.6) on real sockets: a peer that starts following a feed late asks
who holds its old entries (query_feed), downloads them from the holder directly, and so gets
back entries the source feed no longer lists."""

from __future__ import annotations

from feedmesh.farm.testing import TEST_ORIGIN
from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, EAGER, LAZY

FEED = BUSY[0]  # its document lists the latest 6 posts


async def test_entries_no_longer_in_the_feed_come_back_from_peers(mesh):
    url = mesh.url(FEED)
    cap = mesh.farm.model.spec(FEED).entries_cap
    keeper = await mesh.peer(0, [FEED], EAGER)
    feed_id = keeper.archive.feed_id(url)
    # the keeper archives the feed until it holds twice what the document lists
    await eventually(lambda: keeper.archive.count(url), timeout=30)

    async def kept_enough() -> bool:
        return await keeper.archive.count(url) >= 2 * cap
    await eventually(kept_enough, timeout=90)
    kept = {row.entry.key for row in await keeper.archive.entries(feed_id, 10_000)}

    late = await mesh.peer(1, [FEED], LAZY)
    await eventually(lambda: keeper.feedex.address in late.feedex.node.neighbours)
    late_id = late.archive.feed_id(url)

    async def fetched_once() -> bool:
        return len(mesh.fetches(1, FEED)) == 1 and await late.archive.count(url) > 0
    await eventually(fetched_once)
    own = {row.entry.key for row in await late.archive.entries(late_id, 10_000)}
    assert len(own) <= cap + 2  # its own fetch saw the document (and perhaps a bundle or two)

    answer = await late.pull(url)
    assert answer["holder"] == f"{keeper.feedex.address[0]}:{keeper.feedex.address[1]}"
    assert answer["new_entries"] >= len(kept - own) - 2
    now_held = {row.entry.key for row in await late.archive.entries(late_id, 10_000)}
    gone_from_feed = kept - own
    assert len(gone_from_feed) >= cap
    assert gone_from_feed <= now_held  # what the feed no longer lists came back from the peer
    # and they are real posts of the feed, with the publisher's guids and titles
    posts = mesh.farm.truth(FEED, since=TEST_ORIGIN - 86400.0 * 365)
    truth = {mesh.guid(FEED, post) for post in posts}
    assert gone_from_feed <= truth
    assert late.archive.received[answer["holder"]] >= len(gone_from_feed)
    assert keeper.feedex.transport.stats["archive_served"] == 1
