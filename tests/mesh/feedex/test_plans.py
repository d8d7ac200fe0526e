"""Fetch plans known by origin (:class:`KnownPlans`): the later heard copy of one origin's plan
wins, a neighbour's share and the whole are bounded, each neighbour is told only what is new;
and on nodes: a follower learns the fetch times of followers more than two hops away, and a
changed plan replaces the old one instead of being counted beside it; a connect carries only the
caller's own times, the plans it knows going to the node once it is a neighbour."""

from __future__ import annotations

import itertools
import random

from feedmesh.mesh.feedex import FeedExSettings
from feedmesh.mesh.feedex.messages import Connect, Plan, UpdateSubset
from feedmesh.mesh.feedex.plans import KnownPlans

from .net import Net, address

FEED = "http://pub.test/feed/shared"
OTHER = "http://pub.test/feed/other"
T = 16 * 3600.0
ME = ("127.0.8.99", 8400)
A, B = ("127.0.8.1", 8400), ("127.0.8.2", 8400)


def _origin(i: int):
    return (f"127.0.7.{i}", 8400)


def test_the_later_heard_copy_of_a_plan_wins_and_neither_we_nor_the_relay_are_origins():
    plans = KnownPlans(ME)
    assert plans.relayed(100.0, FEED, A, [Plan(_origin(1), 5000.0, 90.0)])
    assert not plans.relayed(100.0, FEED, B, [Plan(_origin(1), 7000.0, 80.0)])  # older copy
    assert plans.times(FEED, 0, T) == [5000.0]
    assert plans.relayed(200.0, FEED, B, [Plan(_origin(1), 9000.0, 150.0)])   # newer copy
    assert plans.times(FEED, 0, T) == [9000.0]
    # the same plan heard again later is no news to relay
    assert not plans.relayed(300.0, FEED, A, [Plan(_origin(1), 9000.0, 250.0)])
    # our own plan coming back, or the relay's own (it comes as its own), are not kept
    assert not plans.relayed(300.0, FEED, A, [Plan(ME, 1.0, 299.0), Plan(A, 2.0, 299.0)])
    # a copy claimed heard in the future counts as heard now: it cannot pin the plan
    plans.relayed(400.0, FEED, A, [Plan(_origin(2), 100.0, 1e12)])
    assert plans.relayed(500.0, FEED, B, [Plan(_origin(2), 200.0, 450.0)])
    assert sorted(plans.times(FEED, 0, T)) == [200.0, 9000.0]
    # a neighbour's own time, heard from it, beats any relayed copy
    assert plans.direct(600.0, FEED, _origin(2), 300.0)
    assert not plans.relayed(600.0, FEED, A, [Plan(_origin(2), 400.0, 599.0)])


def test_what_one_neighbour_brings_and_the_whole_are_bounded():
    plans = KnownPlans(ME, cap=8, total=20)
    for i in range(100):   # a neighbour inventing origins without end
        plans.relayed(float(i), FEED, A, [Plan(_origin(i), float(i), float(i))])
    assert len(plans) == 8 and sorted(plans.times(FEED, 0, T)) == [float(i) for i in range(92, 100)]
    for i in range(100, 130):
        plans.relayed(float(i), FEED, B, [Plan(_origin(i), float(i), float(i))])
    assert len(plans) == 16
    # gone neighbours' plans of feeds we follow stay (they are still true), under the total
    plans.forget_via(A, [FEED])
    plans.forget_via(B, [FEED])
    for via in range(3):
        for i in range(8):
            k = 200 + 10 * via + i
            plans.relayed(float(k), FEED, ("127.0.6.1", 9000 + via), [Plan(_origin(k), k, k)])
    assert len(plans) == 20
    # of a feed we do not follow, only neighbours' own times, gone with the neighbour
    plans.direct(1000.0, OTHER, A, 5.0)
    plans.forget_via(A, [FEED])
    assert plans.times(OTHER, 0, T) == []


