"""The numba loops behind :mod:`.term_table` (importing this module requires numba).

A term is found by an FNV-1a hash of its UTF-8 bytes, finished with its field and kind, in an
open-addressing table (linear probing) of term ids; a hit is confirmed by comparing the bytes with
the term's own text, so a hash collision can cost a probe but never a wrong id. FNV is
incremental: walking a token's bytes once gives the hash of every prefix on the way, so prefix
terms cost one probe per prefix length in use, not one hash each.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["insert_terms", "prepare_packed_kernel"]

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xFF51AFD7ED558CCD)
_SHIFT = np.uint64(33)
_KIND_WORD = 0
_KIND_PREFIX = 1


@numba.njit(cache=True, nogil=True)
def _finish(state, field, kind):  # pragma: no cover
    h = state ^ (np.uint64(field * 4 + kind + 1) * _GOLDEN)
    h ^= h >> _SHIFT
    h *= _MIX
    h ^= h >> _SHIFT
    return h


@numba.njit(cache=True, nogil=True)
def _lookup(h, field, kind, blob, low, high, keys, ids, vblob, vstarts, vfields,
            vkinds):  # pragma: no cover
    """The id of the term (``field``, ``kind``) whose text is ``blob[low:high]``, or -1."""
    mask = np.uint64(len(keys) - 1)
    slot = h & mask
    width = high - low
    while True:
        term = ids[slot]
        if term < 0:
            return -1
        if keys[slot] == h and vfields[term] == field and vkinds[term] == kind:
            start = vstarts[term]
            if vstarts[term + 1] - 1 - start == width:
                k = 0
                while k < width and vblob[start + k] == blob[low + k]:
                    k += 1
                if k == width:
                    return term
        slot = (slot + np.uint64(1)) & mask


@numba.njit(cache=True, nogil=True)
def insert_terms(keys, ids, vblob, vstarts, vfields, vkinds, first, last):  # pragma: no cover
    """File the words and prefixes among terms ``first..last-1`` in the table (``keys``/``ids``,
    a power of two long, ids -1 where empty)."""
    mask = np.uint64(len(keys) - 1)
    for term in range(first, last):
        kind = vkinds[term]
        if kind != _KIND_WORD and kind != _KIND_PREFIX:
            continue
        state = _FNV_OFFSET
        for i in range(vstarts[term], vstarts[term + 1] - 1):
            state = (state ^ np.uint64(vblob[i])) * _FNV_PRIME
        h = _finish(state, vfields[term], kind)
        slot = h & mask
        while ids[slot] >= 0:
            slot = (slot + np.uint64(1)) & mask
        keys[slot] = h
        ids[slot] = term


@numba.njit(cache=True, nogil=True)
def prepare_packed_kernel(blob, seq, bounds, aliases, alias_bounds, active, phrase_fields,
                          prefix_lengths, keys, ids, vblob, vstarts, vfields,
                          vkinds):  # pragma: no cover
    """Term ids found (sorted, unique), token ids per phrase field and their bounds, and whether
    the packed article was whole (``blob``: NUL-separated tokens; ``seq``/``aliases``: indices
    into them, or -1; ``bounds``/``alias_bounds``: from 0 up to their size). When it was not,
    nothing is read past the arrays and three empty arrays come back with False (the caller
    says what was wrong: :meth:`~feedmesh.match.packed.PackedTokens.check`)."""
    count = 0
    if len(blob):
        count = 1
        for i in range(len(blob)):
            if blob[i] == 0:
                count += 1
    if not (_splits(bounds, len(seq)) and _splits(alias_bounds, len(aliases))
            and _points_within(seq, count) and _points_within(aliases, count)):
        nothing = np.empty(0, dtype=np.int32)
        return nothing, nothing, np.empty(0, dtype=np.int64), False
    starts = np.empty(count + 1, dtype=np.int64)
    if count:
        starts[0] = 0
        n = 1
        for i in range(len(blob)):
            if blob[i] == 0:
                starts[n] = i + 1
                n += 1
        starts[count] = len(blob) + 1
    longest = prefix_lengths.shape[1] - 1
    per_token = 1
    for f in range(prefix_lengths.shape[0]):
        lengths = 0
        for n in range(longest + 1):
            if prefix_lengths[f, n]:
                lengths += 1
        per_token = max(per_token, 1 + lengths)
    found = np.empty((len(seq) + len(aliases)) * per_token + 1, dtype=np.int32)
    nfound = 0
    out_seq = np.empty(len(seq), dtype=np.int32)
    nseq = 0
    out_bounds = np.zeros(len(bounds), dtype=np.int64)
    word_id = np.empty(count, dtype=np.int32)
    seen = np.zeros(count, dtype=np.int32)  # f + 1: the token was looked up for field f
    for f in range(len(bounds) - 1):
        low, high = bounds[f], bounds[f + 1]
        if high == low or not active[f]:
            out_bounds[f + 1] = out_bounds[f]
            continue
        for part in range(2):
            indices = seq if part == 0 else aliases
            first = low if part == 0 else alias_bounds[f]
            end = high if part == 0 else alias_bounds[f + 1]
            for k in range(first, end):
                t = indices[k]
                if t < 0 or seen[t] == f + 1:
                    continue
                seen[t] = f + 1
                token_low, token_high = starts[t], starts[t + 1] - 1
                state = _FNV_OFFSET
                chars = 0
                for i in range(token_low, token_high):
                    state = (state ^ np.uint64(blob[i])) * _FNV_PRIME
                    if i + 1 == token_high or (blob[i + 1] & 0xC0) != 0x80:  # a character ends
                        chars += 1
                        if chars <= longest and prefix_lengths[f, chars]:
                            term = _lookup(_finish(state, f, _KIND_PREFIX), f, _KIND_PREFIX,
                                           blob, token_low, i + 1, keys, ids, vblob, vstarts,
                                           vfields, vkinds)
                            if term >= 0:
                                found[nfound] = term
                                nfound += 1
                term = _lookup(_finish(state, f, _KIND_WORD), f, _KIND_WORD, blob, token_low,
                               token_high, keys, ids, vblob, vstarts, vfields, vkinds)
                word_id[t] = term
                if term >= 0:
                    found[nfound] = term
                    nfound += 1
        if phrase_fields[f]:
            for k in range(low, high):
                t = seq[k]
                out_seq[nseq] = word_id[t] if t >= 0 else -1
                nseq += 1
        out_bounds[f + 1] = nseq
    terms = np.sort(found[:nfound])
    unique = 0
    for i in range(nfound):
        if unique == 0 or terms[i] != terms[unique - 1]:
            terms[unique] = terms[i]
            unique += 1
    return terms[:unique], out_seq[:nseq], out_bounds, True


@numba.njit(cache=True, nogil=True, inline="always")
def _splits(bounds, size):  # pragma: no cover - compiled
    """Do ``bounds`` run from 0 to ``size`` without going down?"""
    if len(bounds) == 0 or bounds[0] != 0 or bounds[len(bounds) - 1] != size:
        return False
    for i in range(1, len(bounds)):  # noqa: SIM110 - numba compiles loops, not generators
        if bounds[i] < bounds[i - 1]:
            return False
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _points_within(indices, count):  # pragma: no cover - compiled
    """Is every index -1 (a separator) or one of the ``count`` tokens?"""
    for i in range(len(indices)):  # noqa: SIM110 - numba compiles loops, not generators
        if indices[i] < -1 or indices[i] >= count:
            return False
    return True
