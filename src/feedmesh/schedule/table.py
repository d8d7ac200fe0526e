"""The arrays behind the scheduler: per-feed rows, per-host rows, the heap and the plan pool.

:mod:`.kernels` works on these arrays; this module owns their allocation (capacity doubles when it
runs out), the mapping from host names to rows, and where each feed's plan offsets live in one
shared pool. Everything is plain numpy, so a snapshot is a copy of a few arrays.
"""

from __future__ import annotations

import math

import numpy as np

from . import kernels
from .kernels import (
    F_FIELDS,
    FLAG_HELD,
    H_BLOCKED,
    H_FIELDS,
    H_LAST,
    H_LATENCY,
    H_QUEUE,
    H_SPACING,
    HI_COUNT,
    HI_FIELDS,
    HI_HEAD,
    HI_HELD,
    HI_IN_FLIGHT,
    HI_PER_MINUTE,
    HI_URGENT,
    I_FIELDS,
    I_HEAP_POS,
    I_PLAN_CAP,
    I_PLAN_COUNT,
    I_PLAN_START,
)

__all__ = ["FeedTable", "HostTable"]

_NAN = math.nan
_NEVER = -1e18  # a host never fetched: ready at any time


class FeedTable:
    """Per-slot fields (``F``, ``I``), the due-time heap, and the pool of plan offsets."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = 0
        self.F = np.zeros((0, F_FIELDS))
        self.I = np.zeros((0, I_FIELDS), dtype=np.int64)
        self.heap_keys = np.zeros(0)
        self.heap_slots = np.zeros(0, dtype=np.int64)
        self.heap_n = np.zeros(1, dtype=np.int64)
        self.pool = np.zeros(256)
        self.pool_used = 0
        self.out = np.zeros(0, dtype=np.int64)
        self.grow(capacity)

    def grow(self, capacity: int) -> None:
        """Make room for ``capacity`` slots (doubling), keeping every value."""
        if capacity <= self.capacity:
            return
        new = max(capacity, 2 * self.capacity, 64)
        F = np.full((new, F_FIELDS), _NAN)
        F[: self.capacity] = self.F
        I = np.zeros((new, I_FIELDS), dtype=np.int64)
        I[: self.capacity] = self.I
        I[self.capacity:, I_HEAP_POS] = -1
        keys = np.zeros(new)
        keys[: self.capacity] = self.heap_keys
        slots = np.zeros(new, dtype=np.int64)
        slots[: self.capacity] = self.heap_slots
        self.F, self.I, self.heap_keys, self.heap_slots = F, I, keys, slots
        self.out = np.zeros(new, dtype=np.int64)
        self.capacity = new

    def reset(self, slot: int) -> None:
        """A fresh row for a new feed (out of the heap, no plan, no history)."""
        self.remove_from_heap(slot)
        self.F[slot] = _NAN
        self.F[slot, kernels.F_DUE] = math.inf
        self.F[slot, kernels.F_BACKOFF] = 0.0
        self.F[slot, kernels.F_WEIGHT] = 1.0
        cap = self.I[slot, I_PLAN_CAP]
        start = self.I[slot, I_PLAN_START]
        self.I[slot] = 0
        self.I[slot, I_HEAP_POS] = -1
        self.I[slot, I_PLAN_START] = start  # keep the pool room the slot already has
        self.I[slot, I_PLAN_CAP] = cap
        self.I[slot, kernels.I_FLAGS] = FLAG_HELD

    # -- heap ---------------------------------------------------------------------------------
    def remove_from_heap(self, slot: int) -> None:
        kernels.heap_remove(self.heap_keys, self.heap_slots, self.heap_n, self.I, slot)

    def shift_heap(self, delta: float) -> None:
        n = int(self.heap_n[0])
        self.heap_keys[:n] += delta  # a uniform shift keeps the heap order

    # -- plans ----------------------------------------------------------------------------------
    def set_plans(self, slots: np.ndarray, period_s: np.ndarray, offsets: np.ndarray,
                  origin_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Store plans with ``m`` offsets each (``offsets[g, m]``, rows sorted, in [0, period)).

        Returns (had a plan, the plan differs from it) per row."""
        F, I = self.F, self.I
        m = offsets.shape[1]
        had = np.isfinite(F[slots, kernels.F_PLAN_PERIOD])
        same = had & (F[slots, kernels.F_PLAN_PERIOD] == period_s) & \
            (F[slots, kernels.F_PLAN_ORIGIN] == origin_s) & (I[slots, I_PLAN_COUNT] == m)
        if same.any():
            rows = np.flatnonzero(same)
            index = I[slots[rows], I_PLAN_START][:, None] + np.arange(m)[None, :]
            same[rows] = (self.pool[index] == offsets[rows]).all(axis=1)
        need = I[slots, I_PLAN_CAP] < m
        fresh = int(need.sum())
        if fresh:
            if self.pool_used + fresh * m > len(self.pool):
                self._compact(extra=fresh * m)
            I[slots[need], I_PLAN_START] = self.pool_used + np.arange(fresh) * m
            I[slots[need], I_PLAN_CAP] = m
            self.pool_used += fresh * m
        index = I[slots, I_PLAN_START][:, None] + np.arange(m)[None, :]
        self.pool[index] = offsets
        I[slots, I_PLAN_COUNT] = m
        F[slots, kernels.F_PLAN_PERIOD] = period_s
        F[slots, kernels.F_PLAN_ORIGIN] = origin_s
        return had, ~same

    def plan_offsets(self, slot: int) -> np.ndarray:
        start, count = self.I[slot, I_PLAN_START], self.I[slot, I_PLAN_COUNT]
        return self.pool[start:start + count]

    def clear_plan(self, slot: int) -> None:
        self.F[slot, kernels.F_PLAN_PERIOD] = _NAN
        self.I[slot, I_PLAN_COUNT] = 0

    def _compact(self, extra: int) -> None:
        """Rebuild the pool with only the rooms in use (and space for ``extra`` more)."""
        I = self.I
        rooms = np.flatnonzero(I[:, I_PLAN_CAP] > 0)
        live = int(I[rooms, I_PLAN_CAP].sum())
        pool = np.zeros(max(2 * (live + extra), 256))  # room to grow before the next rebuild
        at = 0
        for slot in rooms:
            start, cap = I[slot, I_PLAN_START], I[slot, I_PLAN_CAP]
            pool[at:at + cap] = self.pool[start:start + cap]
            I[slot, I_PLAN_START] = at
            at += cap
        self.pool = pool
        self.pool_used = at


