"""Subscription-set arithmetic: advertisements without the recipient, diffs, usefulness."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedmesh.mesh.feedex.subsets import (
    advertisement,
    advertisements,
    apply_update,
    diff,
    usefulness,
)

feeds = st.sampled_from([f"f{i}" for i in range(8)])
subset = st.dictionaries(feeds, st.integers(0, 5), max_size=8)
neighbour_sets = st.dictionaries(st.integers(0, 6), subset, max_size=6)


@given(st.sets(feeds, max_size=4), neighbour_sets, st.integers(0, 4))
def test_all_at_once_equals_one_by_one(direct, sets, max_hops):
    together = advertisements(direct, sets, max_hops)
    for peer in sets:
        assert together[peer] == advertisement(direct, sets, peer, max_hops)


@given(st.sets(feeds, max_size=4), neighbour_sets, st.integers(0, 4))
def test_advertisement_rules(direct, sets, max_hops):
    for peer in sets:
        ad = advertisement(direct, sets, peer, max_hops)
        for feed in direct:
            assert ad[feed] == 0
        for feed, hops in ad.items():
            assert hops <= max_hops
            if feed not in direct:  # one more than the best *other* neighbour's hop count
                others = [s[feed] for p, s in sets.items() if p != peer and feed in s]
                assert hops == min(others) + 1
        # nothing comes back to a neighbour only because it advertised it
        only_peer = {f for f in sets[peer] if all(f not in s for p, s in sets.items() if p != peer)}
        assert not (only_peer - set(direct)) & set(ad)


@given(subset, subset)
def test_diff_then_apply_gives_the_new_set(old, new):
    added, removed = diff(old, new)
    assert apply_update(old, added, removed) == new
    assert set(added) | set(removed) <= set(old) | set(new)
    if old == new:
        assert added == {} and removed == []


def test_usefulness_is_the_papers_formula():
    weights = {"a": 1.0, "b": 2.0, "c": 1.0}
    q = {"a": 0, "b": 1, "d": 0, "c": 3}
    assert usefulness(weights, q, 2.0) == pytest.approx(1.0 + 2.0 / 2 + 1.0 / 8)
    assert usefulness({}, q, 2.0) == 0.0
