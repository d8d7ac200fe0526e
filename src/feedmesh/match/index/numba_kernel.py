"""The numba version of the matching kernel (see :mod:`feedmesh.match.index.kernels`).

Importing this module requires numba. The functions live at module level so that ``cache=True``
stores the compiled code beside this file: only the first run on a machine pays the compile (a few
seconds); later processes load it in about 0.15 s.

Matched owners (positions in ``members``) are deduplicated and put in order with a bitset over all
subscriptions of the index (a scratch array kept by the caller, all zero between calls): setting a
bit per owner and then reading the set bits of the touched words costs an order of magnitude less
than sorting when thousands of subscriptions match (numba's sort is slow).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["match_numba"]

_PHRASE_FLAG = 1 << 30
_TERM_MASK = _PHRASE_FLAG - 1
# Position of the lowest set bit of a power of two w: _DEBRUIJN[(w * _MAGIC) >> 58].
_MAGIC = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN = np.array(
    [0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51, 43, 22, 45,
     39, 33, 30, 24, 18, 12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11, 46,
     26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6],
    dtype=np.int64,
)


@numba.njit(cache=True, nogil=True)
def _phrase_holds(phrase, phrase_field, phrase_start, phrase_words, seq, bounds):  # pragma: no cover
    """Whether phrase number ``phrase`` occurs in its field of the article (``seq``/``bounds``)."""
    field = phrase_field[phrase]
    low, high = bounds[field], bounds[field + 1]
    first, width = phrase_start[phrase], phrase_start[phrase + 1] - phrase_start[phrase]
    for i in range(low, high - width + 1):
        if seq[i] == phrase_words[first]:
            k = 1
            while k < width and seq[i + k] == phrase_words[first + k]:
                k += 1
            if k == width:
                return True
    return False


@numba.njit(cache=True, nogil=True)
def _set_bits(owner_slots, first, last, bits):  # pragma: no cover
    """Set the bit of every owner in ``owner_slots[first:last]``."""
    one = np.uint64(1)
    for o in range(first, last):
        slot = owner_slots[o]
        bits[slot >> 6] |= one << np.uint64(slot & 63)


@numba.njit(cache=True, nogil=True)
def _holds(code, present, phrase_of_term, phrase_field, phrase_start, phrase_words, seq, bounds,
           touched):  # pragma: no cover
    """Truth of one stored term code (word, prefix, phrase; NOT applied) for the article."""
    negative = code < 0
    if negative:
        code = -code - 1
    term = code & _TERM_MASK
    value = present[term]
    if value == 0 and code >= _PHRASE_FLAG:
        found = _phrase_holds(
            phrase_of_term[term], phrase_field, phrase_start, phrase_words, seq, bounds
        )
        value = 1 if found else 2
        present[term] = value  # cache the answer for this article; reset by the caller
        touched.append(term)
    return (value == 1) != negative


@numba.njit(cache=True, nogil=True)
def match_numba(  # pragma: no cover - compiled; tested through both backends
    buffer, header, phrase_of_term, phrase_field, phrase_start, phrase_words,
    terms, seq, bounds, present, bits,
):
    """Sorted unique ids of the subscriptions in the index (``buffer``/``header``) that match."""
    post_start = buffer[header[0] : header[1]]
    immediate_end = buffer[header[1] : header[2]]
    plain_end = buffer[header[2] : header[3]]
    rest_start = buffer[header[3] : header[4]]
    rest_terms = buffer[header[4] : header[5]]
    owner_start = buffer[header[5] : header[6]]
    owner_slots = buffer[header[6] : header[7]]
    members = buffer[header[7] : header[8]]
    indexed_terms = post_start.size - 1
    # numba does not check bounds: refuse scratch arrays too small for this index and article.
    if terms.size and terms[terms.size - 1] >= present.size or indexed_terms > present.size:
        raise ValueError("present[] is smaller than the vocabulary")
    if bits.size * 64 < members.size:
        raise ValueError("bits[] has fewer bits than the index has subscriptions")
    for t in terms:
        present[t] = 1
    touched = [0 for _ in range(0)]  # phrase terms whose answer was cached in present[]
    owners = 0
    for t in terms:
        if t >= indexed_terms:
            continue
        first = post_start[t]
        # Nothing left to check: the owners of the whole run are one contiguous range.
        _set_bits(owner_slots, owner_start[first], owner_start[immediate_end[t]], bits)
        owners += owner_start[immediate_end[t]] - owner_start[first]
        # Only positive words/prefixes left: AND their presence bytes, no early exit.
        for c in range(immediate_end[t], plain_end[t]):
            ok = 1
            for k in range(rest_start[c], rest_start[c + 1]):
                ok &= present[rest_terms[k]]
            if ok:
                _set_bits(owner_slots, owner_start[c], owner_start[c + 1], bits)
                owners += owner_start[c + 1] - owner_start[c]
        # Phrases or NOT terms: test in stored order, stop at the first failure.
        for c in range(plain_end[t], post_start[t + 1]):
            ok = 1
            for k in range(rest_start[c], rest_start[c + 1]):
                if not _holds(rest_terms[k], present, phrase_of_term, phrase_field,
                              phrase_start, phrase_words, seq, bounds, touched):
                    ok = 0
                    break
            if ok:
                _set_bits(owner_slots, owner_start[c], owner_start[c + 1], bits)
                owners += owner_start[c + 1] - owner_start[c]
    for t in terms:
        present[t] = 0
    for t in touched:
        present[t] = 0
    return _collect(bits, members, owners)


@numba.njit(cache=True, nogil=True)
def _collect(bits, members, owners):  # pragma: no cover
    """The ids of the set bits, in order; clears them. One pass over all words: S/64 of them."""
    result = np.empty(owners, dtype=np.int32)
    unique = 0
    one = np.uint64(1)
    for word in range(bits.size):
        pending = bits[word]
        if pending != 0:
            bits[word] = 0
            while pending != 0:
                lowest = pending & (~pending + one)
                result[unique] = members[word * 64 + _DEBRUIJN[(lowest * _MAGIC) >> np.uint64(58)]]
                unique += 1
                pending ^= lowest
    return result[:unique].copy()
