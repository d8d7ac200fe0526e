"""Pastry in the simulator: every key reaches the numerically closest live node, before and after
nodes die; joins, acknowledgements and proximity, driven by a manual clock."""

from __future__ import annotations

import random

import pytest

from feedmesh.mesh.overlay.ids import Handle, closest, node_id
from feedmesh.mesh.overlay.messages import (
    Announce,
    JoinDone,
    JoinPayload,
    Probe,
    Route,
    RowRequest,
    StateRows,
)
from feedmesh.mesh.overlay.pastry import PastryNode
from feedmesh.mesh.overlay.sim import LatencyMatrix, Simulator


class Recorder:
    """An application that remembers what was delivered to it."""

    def __init__(self) -> None:
        self.delivered: list[tuple[int, object]] = []
        self.failed: list[Handle] = []

    def forward(self, now, route, next_hop):
        return route.payload

    def deliver(self, now, route):
        self.delivered.append((route.key, route.payload))

    def direct(self, now, sender, body):
        pass

    def node_failed(self, now, node):
        self.failed.append(node)

    def timer(self, now, token):
        pass


def build(count: int, seed: int = 7, gap: float = 0.02) -> tuple[Simulator, list[PastryNode]]:
    rng = random.Random(seed)
    sim = Simulator(LatencyMatrix(seed=seed))
    nodes = []
    for index in range(count):
        node = PastryNode(Handle(node_id(f"p{seed}-{index}".encode()), index))
        node.app = Recorder()
        sim.add(node)
        bootstrap = nodes[rng.randrange(index)].handle if index else None
        sim.at(index * gap, lambda now, n=node, b=bootstrap: n.start(now, b), index)
        nodes.append(node)
    sim.run_until(count * gap + 5.0)
    return sim, nodes


def route_and_check(sim: Simulator, nodes: list[PastryNode], keys: int, seed: int) -> None:
    """Route real messages from random live nodes; each must land on the closest live node."""
    rng = random.Random(seed)
    live = [n for n in nodes if n.handle.addr not in sim.dead]
    for node in live:
        node.app.delivered.clear()
    sent = []
    for number in range(keys):
        key = rng.getrandbits(128)
        start = rng.choice(live)
        sent.append((key, number))
        sim.act(start.handle.addr, lambda n, now, k=key, m=number: n.route(now, k, m))
    sim.run_until(sim.now + 3.0)
    for key, number in sent:
        root = closest(key, [n.handle for n in live])
        receivers = [n for n in live if (key, number) in n.app.delivered]
        assert [n.handle for n in receivers] == [root], f"key {key:032x} went to {receivers}"


def test_every_key_is_delivered_at_the_numerically_closest_node():
    sim, nodes = build(60)
    assert all(n.joined for n in nodes)
    route_and_check(sim, nodes, 150, seed=1)


def test_after_a_fifth_of_the_nodes_die_keys_reach_the_closest_live_node():
    sim, nodes = build(60, seed=8)
    rng = random.Random(2)
    for victim in rng.sample(nodes[1:], 12):
        sim.kill(victim.handle.addr)
    sim.run_until(sim.now + 8.0)   # leaf timeouts (3 s) and leaf-set repair
    live = [n for n in nodes if n.handle.addr not in sim.dead]
    for node in live:
        assert not {h.addr for h in node.leaves.members()} & sim.dead
    route_and_check(sim, nodes, 150, seed=3)


def test_a_graceful_leave_is_noticed_at_once():
    sim, nodes = build(20, seed=9)
    leaving = nodes[5]
    sim.act(leaving.handle.addr, lambda n, now: n.leave(now))
    sim.run_until(sim.now + 0.2)
    for node in nodes:
        if node is not leaving:
            assert leaving.id not in node.leaves and leaving.handle not in node.table.handles()


