"""Resource allocation: how many fetches per period each feed gets, under one global budget.

* :func:`sqrt_allocation` - the paper's Theorem 1, m_i proportional to sqrt(w_i lambda_i), with
  per-feed floors and caps (water-filling: m_i = clip(k sqrt(w_i lambda_i), floor_i, cap_i), k set
  by bisection so that the m_i sum to the budget). Floors are what bound the maximum delay.
* :func:`cgm_freshness_allocation` and :func:`cgm_age_allocation` - Cho & Garcia-Molina (TODS
  2003), the allocations the paper compares against (Table 2), solved from their KKT conditions:
  an outer bisection on the multiplier mu, the inner inverse g^-1 / h^-1 read from a precomputed
  monotone table (then polished by Newton steps), everything vectorized over feeds.
* :func:`round_to_total` - integer counts that keep the budget exact (largest remainder).

Rates are posts per day and allocations fetches per day unless a caller says otherwise.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "cgm_age_allocation",
    "cgm_freshness_allocation",
    "round_to_total",
    "sqrt_allocation",
]


def _bisect_scale(total_at, budget: float, lo: float, hi: float, iterations: int = 80) -> float:
    """Largest k in [lo, hi] with total_at(k) <= budget, for a total that grows with k."""
    while total_at(hi) < budget and hi < 1e300:
        hi *= 4.0
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if total_at(mid) > budget:
            hi = mid
        else:
            lo = mid
    return lo


def sqrt_allocation(demand: np.ndarray, budget: float, *, floors: np.ndarray | float = 0.0,
                    caps: np.ndarray | float = np.inf) -> np.ndarray:
    """m_i = clip(k sqrt(demand_i), floor_i, cap_i) with sum m_i = budget (Theorem 1 + bounds).

    ``demand`` is w_i lambda_i. When the floors alone exceed the budget they are scaled down to
    fit (every feed gets the same share of what there is); when the caps are below it, the caps
    are returned.
    """
    demand = np.asarray(demand, dtype=np.float64)
    n = len(demand)
    floors = np.broadcast_to(np.asarray(floors, dtype=np.float64), (n,))
    caps = np.maximum(np.broadcast_to(np.asarray(caps, dtype=np.float64), (n,)), floors)
    if n == 0:
        return np.zeros(0)
    floor_total = float(floors.sum())
    if floor_total >= budget:
        return floors * (budget / floor_total) if floor_total > 0 else np.zeros(n)
    if float(caps.sum()) <= budget:
        return caps.copy()
    root = np.sqrt(np.maximum(demand, 0.0))

    def total_at(k: float) -> float:
        return float(np.clip(k * root, floors, caps).sum())

    k = _bisect_scale(total_at, budget, 0.0, 1.0)
    m = np.clip(k * root, floors, caps)
    # The bisection leaves a tiny shortfall; give it to the unclamped feeds pro rata.
    free = (m > floors) & (m < caps)
    gap = budget - float(m.sum())
    if gap > 0 and free.any():
        m[free] += gap * m[free] / m[free].sum()
    return m


# -- Cho & Garcia-Molina ------------------------------------------------------------------------

def _g(r: np.ndarray) -> np.ndarray:
    """Freshness KKT function g(r) = 1 - (1 + r) e^-r (increasing from 0 to 1)."""
    return -np.expm1(-r) - r * np.exp(-r)


def _h(r: np.ndarray) -> np.ndarray:
    """Age KKT function h(r) = r^2/2 - 1 + (1 + r) e^-r (increasing from 0 to infinity)."""
    small = r < 1e-3
    out = np.empty_like(r)
    rs = r[small]
    out[small] = rs**3 / 3.0 - rs**4 / 8.0
    rb = r[~small]
    out[~small] = rb * rb / 2.0 - 1.0 + (1.0 + rb) * np.exp(-rb)
    return out


_R_GRID = np.geomspace(1e-6, 1e6, 4001)
_G_GRID = _g(_R_GRID)
_H_GRID = _h(_R_GRID)


def _inverse(values: np.ndarray, grid_out: np.ndarray, func, derivative) -> np.ndarray:
    """r with func(r) = values, from the log-spaced table, then two Newton steps."""
    log_r = np.interp(np.log(np.maximum(values, 1e-300)), np.log(np.maximum(grid_out, 1e-300)),
                      np.log(_R_GRID))
    r = np.exp(log_r)
    for _ in range(2):
        slope = derivative(r)
        step = np.divide(func(r) - values, slope, out=np.zeros_like(r), where=slope > 0)
        r = np.maximum(r - step, r * 0.5)
    return r


def _g_prime(r: np.ndarray) -> np.ndarray:
    return r * np.exp(-r)


def _h_prime(r: np.ndarray) -> np.ndarray:
    return r - r * np.exp(-r)


def _bisect_multiplier(freq_at, budget: float, lo: float, hi: float,
                       warm: dict[str, float] | None = None) -> float:
    """The smallest mu (to 0.01% relative) whose frequencies fit the budget; the total decreases
    as mu grows. Bisection on log mu, so a 1e60-wide bracket takes about 60 steps; with ``warm``
    (holding the last answer under "mu") it starts from a bracket a factor 4 around that answer
    when it still holds the new one (daily refits move mu little), and stores the new answer."""
    if warm is not None and warm.get("mu", 0.0) > 0.0:
        near_lo, near_hi = max(warm["mu"] / 4.0, lo), min(warm["mu"] * 4.0, hi)
        if near_lo < near_hi and float(freq_at(near_lo).sum()) > budget >= \
                float(freq_at(near_hi).sum()):
            lo, hi = near_lo, near_hi
    while hi / lo > 1.0001:
        mid = (lo * hi) ** 0.5
        if float(freq_at(mid).sum()) > budget:
            lo = mid
        else:
            hi = mid
    if warm is not None:
        warm["mu"] = hi
    return hi


def cgm_freshness_allocation(rates: np.ndarray, weights: np.ndarray, budget: float, *,
                             floors: np.ndarray | float = 0.0,
                             warm: dict[str, float] | None = None) -> np.ndarray:
    """Fetches per day maximizing sum w_i F(lambda_i / f_i), F(r) = (1 - e^-r)/r, sum f_i = budget.

    KKT: f_i = 0 when w_i / lambda_i <= mu, else g(r_i) = mu lambda_i / w_i and f_i = lambda_i /
    r_i.
    Fast-changing feeds get nothing (the effect the paper measured as a 40,105-minute delay);
    ``floors`` (e.g. one fetch per T_max) are applied inside the optimization, not after it.
    """
    rates = np.maximum(np.asarray(rates, dtype=np.float64), 0.0)
    weights = np.asarray(weights, dtype=np.float64)
    n = len(rates)
    floors = np.broadcast_to(np.asarray(floors, dtype=np.float64), (n,))
    if n == 0:
        return np.zeros(0)
    if float(floors.sum()) >= budget:
        total = float(floors.sum())
        return floors * (budget / total) if total > 0 else np.zeros(n)
    positive = (rates > 0) & (weights > 0)

    def freq_at(mu: float) -> np.ndarray:
        f = np.zeros(n)
        y = mu * rates[positive] / weights[positive]
        alive = y < 1.0 - 1e-12
        r = _inverse(y[alive], _G_GRID, _g, _g_prime)
        sub = np.zeros(int(positive.sum()))
        sub[alive] = rates[positive][alive] / r
        f[positive] = sub
        return np.maximum(f, floors)

    # sum f decreases in mu; bisect on log mu for the budget.
    if not positive.any():
        return floors * (budget / max(float(floors.sum()), 1e-300)) if floors.sum() > 0 else \
            np.full(n, budget / n)
    hi = float((weights[positive] / rates[positive]).max())
    return freq_at(_bisect_multiplier(freq_at, budget, hi * 1e-18, hi, warm))


def cgm_age_allocation(rates: np.ndarray, weights: np.ndarray, budget: float, *,
                       floors: np.ndarray | float = 0.0,
                       warm: dict[str, float] | None = None) -> np.ndarray:
    """Fetches per day minimizing sum w_i A_i (age), sum f_i = budget.

    KKT: w_i h(r_i) / lambda_i^2 = mu, r_i = lambda_i / f_i. Nobody starves: slow feeds get
    f ~ (w lambda / 3 mu)^(1/3), fast ones approach sqrt(w / 2 mu).
    """
    rates = np.maximum(np.asarray(rates, dtype=np.float64), 0.0)
    weights = np.asarray(weights, dtype=np.float64)
    n = len(rates)
    floors = np.broadcast_to(np.asarray(floors, dtype=np.float64), (n,))
    if n == 0:
        return np.zeros(0)
    if float(floors.sum()) >= budget:
        total = float(floors.sum())
        return floors * (budget / total) if total > 0 else np.zeros(n)
    positive = (rates > 0) & (weights > 0)
    if not positive.any():
        return np.maximum(floors, 0.0) + (budget - float(floors.sum())) / n

    def freq_at(mu: float) -> np.ndarray:
        f = np.zeros(n)
        lam = rates[positive]
        r = _inverse(mu * lam * lam / weights[positive], _H_GRID, _h, _h_prime)
        f[positive] = lam / np.maximum(r, 1e-300)
        return np.maximum(f, floors)

    return freq_at(_bisect_multiplier(freq_at, budget, 1e-30, 1e30, warm))


def round_to_total(values: np.ndarray, total: int | None = None) -> np.ndarray:
    """Non-negative integers close to ``values`` whose sum is ``total`` (default: round(sum)).

    Largest-remainder rounding: floor everything, then add one to the largest fractional parts.
    """
    values = np.maximum(np.asarray(values, dtype=np.float64), 0.0)
    if total is None:
        total = round(float(values.sum()))
    base = np.floor(values).astype(np.int64)
    missing = total - int(base.sum())
    if missing > 0:
        order = np.argsort(-(values - base), kind="stable")
        base[order[:missing]] += 1
    elif missing < 0:
        order = np.argsort(values - base, kind="stable")
        candidates = order[base[order] > 0]
        base[candidates[:-missing]] -= 1
    return base
