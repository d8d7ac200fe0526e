"""Peers on real sockets exchange entries (FeedEx 3.4): a node that has not fetched a feed since
start-up gets its new entries from the neighbour that did; a dead neighbour is replaced."""

from __future__ import annotations

from dataclasses import replace

from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, EAGER, FEEDEX, LAZY

FEED = BUSY[0]


async def _keys(peer, url: str) -> set[str]:
    feed_id = peer.archive.feed_id(url)
    return {row.entry.key for row in await peer.archive.entries(feed_id, 10_000)}


async def test_lazy_peers_get_new_entries_from_the_one_that_fetches(mesh):
    url = mesh.url(FEED)
    eager = await mesh.peer(0, [FEED, BUSY[1]], EAGER)
    lazies = [await mesh.peer(i, [FEED], LAZY) for i in (1, 2, 3)]
    everyone = [eager, *lazies]
    await eventually(lambda: all(len(p.feedex.node.neighbours) >= 2 for p in everyone),
                     what="every peer has two neighbours")
    # each lazy peer fetched the feed once, at start-up, and not again
    await eventually(lambda: all(len(mesh.fetches(i, FEED)) == 1 for i in (1, 2, 3)))
    last_fetch = {i: mesh.fetches(i, FEED)[-1] for i in (1, 2, 3)}

    async def lazies_have_later_posts() -> bool:
        for i, peer in zip((1, 2, 3), lazies, strict=True):
            later = {mesh.guid(FEED, p) for p in mesh.farm.truth(FEED, since=last_fetch[i])}
            if not later or not later <= await _keys(peer, url):
                return False
        return True

    # posts published after a lazy peer's only fetch reach it: two or more of them each
    await eventually(lazies_have_later_posts, timeout=60)
    await eventually(lambda: all(len(mesh.farm.truth(FEED, since=last_fetch[i])) >= 2
                                 for i in (1, 2, 3)), timeout=60)
    await eventually(lazies_have_later_posts, timeout=60)
    for i, peer in zip((1, 2, 3), lazies, strict=True):
        assert len(mesh.fetches(i, FEED)) == 1, "the lazy peer did not fetch again"
        assert sum(peer.archive.received.values()) >= 2
        status = peer.status()
        assert status["entries_from_peers"] == sum(peer.archive.received.values())
        assert any(row["entries_from"] > 0 for row in status["neighbours"])
    assert len(mesh.fetches(0, FEED)) >= 5
    # the eager peer gives, the lazy ones receive: its neighbours owe it nothing back
    assert sum(row["entries_to"] for row in eager.status()["neighbours"]) >= 2


async def test_a_dead_neighbour_is_replaced(mesh):
    tight = replace(FEEDEX, max_neighbours=2)  # full at the minimum: a loss must be replaced
    peers = {i: await mesh.peer(i, [FEED], LAZY, feedex=tight) for i in range(5)}
    watched = peers[0]

    def regular() -> set:  # the neighbours it keeps (newcomers on trial beside them aside)
        return {a for a, n in watched.feedex.node.neighbours.items() if not n.probation}

    await eventually(lambda: len(regular()) >= 2)
    victim_address = next(iter(regular()))
    victim = next(i for i, p in peers.items() if p.feedex.address == victim_address)
    before = regular()
    await mesh.stop_peer(victim)
    await eventually(lambda: victim_address not in watched.feedex.node.neighbours, timeout=60,
                     what="the dead neighbour is dropped")
    await eventually(lambda: len(regular()) >= 2, timeout=60,
                     what="the peer is back to its minimum of neighbours")
    # (a newcomer on trial takes the place, or a new one is found)
    assert regular() - before, "a new neighbour took the dead one's place"


async def test_a_restarted_peer_returns_to_its_neighbours_without_the_tracker(mesh):
    first = await mesh.peer(0, [FEED], LAZY)
    second = await mesh.peer(1, [FEED], LAZY)
    await eventually(lambda: second.feedex.address in first.feedex.node.neighbours)
    await mesh.stop_peer(0)  # saves its neighbours
    await mesh.tracker.stop()  # nobody to ask now
    again = await mesh.peer(0, [FEED], LAZY)
    assert again.feedex.candidates == [second.feedex.address]
    await eventually(lambda: second.feedex.address in again.feedex.node.neighbours,
                     what="the restarted peer reconnects to the neighbour it saved")
    assert again.feedex.address in second.feedex.node.neighbours