def test_routing_tables_prefer_the_lower_latency_node_per_slot():
    sim, nodes = build(80, seed=10)
    latency = sim.latency
    by_id = {n.id: n for n in nodes}
    chosen = better_known = 0
    for node in nodes:
        for row_index in range(2):
            for holder in node.table.row(row_index):
                # every node the holder could be replaced with, that this node measured
                rivals = [other for other in nodes if other.id in node.rtt
                          and node.table.slot(other.id) == node.table.slot(holder.id)]
                chosen += 1
                best = min([*rivals, by_id[holder.id]],
                           key=lambda o: latency(node.handle.addr, o.handle.addr))
                better_known += best.id != holder.id
    assert chosen > 200
    assert better_known / chosen < 0.05


def test_join_hands_rows_then_leaves_to_the_joiner():
    first = PastryNode(Handle(1 << 120, "a"))
    first.start(0.0)
    joiner = PastryNode(Handle(3 << 120, "b"))
    joiner.start(0.0, first.handle)
    [(to, join)] = joiner.take()
    assert to == first.handle and type(join) is Route and type(join.payload) is JoinPayload
    first.receive(0.01, joiner.handle, join)
    replies = first.take()
    done = [body for _, body in replies if type(body) is JoinDone]
    assert done and first.handle in done[0].leaves
    assert not [b for _, b in replies if type(b) is StateRows]   # the first hop was the last
    assert joiner.id not in first.leaves   # nobody routes through a node still joining
    joiner.receive(0.02, first.handle, done[0])
    assert joiner.joined and first.handle in joiner.leaves.members()
    sent = joiner.take()
    assert (first.handle, Announce()) in sent and any(type(b) is Probe for _, b in sent)
    first.receive(0.03, joiner.handle, Announce())
    assert joiner.id in first.leaves
    assert any(type(body) is Probe for _, body in first.take())   # measuring the newcomer


def test_an_unacknowledged_hop_marks_the_node_dead_and_routes_around_it():
    node = PastryNode(Handle(0, "me"))
    node.app = Recorder()
    node.start(0.0)
    near, far = Handle(10, "near"), Handle(20, "far")
    node.receive(0.0, near, Probe(0.0))
    node.receive(0.0, far, Probe(0.0))
    node.take()
    node.route(0.0, 11, "payload")
    [(first_hop, _)] = node.take()
    assert first_hop == near
    assert node.next_deadline() == pytest.approx(0.5)
    node.fire(0.5)
    routed = [(to, body) for to, body in node.take() if type(body) is Route]
    [(second_hop, message)] = routed
    assert second_hop == far and message.payload == "payload"
    assert node.app.failed == [near] and near.id not in node.leaves


def test_a_dead_table_entry_is_refilled_from_another_node_of_its_row():
    node = PastryNode(Handle(0, "me"))
    node.start(0.0)
    dead, same_row = Handle(0xA << 124, "dead"), Handle(0xB << 124, "row-mate")
    replacement = Handle((0xA << 124) | 5, "replacement")
    for handle in (dead, same_row):
        node.receive(0.0, handle, Probe(0.0))
    node.take()
    node.declare_dead(1.0, dead)
    assert node.table.get(0, 0xA) is None
    requests = [(to, body) for to, body in node.take() if type(body) is RowRequest]
    assert requests == [(same_row, RowRequest(0))]
    node.receive(1.05, same_row, StateRows((replacement,)))
    assert node.table.get(0, 0xA) == replacement


def test_concurrent_joins_through_nodes_still_joining_end_with_exact_leaf_sets():
    # 2 ms apart, joins overlap by dozens; bootstraps are often nodes still joining themselves
    sim, nodes = build(150, seed=11, gap=0.002)
    ring = sorted(nodes, key=lambda n: n.id)
    for index, node in enumerate(ring):
        right = [ring[(index + k) % len(ring)].id for k in range(1, 9)]
        assert [h.id for h in node.leaves.right] == right
    route_and_check(sim, nodes, 100, seed=4)