def test_each_neighbour_is_told_only_what_it_was_not_told_and_never_its_own():
    plans = KnownPlans(ME)
    plans.direct(10.0, FEED, A, 100.0)
    plans.relayed(10.0, FEED, A, [Plan(_origin(1), 200.0, 9.0)])
    plans.relayed(11.0, FEED, B, [Plan(_origin(2), 300.0, 10.0)])
    told = {p.origin for p in plans.since(FEED, 0, B)}
    assert told == {A, _origin(1)}        # not B's own, nor what came from B
    seq = plans.newest(FEED)
    assert plans.since(FEED, seq, B) == []
    plans.relayed(20.0, FEED, A, [Plan(_origin(1), 250.0, 19.0)])
    assert [(p.origin, p.at) for p in plans.since(FEED, seq, B)] == [(_origin(1), 250.0)]
    plans.expire(240.0)
    assert sorted(plans.times(FEED, 0, T)) == [250.0, 300.0]


def _line(net: Net, n: int):
    nodes = [net.add(i, [FEED], rng=random.Random(i)) for i in range(1, n + 1)]
    for a, b in itertools.pairwise(nodes):
        net.connect(a, b)
    return nodes


def test_a_follower_learns_the_times_of_followers_more_than_two_hops_away():
    net = Net(FeedExSettings(share_fetch_times=True, min_neighbours=1, max_neighbours=2))
    nodes = _line(net, 6)
    for node in nodes:
        node.plan_fetch(net.now, FEED, T)
        net.carry(node)
    net.run(8 * 300.0)   # advertisement rounds: one hop each
    first, last = nodes[0], nodes[-1]
    theirs = sorted(n.fetch_plans[FEED] for n in nodes[1:])
    assert sorted(first.known_plans(net.now, FEED, T)) == theirs   # five hops away too
    # a plan that changed replaces the old one wherever it arrives: five times, not six
    moved = last.plan_fetch(net.now, FEED, T)
    net.carry(last)
    net.run(8 * 300.0)
    known = first.known_plans(net.now, FEED, T)
    assert len(known) == 5 and moved in known
    # the plans travelled with their origins, in the exchange's own messages
    assert any(m.schedule for m in net.calls(UpdateSubset))
    assert address(6) in {p.origin for m in net.calls(UpdateSubset) for ps in m.schedule.values()
                          for p in ps}



def test_a_connect_carries_our_own_times_and_the_known_plans_follow_once_accepted():
    net = Net(FeedExSettings(share_fetch_times=True, min_neighbours=1, max_neighbours=3))
    x, y = _line(net, 2)
    for node in (x, y):
        node.plan_fetch(net.now, FEED, T)
        net.carry(node)
    net.run(2 * 300.0)
    assert y.known_plans(net.now, FEED, T) == [x.fetch_plans[FEED]]
    z = net.add(3, [FEED], rng=random.Random(3))
    net.connect(y, z)
    # a connect may be refused: it carries y's own time, not the plans y knows of others
    connect = net.calls(Connect, to=z.address)[-1]
    assert connect.fetch_times == {FEED: y.fetch_plans[FEED]} and connect.schedule == {}
    assert y.address in z.neighbours
    assert z.known_plans(net.now, FEED, T) == [y.fetch_plans[FEED]]
    # accepted: y's next advertisement tells z what it knows (x's plan, relayed with its origin)
    net.run(2 * 300.0)
    assert sorted(z.known_plans(net.now, FEED, T)) == sorted(
        [x.fetch_plans[FEED], y.fetch_plans[FEED]])
    assert any(p.origin == x.address for m in net.calls(UpdateSubset, to=z.address)
               for ps in m.schedule.values() for p in ps)


def test_a_departed_origin_s_plans_go_from_every_feed_whoever_brought_them():
    plans = KnownPlans(ME, cap=8)
    plans.relayed(100.0, FEED, A, [Plan(_origin(1), 5000.0, 90.0), Plan(_origin(2), 6000.0, 90.0)])
    plans.relayed(100.0, OTHER, B, [Plan(_origin(1), 7000.0, 95.0)])
    plans.forget_origin(_origin(1))
    assert plans.times(FEED, 0, T) == [6000.0] and plans.times(OTHER, 0, T) == []
    # the share it took of what A brought is given back: A can bring 7 more, not 6
    for i in range(10, 17):
        plans.relayed(200.0, FEED, A, [Plan(_origin(i), float(i), 200.0)])
    assert len(plans.times(FEED, 0, T)) == 8
    plans.forget_origin(_origin(99))   # unknown: nothing changes
    assert len(plans) == 8
