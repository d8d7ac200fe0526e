"""The id space and Pastry's tables: digits, prefixes, ring distance, proximity, leaf sets."""

from __future__ import annotations

import hashlib
import random

from feedmesh.mesh.overlay.ids import (
    RING,
    Handle,
    closest,
    digit,
    group_id,
    ring_distance,
    shared_prefix,
)
from feedmesh.mesh.overlay.tables import LeafSet, RoutingTable


def test_group_id_is_sha1_of_the_canonical_url_truncated_to_128_bits():
    url = "https://example.org/feed.xml"
    sha1 = hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()
    assert f"{group_id(url):032x}" == sha1[:32]


def test_digits_and_shared_prefixes():
    a = 0x1234 << 112
    b = 0x1239 << 112
    assert [digit(a, r) for r in range(4)] == [1, 2, 3, 4]
    assert shared_prefix(a, b) == 3
    assert shared_prefix(a, a) == 32
    assert shared_prefix(0, RING - 1) == 0


def test_ring_distance_wraps_and_ties_go_to_the_smaller_id():
    assert ring_distance(1, RING - 1) == 2
    assert ring_distance(RING - 1, 1) == 2
    assert closest(0, [Handle(2, "a"), Handle(RING - 2, "b")]).id == 2


def test_a_table_slot_keeps_the_lower_rtt_candidate_and_asks_to_probe_an_unknown_one():
    table = RoutingTable(0)
    far, near, unknown = (Handle((0xA << 124) | n, n) for n in (1, 2, 3))
    rtt = {far.id: 0.060, near.id: 0.020}
    assert table.consider(far, rtt) == "set"
    assert table.consider(unknown, rtt) == "probe"
    assert table.consider(near, rtt) == "replaced"
    assert table.get(0, 0xA) == near
    assert table.consider(far, rtt) == "kept" and table.get(0, 0xA) == near
    assert table.remove(near.id) and table.get(0, 0xA) is None


def test_leaf_set_holds_the_nearest_on_each_side_of_the_ring():
    rng = random.Random(3)
    own = Handle(rng.getrandbits(128), "own")
    leaves = LeafSet(own, 4)
    others = [Handle(rng.getrandbits(128), i) for i in range(50)]
    for handle in others:
        leaves.consider(handle)
    clockwise = sorted(others, key=lambda h: (h.id - own.id) % RING)[:4]
    counter = sorted(others, key=lambda h: (own.id - h.id) % RING)[:4]
    assert leaves.right == clockwise and leaves.left == counter
    assert leaves.covers(own.id) and leaves.covers(clockwise[-1].id)
    assert not leaves.covers((clockwise[-1].id + 1) % RING)
    assert not leaves.covers((counter[-1].id - 1) % RING)
    assert leaves.remove(clockwise[0].id) and clockwise[0].id not in leaves
