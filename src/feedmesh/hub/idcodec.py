"""Compact lists of subscription ids: sorted ids as gaps, byte planes apart, then zlib.

Cobra's worry about sending matching ids (section 3.3) was 4 bytes per id: 400 KB for an article
that matches 100,000 subscriptions. Sorted ids have small gaps; storing the gaps' low bytes, then
their second bytes, and so on (the "shuffle" of HDF5/Blosc) puts the zeros together, and zlib then
gets about one byte per id (1,391 random ids among 100,000: 1,480 bytes; plain 32-bit gaps: 2,271).
The filter sends these, and the reflector logs them.
"""

from __future__ import annotations

import zlib

import numpy as np

__all__ = ["decode_ids", "encode_ids"]

_RAW = b"\x00"
_DEFLATED = b"\x01"


def encode_ids(ids: np.ndarray) -> bytes:
    """``ids``: sorted, unique, non-negative integers below 2**32."""
    if not len(ids):
        return _RAW
    gaps = np.empty(len(ids), dtype="<u4")
    gaps[0] = ids[0]
    np.subtract(ids[1:], ids[:-1], out=gaps[1:], casting="unsafe")
    if len(gaps) < 16:
        return _RAW + gaps.tobytes()
    planes = gaps.view(np.uint8).reshape(-1, 4).T.tobytes()
    return _DEFLATED + zlib.compress(planes, 1)  # level 6 saves 4% for twice the time


def decode_ids(data: bytes) -> np.ndarray:
    kind, body = data[:1], data[1:]
    if kind == _DEFLATED:
        planes = np.frombuffer(zlib.decompress(body), dtype=np.uint8)
        if len(planes) % 4:
            raise ValueError("corrupt id list: byte planes of unequal length")
        gaps = planes.reshape(4, -1).T.copy().view("<u4").ravel()
    elif kind == _RAW:
        if len(body) % 4:
            raise ValueError("corrupt id list: not whole 32-bit gaps")
        gaps = np.frombuffer(body, dtype="<u4")
    else:
        raise ValueError(f"unknown id list encoding {kind!r}")
    return np.cumsum(gaps, dtype=np.int64)
