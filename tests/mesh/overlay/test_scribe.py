"""Scribe trees in the simulator: delivery down the tree, gap recovery from the parent's buffer,
re-joining when a parent goes silent, root hand-over, forged records stopped, the whole
experiment."""

from __future__ import annotations

import pytest
from nacl.signing import SigningKey

from feedmesh.mesh.overlay.ids import Handle, closest, group_id
from feedmesh.mesh.overlay.scenario import build_overlay, run_experiment
from feedmesh.mesh.overlay.scribe import Item, ScribeConfig, ScribeNode
from feedmesh.mesh.records import FeedWriter

URL = "https://news.example.org/feed.xml"


class Feed:
    """An overlay where every node but node 0 subscribes, and node 0 publishes."""

    def __init__(self, count: int, seed: int = 3, scribe: ScribeConfig | None = None) -> None:
        self.overlay = build_overlay(count, seed=seed, settle=3.0, scribe=scribe)
        self.sim = self.overlay.sim
        self.nodes = self.overlay.nodes
        self.publisher = self.nodes[0]
        self.writer = FeedWriter(SigningKey(b"\x11" * 32), URL)
        self.got: dict[int, list] = {n.handle.addr: [] for n in self.nodes}
        self.sim.after_step = lambda node: self.got[node.handle.addr].extend(
            node.take_deliveries())
        for node in self.nodes[1:]:
            self.sim.act(node.handle.addr, lambda n, now: n.subscribe(now, URL, self.writer.feed))
        self.sim.run_until(self.sim.now + 3.0)

    def publish(self, count: int = 1, gap: float = 0.2) -> None:
        for _ in range(count):
            wire = self.writer.append({"id": str(self.writer.seq + 1)})
            seq = self.writer.seq
            self.sim.act(self.publisher.handle.addr,
                         lambda n, now, w=wire, s=seq: n.publish(now, URL, s, w))
            self.sim.run_until(self.sim.now + gap)

    def live_subscribers(self) -> list[ScribeNode]:
        return [n for n in self.nodes[1:] if n.handle.addr not in self.sim.dead]

    def seqs(self, node: ScribeNode) -> list[int]:
        return [d.record.seq for d in self.got[node.handle.addr]]

    def root(self) -> ScribeNode:
        live = [n for n in self.nodes if n.handle.addr not in self.sim.dead]
        handle = closest(group_id(URL), [n.handle for n in live])
        return next(n for n in live if n.handle == handle)

    def assert_tree(self) -> None:
        """Every subscriber's parent chain ends at the root, through live nodes, without a loop."""
        by_id = {n.handle.id: n for n in self.nodes}
        gid = group_id(URL)
        root = self.root()
        assert root.groups[gid].root
        for node in self.live_subscribers():
            seen, current = set(), node
            while not current.groups[gid].root:
                assert current.handle.id not in seen, "a loop in the tree"
                seen.add(current.handle.id)
                parent = current.groups[gid].parent
                assert parent is not None and parent.addr not in self.sim.dead
                current = by_id[parent.id]
            assert current is root


def test_records_go_down_the_tree_to_every_subscriber_in_order_with_one_publisher_message():
    feed = Feed(60)
    feed.assert_tree()
    before = feed.sim.sent_by_kind[0, "Route/Publish"]
    feed.publish(5)
    feed.sim.run_until(feed.sim.now + 1.0)
    assert feed.sim.sent_by_kind[0, "Route/Publish"] - before == 5
    for node in feed.live_subscribers():
        assert feed.seqs(node) == [1, 2, 3, 4, 5]
        assert node.counters["duplicates"] == 0
    assert not feed.got[0]   # the publisher did not subscribe


def test_a_lost_item_is_recovered_from_the_parents_buffer():
    feed = Feed(40)
    victim = max(feed.live_subscribers(), key=lambda n: len(n.groups[group_id(URL)].path))
    lost = []

    def lose(sender, destination, body):
        if destination.addr == victim.handle.addr and type(body) is Item and body.seq == 2 \
                and not body.recovered and not lost:
            lost.append(body)
            return True
        return False

    feed.sim.lose = lose
    feed.publish(3, gap=0.3)
    feed.sim.run_until(feed.sim.now + 1.5)
    assert lost
    assert feed.seqs(victim) == [1, 2, 3]
    second = next(d for d in feed.got[victim.handle.addr] if d.record.seq == 2)
    assert second.recovered and victim.counters["recover-asked"] >= 1


def test_the_last_item_lost_is_noticed_from_the_heartbeat_and_recovered():
    feed = Feed(30)
    victim = feed.live_subscribers()[3]
    feed.sim.lose = lambda s, d, body: d.addr == victim.handle.addr and type(body) is Item \
        and not body.recovered
    feed.publish(1)
    feed.sim.lose = None
    feed.sim.run_until(feed.sim.now + 1.5)
    assert feed.seqs(victim) == [1]


def test_children_of_a_dead_forwarder_join_again_and_keep_receiving():
    feed = Feed(60, seed=4)
    gid = group_id(URL)
    forwarder = max((n for n in feed.nodes[1:] if not n.groups[gid].root),
                    key=lambda n: len(n.groups[gid].children))
    orphans = [feed.nodes[child.addr] for child in forwarder.groups[gid].children.values()]
    assert orphans
    feed.sim.kill(forwarder.handle.addr)
    feed.sim.run_until(feed.sim.now + 3.0)   # parent_timeout 1.5 s, then a re-join
    for orphan in orphans:
        parent = orphan.groups[gid].parent
        assert orphan.groups[gid].root or (parent is not None and parent != forwarder.handle)
    feed.assert_tree()
    feed.publish(2)
    feed.sim.run_until(feed.sim.now + 1.0)
    for node in feed.live_subscribers():
        assert feed.seqs(node) == [1, 2]


