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
