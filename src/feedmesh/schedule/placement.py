"""Retrieval scheduling: where in the period to put a feed's m fetches (the paper's Theorems 2-3).

The posting rate lambda(t) of a feed is periodic (a day, or a week for feedmesh) and piecewise
constant on bins (hours). With F(t) = integral of lambda and m fetches tau_1 < ... < tau_m, the
expected delay of one period is closed-form (:func:`expected_delay`). Moving one fetch tau_j
between its neighbours a and b changes the delay by

    C(tau) = (tau - b) F(tau) - tau F(a) + const,

which is a convex parabola inside each bin (curvature 2 lambda_k) and kinks at bin edges, so its
minimum over [a, b] is the best of the per-bin minima: the in-bin root of Theorem 3's condition
lambda(tau)(b - tau) = F(tau) - F(a), clamped to the bin. No grid, no Newton: exact at any time
resolution. Placement is

1. m = 1: Theorem 2, exhaustively (the delay is linear inside a bin, so a bin edge is optimal);
2. m > 1: start from the asymptotically optimal density (fetches spaced evenly in the cumulative
   of sqrt(lambda)), try several phases and keep the best, then *iterative refinement*: sweeps of
   the exact coordinate update, even-indexed fetches then odd ones (each half-sweep is fully
   vectorized over feeds and fetches, and never increases the delay).

An optional ``max_gap`` keeps every gap between consecutive fetches at most that long (feedmesh's
bound on the maximum delay). Everything works on a batch of feeds that share the same m.
"""

from __future__ import annotations

import numpy as np

from .kernels import HAVE_NUMBA
from .placement_kernel import place_rows

__all__ = ["RateGrid", "expected_delay", "place_batch"]


