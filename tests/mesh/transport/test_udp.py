"""The overlay on real UDP sockets: nodes on 127.0.4.x join, subscribe to a feed's group, and get
the root's signed records verified; forged items and bad datagrams are refused and counted; a dead
parent is repaired around."""

from __future__ import annotations

import logging

from nacl.signing import SigningKey

from feedmesh.mesh.overlay import group_id
from feedmesh.mesh.overlay.scribe import Item
from feedmesh.mesh.overlay.wire import MAGIC
from feedmesh.mesh.records import FeedWriter, record_hash
from feedmesh.mesh.records.record import MAGIC as RECORD_MAGIC
from tests.eventually import eventually
from tests.mesh.transport.conftest import subscribed, tree, udp_ring

URL = "http://127.0.4.200:8000/feed.xml"


def seqs(node) -> list[int]:
    return [d.record.seq for d in node.deliveries]


async def test_subscribers_get_every_record_verified_in_order() -> None:
    async with udp_ring(10) as nodes:
        writer = FeedWriter(SigningKey.generate(), URL)
        publisher, subscribers = nodes[0], nodes[1:]
        for node in subscribers:
            node.subscribe(URL, writer.feed)
        await subscribed(subscribers, group_id(URL))
        for n in range(3):
            publisher.publish(URL, n + 1, writer.append({"id": str(n), "title": f"item {n}"}))
        await eventually(lambda: all(seqs(n) == [1, 2, 3] for n in subscribers), timeout=10)
        assert [d.record.entry["title"] for d in subscribers[0].deliveries] == \
            ["item 0", "item 1", "item 2"]
        assert publisher.deliveries == []                  # it did not subscribe
        assert all(n.counters["malformed"] == 0 for n in nodes)
        # one routed message per record from the publisher to the root
        assert sum(n.node.counters["published"] for n in nodes) == 3


async def test_forged_items_are_refused_and_counted(rogue) -> None:
    async with udp_ring(6) as nodes:
        key = SigningKey.generate()
        writer = FeedWriter(key, URL)
        for node in nodes[1:]:
            node.subscribe(URL, writer.feed)
        await subscribed(nodes[1:], group_id(URL))
        first = writer.append({"id": "1"})
        nodes[0].publish(URL, 1, first)
        victim = nodes[3]
        await eventually(lambda: seqs(victim) == [1])

        good = writer.append({"id": "2"})
        tampered = good.replace(b'"id":"2"', b'"id":"3"')        # one byte changed
        impostor = FeedWriter(SigningKey.generate(), URL, feed=writer.feed,
                              head=(1, record_hash(first)))
        wrong_key = impostor.append({"id": "2"})
        unsigned = RECORD_MAGIC + bytes(64) + good[68:]
        gid = group_id(URL)
        for seq, wire in ((2, tampered), (2, wrong_key), (2, unsigned), (7, first)):
            rogue.send(Item(gid, seq, wire), victim)
        refused = victim.node.counters
        def all_refused() -> bool:
            counted = {k: refused[f"refused-{k}"]
                       for k in ("bad-signature", "wrong-key", "unsigned", "replayed")}
            assert counted == dict.fromkeys(counted, 1), dict(refused)
            return True
        await eventually(all_refused)
        rogue.send(Item(gid, 1, first), victim)            # a replay under its own seq
        await eventually(lambda: refused["duplicates"] >= 1)
        assert seqs(victim) == [1]                         # nothing forged was delivered

        nodes[0].publish(URL, 2, good)                     # the real record 2 still gets through
        await eventually(lambda: all(seqs(n) == [1, 2] for n in nodes[1:]))


async def test_bad_datagrams_are_refused_logged_and_counted(rogue, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="feedmesh.mesh.udp")
    async with udp_ring(3) as nodes:
        target = nodes[1]
        rogue.send_raw(b"hello", target)
        rogue.send_raw(MAGIC + b"\xc1\xc1", target)
        rogue.send_raw(MAGIC + bytes(61_000), target)
        someone_else = type(rogue.handle)(5, ("127.0.4.251", 9))
        rogue.send(Item(1, 1, b"x"), target, sender=someone_else)   # claims another address
        await eventually(lambda: target.counters["malformed"] == 2
                         and target.counters["oversized"] == 1 and target.counters["spoofed"] == 1)
        text = caplog.text
        assert "datagram_refused" in text and "kind=oversized" in text and "kind=malformed" in text
        assert "61004 bytes over the 60000-byte limit" in text
        # and the node still works
        writer = FeedWriter(SigningKey.generate(), URL)
        target.subscribe(URL, writer.feed)
        await subscribed([target], group_id(URL))
        nodes[2].publish(URL, 1, writer.append({"id": "1"}))
        await eventually(lambda: seqs(target) == [1])


async def test_a_killed_parent_is_repaired_around() -> None:
    async with udp_ring(12) as nodes:
        writer = FeedWriter(SigningKey.generate(), URL)
        gid = group_id(URL)
        # everyone subscribes, so the root (whichever node's id is closest) always has children and
        # is one of the victims to choose from; the publisher is any other node, chosen once the
        # tree is built (a non-subscribing publisher that is the root would leave no subscriber a
        # parent in a ring this small: every one attaches to it directly)
        for node in nodes:
            node.subscribe(URL, writer.feed)
        await subscribed(nodes, gid)
        publisher = next(n for n in nodes if not n.node.groups[gid].root)
        subscribers = nodes
        publisher.publish(URL, 1, writer.append({"id": "1"}))
        await eventually(lambda: all(seqs(n) == [1] for n in subscribers), timeout=10)

        # kill the node, not the publisher, that is the parent of the most (the root, or a
        # forwarder)
        def orphans_of(candidate) -> list:
            return [n for n in nodes if n is not candidate and (g := n.node.groups.get(gid))
                    and g.parent is not None and g.parent.id == candidate.handle.id]
        victim = max((n for n in subscribers if n is not publisher),
                     key=lambda n: len(orphans_of(n)))
        orphans = orphans_of(victim)
        assert orphans, tree(nodes, gid)
        victim.close()
        live = [n for n in subscribers if n is not victim]
        publisher.publish(URL, 2, writer.append({"id": "2"}))
        def repaired() -> bool:
            assert all(seqs(n) == [1, 2] for n in live), tree(nodes, gid)
            return True
        await eventually(repaired, timeout=20)
        for orphan in orphans:
            parent = orphan.node.groups[gid].parent if gid in orphan.node.groups else None
            assert parent is None or parent.id != victim.handle.id
        assert sum(n.node.counters["parent-silent"] + n.node.counters["parent-lost"]
                   for n in orphans) >= len(orphans)
        publisher.publish(URL, 3, writer.append({"id": "3"}))
        await eventually(lambda: all(seqs(n) == [1, 2, 3] for n in live), timeout=10)
