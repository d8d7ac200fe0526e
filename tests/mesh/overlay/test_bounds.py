"""A stranger's flood cannot grow a node's memory: ``Recover``/``Vouch`` for seqs far ahead or long
gone, joins and publishes for thousands of groups, rumours of far-ahead seqs leave every structure
a datagram can fill (waiting and asked seqs, groups held for others and their buffers, a child's
places) within its bound, and the memory traced stays within them; honest recovery still works
after it. The stranger here is the worst case: validated (the simulator validates every sender)
and adopted as a child, so nothing but the bounds stands in its way."""

from __future__ import annotations

import gc
import random
import tracemalloc

from feedmesh.mesh.overlay.ids import ID_BITS, Handle, group_id
from feedmesh.mesh.overlay.messages import Route
from feedmesh.mesh.overlay.scribe import (
    Heartbeat,
    Item,
    Publish,
    Recover,
    Rumour,
    ScribeConfig,
    Subscribe,
    Vouch,
)
from feedmesh.mesh.overlay.wire import encode
from tests.mesh.overlay.test_scribe import URL, Feed

BOUNDS = ScribeConfig(max_children=0, feed_children=0, seq_window=64, max_foreign_groups=32,
                      max_foreign_bytes=256_000, max_groups_per_child=8)
RECORDS = 40


def test_a_strangers_flood_leaves_every_structure_within_its_bound_and_recovery_works():
    feed = Feed(12, seed=5, scribe=BOUNDS)
    gid = group_id(URL)
    feed.publish(RECORDS, gap=0.05)
    feed.sim.run_until(feed.sim.now + 1.0)
    target = max(feed.live_subscribers(), key=lambda n: len(n.groups[gid].children))
    assert target.groups[gid].children, "the target forwards to honest children"
    rng = random.Random(9)
    stranger = Handle(rng.getrandbits(ID_BITS), 10_000)
    near = target.handle.id & ~0xFFFFFF   # group ids the target is the root of

    def join_as_child(node, now):
        node.receive(now, stranger, Route(gid, Subscribe(gid, stranger), stranger, 1))
    feed.sim.act(target.handle.addr, join_as_child)
    assert stranger.id in target.groups[gid].children

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    sent = 0

    def flood(node, now):
        nonlocal sent

        def receive(sender, message):
            nonlocal sent
            sent += len(encode(message))   # what it costs the stranger on the wire
            node.receive(now, sender, message)
        for i in range(300):
            low = rng.randrange(1, 10_000_000)
            seqs = tuple(range(low, low + 1000)) if i % 3 else tuple(range(1, 1001))
            kind = Recover if i % 2 else Vouch
            receive(stranger, kind(gid, seqs))
        for i in range(3000):
            other = Handle(rng.getrandbits(ID_BITS), 10_001 + i)
            group = near | rng.getrandbits(24)
            receive(other, Route(group, Subscribe(group, stranger if i % 2 else other), other,
                                 10 + i))
            wire = rng.randbytes(4000)
            receive(other, Route(group, Publish(group, i, wire), other, 50_000 + i))
            receive(other, Item(group, i, wire))
        for _ in range(300):
            groups = (gid, *(near | rng.getrandbits(24) for _ in range(200)))
            receive(stranger, Rumour(groups, (10**12,) * len(groups)))
            receive(stranger, Heartbeat(gid, (stranger.id,), 10**12))
    feed.sim.act(target.handle.addr, flood)
    feed.sim.run_until(feed.sim.now + 2.0)   # the node acts on what it was told
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()

    assert sent > 20_000_000
    foreign = [g for g in target.groups.values() if g.log is None]
    assert len(foreign) <= BOUNDS.max_foreign_groups
    assert sum(g.buffer_bytes for g in foreign) <= BOUNDS.max_foreign_bytes
    for group in target.groups.values():
        assert len(group.waiting) <= BOUNDS.seq_window
        assert len(group.asked) <= BOUNDS.seq_window
        assert len(group.buffer) <= BOUNDS.buffer_size
    assert sum(stranger.id in g.children for g in target.groups.values()) <= \
        BOUNDS.max_groups_per_child
    ours = target.groups[gid]
    assert max(ours.waiting, default=0) <= ours.newest + BOUNDS.seq_window
    assert sum(stranger in w for w in ours.waiting.values()) <= BOUNDS.seq_window // 2
    assert target.counters["recover-refused"] > 100_000
    assert target.counters["groups-full"] > 0
    # ~1 MB for everything kept (the foreign buffers' 256 KB, 32 groups, Pastry's tables), from
    # more than 20 MB sent
    assert grown < 3_000_000, grown

    # honest recovery still works: a child that lost a record gets it back from the target
    child = next(n for n in feed.nodes if n.handle.id in ours.children)
    lost = []

    def lose(sender, destination, body):
        if destination.addr == child.handle.addr and type(body) is Item and \
                body.seq == RECORDS + 1 and not body.recovered and not lost:
            lost.append(body)
            return True
        return False
    feed.sim.lose = lose
    feed.publish(3, gap=0.3)
    # (the flood's strangers entered Pastry's tables: the first routes to them time out)
    feed.sim.run_until(feed.sim.now + 4.0)
    assert lost
    assert feed.seqs(child)[-3:] == [RECORDS + 1, RECORDS + 2, RECORDS + 3]
    again = next(d for d in feed.got[child.handle.addr] if d.record.seq == RECORDS + 1)
    assert again.recovered
    for node in feed.live_subscribers():
        assert feed.seqs(node) == list(range(1, RECORDS + 4)), node.handle.addr