class RateGrid:
    """Piecewise-constant periodic rates for a batch of feeds: ``rates[g, B]`` on bins of
    ``width``."""

    def __init__(self, rates: np.ndarray, width: float) -> None:
        self.rates = np.maximum(np.asarray(rates, dtype=np.float64), 0.0)
        self.width = float(width)
        self.bins = self.rates.shape[1]
        self.period = self.width * self.bins
        edges = np.arange(self.bins + 1) * self.width
        self.edges = edges
        mass = self.rates * self.width
        self.cum = np.concatenate([np.zeros((len(self.rates), 1)), np.cumsum(mass, axis=1)], axis=1)
        self.total = self.cum[:, -1]
        # G(t) = integral of lambda(u) u du, at bin edges
        moment = self.rates * (edges[1:] ** 2 - edges[:-1] ** 2) / 2.0
        self.cum_moment = np.concatenate([np.zeros((len(self.rates), 1)),
                                          np.cumsum(moment, axis=1)], axis=1)

    def _split(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        wraps = np.floor(t / self.period)
        local = t - wraps * self.period
        k = np.minimum((local / self.width).astype(np.int64), self.bins - 1)
        return wraps, local, k

    def cumulative(self, rows: np.ndarray, t: np.ndarray) -> np.ndarray:
        """F(t) for each (row, t), periodic extension F(t + P) = F(t) + total."""
        wraps, local, k = self._split(t)
        return (self.cum[rows, k] + self.rates[rows, k] * (local - self.edges[k])
                + wraps * self.total[rows])

    def moment(self, rows: np.ndarray, t: np.ndarray) -> np.ndarray:
        """G(t) = integral_0^t lambda(u) u du for t in [0, P]."""
        _, local, k = self._split(np.minimum(t, self.period * (1 - 1e-15)))
        return (self.cum_moment[rows, k]
                + self.rates[rows, k] * (local**2 - self.edges[k] ** 2) / 2.0)


def expected_delay(grid: RateGrid, positions: np.ndarray) -> np.ndarray:
    """Expected total delay per period of each feed fetched at ``positions[g, m]`` (sorted, in [0,
    P)).

    Sum over postings of (next fetch - posting time), in rate units x time^2 (divide by the expected
    count per period for the mean delay of one posting).
    """
    g, m = positions.shape
    rows = np.repeat(np.arange(g)[:, None], m, axis=1)
    F = grid.cumulative(rows, positions)
    G = grid.moment(rows, positions)
    inner = (positions[:, 1:] * (F[:, 1:] - F[:, :-1]) - (G[:, 1:] - G[:, :-1])).sum(axis=1)
    first = positions[:, 0] * F[:, 0] - G[:, 0]
    G_end = grid.cum_moment[:, -1]
    wrap = (positions[:, 0] + grid.period) * (grid.total - F[:, -1]) - (G_end - G[:, -1])
    return inner + first + wrap


def _best_single(grid: RateGrid) -> np.ndarray:
    """Theorem 2: the single fetch time minimizing the delay, searched over every bin edge."""
    g = len(grid.rates)
    candidates = grid.edges[:-1]
    best = np.zeros(g)
    best_cost = np.full(g, np.inf)
    for start in candidates:
        cost = expected_delay(grid, np.full((g, 1), start))
        better = cost < best_cost
        best[better] = start
        best_cost[better] = cost[better]
    return best


def _quantile_positions(grid: RateGrid, m: int, phase: float, mix: float) -> np.ndarray:
    """Fetches evenly spaced in the cumulative of sqrt(lambda) + mix * mean(sqrt(lambda))."""
    root = np.sqrt(grid.rates)
    density = root + mix * root.mean(axis=1, keepdims=True) + 1e-12
    cum = np.concatenate([np.zeros((len(density), 1)), np.cumsum(density, axis=1)], axis=1)
    cum /= cum[:, -1:]
    targets = (np.arange(m) + phase) / m  # in [0, 1)
    # Batched inverse interpolation: offset every row by 2 so one sorted array holds them all.
    g, width = len(cum), cum.shape[1]
    offsets = 2.0 * np.arange(g)
    flat = (cum + offsets[:, None]).ravel()
    queries = (targets[None, :] + offsets[:, None]).ravel()
    idx = np.searchsorted(flat, queries, side="right").clip(1, flat.size - 1)
    idx = np.minimum(idx, (np.repeat(np.arange(g), m) + 1) * width - 1)
    lo_val, hi_val = flat[idx - 1], flat[idx]
    frac = np.divide(queries - lo_val, hi_val - lo_val, out=np.zeros_like(queries),
                     where=hi_val > lo_val)
    bin_index = (idx - 1) % width
    out = (grid.edges[np.minimum(bin_index, width - 2)] + frac * grid.width).reshape(g, m)
    return np.clip(out, 0.0, grid.period * (1 - 1e-12))


def _max_gap(positions: np.ndarray, period: float) -> np.ndarray:
    gaps = np.diff(positions, axis=1, append=positions[:, :1] + period)
    return gaps.max(axis=1)


def _refine(grid: RateGrid, positions: np.ndarray, sweeps: int, max_gap: float | None,
            reach: int = 3) -> None:
    """Exact coordinate updates, even then odd indices, in place (positions stay sorted)."""
    g, m = positions.shape
    P, w = grid.period, grid.width
    rows_all = np.arange(g)
    for _ in range(sweeps):
        for parity in (0, 1):
            js = np.arange(parity, m, 2)
            if m % 2 == 1 and parity == 0 and m > 1:
                js = js[:-1]  # the last even index neighbours index 0 across the wrap
            if len(js) == 0:
                continue
            prev_idx = (js - 1) % m
            next_idx = (js + 1) % m
            a = positions[:, prev_idx] - np.where(js == 0, P, 0.0)[None, :]
            b = positions[:, next_idx] + np.where(js == m - 1, P, 0.0)[None, :]
            lo, hi = a, b
            if max_gap is not None:
                lo = np.maximum(a, b - max_gap)
                hi = np.minimum(b, a + max_gap)
                infeasible = lo > hi
                mid = 0.5 * (a + b)
                lo = np.where(infeasible, mid, lo)
                hi = np.where(infeasible, mid, hi)
            # Candidates: the bins within `reach` of the current position (a local search keeps
            # the cost independent of the gap length), plus both ends of the allowed interval.
            current = np.clip(positions[:, js], lo, hi)
            span = 2 * reach + 1
            rows = np.broadcast_to(rows_all[:, None, None], (g, len(js), span))
            k = np.floor(current / w)[:, :, None] + np.arange(-reach, reach + 1)[None, None, :]
            start = k * w
            lo3, hi3 = lo[:, :, None], hi[:, :, None]
            b3 = b[:, :, None]
            left = np.maximum(start, lo3)
            right = np.minimum(start + w, hi3)
            valid = left <= right
            lam = grid.rates[rows, k.astype(np.int64) % grid.bins]
            F_a = grid.cumulative(rows[:, :, 0], a)[:, :, None]
            F_start = grid.cumulative(rows, start)
            with np.errstate(divide="ignore", invalid="ignore"):
                root = (lam * (start + b3) - (F_start - F_a)) / (2.0 * lam)
            root = np.where(lam > 0, root, left)
            cand = np.concatenate([np.clip(root, left, right), lo3, hi3, current[:, :, None]],
                                  axis=2)
            valid = np.concatenate([valid, np.ones((g, len(js), 3), dtype=bool)], axis=2)
            rows3 = np.broadcast_to(rows_all[:, None, None], cand.shape)
            F_c = grid.cumulative(rows3, cand)
            cost = (cand - b3) * F_c - cand * F_a
            cost = np.where(valid, cost, np.inf)
            best = np.take_along_axis(cand, cost.argmin(axis=2)[:, :, None], axis=2)[:, :, 0]
            positions[:, js] = best
        positions %= P
        positions.sort(axis=1)


def place_batch(rates: np.ndarray, width: float, m: int, *, max_gap: float | None = None,
                sweeps: int = 4, phases: int = 4, compiled: bool | None = None) -> np.ndarray:
    """Fetch offsets ``[g, m]`` in [0, period) for feeds sharing the fetch count ``m``.

    ``rates[g, B]`` are per-bin posting rates (any unit; only the shape matters). With ``max_gap``
    the result keeps every gap (wrap included) at most ``max_gap`` when ``m * max_gap`` >= period.
    ``compiled`` (default: when numba is installed) runs the same steps per feed in compiled
    loops (:mod:`.placement_kernel`); False runs the numpy version below.
    """
    if compiled is None:
        compiled = HAVE_NUMBA
    if compiled and m > 0 and len(rates):
        out = np.empty((len(rates), m))
        place_rows(np.ascontiguousarray(np.maximum(rates, 0.0), dtype=np.float64), float(width),
                   int(m), -1.0 if max_gap is None else float(max_gap), int(sweeps),
                   int(phases), out)
        return out
    grid = RateGrid(rates, width)
    g = len(grid.rates)
    if g == 0 or m <= 0:
        return np.zeros((g, max(m, 0)))
    P = grid.period
    if m == 1 and (max_gap is None or max_gap >= P):
        return _best_single(grid)[:, None]
    best = None
    best_cost = np.full(g, np.inf)
    for mix in (0.0, 1e6):  # sqrt-density spacing, and even spacing
        for phase in np.arange(phases) / phases + 0.5 / phases:
            pos = _quantile_positions(grid, m, phase, mix)
            cost = expected_delay(grid, pos)
            if max_gap is not None:
                cost = np.where(_max_gap(pos, P) <= max_gap * (1 + 1e-9), cost, np.inf)
            if best is None:
                best = pos.copy()
                best_cost = cost
                continue
            better = cost < best_cost
            best[better] = pos[better]
            best_cost = np.where(better, cost, best_cost)
    assert best is not None
    # Feeds no candidate could keep within max_gap start evenly spaced (always feasible).
    stuck = ~np.isfinite(best_cost)
    if stuck.any():
        best[stuck] = (np.arange(m)[None, :] + 0.5) * (P / m)
    if m > 1 and sweeps > 0:
        _refine(grid, best, sweeps, max_gap)
    return best
