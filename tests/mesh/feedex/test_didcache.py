"""The did cache: exact for the latest, a Bloom filter after; never a false "unseen"."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from feedmesh.mesh.feedex import BloomFilter, DidCache


def did(i: int) -> bytes:
    return hashlib.sha1(str(i).encode(), usedforsecurity=False).digest()


@given(st.lists(st.binary(min_size=1, max_size=40), max_size=300), st.integers(1, 200))
def test_bloom_filter_has_no_false_negatives(keys, capacity):
    bloom = BloomFilter(capacity)
    for key in keys:
        bloom.add(key)
    assert all(key in bloom for key in keys)


def test_bloom_filter_false_positive_rate_is_near_its_target():
    bloom = BloomFilter(5000, 0.01)
    for i in range(5000):
        bloom.add(did(i))
    false = sum(did(i) in bloom for i in range(5000, 25_000))
    assert false / 20_000 < 0.02


@settings(max_examples=50)
@given(st.integers(1, 50), st.integers(1, 100), st.integers(0, 400))
def test_did_cache_remembers_at_least_exact_plus_capacity_latest(exact, capacity, count):
    cache = DidCache(exact, capacity)
    for i in range(count):
        cache.add(did(i))
    remembered = exact + capacity
    assert all(did(i) in cache for i in range(max(0, count - remembered), count))
    assert len(cache) <= exact + 2 * capacity  # two generations at most: bounded


def test_did_cache_is_exact_for_the_latest_and_forgets_in_generations():
    cache = DidCache(exact=10, bloom_capacity=100)
    for i in range(10):
        cache.add(did(i))
    assert did(10) not in cache and len(cache) == 10
    for i in range(10, 400):
        cache.add(did(i))
    assert len(cache) <= 10 + 200
    forgotten = sum(did(i) not in cache for i in range(100))
    assert forgotten > 90  # old generations are cleared (a few may be false positives)
