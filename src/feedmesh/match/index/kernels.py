"""The matching loop over a :class:`~feedmesh.match.index.compiled.CompiledIndex`, in two versions.

Phase 1 marks the article's terms in a scratch ``present`` array (one byte per term id). Phase 2 walks
the posting range of every article term (the conjunctions filed under it) and verifies each
candidate's remaining terms in their stored order: selective words first, so most candidates fail on
the first test; phrases are checked by positions only when every word test passed, once per article
(the answer is cached in ``present``: 1 true, 2 false); NOT terms last. The owners of every conjunction
that passed are collected, sorted, deduplicated and mapped to subscription ids.

* ``numba`` (the ``fast`` extra): a compiled loop, cached on disk (``cache=True``) so only the first
  run on a machine pays the compile; the owners are deduplicated with a bitmap when many matched.
* ``numpy``: the same steps as whole-array operations; always available, several times slower.

Both take the same arguments and return the same sorted int32 array; tests run both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import numpy as np

from feedmesh.match.index.compiled import CompiledIndex, ranges
from feedmesh.match.index.vocabulary import PhraseTables

__all__ = ["BACKENDS", "Kernel", "default_backend", "phrase_holds", "warm_up"]

Kernel = Callable[..., np.ndarray]
"""``kernel(buffer, header, phrase_of_term, phrase_field, phrase_start, phrase_words, terms, seq,
bounds, present) -> sorted unique subscription ids`` (int32)."""

_EMPTY_IDS: Final = np.empty(0, dtype=np.int32)


# --- numpy ---------------------------------------------------------------------------------------


def phrase_holds(words: np.ndarray, seq: np.ndarray, start: int, end: int) -> bool:
    """True when ``words`` occur consecutively in ``seq[start:end]``."""
    width = len(words)
    segment = seq[start:end]
    if len(segment) < width:
        return False
    candidates = np.flatnonzero(segment[: len(segment) - width + 1] == words[0])
    for k in range(1, width):
        if candidates.size == 0:
            return False
        candidates = candidates[segment[candidates + k] == words[k]]
    return bool(candidates.size)


def match_numpy(
    buffer: np.ndarray,
    header: np.ndarray,
    phrase_of_term: np.ndarray,
    phrase_field: np.ndarray,
    phrase_start: np.ndarray,
    phrase_words: np.ndarray,
    terms: np.ndarray,
    seq: np.ndarray,
    bounds: np.ndarray,
    present: np.ndarray,
) -> np.ndarray:
    index = CompiledIndex(buffer, header)
    terms = terms[terms < index.term_count]
    candidates = ranges(index.post_start[terms], index.post_start[terms + 1])
    if candidates.size == 0:
        return _EMPTY_IDS
    rest_begin = index.rest_start[candidates]
    rest_lengths = index.rest_start[candidates + 1] - rest_begin
    entries = index.rest_terms[ranges(rest_begin, rest_begin + rest_lengths)]
    negative = entries < 0
    term_ids = np.where(negative, -entries.astype(np.int64) - 1, entries)
    truth = np.zeros(len(present), dtype=bool)
    truth[terms] = True
    phrases = np.unique(term_ids[phrase_of_term[term_ids] >= 0])
    for phrase_term in phrases:
        phrase = phrase_of_term[phrase_term]
        words = phrase_words[phrase_start[phrase] : phrase_start[phrase + 1]]
        field = phrase_field[phrase]
        truth[phrase_term] = phrase_holds(words, seq, int(bounds[field]), int(bounds[field + 1]))
    failed = truth[term_ids] == negative
    failures = np.bincount(
        np.repeat(np.arange(len(candidates)), rest_lengths)[failed], minlength=len(candidates)
    )
    passed = candidates[failures == 0]
    slots = index.owner_slots[ranges(index.owner_start[passed], index.owner_start[passed + 1])]
    return index.members[np.unique(slots)]


# --- numba ---------------------------------------------------------------------------------------


def _build_numba_kernel() -> Kernel | None:
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=True, nogil=True)
    def holds(phrase, phrase_field, phrase_start, phrase_words, seq, bounds):  # pragma: no cover
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
    def match(  # pragma: no cover - compiled; covered through the tests of both backends
        buffer, header, phrase_of_term, phrase_field, phrase_start, phrase_words,
        terms, seq, bounds, present,
    ):
        post_start = buffer[header[0] : header[1]]
        rest_start = buffer[header[1] : header[2]]
        rest_terms = buffer[header[2] : header[3]]
        owner_start = buffer[header[3] : header[4]]
        owner_slots = buffer[header[4] : header[5]]
        members = buffer[header[5] : header[6]]
        indexed_terms = post_start.size - 1
        for t in terms:
            present[t] = 1
        out = np.empty(1024, dtype=np.int32)
        count = 0
        touched = np.empty(16, dtype=np.int32)
        touched_count = 0
        for t in terms:
            if t >= indexed_terms:
                continue
            for c in range(post_start[t], post_start[t + 1]):
                ok = True
                for k in range(rest_start[c], rest_start[c + 1]):
                    x = rest_terms[k]
                    negative = x < 0
                    if negative:
                        x = -x - 1
                    value = present[x]
                    if value == 0 and phrase_of_term[x] >= 0:
                        value = 1 if holds(phrase_of_term[x], phrase_field, phrase_start,
                                           phrase_words, seq, bounds) else 2
                        present[x] = value
                        if touched_count == touched.size:
                            grown = np.empty(2 * touched.size, dtype=np.int32)
                            grown[:touched_count] = touched
                            touched = grown
                        touched[touched_count] = x
                        touched_count += 1
                    if (value == 1) == negative:
                        ok = False
                        break
                if ok:
                    first, last = owner_start[c], owner_start[c + 1]
                    if count + last - first > out.size:
                        grown = np.empty(max(2 * out.size, count + last - first), dtype=np.int32)
                        grown[:count] = out[:count]
                        out = grown
                    out[count : count + last - first] = owner_slots[first:last]
                    count += last - first
        for t in terms:
            present[t] = 0
        for i in range(touched_count):
            present[touched[i]] = 0
        if count == 0:
            return np.empty(0, dtype=np.int32)
        subscriptions = members.size
        if count * 16 > subscriptions:
            # Many matches: one pass over a bitmap of all subscriptions beats sorting them.
            seen = np.zeros(subscriptions, dtype=np.uint8)
            for i in range(count):
                seen[out[i]] = 1
            unique = 0
            for slot in range(subscriptions):
                if seen[slot]:
                    out[unique] = members[slot]
                    unique += 1
            return out[:unique].copy()
        slots = np.sort(out[:count])
        result = np.empty(count, dtype=np.int32)
        unique = 0
        previous = -1
        for i in range(count):
            if slots[i] != previous:
                previous = slots[i]
                result[unique] = members[previous]
                unique += 1
        return result[:unique].copy()

    return match


_NUMBA_KERNEL: Final = _build_numba_kernel()

BACKENDS: Final[dict[str, Kernel]] = {"numpy": match_numpy}
if _NUMBA_KERNEL is not None:
    BACKENDS["numba"] = _NUMBA_KERNEL


def default_backend() -> str:
    """``numba`` when it is installed, else ``numpy``."""
    return "numba" if "numba" in BACKENDS else "numpy"


def warm_up(backend: str) -> float:
    """Compile (or load from the on-disk cache) the kernel of ``backend``; returns seconds spent."""
    started = time.perf_counter()
    index = CompiledIndex.empty()
    phrases = PhraseTables(
        np.full(1, -1, np.int32), np.empty(0, np.int32), np.zeros(1, np.int32), np.empty(0, np.int32)
    )
    BACKENDS[backend](
        index.buffer, index.header, phrases.of_term, phrases.field, phrases.start, phrases.words,
        np.zeros(1, np.int32), np.empty(0, np.int32), np.zeros(5, np.int64), np.zeros(1, np.uint8),
    )
    return time.perf_counter() - started
