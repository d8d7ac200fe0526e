"""Theorem 3 placement compiled: the same algorithm as :mod:`.placement`, one feed at a time.

:func:`feedmesh.schedule.placement.place_batch` works on a whole batch of feeds with numpy; its
temporaries ([feeds, fetches, candidates] arrays) dominate a refit that re-places a thousand
feeds. Here the same steps run per feed in compiled loops (numba), with no temporaries:

1. m = 1 without a gap bound: Theorem 2, the best bin edge;
2. otherwise starting points spaced evenly in the cumulative of sqrt(lambda) (and evenly in
   time), several phases, the best one that keeps every gap within ``max_gap``; evenly spaced
   if none does;
3. sweeps of exact coordinate updates, even-indexed fetches then odd ones: fetch j moves to the
   minimum of C(tau) = (tau - b) F(tau) - tau F(a) over [a, b] (its neighbours), searched over
   the bins within ``reach`` of where it is and both ends, with the in-bin root of Theorem 3.

Used only when numba is installed (in plain Python these loops would be slower than numpy).
"""

from __future__ import annotations

import math

import numpy as np

from .kernels import njit

__all__ = ["place_rows"]


@njit(cache=True)
def _cumulative(lam, cum, width, period, total, t):
    """F(t) = integral of lambda from 0 to t, extended periodically."""
    wraps = math.floor(t / period)
    local = t - wraps * period
    k = int(local / width)
    if k >= len(lam):
        k = len(lam) - 1
    return cum[k] + lam[k] * (local - k * width) + wraps * total


@njit(cache=True)
def _moment(lam, cum, mom, width, period, total, t):
    """G(t) = integral of lambda(u) u du from 0 to t, extended periodically (t may be < 0)."""
    n = math.floor(t / period)
    s = t - n * period
    k = int(s / width)
    if k >= len(lam):
        k = len(lam) - 1
    edge = k * width
    g_local = mom[k] + lam[k] * (s * s - edge * edge) / 2.0
    f_local = cum[k] + lam[k] * (s - edge)
    return n * mom[-1] + period * total * n * (n - 1) / 2.0 + g_local + n * period * f_local


@njit(cache=True)
def _delay(lam, cum, mom, width, period, total, pos, m):
    """Expected delay per period of fetches at sorted ``pos[:m]`` in [0, period)."""
    out = 0.0
    prev = pos[m - 1] - period
    f_prev = _cumulative(lam, cum, width, period, total, prev)
    g_prev = _moment(lam, cum, mom, width, period, total, prev)
    for j in range(m):
        b = pos[j]
        f_b = _cumulative(lam, cum, width, period, total, b)
        g_b = _moment(lam, cum, mom, width, period, total, b)
        out += b * (f_b - f_prev) - (g_b - g_prev)
        f_prev, g_prev = f_b, g_b
    return out


@njit(cache=True)
def _largest_gap(pos, m, period):
    largest = pos[0] + period - pos[m - 1]
    for j in range(1, m):
        largest = max(largest, pos[j] - pos[j - 1])
    return largest


@njit(cache=True)
def _quantiles(lam, width, m, phase, mix, out):
    """Fetches evenly spaced in the cumulative of sqrt(lambda) + mix * mean(sqrt(lambda))."""
    bins = len(lam)
    mean_root = 0.0
    for k in range(bins):
        mean_root += math.sqrt(lam[k])
    mean_root /= bins
    total = 0.0
    for k in range(bins):
        total += math.sqrt(lam[k]) + mix * mean_root + 1e-12
    k = 0
    below = 0.0  # density mass before bin k
    for j in range(m):
        target = (j + phase) / m * total
        while k < bins - 1:
            mass = math.sqrt(lam[k]) + mix * mean_root + 1e-12
            if below + mass >= target:
                break
            below += mass
            k += 1
        mass = math.sqrt(lam[k]) + mix * mean_root + 1e-12
        frac = (target - below) / mass if mass > 0 else 0.0
        frac = min(max(frac, 0.0), 1.0)
        out[j] = min((k + frac) * width, bins * width * (1 - 1e-12))


