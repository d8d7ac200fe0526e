"""Publishers that list their recent FeedEx clients as a source of neighbours (FeedEx 3.1), on
real sockets: two peers that know no tracker and no earlier neighbour find each other through
the farm's ``Link: <...>; rel="feedex-peer"`` answer to their fetches."""

from __future__ import annotations

from feedmesh.mesh.peer.daemon import publisher_peers
from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, EAGER

FEED = BUSY[0]


async def test_peers_that_know_no_tracker_meet_through_the_publishers_list(mesh):
    first = await mesh.peer(0, [FEED], EAGER, tracker=False, tell_publishers=True)
    await eventually(lambda: mesh.fetches(0, FEED), what="the first peer fetched the feed")
    quiet = await mesh.peer(2, [FEED], EAGER, tracker=False)  # does not tell publishers
    second = await mesh.peer(1, [FEED], EAGER, tracker=False, tell_publishers=True)
    await eventually(lambda: first.feedex.address in second.feedex.node.neighbours
                     and second.feedex.address in first.feedex.node.neighbours,
                     what="the second peer connects to the client the publisher listed")
    # the publisher knows them by the host their fetch came from and the port they stated
    assert set(mesh.farm.peers.clients(FEED)) == {first.feedex.address, second.feedex.address}
    assert first.settings.tracker is None and second.settings.tracker is None
    # a peer that does not tell publishers is neither listed nor told
    assert quiet.feedex.address not in first.feedex.node.neighbours
    assert quiet.feedex.node.neighbours == {}


def test_only_well_formed_feedex_peer_links_are_taken():
    links = ('<http://127.0.3.11:8400/feedex/v1>; rel="feedex-peer", '
             '<http://127.0.0.1:9000/hub>; rel="hub", '
             '<http://127.0.3.12/feedex/v1>; rel="feedex-peer", '  # no port
             '<http://127.0.3.13:99999/feedex/v1>; rel="feedex-peer", '  # not a port
             '<ftp://127.0.3.14:21/>; rel="feedex-peer", '
             '<http://127.0.3.15:8401/feedex/v1>; rel="feedex-peer"')
    assert publisher_peers(links) == [("127.0.3.11", 8400), ("127.0.3.15", 8401)]
    assert publisher_peers("garbage <<<") == []
