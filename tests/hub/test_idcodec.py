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
from feedmesh.hub.idcodec import decode_ids, encode_ids

id_lists = st.lists(st.one_of(st.integers(0, 2**20), st.integers(0, 2**63 - 1)), unique=True,
                    max_size=2000).map(lambda ids: np.array(sorted(ids), dtype=np.int64))


@pytest.fixture(params=["compiled", "numpy"])
def implementation(request, monkeypatch):
    if request.param == "compiled":
        if idcodec._encode_varints is None:
            pytest.skip("numba (the fast extra) is not installed")
    else:
        for name in ("_encode_varints", "_decode_varints", "_count_ends"):
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
