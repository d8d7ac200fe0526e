"""Compact lists of subscription ids: sorted ids as gaps, each gap a LEB128 varint.

Cobra's worry about sending matching ids (section 3.3) was 4 bytes per id: 400 KB for an article
that matches 100,000 subscriptions. Sorted ids have small gaps: among a million subscriptions, an
article matching 14,000 leaves gaps of ~70 on average, and a varint stores a gap below 128 in one
byte. 14,000 random ids among 1,000,000 take 16,345 bytes (1.17 per id).

This is on the hub's hot path (the filter encodes every article's ids, the reflector decodes them
and logs the same bytes), so it is measured against the alternative we shipped first, gaps split
into byte planes and deflated (kind 1, still read): 14,768 bytes for those ids, 10% smaller, but
0.39 ms to encode and 0.34 ms to decode against 0.02 and 0.02 ms here with the compiled loops
(numba, the ``fast`` extra; the numpy fallback writes the same bytes in ~0.6 ms).

Encoding: one kind byte, then the body. Kind 2 (written): varint gaps, the first gap from 0. Kind 1
(read only): 32-bit gaps as four byte planes, deflated. Kind 0 (read only): raw 32-bit gaps.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

try:
    from feedmesh.hub.idcodec_kernel import count_ends as _count_ends
    from feedmesh.hub.idcodec_kernel import decode_varints as _decode_varints
    from feedmesh.hub.idcodec_kernel import encode_varints as _encode_varints
    from feedmesh.hub.idcodec_kernel import encode_varints_many as _encode_varints_many
    from feedmesh.hub.idcodec_kernel import route_varints as _route_varints
    from feedmesh.hub.idcodec_kernel import route_varints_bits as _route_varints_bits
    from feedmesh.hub.idcodec_kernel import route_varints_few as _route_varints_few
    from feedmesh.hub.idcodec_kernel import route_varints_one as _route_varints_one
except ImportError:  # numba is not installed: the numpy versions below
    _encode_varints = _decode_varints = _count_ends = _route_varints = None
    _encode_varints_many = None
    _route_varints_few = _route_varints_one = _route_varints_bits = None

FEW_REFLECTORS = 4
"""Up to this many reflectors, a batch is routed without counting each list first (room for
all of an article's ids in each of its reflectors' lists); beyond, in two passes."""

__all__ = ["decode_ids", "encode_ids", "encode_routed", "first_reflector_bits"]

_RAW = b"\x00"
_DEFLATED = b"\x01"
_VARINT = 2


def encode_ids(ids: np.ndarray) -> bytes:
    """``ids``: sorted, unique integers in [0, 2**63)."""
    ids = np.asarray(ids, dtype=np.int64)
    out = np.empty(1 + 9 * len(ids), dtype=np.uint8)  # 9 bytes hold any gap below 2**63
    out[0] = _VARINT
    if _encode_varints is not None:
        n = _encode_varints(ids, out[1:])
    else:
        n = _encode_numpy(ids, out[1:])
    return out[:1 + n].tobytes()


def first_reflector_bits(route: np.ndarray) -> np.ndarray:
    """The bitmap :func:`encode_routed` reads for a batch of one reflector: bit ``v % 8`` of
    byte ``v // 8`` set when ``route[v]`` is 0."""
    return np.packbits(np.asarray(route) == 0, bitorder="little")


