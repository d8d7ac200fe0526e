"""The compact, immutable main index: a few int32 arrays in one buffer.

Layout (``C`` conjunctions, ``V`` terms, ``S`` subscriptions)::

    post_start[V+1]   conjunctions filed under term t are post_start[t] .. post_start[t+1]-1
    rest_start[C+1]   the remaining terms of conjunction c are rest_terms[rest_start[c]:...]
    rest_terms[R]     positive words/prefixes (most selective first), then phrases, then NOT terms
                      (a NOT term t is stored as -(t+1))
    owner_start[C+1]  the subscriptions of conjunction c are owner_slots[owner_start[c]:...]
    owner_slots[O]    positions in members[]
    members[S]        the subscription ids, sorted (membership test, and slot -> id)

Within a term's range, conjunctions with nothing left to verify come first. Identical conjunctions
(hence identical queries) are stored once, with every owner. Building is vectorized (numpy sorts over
the flat :class:`ConjunctionTable`), so compacting a million subscriptions takes well under a second,
and :meth:`CompiledIndex.to_table` gives the table back for the next compaction.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from feedmesh.match.index.vocabulary import KIND_PHRASE

__all__ = ["CompiledIndex", "ConjunctionTable", "build_compiled", "concat_tables", "empty_table"]

SECTIONS = ("post_start", "rest_start", "rest_terms", "owner_start", "owner_slots", "members")


class ConjunctionTable(NamedTuple):
    """Conjunctions as flat arrays: the input of a build, and what a compiled index turns back into."""

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


def _canonical_terms(table: ConjunctionTable) -> tuple[np.ndarray, np.ndarray]:
    """Terms sorted within each conjunction, and the conjunction index of every term entry."""
    lengths = np.diff(table.term_start)
    conjunction_of_entry = np.repeat(np.arange(table.conjunctions, dtype=np.int64), lengths)
    order = np.lexsort((table.terms, conjunction_of_entry))
    return table.terms[order], conjunction_of_entry


def _duplicate_leaders(terms: np.ndarray, term_start: np.ndarray) -> np.ndarray:
    """For each conjunction, the index of the first conjunction with exactly the same terms.

    Conjunctions are grouped by a 64-bit hash of their (sorted) terms; every grouping is then verified
    term by term, and any genuine collision falls back to exact grouping with tuples.
    """
    count = len(term_start) - 1
    lengths = np.diff(term_start)
    position = np.arange(len(terms), dtype=np.int64) - np.repeat(term_start[:-1], lengths)
    mixed = _mix64(terms.astype(np.int64) + (position << np.int64(32)))
    with np.errstate(over="ignore"):
        # Every conjunction has at least one term, so reduceat sums exactly each conjunction's terms.
        hashes = np.add.reduceat(mixed, term_start[:-1]) ^ _mix64(lengths)
    order = np.lexsort((np.arange(count), hashes))
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
    def empty(cls) -> CompiledIndex:
        zero = np.zeros(1, np.int32)
        nothing = np.empty(0, np.int32)
        return cls.from_sections([zero, zero, nothing, zero, nothing, nothing])

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
        terms[is_rest] = self.rest_terms
        owners = self.members[self.owner_slots].astype(np.int64)
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
    and ``kinds[t]`` its kind; both cover at least ``term_count`` terms.
    """
    if table.conjunctions == 0:
        return CompiledIndex.from_sections(
            [np.zeros(term_count + 1, np.int32), np.zeros(1, np.int32), np.empty(0, np.int32),
             np.zeros(1, np.int32), np.empty(0, np.int32), np.empty(0, np.int32)]
        )
    terms, conjunction_of_entry = _canonical_terms(table)
    term_start = table.term_start
    leaders = _duplicate_leaders(terms, term_start)

    # Owners of duplicates move to their leader; each (leader, subscription) pair is kept once.
    owner_conjunction = leaders[np.repeat(np.arange(table.conjunctions), np.diff(table.owner_start))]
    unique_conjunctions = np.flatnonzero(leaders == np.arange(table.conjunctions))
    new_id = np.full(table.conjunctions, -1, dtype=np.int64)
    new_id[unique_conjunctions] = np.arange(len(unique_conjunctions))
    owner_conjunction = new_id[owner_conjunction]
    members, owner_slots = np.unique(table.owners, return_inverse=True)
    pair_order = np.lexsort((owner_slots, owner_conjunction))
    owner_conjunction, owner_slots = owner_conjunction[pair_order], owner_slots[pair_order]
    keep = np.ones(len(owner_slots), dtype=bool)
    keep[1:] = (owner_conjunction[1:] != owner_conjunction[:-1]) | (owner_slots[1:] != owner_slots[:-1])
    owner_conjunction, owner_slots = owner_conjunction[keep], owner_slots[keep]

    # Terms of the unique conjunctions.
    entry_alive = np.repeat(leaders == np.arange(table.conjunctions), np.diff(term_start))
    terms = terms[entry_alive]
    entry_conjunction = new_id[conjunction_of_entry[entry_alive]]
    count = len(unique_conjunctions)

    # Access predicate: the positive word/prefix with the lowest estimated article frequency.
    is_negative = terms < 0
    term_ids = np.where(is_negative, -terms.astype(np.int64) - 1, terms)
    is_phrase = kinds[term_ids] == KIND_PHRASE
    estimate = estimates[term_ids]
    eligible = ~is_negative & ~is_phrase
    access_key = np.where(eligible, estimate, np.inf)
    by_selectivity = np.lexsort((term_ids, access_key, entry_conjunction))
    first_entry = np.ones(len(terms), dtype=bool)
    first_entry[1:] = entry_conjunction[by_selectivity][1:] != entry_conjunction[by_selectivity][:-1]
    access_entry = by_selectivity[first_entry]
    if not eligible[access_entry].all():
        raise ValueError("a conjunction has no positive word or prefix to file it under")
    access = term_ids[access_entry]

    # Remaining terms: words/prefixes (most selective first), then phrases, then NOT terms.
    is_rest = np.ones(len(terms), dtype=bool)
    is_rest[access_entry] = False
    rest_lengths = np.bincount(entry_conjunction[is_rest], minlength=count)
    conjunction_order = np.lexsort((rest_lengths > 0, access))
    rank = np.empty(count, dtype=np.int64)
    rank[conjunction_order] = np.arange(count)
    term_class = np.where(is_negative, 2, np.where(is_phrase, 1, 0))
    rest_entries = np.flatnonzero(is_rest)
    rest_order = np.lexsort(
        (term_ids[rest_entries], estimate[rest_entries], term_class[rest_entries],
         rank[entry_conjunction[rest_entries]])
    )
    rest_terms = terms[rest_entries[rest_order]]
    rest_start = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(rest_lengths[conjunction_order], out=rest_start[1:])

    owner_order = np.lexsort((owner_slots, rank[owner_conjunction]))
    owner_counts = np.bincount(owner_conjunction, minlength=count)[conjunction_order]
    owner_start = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(owner_counts, out=owner_start[1:])

    post_start = np.zeros(term_count + 1, dtype=np.int64)
    np.cumsum(np.bincount(access, minlength=term_count), out=post_start[1:])
    if members[0] < 0 or members[-1] >= 2**31:
        raise ValueError("subscription ids must be in 0 <= id < 2**31")
    return CompiledIndex.from_sections(
        [post_start, rest_start, rest_terms, owner_start, owner_slots[owner_order], members]
    )
