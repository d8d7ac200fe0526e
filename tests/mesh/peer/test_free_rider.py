"""Incentives (FeedEx 3.5) on real sockets: a free rider (takes entries, never offers any) is cut
off once its deficit passes D, and falls back to what its own fetches bring, while two
cooperators that feed each other keep getting everything."""

from __future__ import annotations

from dataclasses import replace

from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, EAGER, FEEDEX, LAZY

# D = 3 entries of credit; a neighbour that gives anything back is forgiven 50 to 1, so the two
# cooperators, whose feeds post at different rates, never cut each other: only a taker is cut.
CHECKED = replace(FEEDEX, max_deficit=3.0, deficit_ratio=50.0)
PAIR = (BUSY[0], 13)  # both post every 10-30 farm minutes in the first hours


async def _keys(peer, url: str) -> set[str]:
    feed_id = peer.archive.feed_id(url)
    return {row.entry.key for row in await peer.archive.entries(feed_id, 10_000)}


async def test_a_free_rider_is_cut_off_while_cooperators_keep_their_entries(mesh):
    a, b = PAIR
    # each cooperator fetches one of the two feeds often and gets the other from its partner
    first = await mesh.peer(0, [a, b], EAGER, feedex=CHECKED)
    second = await mesh.peer(1, [a, b], EAGER, feedex=CHECKED)
    rider = await mesh.peer(2, [a, b], LAZY, feedex=CHECKED, forward=False)
    # only one cooperator fetches each feed: stop the other's fetching of it by unfollowing in
    # its scheduler (the node still follows and advertises it)
    first.archive.scheduled.scheduler.remove_feed(str(first.archive.feed_id(mesh.url(b))))
    second.archive.scheduled.scheduler.remove_feed(str(second.archive.feed_id(mesh.url(a))))
    everyone = (first, second, rider)
    await eventually(lambda: all(len(p.feedex.node.neighbours) == 2 for p in everyone))
    cooperators = (first, second)
    rider_address = rider.feedex.address

    def cut() -> bool:
        ledgers = [p.feedex.node.neighbours.get(rider_address) for p in cooperators]
        return all(ledger is not None and ledger.received == 0
                   and ledger.owes(CHECKED.deficit_ratio) > CHECKED.max_deficit
                   for ledger in ledgers)
    await eventually(cut, timeout=60, what="both cooperators stop serving the rider")

    def feeding_each_other() -> bool:
        # until a cooperator has given its partner something new, the partner owes it and may
        # hold its bundles back too (D applies to everyone); from then on it is forgiven
        return (first.feedex.node.neighbours[second.feedex.address].received > 0
                and second.feedex.node.neighbours[first.feedex.address].received > 0)
    await eventually(feeding_each_other, timeout=60)
    assert cut()
    cut_at = mesh.clock.now()
    assert rider.feedex.transport.stats.get("withheld", 0) >= 1  # it did have things to offer
    # and it took entries before the cut (what was sent to it then may still be being stored)
    await eventually(lambda: sum(rider.archive.received.values()) >= 1, timeout=30,
                     what="the rider stores what it was given before the cut")

    def posted_since_cut() -> bool:
        return all(len(mesh.farm.truth(f, since=cut_at)) >= 3 for f in PAIR)
    await eventually(posted_since_cut, timeout=60)
    later = {f: {mesh.guid(f, p) for p in mesh.farm.truth(f, since=cut_at + 600.0)}
             for f in PAIR}

    async def cooperators_have_them() -> bool:
        for peer in cooperators:
            for f in PAIR:
                if not later[f] <= await _keys(peer, mesh.url(f)):
                    return False
        return True
    await eventually(cooperators_have_them, timeout=60,
                     what="each cooperator gets the posts of the feed its partner fetches")
    for peer in cooperators:  # the same connection throughout: nothing reset its ledger
        assert peer.feedex.node.neighbours[rider_address].since <= cut_at
    for f in PAIR:
        assert not later[f] & await _keys(rider, mesh.url(f)), "the rider got nothing after the cut"
        assert len(mesh.fetches(2, f)) == 1
    assert sum(p.feedex.node.stats["refused_deficit"] for p in cooperators) >= 1
