"""Fake entries on real sockets: a lying peer sends entries its feed never had; the honest peer
checks what its neighbours sent against its own next fetch of the feed, lowers the liar's standing
with each one and drops it, while a neighbour that relays real entries keeps its place."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import msgspec

from feedmesh.model import Entry
from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, EAGER, FEEDEX, LAZY, linked

FEED = BUSY[0]
# the honest peer fetches every 30 farm minutes, its partner every 5: the partner brings most
# posts first, and the honest peer's own fetches judge them
EVERY_HALF_HOUR = msgspec.structs.replace(EAGER, budget_per_feed_per_day=48.0,
                                          min_interval_s=1800.0)
AUDITED = replace(FEEDEX, audit_sample=1.0, audit_grace_s=60.0, fake_entry_penalty=2.5,
                  drop_standing=-10.0)


def _invented(mesh, name: str) -> Entry:
    published = datetime.fromtimestamp(mesh.clock.now(), UTC)
    return Entry(key=f"urn:invented:{name}", guid=f"urn:invented:{name}", title=f"Invented {name}",
                 link=f"http://127.0.0.1/invented/{name}", published=published)


async def test_a_peer_that_sends_invented_entries_loses_standing_and_is_dropped(mesh):
    url = mesh.url(FEED)
    honest = await mesh.peer(0, [FEED], EVERY_HALF_HOUR, feedex=AUDITED)
    partner = await mesh.peer(1, [FEED], EAGER)
    liar = await mesh.peer(2, [FEED], LAZY)
    node = honest.feedex.node
    await eventually(lambda: linked(honest, partner) and linked(honest, liar),
                     what="both links are held at both ends")
    liar_address = f"{liar.feedex.address[0]}:{liar.feedex.address[1]}"

    # the liar offers two entries as if its fetch had found them (a bundle like any other)
    liar.feedex.fetched(url, [_invented(mesh, "1"), _invented(mesh, "2")])
    await eventually(lambda: honest.archive.received.get(liar_address, 0) >= 2,
                     what="the honest peer takes the invented entries at first")
    await eventually(lambda: node.stats["fake_entries"] >= 2, timeout=60,
                     what="its next fetch of the feed shows them invented")
    assert node.standing.score(liar.feedex.address) <= -5.0
    assert liar.feedex.address in node.neighbours  # lowered, not yet at the drop line

    liar.feedex.fetched(url, [_invented(mesh, "3"), _invented(mesh, "4")])
    await eventually(lambda: liar.feedex.address not in node.neighbours, timeout=60,
                     what="the liar is dropped at -10")
    assert node.standing.banned(mesh.clock.now(), liar.feedex.address)
    assert node.stats["fake_entries"] >= 4
    # real entries from the partner are confirmed by the same fetches; it keeps its place
    await eventually(lambda: node.stats["confirmed_entries"] >= 1, timeout=60,
                     what="an entry the partner brought first is confirmed")
    assert partner.feedex.address in node.neighbours
    assert node.standing.score(partner.feedex.address) > AUDITED.drop_standing
