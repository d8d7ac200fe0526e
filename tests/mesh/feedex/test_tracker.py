"""The tracker core: records callers, answers with others, forgets the silent."""

from __future__ import annotations

import random

from feedmesh.mesh.feedex import Tracker
from feedmesh.mesh.feedex.messages import Connect, Error, GetNeighbors, Neighbors


def test_answers_with_other_live_nodes_and_forgets_silent_ones():
    tracker = Tracker(ttl_s=100.0, rng=random.Random(1))
    a, b, c = ("127.0.3.1", 1), ("127.0.3.2", 1), ("127.0.3.3", 1)
    assert tracker.receive(0.0, a, GetNeighbors(5)) == Neighbors([])
    assert tracker.receive(1.0, b, GetNeighbors(5)) == Neighbors([a])
    assert sorted(tracker.receive(50.0, c, GetNeighbors(5)).peers) == [a, b]
    later = tracker.receive(130.0, c, GetNeighbors(5))  # a and b silent for over 100 s
    assert later.peers == [] and len(tracker) == 1
    tracker.forget(c)
    assert len(tracker) == 0


def test_samples_without_repeats_or_the_caller_in_a_large_list():
    tracker = Tracker(rng=random.Random(2))
    nodes = [(f"127.0.4.{i % 250}", 8000 + i) for i in range(1000)]
    for node in nodes:
        tracker.receive(0.0, node, GetNeighbors(0))
    answer = tracker.receive(1.0, nodes[0], GetNeighbors(40)).peers
    assert len(answer) == len(set(answer)) == 40 and nodes[0] not in answer


def test_other_calls_get_an_error():
    reply = Tracker().receive(0.0, ("127.0.3.1", 1), Connect({}))
    assert isinstance(reply, Error) and reply.code == "unsupported"


def test_one_network_cannot_own_the_tracker():
    """Issue 32: 1,000 identities from one address (and its /24) were all recorded, and a
    newcomer asking for 10 neighbours got 10 of the attacker's. Now an address holds at most
    ``per_address`` identities, a /24 ``per_prefix``, and candidates are spread over prefixes."""
    tracker = Tracker(rng=random.Random(3))
    honest = [(f"127.1.{i}.1", 8400) for i in range(1, 51)]  # 50 machines, 50 networks
    for node in honest:
        tracker.receive(0.0, node, GetNeighbors(0))
    attacker = [(f"127.66.6.{i % 250}", 9000 + i) for i in range(1000)]  # one /24
    for node in attacker:
        tracker.receive(1.0, node, GetNeighbors(0))
    recorded = len(tracker) - len(honest)
    assert recorded == tracker.per_prefix == 64 and tracker.refused == 1000 - 64
    shares = []
    for n in range(200):
        newcomer = (f"127.2.{n}.1", 8400)
        peers = tracker.receive(2.0, newcomer, GetNeighbors(10)).peers
        assert len(peers) == len(set(peers)) == 10 and newcomer not in peers
        shares.append(sum(p[0].startswith("127.66.6.") for p in peers) / 10)
        tracker.forget(newcomer)
    assert sum(shares) / len(shares) <= 0.2  # one prefix among 51: ~1 candidate in 10 at most


def test_one_address_holds_a_few_identities_and_forgetting_frees_them():
    tracker = Tracker(per_address=2, per_prefix=4)
    a1, a2, a3 = ("127.0.3.1", 1), ("127.0.3.1", 2), ("127.0.3.1", 3)
    for node in (a1, a2, a3):
        tracker.receive(0.0, node, GetNeighbors(0))
    assert len(tracker) == 2 and tracker.refused == 1
    tracker.forget(a1)
    tracker.receive(1.0, a3, GetNeighbors(0))
    assert len(tracker) == 2
    for i in range(2, 6):
        tracker.receive(1.0, (f"127.0.3.{i}", 1), GetNeighbors(0))
    assert len(tracker) == 4  # the /24's share


def test_an_emulation_on_one_loopback_net_counts_each_address_as_a_machine():
    tracker = Tracker(prefix_v4=32, rng=random.Random(2))
    for i in range(300):
        tracker.receive(0.0, (f"127.0.4.{i % 250}", 8000 + i // 250), GetNeighbors(0))
    assert len(tracker) == 300
