"""The matching loop over a :class:`~feedmesh.match.index.compiled.CompiledIndex`, in two versions.

Phase 1 marks the article's terms in a scratch presence bitset. Phase 2 walks the posting range of
every article term (the conjunctions filed under it) and verifies each candidate's remaining terms
in their stored order: selective words first; phrases by positions, once per article (the answer is
cached in ``phrase_state``: 1 holds, 2 does not); NOT terms last. The owners (subscription ids) of
every conjunction that passed are collected, then sorted and deduplicated.

* ``numba`` (the ``fast`` extra, :mod:`.numba_kernel`): a compiled loop, cached on disk
  (``cache=True``) so only the first run on a machine pays the compile.
* ``numpy``: the same steps as whole-array operations; always available, 2-3 times slower.

Both take the same arguments and return the same result; tests run both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import numpy as np

from feedmesh.match.index.compiled import (
    PHRASE_FLAG,
    TERM_MASK,
    CompiledIndex,
    ranges,
    sorted_unique,
)
from feedmesh.match.index.vocabulary import PhraseTables

__all__ = ["BACKENDS", "Kernel", "MatchScratch", "default_backend", "phrase_holds", "warm_up"]

Kernel = Callable[..., tuple[np.ndarray, int]]
"""``kernel(buffer, header, phrase_of_term, phrase_field, phrase_start, phrase_words, terms, seq,
bounds, present_bits, phrase_state, id_bits, work, spare) -> (ids, needed)``: the sorted unique
subscription ids (int32) and 0, or an empty array and the size ``work``/``spare`` must grow to
before calling again. The last five arguments are the arrays of a :class:`MatchScratch`."""


class MatchScratch:
    """Working memory of one matcher, zero between calls: a presence bit per term, a phrase state
    per term (0 not checked, 1 holds, 2 does not), and a bit per subscription id."""

    __slots__ = ("id_bits", "phrase_state", "present_bits", "spare", "work")

    def __init__(self) -> None:
        self.present_bits = np.zeros(1, dtype=np.uint64)
        self.phrase_state = np.zeros(0, dtype=np.uint8)
        self.id_bits = np.zeros(1, dtype=np.uint64)
        # Owners collected for one article, and room to sort them: kept between calls so that a
        # large article does not pay for fresh pages every time.
        self.work = np.empty(4096, dtype=np.int32)
        self.spare = np.empty(4096, dtype=np.int32)

    def grow_work(self, needed: int) -> None:
        size = max(needed, 2 * len(self.work))
        self.work = np.empty(size, dtype=np.int32)
        self.spare = np.empty(size, dtype=np.int32)

    def fit(self, term_count: int, largest_id: int) -> None:
        """Grow (never shrink) to cover ``term_count`` terms and ids up to ``largest_id``."""
        if len(self.phrase_state) < term_count:
            size = 2 * term_count + 64
            self.phrase_state = np.zeros(size, dtype=np.uint8)
            self.present_bits = np.zeros(size // 64 + 1, dtype=np.uint64)
        if len(self.id_bits) * 64 <= largest_id:
            self.id_bits = np.zeros(largest_id // 64 + 1, dtype=np.uint64)

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
    present_bits: np.ndarray,
    phrase_state: np.ndarray,
    id_bits: np.ndarray,
    work: np.ndarray,
    spare: np.ndarray,
) -> tuple[np.ndarray, int]:
    index = CompiledIndex(buffer, header)
    terms = terms[terms < index.term_count]
    candidates = ranges(index.post_start[terms], index.post_start[terms + 1])
    if candidates.size == 0:
        return _EMPTY_IDS, 0
    rest_begin = index.rest_start[candidates]
    rest_lengths = index.rest_start[candidates + 1] - rest_begin
    entries = index.rest_terms[ranges(rest_begin, rest_begin + rest_lengths)].astype(np.int64)
    negative = entries < 0
    codes = np.where(negative, -entries - 1, entries)
    term_ids = codes & TERM_MASK
    truth = np.zeros(len(phrase_state), dtype=bool)
    truth[terms] = True
    phrases = sorted_unique(term_ids[codes >= PHRASE_FLAG])
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
    owners = index.owner_ids[ranges(index.owner_start[passed], index.owner_start[passed + 1])]
    return sorted_unique(owners), 0


# --- numba ---------------------------------------------------------------------------------------


def _numba_kernel() -> Kernel | None:
    try:
        from feedmesh.match.index.numba_kernel import match_numba
    except ImportError:  # numba is the optional ``fast`` extra
        return None
    return match_numba


_NUMBA_KERNEL: Final = _numba_kernel()

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
        np.full(1, -1, np.int32), np.empty(0, np.int32), np.zeros(1, np.int32),
        np.empty(0, np.int32),
    )
    scratch = MatchScratch()
    scratch.fit(1, 0)
    BACKENDS[backend](
        index.buffer, index.header, phrases.of_term, phrases.field, phrases.start, phrases.words,
        np.zeros(1, np.int32), np.empty(0, np.int32), np.zeros(5, np.int64), scratch.present_bits,
        scratch.phrase_state, scratch.id_bits, scratch.work, scratch.spare,
    )
    return time.perf_counter() - started