def test_a_node_closer_to_the_group_id_becomes_root_and_the_old_tree_hangs_below_it():
    feed = Feed(30, seed=5)
    old_root = feed.root()
    newcomer = ScribeNode(Handle(group_id(URL), 999))
    feed.sim.add(newcomer)
    feed.got[999] = []
    feed.sim.act(999, lambda n, now: n.start(now, old_root.handle))
    feed.sim.run_until(feed.sim.now + 2.0)
    feed.publish(3)
    feed.sim.run_until(feed.sim.now + 3.0)
    gid = group_id(URL)
    assert newcomer.groups[gid].root and not old_root.groups[gid].root
    assert old_root.groups[gid].parent == newcomer.handle
    for node in feed.live_subscribers():
        assert feed.seqs(node) == [1, 2, 3]


def test_a_subscriber_forwards_nothing_its_log_refused():
    feed = Feed(40, seed=6)
    gid = group_id(URL)
    feed.publish(1)
    parent = next(n for n in feed.live_subscribers()
                  if n.groups[gid].children and not n.groups[gid].root)
    forged = FeedWriter(SigningKey(b"\x66" * 32), URL, feed=feed.writer.feed,
                        head=(feed.writer.seq, feed.writer.prev)).append({"id": "forged"})
    forwarded = parent.counters["forwarded"]
    parent.receive(feed.sim.now, parent.groups[gid].parent, Item(gid, 2, forged))
    assert parent.counters["refused-wrong-key"] == 1
    assert parent.counters["forwarded"] == forwarded
    assert not [body for _, body in parent.take() if type(body) is Item]


def test_the_experiment_meets_its_goals_at_small_scale():
    outcome = run_experiment(80, seed=2, items=5, churn_items=24, drain=10.0)
    assert outcome.publisher_msgs_per_update == 1.0
    assert outcome.steady_missed == 0
    assert outcome.delivery_p99_ms <= 400
    assert outcome.duplicates_per_node_item <= 0.05
    assert outcome.tampered_tried == 200 and outcome.tampered_delivered == 0
    assert outcome.missed_after_churn == 0 and outcome.root_killed
    assert outcome.repair_s is not None and outcome.repair_s <= 5.0
    assert outcome.scribe_msgs_per_join == pytest.approx(2.0, abs=1.0)


@pytest.mark.parametrize("limit", [3, 0])
def test_a_full_parent_hands_joiners_to_its_children_so_no_node_has_more_than_the_limit(limit):
    feed = Feed(60, seed=12, scribe=ScribeConfig(max_children=limit))
    gid = group_id(URL)
    widest = max(len(n.groups[gid].children) for n in feed.nodes if gid in n.groups)
    redirected = sum(n.counters["redirected"] for n in feed.nodes)
    if limit:
        assert widest <= limit and redirected > 0
    else:
        assert widest > 3 and redirected == 0   # plain Scribe: the root takes whoever comes
    feed.assert_tree()
    feed.publish(3)
    feed.sim.run_until(feed.sim.now + 1.0)
    for node in feed.live_subscribers():
        assert feed.seqs(node) == [1, 2, 3]


def test_an_unsubscribed_leaf_leaves_its_parents_children_and_garbage_is_only_counted():
    feed = Feed(30, seed=7)
    gid = group_id(URL)
    leaf = next(n for n in feed.live_subscribers()
                if not n.groups[gid].children and not n.groups[gid].root)
    parent = feed.nodes[leaf.groups[gid].parent.addr]
    assert leaf.handle.id in parent.groups[gid].children
    feed.sim.act(leaf.handle.addr, lambda n, now: n.unsubscribe(now, URL))
    feed.sim.run_until(feed.sim.now + 0.5)
    assert gid not in leaf.groups and leaf.handle.id not in parent.groups[gid].children
    feed.sim.act(parent.handle.addr, lambda n, now: n.receive(now, leaf.handle, "not a message"))
    assert parent.counters["unknown-message"] == 1


def test_late_subscribers_under_new_forwarders_still_get_the_buffered_records():
    # a forwarder without a log of its own that attaches after records went down the tree asks
    # its parent for the buffered ones, so the heartbeats it sends tell its children about them
    overlay = build_overlay(80, seed=5, settle=3.0)
    sim, nodes = overlay.sim, overlay.nodes
    writer = FeedWriter(SigningKey(b"\x12" * 32), URL)
    got: dict[int, list[int]] = {n.handle.addr: [] for n in nodes}
    sim.after_step = lambda node: got[node.handle.addr].extend(
        d.record.seq for d in node.take_deliveries())
    early, late = nodes[1:6], nodes[7::2]     # the even-numbered others only ever forward
    for node in early:
        sim.act(node.handle.addr, lambda n, now: n.subscribe(now, URL, writer.feed))
    sim.run_until(sim.now + 3.0)
    for _ in range(3):
        wire = writer.append({"id": str(writer.seq + 1)})
        sim.act(nodes[0].handle.addr,
                lambda n, now, w=wire, s=writer.seq: n.publish(now, URL, s, w))
    sim.run_until(sim.now + 1.0)
    for node in late:
        sim.act(node.handle.addr, lambda n, now: n.subscribe(now, URL, writer.feed))
    sim.run_until(sim.now + 6.0)
    gid = group_id(URL)
    forwarders = [n for n in nodes if gid in n.groups and n.groups[gid].log is None
                  and n.groups[gid].children]
    assert forwarders, "the test needs log-less forwarders"
    assert all(got[n.handle.addr] == [1, 2, 3] for n in early + late), \
        {n.handle.addr: got[n.handle.addr] for n in late if got[n.handle.addr] != [1, 2, 3]}
