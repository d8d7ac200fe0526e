"""Each subscription's newest entries, for a million subscriptions, in numpy.

A subscription holds the ``keep`` largest entry ids it matched (entry ids grow with the time the
crawler first saw an entry, so "largest" is "newest"). Rows of ``WIDTH`` slots hold them for every
subscription (8 bytes a slot: 80 MB for 1M subscriptions), unordered, 0 meaning empty; the few
subscriptions that keep more than ``WIDTH`` entries live in a dict of sorted arrays.

Inserting an entry into the rows of the 1,400 subscriptions it matched is a handful of vectorized
operations. Insertion is a *set* operation (add if larger than the row's smallest, never twice),
so it is idempotent and order-independent: replaying a log, or applying it on top of a checkpoint
that already holds part of it, gives the same state. That is what makes crash recovery simple.
"""

from __future__ import annotations

import numpy as np

__all__ = ["WIDTH", "TopK"]

WIDTH = 10

try:  # numba is the optional ``fast`` extra; numpy does the same, slower
    from feedmesh.hub.topk_kernel import insert_rows as _insert_rows
except ImportError:
    _insert_rows = None


class TopK:
    def __init__(self, capacity: int = 1024) -> None:
        self.rows = np.zeros((capacity, WIDTH), dtype=np.int64)
        self.extra: dict[int, np.ndarray] = {}

    @property
    def capacity(self) -> int:
        return len(self.rows)

    def ensure(self, sub_id: int) -> None:
        if sub_id < len(self.rows):
            return
        capacity = len(self.rows)
        while capacity <= sub_id:
            capacity *= 2
        rows = np.zeros((capacity, WIDTH), dtype=np.int64)
        rows[: len(self.rows)] = self.rows
        self.rows = rows

    def insert(self, entry_id: int, ids: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
        """Add ``entry_id`` to subscriptions ``ids`` (each keeping ``keep[i]``; None when none
        keeps more than ``WIDTH``); returns the ids whose newest entries changed."""
        changed = []
        wide = keep > WIDTH if keep is not None else None
        if wide is not None and wide.any():
            for sub_id, k in zip(ids[wide].tolist(), keep[wide].tolist(), strict=True):
                if self._insert_extra(sub_id, entry_id, k):
                    changed.append(sub_id)
            ids = ids[~wide]
        if len(ids) and _insert_rows is not None:
            out = np.empty(len(ids), dtype=np.int64)
            changed_narrow = out[: _insert_rows(self.rows, ids, entry_id, out)]
        elif len(ids):
            rows = self.rows[ids]
            slot = rows.argmin(axis=1)
            smallest = rows[np.arange(len(ids)), slot]
            fresh = (smallest < entry_id) & ~(rows == entry_id).any(axis=1)
            self.rows[ids[fresh], slot[fresh]] = entry_id
            changed_narrow = ids[fresh]
        else:
            changed_narrow = ids
        if changed:
            return np.concatenate([changed_narrow, np.array(changed, dtype=np.int64)])
        return changed_narrow

    def _insert_extra(self, sub_id: int, entry_id: int, keep: int) -> bool:
        held = self.extra.get(sub_id)
        if held is None:
            held = self.rows[sub_id][self.rows[sub_id] > 0] if sub_id < len(self.rows) else \
                np.zeros(0, dtype=np.int64)
            held = np.sort(held)
        if entry_id in held or (len(held) >= keep and entry_id < held[0]):
            self.extra[sub_id] = held
            return False
        held = np.sort(np.append(held, entry_id))[-keep:]
        self.extra[sub_id] = held
        return True

    def newest(self, sub_id: int, keep: int) -> list[int]:
        """The subscription's newest ``keep`` entry ids, newest first."""
        held = self.extra.get(sub_id)
        if held is None:
            if sub_id >= len(self.rows):
                return []
            row = self.rows[sub_id]
            held = row[row > 0]
        return sorted(held.tolist(), reverse=True)[:keep]

    def count(self, sub_id: int) -> int:
        held = self.extra.get(sub_id)
        if held is not None:
            return len(held)
        return int((self.rows[sub_id] > 0).sum()) if sub_id < len(self.rows) else 0

    def drop(self, sub_id: int) -> None:
        self.extra.pop(sub_id, None)
        if sub_id < len(self.rows):
            self.rows[sub_id] = 0

    def live_entries(self) -> np.ndarray:
        """Every entry id some subscription holds (for garbage collection)."""
        parts = [np.unique(self.rows)] + list(self.extra.values())
        live = np.unique(np.concatenate(parts))
        return live[live > 0]

    def nbytes(self) -> int:
        return self.rows.nbytes + sum(a.nbytes for a in self.extra.values())