def encode_routed(id_lists: Sequence[np.ndarray], route: np.ndarray,
                  slots: int, *, first: np.ndarray | None = None, every: bool = False
                  ) -> dict[int, list[tuple[int, bytes]]]:
    """A filter's batch of matches, split by reflector and encoded at once: ``id_lists[a]``
    holds article ``a``'s ids (sorted, unique), id ``v`` goes to reflector ``route[v]`` (none
    when that is -1 or ``v`` is past the end of ``route``), every reflector is below ``slots``.
    Returns reflector -> ``[(a, encode_ids(its ids of article a)), ...]`` for the articles that
    have some, in article order: what one :func:`encode_ids` per article and reflector gives,
    from one compiled pass over the batch (a Python step per article and reflector, none per
    id). ``first``: ``route``'s :func:`first_reflector_bits`, kept beside it by the caller, which
    one reflector's batch reads instead of ``route`` (a sixteenth of its size, it stays in the
    cache: at a million subscriptions the table's lookups cost more than the encoding).
    ``every``: the caller knows that every id of ``id_lists`` goes to reflector 0 (``slots``
    must be 1): none is looked up (a cache miss an id at ten million subscriptions)."""
    if every and slots != 1:
        raise ValueError(f"every id to reflector 0, but {slots} reflectors")
    if _route_varints is None or not id_lists:
        if every:
            return _encode_routed_numpy(id_lists, np.zeros(0, np.int16), slots, every=True)
        return _encode_routed_numpy(id_lists, route, slots)
    ids = np.concatenate(id_lists) if len(id_lists) > 1 else id_lists[0]
    offsets = np.zeros(len(id_lists) + 1, dtype=np.int64)
    np.cumsum([len(mine) for mine in id_lists], out=offsets[1:])
    global _route_out
    if slots <= FEW_REFLECTORS:
        room = slots * (5 * len(ids) + len(id_lists))
        if len(_route_out) < room:  # more room, kept for the next batches
            _route_out = np.empty(room + room // 4, dtype=np.uint8)
        if every:  # every id to the one reflector: nothing to look up
            starts, ends = _encode_varints_many(ids, offsets, _route_out)
        elif slots == 1 and first is not None:  # one reflector: one pass over a small bitmap
            starts, ends = _route_varints_bits(ids, offsets, first, _route_out)
        elif slots == 1:  # a shard of one reflector: one pass, no branch on an id
            starts, ends = _route_varints_one(ids, offsets, route, _route_out)
        else:
            starts, ends = _route_varints_few(ids, offsets, route, slots, _route_out)
    else:
        starts, ends = _route_varints(ids, offsets, route, slots, _route_out)
        if not len(ends):
            _route_out = np.empty(int(starts[-1]) + int(starts[-1]) // 4, dtype=np.uint8)
            starts, ends = _route_varints(ids, offsets, route, slots, _route_out)
    view = memoryview(_route_out)
    articles = len(id_lists)
    low = starts[:-1].reshape(slots, articles)
    high = ends.reshape(slots, articles)
    some = high > low
    routed: dict[int, list[tuple[int, bytes]]] = {}
    for reflector in np.flatnonzero(some.any(axis=1)).tolist():
        begin, end = low[reflector].tolist(), high[reflector].tolist()
        routed[reflector] = [(a, view[begin[a]:end[a]].tobytes())
                             for a in np.flatnonzero(some[reflector]).tolist()]
    return routed


_route_out = np.empty(1 << 20, dtype=np.uint8)
"""The compiled routing's output, reused from batch to batch (fresh pages cost more than the
encoding: a batch at a million subscriptions writes ~600 KB)."""


def _encode_routed_numpy(id_lists: Sequence[np.ndarray], route: np.ndarray,
                         slots: int, every: bool = False) -> dict[int, list[tuple[int, bytes]]]:
    routed: dict[int, list[tuple[int, bytes]]] = {}
    for a, ids in enumerate(id_lists):
        ids = np.asarray(ids, dtype=np.int64)
        if every:
            if len(ids):
                routed.setdefault(0, []).append((a, encode_ids(ids)))
            continue
        ids = ids[(ids >= 0) & (ids < len(route))]
        targets = route[ids]
        for reflector in np.unique(targets[targets >= 0]).tolist():
            if reflector >= slots:
                raise ValueError(f"reflector {reflector} is not below {slots}")
            routed.setdefault(reflector, []).append((a, encode_ids(ids[targets == reflector])))
    return dict(sorted(routed.items()))


def decode_ids(data: bytes) -> np.ndarray:
    """The sorted ids that :func:`encode_ids` encoded; ValueError when ``data`` is not such a
    list."""
    if not data:
        raise ValueError("corrupt id list: empty")
    kind, body = data[0], data[1:]
    if kind == _VARINT:
        return _decode_varint(np.frombuffer(body, dtype=np.uint8))
    if kind == _DEFLATED[0]:
        planes = np.frombuffer(zlib.decompress(body), dtype=np.uint8)
        if len(planes) % 4:
            raise ValueError("corrupt id list: byte planes of unequal length")
        gaps = planes.reshape(4, -1).T.copy().view("<u4").ravel()
    elif kind == _RAW[0]:
        if len(body) % 4:
            raise ValueError("corrupt id list: not whole 32-bit gaps")
        gaps = np.frombuffer(body, dtype="<u4")
    else:
        raise ValueError(f"corrupt id list: unknown encoding {kind}")
    return np.cumsum(gaps, dtype=np.int64)


def _decode_varint(body: np.ndarray) -> np.ndarray:
    if len(body) and body[-1] & 0x80:
        raise ValueError("corrupt id list: the last varint is cut off")
    if _decode_varints is not None:
        ids = np.empty(_count_ends(body), dtype=np.int64)
        if _decode_varints(body, ids) < 0:
            raise ValueError("corrupt id list: a varint longer than 9 bytes")
        return ids
    return _decode_numpy(body)


def _encode_numpy(ids: np.ndarray, out: np.ndarray) -> int:
    """The varint gaps of ``ids`` into ``out``; returns the bytes written."""
    if not len(ids):
        return 0
    gaps = np.diff(ids, prepend=0).astype(np.uint64)
    sizes = np.ones(len(gaps), dtype=np.int64)
    for bits in range(7, 64, 7):
        sizes += gaps >= np.uint64(1 << bits)
    total = int(sizes.sum())
    owner = np.repeat(np.arange(len(gaps)), sizes)  # the gap each output byte belongs to
    place = np.arange(total) - (np.cumsum(sizes) - sizes)[owner]  # its place within that gap
    chunk = (gaps[owner] >> (np.uint64(7) * place.astype(np.uint64))) & np.uint64(0x7F)
    out[:total] = chunk.astype(np.uint8) | np.where(place < sizes[owner] - 1, 0x80, 0).astype(
        np.uint8)
    return total


def _decode_numpy(body: np.ndarray) -> np.ndarray:
    if not len(body):
        return np.zeros(0, dtype=np.int64)
    last = body < 0x80
    ends = np.flatnonzero(last)
    starts = np.concatenate(([0], ends[:-1] + 1))
    if int((ends - starts).max()) > 8:
        raise ValueError("corrupt id list: a varint longer than 9 bytes")
    owner = np.cumsum(last) - last
    place = np.arange(len(body)) - starts[owner]
    values = (body & 0x7F).astype(np.uint64) << (np.uint64(7) * place.astype(np.uint64))
    gaps = np.add.reduceat(values, starts)
    return np.cumsum(gaps.astype(np.int64), dtype=np.int64)