class HostTable:
    """Per-host politeness rows: last fetch, spacing, server-requested pause, per-minute ring."""

    def __init__(self, min_spacing_s: float, max_per_minute: int, *,
                 max_spacing_s: float = 60.0, concurrency: int = 2,
                 delay_factor: float = 1.0) -> None:
        self.default_spacing_s = float(min_spacing_s)
        self.default_per_minute = int(max_per_minute)
        self.min_spacing_s = float(min_spacing_s)
        self.max_spacing_s = max(float(max_spacing_s), self.min_spacing_s)
        self.concurrency = int(concurrency)
        self.delay_factor = float(delay_factor)
        self.index: dict[str, int] = {}
        self.names: list[str] = []
        self.HF = np.zeros((0, H_FIELDS))
        self.HI = np.zeros((0, HI_FIELDS), dtype=np.int64)
        self.ring = np.zeros((0, max(1, self.default_per_minute)))

    def row(self, host: str) -> int:
        """The row of ``host`` (created with the defaults when new)."""
        row = self.index.get(host)
        if row is not None:
            return row
        row = len(self.names)
        if row >= len(self.HF):
            new = max(64, 2 * len(self.HF))
            HF = np.zeros((new, H_FIELDS))
            HF[: len(self.HF)] = self.HF
            HI = np.zeros((new, HI_FIELDS), dtype=np.int64)
            HI[: len(self.HI)] = self.HI
            ring = np.zeros((new, self.ring.shape[1]))
            ring[: len(self.ring)] = self.ring
            self.HF, self.HI, self.ring = HF, HI, ring
        self.index[host] = row
        self.names.append(host)
        self.HF[row] = (_NEVER, self.default_spacing_s, 0.0, _NEVER, 0.0)
        self.HI[row] = (self.default_per_minute, 0, 0, 0, 0, 0)
        return row

    def recent(self, row: int) -> list[float]:
        """The host's last fetch times (oldest first), at most its per-minute cap."""
        per_minute, head, count = (int(x) for x in self.HI[row, :HI_IN_FLIGHT])
        if per_minute <= 0:
            return []
        return [float(self.ring[row, (head + k) % per_minute]) for k in range(count)]

    def _set_recent(self, row: int, times: list[float]) -> None:
        per_minute = int(self.HI[row, HI_PER_MINUTE])
        times = times[-per_minute:] if per_minute > 0 else []
        self.ring[row, : len(times)] = times
        self.HI[row, HI_HEAD] = 0
        self.HI[row, HI_COUNT] = len(times)

    def ended(self, rows: np.ndarray) -> None:
        """Fetches to these hosts' rows (one per fetch) ended: each holds one fewer in flight."""
        if len(rows):
            np.subtract.at(self.HI[:, HI_IN_FLIGHT], rows, 1)
            np.maximum(self.HI[:, HI_IN_FLIGHT], 0, out=self.HI[:, HI_IN_FLIGHT])

    def paced(self, row: int, elapsed_s: float | None, overloaded: bool) -> None:
        """Pace the host by how it answered: the time between two fetch starts follows its
        latency (``delay_factor`` x its smoothed answer time / ``concurrency``: with that many in
        flight, a host is kept at most about that busy), within the minimum and maximum spacing;
        an overloaded host (429, 503, a timeout) doubles it, and answers that follow bring it
        back down a fifth at a time."""
        HF = self.HF
        if elapsed_s is not None and math.isfinite(elapsed_s) and elapsed_s > 0:
            latency = float(HF[row, H_LATENCY])
            HF[row, H_LATENCY] = elapsed_s if latency <= 0 else latency + 0.3 * (
                elapsed_s - latency)
        spacing = float(HF[row, H_SPACING])
        if overloaded:
            spacing = min(self.max_spacing_s, max(2.0 * spacing, 1.0))
        else:
            target = self.delay_factor * float(HF[row, H_LATENCY]) / max(1, self.concurrency)
            target = min(max(target, self.min_spacing_s), self.max_spacing_s)
            spacing = target if target >= spacing else max(target, 0.8 * spacing)
        HF[row, H_SPACING] = spacing

    def step(self, row: int) -> float:
        """The time between two places in the host's line: its spacing, or the per-minute
        cap's, whichever is longer."""
        per_minute = int(self.HI[row, HI_PER_MINUTE])
        spacing = float(self.HF[row, H_SPACING])
        return max(spacing, 60.0 / per_minute) if per_minute > 0 else spacing

    def ready_at(self, row: int, now: float) -> float:
        """When the host may next start a fetch, as far as spacing and pauses say (its fetches
        in flight aside)."""
        HF = self.HF
        return max(now, float(HF[row, H_LAST] + HF[row, H_SPACING]), float(HF[row, H_BLOCKED]))

    def urgent(self, row: int, change: int) -> None:
        """One more (+1) or one fewer (-1) feed a person just added waits for the host."""
        self.HI[row, HI_URGENT] = max(0, int(self.HI[row, HI_URGENT]) + change)

    def holds_back(self, row: int) -> bool:
        """Whether the host held feeds back since its line was last given its places."""
        return bool(self.HI[row, HI_HELD])

    def spacing(self, row: int) -> float:
        """The time between two fetch starts to the host now."""
        return float(self.HF[row, H_SPACING])

    def in_flight(self, row: int) -> int:
        """Fetches to the host in flight now."""
        return int(self.HI[row, HI_IN_FLIGHT])

    def block(self, host: str, until: float) -> None:
        """Start nothing from ``host`` before ``until``: the server asked (429 / 503
        Retry-After), or it could not be reached lately (:mod:`feedmesh.fetch.host_state`)."""
        row = self.row(host)
        self.HF[row, H_BLOCKED] = max(self.HF[row, H_BLOCKED], until)

    def shift(self, delta: float) -> None:
        """Move every remembered instant by ``delta`` (after a clock jump)."""
        n = len(self.names)
        for field in (H_LAST, H_QUEUE):
            seen = self.HF[:n, field] > _NEVER / 2
            self.HF[:n, field][seen] += delta
        blocked = self.HF[:n, H_BLOCKED] > 0
        self.HF[:n, H_BLOCKED][blocked] += delta
        self.ring[:n] += delta

    def state(self, row: int) -> tuple[float | None, tuple[float, ...], float]:
        """(last fetch or None, recent fetch times, blocked until)."""
        last = float(self.HF[row, H_LAST])
        return (last if last > _NEVER / 2 else None, tuple(self.recent(row)),
                float(self.HF[row, H_BLOCKED]))

    def load(self, host: str, *, last_fetch_at: float | None, recent: tuple[float, ...],
             blocked_until: float) -> None:
        """Restore a host's state from a snapshot (:meth:`state`)."""
        row = self.row(host)
        if last_fetch_at is not None:
            self.HF[row, H_LAST] = last_fetch_at
        self._set_recent(row, list(recent))
        self.HF[row, H_BLOCKED] = blocked_until