@njit(cache=True)
def _refine(lam, cum, width, period, total, pos, m, sweeps, max_gap, reach):
    bins = len(lam)
    for _ in range(sweeps):
        for parity in range(2):
            for j in range(parity, m, 2):
                if m % 2 == 1 and parity == 0 and j == m - 1 and m > 1:
                    continue  # the last even index neighbours index 0 across the wrap
                a = pos[j - 1] if j > 0 else pos[m - 1] - period
                b = pos[j + 1] if j < m - 1 else pos[0] + period
                lo, hi = a, b
                if max_gap > 0:
                    lo = max(a, b - max_gap)
                    hi = min(b, a + max_gap)
                    if lo > hi:
                        lo = hi = 0.5 * (a + b)
                current = min(max(pos[j], lo), hi)
                f_a = _cumulative(lam, cum, width, period, total, a)
                best = current
                f_c = _cumulative(lam, cum, width, period, total, current)
                best_cost = (current - b) * f_c - current * f_a
                for edge in (lo, hi):
                    f_e = _cumulative(lam, cum, width, period, total, edge)
                    cost = (edge - b) * f_e - edge * f_a
                    if cost < best_cost:
                        best, best_cost = edge, cost
                centre = math.floor(current / width)
                for step in range(-reach, reach + 1):
                    k = centre + step
                    start = k * width
                    left = max(start, lo)
                    right = min(start + width, hi)
                    if left > right:
                        continue
                    rate = lam[int(k) % bins]
                    if rate > 0:
                        f_s = _cumulative(lam, cum, width, period, total, start)
                        root = (rate * (start + b) - (f_s - f_a)) / (2.0 * rate)
                        tau = min(max(root, left), right)
                    else:
                        tau = left
                    f_t = _cumulative(lam, cum, width, period, total, tau)
                    cost = (tau - b) * f_t - tau * f_a
                    if cost < best_cost:
                        best, best_cost = tau, cost
                pos[j] = best
        for j in range(m):
            pos[j] = pos[j] - math.floor(pos[j] / period) * period
        pos[:m].sort()


@njit(cache=True)
def place_rows(rates, width, m, max_gap, sweeps, phases, out):
    """Place ``m`` fetches for every row of ``rates[g, B]`` into ``out[g, m]`` (max_gap <= 0:
    none)."""
    g, bins = rates.shape
    period = bins * width
    cum = np.empty(bins + 1)
    mom = np.empty(bins + 1)
    trial = np.empty(m)
    for row in range(g):
        lam = rates[row]
        cum[0] = 0.0
        mom[0] = 0.0
        for k in range(bins):
            lo_edge = k * width
            cum[k + 1] = cum[k] + lam[k] * width
            mom[k + 1] = mom[k] + lam[k] * ((lo_edge + width) ** 2 - lo_edge * lo_edge) / 2.0
        total = cum[bins]
        if m == 1 and (max_gap <= 0 or max_gap >= period):  # Theorem 2: a bin edge
            best, best_cost = 0.0, np.inf
            for k in range(bins):
                trial[0] = k * width
                cost = _delay(lam, cum, mom, width, period, total, trial, 1)
                if cost < best_cost:
                    best, best_cost = trial[0], cost
            out[row, 0] = best
            continue
        best_cost = np.inf
        for mix_index in range(2):  # sqrt-density spacing, and even spacing
            mix = 0.0 if mix_index == 0 else 1e6
            for p in range(phases):
                _quantiles(lam, width, m, (p + 0.5) / phases, mix, trial)
                if max_gap > 0 and _largest_gap(trial, m, period) > max_gap * (1 + 1e-9):
                    continue
                cost = _delay(lam, cum, mom, width, period, total, trial, m)
                if cost < best_cost:
                    best_cost = cost
                    out[row, :] = trial
        if best_cost == np.inf:  # nothing kept the gaps: evenly spaced always does
            for j in range(m):
                out[row, j] = (j + 0.5) * (period / m)
        if m > 1 and sweeps > 0:
            _refine(lam, cum, width, period, total, out[row], m, sweeps, max_gap, 3)
