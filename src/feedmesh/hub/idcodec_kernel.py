"""The compiled loops of :mod:`feedmesh.hub.idcodec` (numba, the ``fast`` extra): one pass over
the ids or the bytes, ~20 times faster than the zlib codec they replaced on 14,000 ids."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["count_ends", "decode_varints", "encode_varints"]


@numba.njit(cache=True, nogil=True)
def encode_varints(ids: np.ndarray, out: np.ndarray) -> int:  # pragma: no cover - compiled
    """Write the gaps between consecutive ``ids`` (the first from 0) into ``out`` as LEB128
    varints; return the bytes written."""
    n = 0
    previous = 0
    for i in range(ids.shape[0]):
        gap = ids[i] - previous
        previous = ids[i]
        while gap >= 0x80:
            out[n] = (gap & 0x7F) | 0x80
            n += 1
            gap >>= 7
        out[n] = gap
        n += 1
    return n


@numba.njit(cache=True, nogil=True)
def count_ends(body: np.ndarray) -> int:  # pragma: no cover - compiled
    """How many varints ``body`` holds (bytes without the continuation bit)."""
    count = 0
    for i in range(body.shape[0]):
        if body[i] < 0x80:
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def decode_varints(body: np.ndarray, ids: np.ndarray) -> int:  # pragma: no cover - compiled
    """Sum the varint gaps of ``body`` into ``ids``; return how many, or -1 when a varint is
    longer than 9 bytes."""
    k = 0
    value = 0
    gap = 0
    shift = 0
    for i in range(body.shape[0]):
        byte = body[i]
        if shift > 56:
            return -1
        gap |= np.int64(byte & 0x7F) << shift
        if byte < 0x80:
            value += gap
            ids[k] = value
            k += 1
            gap = 0
            shift = 0
        else:
            shift += 7
    return k
