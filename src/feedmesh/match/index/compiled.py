"""The compact, immutable main index: a few int32 arrays in one buffer.

Layout (``C`` conjunctions, ``V`` terms, ``S`` subscriptions)::

    post_start[V+1]   conjunctions filed under term t are post_start[t] .. post_start[t+1]-1, in
                      three runs: nothing left to check (up to immediate_end[t]), only positive
                      words/prefixes left (up to plain_end[t]), anything else
    immediate_end[V]
    plain_end[V]
    rest_start[C+1]   the remaining terms of conjunction c are rest_terms[rest_start[c]:...]
    rest_terms[R]     positive words/prefixes (most selective first), then phrases, then NOT terms;
                      a phrase is stored as t | PHRASE_FLAG, a NOT term as -(code+1), so the
                      kernel needs no other array to know how to test a term
    owner_start[C+1]  the subscriptions of conjunction c are owner_ids[owner_start[c]:...]
    owner_ids[O]      subscription ids (sorted within each conjunction)
    members[S]        every subscription id once, sorted (membership tests, the largest id)

The owners of the first run are one contiguous range, taken without looking at the conjunctions;
the second run is checked without branches (AND of presence bytes). Identical conjunctions
(hence identical queries) are stored once, with every owner. Building is vectorized (numpy sorts
over the flat :class:`ConjunctionTable`), so compacting a million subscriptions takes well under a
second, and :meth:`CompiledIndex.to_table` gives the table back for the next compaction.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from feedmesh.match.index.vocabulary import KIND_PHRASE

__all__ = [
    "CompiledIndex",
    "ConjunctionTable",
    "build_compiled",
    "concat_tables",
    "empty_table",
    "ranges",
    "sorted_unique",
]

PHRASE_FLAG = 1 << 30
TERM_MASK = PHRASE_FLAG - 1
SECTIONS = (
    "post_start",
    "immediate_end",
    "plain_end",
    "rest_start",
    "rest_terms",
    "owner_start",
    "owner_ids",
    "members",
)


class ConjunctionTable(NamedTuple):
    """Conjunctions as flat arrays: the input of a build, and what a compiled index turns back
    into."""

    term_start: np.ndarray  # int64[C+1]
    terms: np.ndarray  # int32[T]: positive term ids, NOT terms as -(id+1)
    owner_start: np.ndarray  # int64[C+1]
    owners: np.ndarray  # int64[O]: subscription ids

    @property
    def conjunctions(self) -> int:
        return len(self.term_start) - 1


def empty_table() -> ConjunctionTable:
    zero = np.zeros(1, dtype=np.int64)
    return ConjunctionTable(zero, np.empty(0, np.int32), zero.copy(), np.empty(0, np.int64))


def concat_tables(tables: list[ConjunctionTable]) -> ConjunctionTable:
    tables = [table for table in tables if table.conjunctions] or [empty_table()]
    term_starts, owner_starts = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)]
    term_offset = owner_offset = 0
    for table in tables:
        term_starts.append(table.term_start[1:] + term_offset)
        owner_starts.append(table.owner_start[1:] + owner_offset)
        term_offset += len(table.terms)
        owner_offset += len(table.owners)
    return ConjunctionTable(
        np.concatenate(term_starts),
        np.concatenate([table.terms for table in tables]).astype(np.int32, copy=False),
        np.concatenate(owner_starts),
        np.concatenate([table.owners for table in tables]).astype(np.int64, copy=False),
    )


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` via one sort: numpy 2.4's unique is 10-30x slower on these sizes."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, e)`` for each pair, vectorized."""
    lengths = (ends - starts).astype(np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(starts.astype(np.int64) - np.cumsum(lengths) + lengths, lengths)
    return offsets + np.arange(total, dtype=np.int64)


def _mix64(values: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: a well-spread 64-bit hash of each value."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


_TERM_BIAS = np.int64(2**31)  # shifts int32 (signed) term codes into 0..2**32-1 for packing
_LOW32 = np.int64(0xFFFFFFFF)


def _canonical_terms(table: ConjunctionTable) -> np.ndarray:
    """The terms sorted within each conjunction (one sort of packed (conjunction, term) keys)."""
    lengths = np.diff(table.term_start)
    conjunction_of_entry = np.repeat(np.arange(table.conjunctions, dtype=np.int64), lengths)
    packed = (conjunction_of_entry << np.int64(32)) | (table.terms.astype(np.int64) + _TERM_BIAS)
    packed.sort()
    return ((packed & _LOW32) - _TERM_BIAS).astype(np.int32)


def _duplicate_leaders(terms: np.ndarray, term_start: np.ndarray) -> np.ndarray:
    """For each conjunction, the index of the first conjunction with exactly the same terms.

    Conjunctions are grouped by a 64-bit hash of their (sorted) terms; every grouping is then
    verified term by term, and any genuine collision falls back to exact grouping with tuples.
    """
    count = len(term_start) - 1
    lengths = np.diff(term_start)
    position = np.arange(len(terms), dtype=np.int64) - np.repeat(term_start[:-1], lengths)
    mixed = _mix64(terms.astype(np.int64) + (position << np.int64(32)))
    with np.errstate(over="ignore"):
        # Every conjunction has at least one term, so reduceat sums exactly each conjunction's
        # terms.
        hashes = np.add.reduceat(mixed, term_start[:-1]) ^ _mix64(lengths)
    order = np.argsort(hashes, kind="stable")
    sorted_hashes = hashes[order]
    new_group = np.ones(count, dtype=bool)
    new_group[1:] = sorted_hashes[1:] != sorted_hashes[:-1]
    group_first = order[np.maximum.accumulate(np.where(new_group, np.arange(count), 0))]
    leaders = np.empty(count, dtype=np.int64)
    leaders[order] = group_first
    suspects = np.flatnonzero(leaders != np.arange(count))
    if suspects.size:
        if (lengths[suspects] != lengths[leaders[suspects]]).any():
            return _exact_leaders(terms, term_start)
        entries = ranges(term_start[suspects], term_start[suspects + 1])
        shift = np.repeat(term_start[leaders[suspects]] - term_start[suspects], lengths[suspects])
        if (terms[entries] != terms[entries + shift]).any():
            return _exact_leaders(terms, term_start)
    return leaders


def _exact_leaders(terms: np.ndarray, term_start: np.ndarray) -> np.ndarray:
    first_of: dict[tuple[int, ...], int] = {}
    leaders = np.empty(len(term_start) - 1, dtype=np.int64)
    for index in range(len(term_start) - 1):
        key = tuple(terms[term_start[index] : term_start[index + 1]].tolist())
        leaders[index] = first_of.setdefault(key, index)
    return leaders


class CompiledIndex:
    """The immutable main index (see the module docstring). Safe to share between processes."""

    __slots__ = ("buffer", "header", *SECTIONS)

    def __init__(self, buffer: np.ndarray, header: np.ndarray) -> None:
        self.buffer = buffer  # int32, every section back to back
        self.header = header  # int64[len(SECTIONS) + 1]: section boundaries in ``buffer``
        for index, name in enumerate(SECTIONS):
            setattr(self, name, buffer[header[index] : header[index + 1]])

    @classmethod
    def from_sections(cls, sections: list[np.ndarray]) -> CompiledIndex:
        sizes = [len(section) for section in sections]
        header = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        buffer = np.concatenate([section.astype(np.int32, copy=False) for section in sections])
        return cls(buffer.astype(np.int32, copy=False), header)

    @classmethod
    def empty(cls, term_count: int = 0) -> CompiledIndex:
        zero = np.zeros(1, np.int32)
        nothing = np.empty(0, np.int32)
        per_term = np.zeros(term_count, np.int32)
        return cls.from_sections(
            [np.zeros(term_count + 1, np.int32), per_term, per_term, zero, nothing, zero, nothing,
             nothing]
        )

    @property
    def term_count(self) -> int:
        return len(self.post_start) - 1

    @property
    def conjunction_count(self) -> int:
        return len(self.rest_start) - 1

    @property
    def subscription_count(self) -> int:
        return len(self.members)

    @property
    def nbytes(self) -> int:
        return int(self.buffer.nbytes + self.header.nbytes)

    def contains(self, sub_id: int) -> bool:
        members = self.members
        position = int(np.searchsorted(members, sub_id))
        return position < len(members) and int(members[position]) == sub_id

    def to_table(self, without: np.ndarray | None = None) -> ConjunctionTable:
        """The conjunctions back as a table, leaving out the owners in ``without`` (sorted ids)."""
        conjunctions = self.conjunction_count
        access = np.repeat(np.arange(self.term_count, dtype=np.int32), np.diff(self.post_start))
        rest_lengths = np.diff(self.rest_start).astype(np.int64)
        term_start = np.zeros(conjunctions + 1, dtype=np.int64)
        np.cumsum(rest_lengths + 1, out=term_start[1:])
        terms = np.empty(int(term_start[-1]), dtype=np.int32)
        terms[term_start[:-1]] = access
        is_rest = np.ones(len(terms), dtype=bool)
        is_rest[term_start[:-1]] = False
        codes = self.rest_terms.astype(np.int64)
        negative = codes < 0
        plain = np.where(negative, -codes - 1, codes) & TERM_MASK  # drop the phrase flag
        terms[is_rest] = np.where(negative, -plain - 1, plain)
        owners = self.owner_ids.astype(np.int64)
        owner_start = self.owner_start.astype(np.int64)
        table = ConjunctionTable(term_start, terms, owner_start, owners)
        if without is not None and len(without) and len(owners):
            table = _drop_owners(table, without)
        return table


def _drop_owners(table: ConjunctionTable, without: np.ndarray) -> ConjunctionTable:
    keep = ~np.isin(table.owners, without)
    owner_conjunction = np.repeat(np.arange(table.conjunctions), np.diff(table.owner_start))
    kept_per_conjunction = np.bincount(owner_conjunction[keep], minlength=table.conjunctions)
    alive = kept_per_conjunction > 0
    owner_start = np.zeros(int(alive.sum()) + 1, dtype=np.int64)
    np.cumsum(kept_per_conjunction[alive], out=owner_start[1:])
    term_lengths = np.diff(table.term_start)[alive]
    term_start = np.zeros(len(term_lengths) + 1, dtype=np.int64)
    np.cumsum(term_lengths, out=term_start[1:])
    terms = table.terms[np.repeat(alive, np.diff(table.term_start))]
    return ConjunctionTable(term_start, terms, owner_start, table.owners[keep])


def build_compiled(
    table: ConjunctionTable, estimates: np.ndarray, kinds: np.ndarray, term_count: int
) -> CompiledIndex:
    """Build the main index for ``table``: dedupe, choose access predicates, order, pack.

    ``estimates[t]`` is the estimated share of articles containing term t (lower is more selective)
    and ``kinds[t]`` its kind; both cover at least ``term_count`` terms. Every sort is a single
    numpy sort of packed int64 keys (conjunction rank in the high bits), which is several times
    faster than a multi-key lexsort.
    """
    if table.conjunctions == 0:
        return CompiledIndex.empty(term_count)
    if term_count >= 2**30 or table.conjunctions >= 2**31:
        raise ValueError("index too large for its 32-bit layout")
    terms = _canonical_terms(table)
    term_start = table.term_start
    leaders = _duplicate_leaders(terms, term_start)
    is_leader = leaders == np.arange(table.conjunctions)
    new_id = np.cumsum(is_leader) - 1  # id among unique conjunctions (valid for leaders)
    count = int(is_leader.sum())

    # Owners of duplicates move to their leader; each (conjunction, subscription) pair once.
    # Owners are ranked by id for grouping (np.unique with return_inverse is the fast path of
    # unique).
    members, owner_slots = np.unique(table.owners, return_inverse=True)
    if members[0] < 0 or members[-1] >= 2**31:
        raise ValueError("subscription ids must be in 0 <= id < 2**31")
    conjunction_of_owner = np.repeat(np.arange(table.conjunctions), np.diff(table.owner_start))
    owner_conjunction = new_id[leaders[conjunction_of_owner]]
    pairs = sorted_unique((owner_conjunction << np.int64(32)) | owner_slots.astype(np.int64))
    owner_conjunction, owner_slots = pairs >> np.int64(32), pairs & _LOW32

    # Terms of the unique conjunctions (still sorted within each).
    lengths = np.diff(term_start)[is_leader]
    terms = terms[np.repeat(is_leader, np.diff(term_start))]
    unique_start = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=unique_start[1:])
    entry_conjunction = np.repeat(np.arange(count, dtype=np.int64), lengths)

    # Rank terms by selectivity once; a conjunction's access predicate is then the positive
    # word/prefix of lowest rank (ties broken by term id, so builds are deterministic).
    by_selectivity = np.lexsort((np.arange(term_count), estimates[:term_count]))
    rank_of_term = np.empty(term_count, dtype=np.int64)
    rank_of_term[by_selectivity] = np.arange(term_count)
    is_negative = terms < 0
    term_ids = np.where(is_negative, -terms.astype(np.int64) - 1, terms.astype(np.int64))
    is_phrase = kinds[term_ids] == KIND_PHRASE
    eligible = ~is_negative & ~is_phrase
    entry_rank = rank_of_term[term_ids]
    best = np.minimum.reduceat(np.where(eligible, entry_rank, term_count), unique_start[:-1])
    if (best >= term_count).any():
        raise ValueError("a conjunction has no positive word or prefix to file it under")
    access = by_selectivity[best]
    is_access = eligible & (term_ids == access[entry_conjunction])

    # Conjunctions ordered by access term, then run: 0 nothing left, 1 words/prefixes only, 2 other.
    rest_lengths = lengths - 1
    is_rest = ~is_access
    term_class = np.where(is_negative, 2, np.where(is_phrase, 1, 0)).astype(np.int64)
    complex_terms = np.bincount(entry_conjunction[is_rest & (term_class > 0)], minlength=count)
    run = np.where(rest_lengths == 0, 0, np.where(complex_terms == 0, 1, 2)).astype(np.int64)
    conjunction_order = np.argsort((access << np.int64(2)) | run, kind="stable")
    rank = np.empty(count, dtype=np.int64)
    rank[conjunction_order] = np.arange(count)

    # Remaining terms: words/prefixes (most selective first), then phrases, then NOT terms.
    rest_keys = (
        (rank[entry_conjunction[is_rest]] << np.int64(32))
        | (term_class[is_rest] << np.int64(30))
        | entry_rank[is_rest]
    )
    rest_keys.sort()
    rest_ids = by_selectivity[rest_keys & np.int64(2**30 - 1)]
    rest_class = (rest_keys >> np.int64(30)) & np.int64(3)
    rest_codes = rest_ids | np.where(kinds[rest_ids] == KIND_PHRASE, PHRASE_FLAG, 0)
    rest_terms = np.where(rest_class == 2, -rest_codes - 1, rest_codes)
    rest_start = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(rest_lengths[conjunction_order], out=rest_start[1:])

    owner_keys = (rank[owner_conjunction] << np.int64(32)) | owner_slots
    owner_keys.sort()
    owner_counts = np.bincount(owner_conjunction, minlength=count)[conjunction_order]
    owner_start = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(owner_counts, out=owner_start[1:])

    runs = np.bincount(access * 3 + run, minlength=3 * term_count).reshape(term_count, 3)
    post_start = np.zeros(term_count + 1, dtype=np.int64)
    np.cumsum(runs.sum(axis=1), out=post_start[1:])
    immediate_end = post_start[:-1] + runs[:, 0]
    plain_end = immediate_end + runs[:, 1]
    return CompiledIndex.from_sections(
        [post_start, immediate_end, plain_end, rest_start, rest_terms, owner_start,
         members[owner_keys & _LOW32], members]
    )
