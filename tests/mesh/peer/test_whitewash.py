"""Whitewashing on real sockets: a free rider that a cooperator cut off leaves, comes back under
the same identity (address and port) and reconnects; the cooperator gives it its old ledger
back, so it is still not served."""

from __future__ import annotations

from dataclasses import replace

from tests.eventually import eventually
from tests.mesh.peer.conftest import BUSY, EAGER, FEEDEX, LAZY

CHECKED = replace(FEEDEX, max_deficit=3.0, deficit_ratio=50.0, dead_after_s=1800.0)
FEED = BUSY[0]


async def test_a_free_rider_that_reconnects_is_still_cut_off(mesh):
    cooperator = await mesh.peer(0, [FEED], EAGER, feedex=CHECKED)
    rider = await mesh.peer(1, [FEED], LAZY, feedex=CHECKED, forward=False)
    node = cooperator.feedex.node
    address = rider.feedex.address
    await eventually(lambda: address in node.neighbours)

    def cut() -> bool:
        ledger = node.neighbours.get(address)
        return ledger is not None and ledger.owes(CHECKED.deficit_ratio) > CHECKED.max_deficit
    await eventually(cut, timeout=60, what="the cooperator stops serving the rider")
    owed = node.neighbours[address].owes(CHECKED.deficit_ratio)

    await mesh.stop_peer(1)
    await eventually(lambda: address not in node.neighbours, timeout=60,
                     what="the cooperator drops the departed rider")
    back = await mesh.peer(1, [FEED], LAZY, feedex=CHECKED, forward=False, port=address[1])
    assert back.feedex.address == address  # the same identity
    await eventually(lambda: address in node.neighbours, timeout=60,
                     what="the rider reconnects")
    assert node.neighbours[address].owes(CHECKED.deficit_ratio) >= owed  # not a clean slate
    refused = node.stats["refused_deficit"]
    await eventually(lambda: node.stats["refused_deficit"] > refused, timeout=60,
                     what="the cooperator holds the next bundle back from it")
    assert sum(back.feedex.delivered.values()) == 0  # nothing came to it since it returned
