"""The clairvoyant lower bound: the least mean delay any policy could reach with the same budget.

An oracle that knows every posting time fetches exactly at posting instants. For one feed with
postings t_1 < ... < t_p and k fetches, the best plan cuts the postings into k runs, each fetched
at its last posting; the delay of a run (i, j] is (j - i) t_j - (S_j - S_i) with S prefix sums.
That cost is Monge, so D_i(k) is convex in k and the Lagrangian relaxation is exact on the convex
hull: for a price mu per fetch each feed solves min over cuts of (delay + mu x fetches) by a
dynamic program with a monotone convex-hull trick (O(p)), and the dual

    L(mu) = sum_i min_k (D_i(k) + mu k) - mu M

is maximized over mu. max L is a valid lower bound on the total delay with M fetches (and tight up
to the integrality of the last fetch). numba compiles the DP when installed (the ``fast`` extra);
the pure-Python fallback is the same code, slower.
"""

from __future__ import annotations

import numpy as np

__all__ = ["oracle_mean_delay"]

try:  # pragma: no cover - exercised whichever way the environment is
    from numba import njit
except ImportError:  # pragma: no cover
    def njit(*args, **kwargs):  # type: ignore[no-redef]
        def wrap(function):
            return function
        return wrap(args[0]) if args and callable(args[0]) else wrap


@njit(cache=True)
def _solve(times: np.ndarray, starts: np.ndarray, price: float) -> tuple[float, float]:
    """Sum over feeds of min(delay + price x fetches), and the fetches that minimum uses."""
    total_cost = 0.0
    total_fetches = 0.0
    feeds = len(starts) - 1
    for f in range(feeds):
        a, b = starts[f], starts[f + 1]
        p = b - a
        if p == 0:
            continue
        best = np.empty(p + 1)
        used = np.empty(p + 1)
        prefix = np.empty(p + 1)
        prefix[0] = 0.0
        for j in range(1, p + 1):
            prefix[j] = prefix[j - 1] + times[a + j - 1]
        best[0] = 0.0
        used[0] = 0.0
        # lines y = -i x + (best[i] + prefix[i]), queried at increasing x = t_j
        slope = np.empty(p + 1)
        intercept = np.empty(p + 1)
        line_index = np.empty(p + 1, dtype=np.int64)
        head = 0
        tail = 0
        slope[0] = 0.0
        intercept[0] = 0.0
        line_index[0] = 0
        tail = 1
        for j in range(1, p + 1):
            x = times[a + j - 1]
            while tail - head >= 2 and (slope[head + 1] * x + intercept[head + 1]
                                        <= slope[head] * x + intercept[head]):
                head += 1
            i = line_index[head]
            value = slope[head] * x + intercept[head]
            best[j] = value + j * x - prefix[j] + price
            used[j] = used[i] + 1.0
            # add the line of j; slopes strictly decrease, so pop lines made useless
            s_new = -float(j)
            c_new = best[j] + prefix[j]
            while tail - head >= 2:
                s1, c1 = slope[tail - 2], intercept[tail - 2]
                s2, c2 = slope[tail - 1], intercept[tail - 1]
                # line 2 is useless if line_new overtakes line 1 no later than line 2 does
                if (c_new - c1) * (s1 - s2) <= (c2 - c1) * (s1 - s_new):
                    tail -= 1
                else:
                    break
            slope[tail] = s_new
            intercept[tail] = c_new
            line_index[tail] = j
            tail += 1
            if head >= tail:
                head = tail - 1
        total_cost += best[p]
        total_fetches += used[p]
    return total_cost, total_fetches


def oracle_mean_delay(times_by_feed: list[np.ndarray], fetches: float) -> float:
    """Lower bound on the mean delay (seconds) of these postings with ``fetches`` fetches in all.

    ``times_by_feed``: sorted posting times per feed, in seconds (only the postings to evaluate).
    """
    sizes = np.array([len(t) for t in times_by_feed], dtype=np.int64)
    postings = int(sizes.sum())
    if postings == 0:
        return 0.0
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    times = np.concatenate([np.asarray(t, dtype=np.float64) for t in times_by_feed])
    # shift each feed to start at 0 for numerical range (delays are differences)
    times = times - np.repeat(np.array([t[0] if len(t) else 0.0 for t in times_by_feed]), sizes)
    distinct = 0
    for t in times_by_feed:
        if len(t):
            distinct += 1 + int((np.diff(t) > 0).sum())
    if fetches >= distinct:
        return 0.0
    # L(mu) is concave; its slope is (fetches used at mu) - M. Bisect on log mu.
    lo, hi = 1e-6, float(times.max() * postings + 1.0)
    best = 0.0
    for _ in range(60):
        mid = (lo * hi) ** 0.5
        cost, used = _solve(times, starts, mid)
        best = max(best, cost - mid * fetches)
        if used > fetches:
            lo = mid
        else:
            hi = mid
    for mu in (lo, hi):
        cost, _ = _solve(times, starts, mu)
        best = max(best, cost - mu * fetches)
    return max(best, 0.0) / postings
