"""The numba version of the matching kernel (see :mod:`feedmesh.match.index.kernels`).

Importing this module requires numba. The functions live at module level so that ``cache=True``
stores the compiled code beside this file: only the first run on a machine pays the compile (a few
seconds); later processes load it in about 0.2 s.

Two passes. The first walks the posting ranges and appends the owners of every conjunction that
holds to one buffer, sized in advance; for "plain" conjunctions it writes the owners unconditionally
and advances by ``holds * owners``, so the hot loop has no unpredictable branch. Term presence is a
bitset (a few KB: it stays in L1). Hot loops index with unsigned integers: numba then skips its
negative-index wraparound test on every access (about 20% of the loop's time). The second pass sorts
and deduplicates the collected ids: an LSD radix sort when they are few relative to the id range,
else a bitset over all ids (one pass over max_id / 64 words), whichever touches less memory.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["match_numba"]

_PHRASE_FLAG = 1 << 30
_TERM_MASK = _PHRASE_FLAG - 1
_ONE = np.uint64(1)
_SIX = np.uint64(6)
_LOW6 = np.uint64(63)
# Position of the lowest set bit of a power of two w: _DEBRUIJN[(w * _MAGIC) >> 58].
_MAGIC = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN = np.array(
    [0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4, 62, 55, 59, 36, 53, 51, 43, 22, 45,
     39, 33, 30, 24, 18, 12, 5, 63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11, 46,
     26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6],
    dtype=np.int64,
)


@numba.njit(cache=True, nogil=True)
def _phrase_holds(phrase, phrase_field, phrase_start, phrase_words, seq,
                  bounds):  # pragma: no cover
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
def _radix_unique(values, count, max_value, spare):  # pragma: no cover
    """Sorted unique ``values[:count]`` (all in 0..max_value), LSD radix sort of 11-bit digits;
    ``values`` and ``spare`` (as long) are overwritten."""
    width = 1
    while (1 << width) <= max_value:
        width += 1
    source = values
    target = spare
    counts = np.empty(2049, dtype=np.int64)
    for shift in range(0, width, 11):
        counts[:] = 0
        for i in range(count):
            counts[((source[i] >> shift) & 2047) + 1] += 1
        for digit in range(2048):
            counts[digit + 1] += counts[digit]
        for i in range(count):
            digit = (source[i] >> shift) & 2047
            target[counts[digit]] = source[i]
            counts[digit] += 1
        source, target = target, source
    result = np.empty(count, dtype=np.int32)
    unique = 0
    previous = -1
    for i in range(count):
        if source[i] != previous:
            previous = source[i]
            result[unique] = previous
            unique += 1
    return result[:unique]


@numba.njit(cache=True, nogil=True)
def _bitset_unique(values, count, id_bits):  # pragma: no cover
    """Sorted unique ``values[:count]`` through a bitset over all ids (zero before and after)."""
    for i in range(np.uint64(count)):
        value = np.uint64(values[i])
        id_bits[value >> _SIX] |= _ONE << (value & _LOW6)
    result = np.empty(count, dtype=np.int32)
    unique = 0
    for word in range(id_bits.size):
        pending = id_bits[word]
        if pending != 0:
            id_bits[word] = 0
            while pending != 0:
                lowest = pending & (~pending + _ONE)
                result[unique] = word * 64 + _DEBRUIJN[(lowest * _MAGIC) >> np.uint64(58)]
                unique += 1
                pending ^= lowest
    return result[:unique]


@numba.njit(cache=True, nogil=True)
def match_numba(  # pragma: no cover - compiled; tested through both backends
    buffer, header, phrase_of_term, phrase_field, phrase_start, phrase_words,
    terms, seq, bounds, present_bits, phrase_state, id_bits, work, spare,
):
    """(sorted unique ids of the subscriptions that match, 0), or (empty, n) when the ``work`` and
    ``spare`` buffers hold fewer than the n owners this article could collect (grow, call again)."""
    post_start = buffer[header[0] : header[1]]
    immediate_end = buffer[header[1] : header[2]]
    plain_end = buffer[header[2] : header[3]]
    rest_start = buffer[header[3] : header[4]]
    rest_terms = buffer[header[4] : header[5]]
    owner_start = buffer[header[5] : header[6]]
    owner_ids = buffer[header[6] : header[7]]
    members = buffer[header[7] : header[8]]
    indexed_terms = post_start.size - 1
    largest_id = members[members.size - 1] if members.size else 0
    # numba does not check bounds: refuse scratch arrays too small for this index and article.
    term_limit = min(present_bits.size * 64, phrase_state.size)
    if (terms.size and terms[terms.size - 1] >= term_limit) or indexed_terms > term_limit:
        raise ValueError("scratch arrays are smaller than the vocabulary")
    if id_bits.size * 64 <= largest_id:
        raise ValueError("id bitset is smaller than the largest subscription id")

    capacity = 0
    for t in terms:
        present_bits[t >> 6] |= _ONE << np.uint64(t & 63)
        if t < indexed_terms:
            capacity += owner_start[post_start[t + 1]] - owner_start[post_start[t]]
    if capacity > work.size or capacity > spare.size:
        for t in terms:
            present_bits[t >> 6] = 0
        return np.empty(0, dtype=np.int32), capacity
    out = work
    count = 0
    touched = np.empty(64, dtype=np.int64)  # phrase terms whose state was set for this article
    touched_count = 0
    for t in terms:
        if t >= indexed_terms:
            continue
        # Nothing left to check: the owners of the whole run are one contiguous range.
        run_start = np.uint64(owner_start[post_start[t]])
        run_end = np.uint64(owner_start[immediate_end[t]])
        for o in range(run_start, run_end):
            out[np.uint64(count)] = owner_ids[o]
            count += 1
        # Only positive words/prefixes left: AND their presence bits; write, then keep or not.
        for c in range(np.uint64(immediate_end[t]), np.uint64(plain_end[t])):
            holds = _ONE
            for k in range(np.uint64(rest_start[c]), np.uint64(rest_start[c + _ONE])):
                term = np.uint64(rest_terms[k])
                holds &= present_bits[term >> _SIX] >> (term & _LOW6)
            first = np.uint64(owner_start[c])
            owners = np.uint64(owner_start[c + _ONE]) - first
            for j in range(owners):
                out[np.uint64(count) + j] = owner_ids[first + j]
            count += np.int64(holds & _ONE) * np.int64(owners)
        # Phrases or NOT terms: test in stored order, stop at the first failure. (Kept inline: a
        # helper function taking these arrays costs more per call than the test itself.)
        for c in range(np.uint64(plain_end[t]), np.uint64(post_start[t + 1])):
            holds = True
            for k in range(np.uint64(rest_start[c]), np.uint64(rest_start[c + _ONE])):
                code = np.int64(rest_terms[k])
                negative = code < 0
                if negative:
                    code = -code - 1
                term = np.uint64(code & _TERM_MASK)
                if code >= _PHRASE_FLAG:
                    state = phrase_state[term]
                    if state == 0:  # first look at this phrase for this article: check, remember
                        found = _phrase_holds(
                            phrase_of_term[term], phrase_field, phrase_start, phrase_words, seq,
                            bounds,
                        )
                        state = 1 if found else 2
                        phrase_state[term] = state
                        if touched_count == touched.size:
                            grown = np.empty(2 * touched.size, dtype=np.int64)
                            grown[:touched_count] = touched
                            touched = grown
                        touched[touched_count] = term
                        touched_count += 1
                    present = state == 1
                else:
                    present = (present_bits[term >> _SIX] >> (term & _LOW6)) & _ONE == _ONE
                if present == negative:
                    holds = False
                    break
            if holds:
                for o in range(np.uint64(owner_start[c]), np.uint64(owner_start[c + _ONE])):
                    out[np.uint64(count)] = owner_ids[o]
                    count += 1
    for t in terms:
        present_bits[t >> 6] = 0
    for i in range(touched_count):
        phrase_state[touched[i]] = 0
    if count > id_bits.size:
        return _bitset_unique(out, count, id_bits), 0
    return _radix_unique(out, count, largest_id, spare), 0
