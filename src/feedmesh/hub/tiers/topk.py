"""Each subscription's newest entries, for a million subscriptions, in numpy.

A subscription holds the ``keep`` largest entry ids it matched (entry ids grow with the time the
crawler first saw an entry, so "largest" is "newest"). Rows of ``WIDTH`` slots hold them for every
subscription (4 bytes a slot: 40 MB for 1M subscriptions), 0 meaning empty; the few subscriptions
that keep more than ``WIDTH`` entries live in a dict of sorted arrays.

Each row is a ring kept in ascending order from ``head`` (the slot of the smallest id, the next to
go), and ``newest`` holds each row's largest id. Entries almost always arrive newer than everything
a row holds, so the common insertion touches ``newest`` and ``head`` (small arrays that stay in
cache) and writes one slot: with Cobra-style subscriptions an article touches 14,000 rows of a
million, and a cache miss per row read would cost milliseconds. Anything else (a replay, an older
entry, a duplicate) takes the general path: replace the smallest if larger and absent, re-sort.

Insertion is therefore a *set* operation (add if larger than the row's smallest, never twice):
idempotent and order-independent, so replaying a log, or applying it on top of a checkpoint that
already holds part of it, gives the same state. That is what makes crash recovery simple.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_ENTRY_ID", "WIDTH", "TopK"]

WIDTH = 10
MAX_ENTRY_ID = 2**31 - 1
"""Entry ids are stored in 32 bits (the crawler's store counts from 1; two billion entries)."""

try:  # numba is the optional ``fast`` extra; numpy does the same, slower
    from feedmesh.hub.tiers.topk_kernel import insert_rows as _insert_rows
except ImportError:
    _insert_rows = None


class TopK:
    def __init__(self, capacity: int = 1024) -> None:
        self.rows = np.zeros((capacity, WIDTH), dtype=np.int32)
        self.head = np.zeros(capacity, dtype=np.int8)
        self.newest = np.zeros(capacity, dtype=np.int32)
        self.extra: dict[int, np.ndarray] = {}

    @property
    def capacity(self) -> int:
        return len(self.rows)

    def ensure(self, sub_id: int) -> None:
        if sub_id < len(self.rows):
            return
        capacity = max(1, len(self.rows))
        while capacity <= sub_id:
            capacity *= 2
        self._resize(capacity)

    def _resize(self, capacity: int) -> None:
        keep = min(capacity, len(self.rows))
        for name in ("rows", "head", "newest"):
            array = getattr(self, name)
            resized = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
            resized[:keep] = array[:keep]
            setattr(self, name, resized)

    def load_rows(self, rows: np.ndarray) -> None:
        """Adopt saved rows (any slot order): sort each ascending, so head is 0 everywhere."""
        self.rows = np.sort(rows.astype(np.int32), axis=1)
        self.head = np.zeros(len(self.rows), dtype=np.int8)
        self.newest = self.rows[:, -1].copy()

    def insert(self, entry_id: int, ids: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
        """Add ``entry_id`` to subscriptions ``ids`` (each keeping ``keep[i]``; None when none
        keeps more than ``WIDTH``); returns the ids whose newest entries changed."""
        if not 0 < entry_id <= MAX_ENTRY_ID:
            raise ValueError(f"entry id {entry_id} is outside 1..{MAX_ENTRY_ID}")
        changed = []
        wide = keep > WIDTH if keep is not None else None
        if wide is not None and wide.any():
            for sub_id, k in zip(ids[wide].tolist(), keep[wide].tolist(), strict=True):
                if self._insert_extra(sub_id, entry_id, k):
                    changed.append(sub_id)
            ids = ids[~wide]
        if len(ids) and _insert_rows is not None:
            out = np.empty(len(ids), dtype=np.int64)
            changed_narrow = out[: _insert_rows(self.rows, self.head, self.newest, ids,
                                                entry_id, out)]
        elif len(ids):
            changed_narrow = self._insert_numpy(entry_id, ids)
        else:
            changed_narrow = ids
        if changed:
            return np.concatenate([changed_narrow, np.array(changed, dtype=np.int64)])
        return changed_narrow

    def _insert_numpy(self, entry_id: int, ids: np.ndarray) -> np.ndarray:
        """The same as the compiled loop: appends vectorized, the rest one row at a time."""
        newer = entry_id > self.newest[ids]
        append = ids[newer]
        self.rows[append, self.head[append]] = entry_id
        self.head[append] = (self.head[append] + 1) % WIDTH
        self.newest[append] = entry_id
        changed = [append]
        for row in ids[~newer].tolist():
            values = self.rows[row]
            if entry_id in values or entry_id < values.min():
                continue
            values[values.argmin()] = entry_id
            self.rows[row] = np.sort(values)
            self.head[row] = 0
            self.newest[row] = self.rows[row, -1]
            changed.append(np.array([row], dtype=np.int64))
        return np.concatenate(changed).astype(np.int64)

    def _insert_extra(self, sub_id: int, entry_id: int, keep: int) -> bool:
        held = self.extra.get(sub_id)
        if held is None:
            held = self._row_values(sub_id).astype(np.int64)
        if entry_id in held or (len(held) >= keep and entry_id < held[0]):
            self.extra[sub_id] = held
            return False
        held = np.sort(np.append(held, entry_id))[-keep:]
        self.extra[sub_id] = held
        return True

    def _row_values(self, sub_id: int) -> np.ndarray:
        if sub_id >= len(self.rows):
            return np.zeros(0, dtype=np.int32)
        row = self.rows[sub_id]
        return np.sort(row[row > 0])

    def widen(self, sub_id: int) -> None:
        """The subscription now keeps more than ``WIDTH``: move its row to the side table."""
        if sub_id not in self.extra:
            self.extra[sub_id] = self._row_values(sub_id).astype(np.int64)

    def newest_ids(self, sub_id: int, keep: int) -> list[int]:
        """The subscription's newest ``keep`` entry ids, newest first."""
        held = self.extra.get(sub_id)
        if held is None:
            held = self._row_values(sub_id)
        return sorted(held.tolist(), reverse=True)[:keep]


    def count(self, sub_id: int) -> int:
        held = self.extra.get(sub_id)
        if held is not None:
            return len(held)
        return int((self.rows[sub_id] > 0).sum()) if sub_id < len(self.rows) else 0

    def pairs(self) -> int:
        """(subscription, entry) pairs held, every subscription together (a scan of the rows:
        for metrics, not for each article)."""
        return int(np.count_nonzero(self.rows)) + sum(len(a) for a in self.extra.values())

    def drop(self, sub_id: int) -> None:
        self.extra.pop(sub_id, None)
        if sub_id < len(self.rows):
            self.rows[sub_id] = 0
            self.head[sub_id] = 0
            self.newest[sub_id] = 0

    def copy_slice(self, into: TopK, start: int, stop: int) -> int:
        """Copy rows ``start`` to ``stop`` (clipped to the capacity) into ``into``, resized to
        this capacity first; returns where the copy stopped. With :meth:`copy_extra` after the
        last slice, it builds a copy between other work: for two million rows, fresh arrays cost
        ~170 ms of page faults and a copy into kept ones ~7 ms, 0.2 ms a slice of 65,536.

        Rows changed between two slices are copied in whichever state they had when their slice
        was taken. Insertion being a set operation, that is still a state from which replaying the
        log after the position where the copy began rebuilds exactly the present one."""
        if into.capacity != self.capacity:
            into._resize(self.capacity)
        stop = min(stop, self.capacity)
        into.rows[start:stop] = self.rows[start:stop]
        into.head[start:stop] = self.head[start:stop]
        into.newest[start:stop] = self.newest[start:stop]
        return stop

    def copy_extra(self, into: TopK) -> None:
        """Copy the wide subscriptions' side table (small) into ``into``."""
        into.extra = {sub_id: values.copy() for sub_id, values in self.extra.items()}

    def live_entries(self) -> np.ndarray:
        """Every entry id some subscription holds (for garbage collection)."""
        parts = [np.unique(self.rows).astype(np.int64), *list(self.extra.values())]
        live = np.unique(np.concatenate(parts))
        return live[live > 0]

    def nbytes(self) -> int:
        return (self.rows.nbytes + self.head.nbytes + self.newest.nbytes
                + sum(a.nbytes for a in self.extra.values()))
