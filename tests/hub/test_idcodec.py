"""Subscription id lists as the filter sends and the reflector logs them: exact round trips, the
compiled and numpy encoders writing the same bytes, the size, older encodings still read, and
precise errors for corrupt lists."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedmesh.hub import idcodec
from feedmesh.hub.idcodec import decode_ids, encode_ids, encode_routed, first_reflector_bits

id_lists = st.lists(st.one_of(st.integers(0, 2**20), st.integers(0, 2**63 - 1)), unique=True,
                    max_size=2000).map(lambda ids: np.array(sorted(ids), dtype=np.int64))


@pytest.fixture(params=["compiled", "numpy"])
def implementation(request, monkeypatch):
    if request.param == "compiled":
        if idcodec._encode_varints is None:
            pytest.skip("numba (the fast extra) is not installed")
    else:
        for name in ("_encode_varints", "_decode_varints", "_count_ends", "_route_varints",
                     "_encode_varints_many"):
            monkeypatch.setattr(idcodec, name, None)
    return request.param


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # set once per test
@given(ids=id_lists)
def test_round_trip(implementation, ids):
    assert decode_ids(encode_ids(ids)).tolist() == ids.tolist()


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # set once per test
@given(ids=id_lists)
def test_compiled_and_numpy_write_the_same_bytes(ids, monkeypatch):
    if idcodec._encode_varints is None:
        pytest.skip("numba (the fast extra) is not installed")
    compiled = encode_ids(ids)
    with monkeypatch.context() as patch:
        for name in ("_encode_varints", "_decode_varints", "_count_ends"):
            patch.setattr(idcodec, name, None)
        assert encode_ids(ids) == compiled
        assert decode_ids(compiled).tolist() == ids.tolist()


def test_dense_id_lists_cost_about_a_byte_per_id(implementation):
    rng = np.random.default_rng(1)
    # an article matching 1.4% of a million subscriptions, and of a hundred thousand
    for universe, count in ((1_000_000, 14_000), (100_000, 1_400)):
        ids = np.sort(rng.choice(universe, count, replace=False))
        size = len(encode_ids(ids))
        assert size < 1.25 * count  # Cobra's 32-bit ids: 4 bytes each
        assert decode_ids(encode_ids(ids)).tolist() == ids.tolist()


def test_earlier_encodings_are_still_read():
    ids = np.array([3, 10, 11, 500, 70_000, 2**31], dtype=np.int64)
    gaps = np.diff(ids, prepend=0).astype("<u4")
    raw = b"\x00" + gaps.tobytes()
    deflated = b"\x01" + zlib.compress(gaps.view(np.uint8).reshape(-1, 4).T.tobytes())
    assert decode_ids(raw).tolist() == ids.tolist()
    assert decode_ids(deflated).tolist() == ids.tolist()


@pytest.mark.parametrize(("data", "message"), [
    (b"", "corrupt id list: empty"),
    (b"\x02\x05\x80", "the last varint is cut off"),
    (b"\x02" + b"\xff" * 9 + b"\x01", "a varint longer than 9 bytes"),
    (b"\x09\x01", "unknown encoding 9"),
    (b"\x00\x01\x02\x03", "not whole 32-bit gaps"),
    (b"\x01" + zlib.compress(b"\x01\x02\x03"), "byte planes of unequal length"),
])
def test_corrupt_lists_are_refused_precisely(implementation, data, message):
    with pytest.raises(ValueError, match=message):
        decode_ids(data)


def routed_one_by_one(id_lists, route):
    """What a filter sent before batches: each article's ids, those routed to a reflector
    (``route[id]``, -1 or past its end: to none), encoded one list at a time."""
    expected = {}
    for a, ids in enumerate(id_lists):
        for reflector in sorted({int(route[v]) for v in ids if v < len(route) and route[v] >= 0}):
            mine = np.array([v for v in ids if v < len(route) and route[v] == reflector],
                            dtype=np.int64)
            expected.setdefault(reflector, []).append((a, encode_ids(mine)))
    return dict(sorted(expected.items()))


@pytest.mark.parametrize("few", [0, 4])  # two passes, or one pass per reflector
@pytest.mark.parametrize("seed", range(12))
def test_a_batch_routed_at_once_is_each_article_routed_alone(implementation, seed, few,
                                                             monkeypatch):
    monkeypatch.setattr(idcodec, "FEW_REFLECTORS", few)
    rng = np.random.default_rng(seed)
    universe = int(rng.choice([50, 3_000, 300_000]))
    reflectors = int(rng.integers(1, 6))
    # some subscriptions removed (-1), some ids past the table (added after it was sized)
    route = rng.integers(-1, reflectors, universe - universe // 10).astype(np.int16)
    id_lists = []
    for _ in range(int(rng.integers(1, 70))):
        count = int(rng.integers(0, min(universe, 4_000)))
        id_lists.append(np.sort(rng.choice(universe, count, replace=False)).astype(
            rng.choice([np.int32, np.int64])))
    routed = encode_routed(id_lists, route, reflectors)
    assert routed == routed_one_by_one(id_lists, route)
    for lists in routed.values():
        for a, data in lists:
            assert decode_ids(data).tolist() == [v for v in id_lists[a].tolist()
                                                 if v < len(route) and route[v] >= 0
                                                 and route[v] == route[decode_ids(data)[0]]]


@pytest.mark.parametrize("seed", range(8))
def test_one_reflector_routed_by_its_bitmap_is_routed_by_its_table(implementation, seed):
    """A shard of one reflector routes by the bitmap of the ids whose reflector is 0: the same
    lists as from the table, removed ids (-1) and ids past the bitmap's end going nowhere."""
    rng = np.random.default_rng(seed)
    universe = int(rng.choice([50, 3_000, 300_000]))
    route = np.where(rng.random(universe - universe // 10) < 0.2, -1, 0).astype(np.int16)
    id_lists = [np.sort(rng.choice(universe, int(rng.integers(0, min(universe, 4_000))),
                                   replace=False)).astype(rng.choice([np.int32, np.int64]))
                for _ in range(int(rng.integers(1, 70)))]
    first = first_reflector_bits(route)
    routed = encode_routed(id_lists, route, 1, first=first)
    assert routed == encode_routed(id_lists, route, 1) == routed_one_by_one(id_lists, route)
    assert routed  # some ids are routed, some are not
    assert sum(len(decode_ids(data)) for _, data in routed[0]) < sum(map(len, id_lists))


@pytest.mark.parametrize("few", [0, 4])
def test_routing_refuses_what_it_cannot_encode(implementation, few, monkeypatch):
    monkeypatch.setattr(idcodec, "FEW_REFLECTORS", few)
    with pytest.raises(ValueError, match="not below"):
        encode_routed([np.array([1, 2], dtype=np.int64)], np.array([0, 0, 3], np.int16), 2)
    with pytest.raises(ValueError, match="not below"):  # one reflector: its own pass
        encode_routed([np.array([0, 2], dtype=np.int32)], np.array([0, 0, 1], np.int16), 1)
    if implementation == "compiled":  # ids the matcher cannot give (int32): refused, not cut
        with pytest.raises(ValueError, match=r"not below 2\*\*31"):
            encode_routed([np.array([1, 2**31], dtype=np.int64)], np.zeros(3, np.int16), 1)


@pytest.mark.parametrize("seed", range(6))
def test_every_id_to_one_reflector_is_routed_as_by_its_table(implementation, seed):
    """When the caller knows every id goes to reflector 0, nothing is looked up: the same lists
    as routing by a table that sends every id there (``route`` is not read at all)."""
    rng = np.random.default_rng(seed)
    universe = int(rng.choice([50, 3_000, 300_000]))
    id_lists = [np.sort(rng.choice(universe, int(rng.integers(0, min(universe, 4_000))),
                                   replace=False)).astype(rng.choice([np.int32, np.int64]))
                for _ in range(int(rng.integers(1, 70)))]
    everything = np.zeros(universe, np.int16)
    routed = encode_routed(id_lists, np.zeros(0, np.int16), 1, every=True)
    assert routed == encode_routed(id_lists, everything, 1) == routed_one_by_one(id_lists,
                                                                                 everything)
    with pytest.raises(ValueError, match="2 reflectors"):
        encode_routed(id_lists, everything, 2, every=True)
