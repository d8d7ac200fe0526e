"""A restarted peer answers archive queries (FeedEx 3.6) for what its archive held before the
restart, not only for the entries it saw since, on real sockets."""

from __future__ import annotations

from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, EAGER, LAZY

FEED = BUSY[0]  # its document lists the latest 6 posts


async def test_after_a_restart_a_peer_answers_queries_from_its_archive(mesh):
    url = mesh.url(FEED)
    cap = mesh.farm.model.spec(FEED).entries_cap
    keeper = await mesh.peer(0, [FEED], EAGER)

    async def kept_enough() -> bool:
        return await keeper.archive.count(url) >= 3 * cap
    await eventually(kept_enough, timeout=90, what="the keeper archives three documents' worth")
    await mesh.stop_peer(0)
    kept = await mesh.peer(0, [], LAZY)  # the same data folder: archive.db from before
    assert kept is not keeper
    held = await kept.archive.count(url)
    assert held >= 3 * cap
    fetches_before = len(mesh.fetches(0, FEED))

    asker = await mesh.peer(1, [FEED], LAZY)
    await eventually(lambda: kept.feedex.address in asker.feedex.node.neighbours)
    result = await asker.feedex.query(url)
    holders = {tuple(h.address): h for h in result.holders}
    assert kept.feedex.address in holders
    # since the restart the keeper fetched the feed at most once and heard from one lazy peer:
    # at most two documents (2 x 6 entries) are new to it; it answers for all it holds
    assert len(mesh.fetches(0, FEED)) - fetches_before <= 1
    assert holders[kept.feedex.address].count >= held > 2 * cap
    answer = await asker.pull(url)
    assert answer["holder"] == f"{kept.feedex.address[0]}:{kept.feedex.address[1]}"
    assert await asker.archive.count(url) >= held
