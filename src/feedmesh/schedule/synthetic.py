"""A synthetic posting trace with the statistics of the monitoring paper's 9,634 feeds.

What the paper states, and how it is used here:

* 9,634 feeds with at least one post in three months (section 4.1): ``feeds``, ``days = 90``;
* posts per feed over three months follow a power law y = a x^b with b ~ -0.78 (Figure 7, note 4):
  each feed's expected count x is drawn from the density proportional to x^-0.78 on [1, x_max];
  x_max is set so that all feeds together post about 180,000 times a week (Figure 3(a)), which
  gives x_max ~ 1,000 (about 11 posts a day for the busiest feeds);
* strong daily rhythm, with 12 K-means clusters of 24-hour profiles, some broad, some bursty "within
  a very limited time window, like 10AM-12PM and 11PM-1AM" (section 4.3.1, Figure 12): 12 cluster
  shapes (von Mises bumps over a baseline) of unequal sizes;
* "more activities during the weekdays than on weekends" (section 2.2): each feed has a weekend
  factor drawn uniformly from [0.2, 1].

What the paper does not give, chosen and stated here: each feed's profile is its cluster's shape
rotated by a feed-specific shift (normal, sd 1 h) with a feed-specific sharpness (log-normal, sd
0.3), because real feeds scatter around their centroid; postings are an inhomogeneous Poisson
process (the paper's model) with that periodic rate. Everything comes from one seeded numpy
Generator, so a seed names a trace.
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np

from .trace import Trace

__all__ = ["CLUSTER_SHAPES", "PAPER_FEEDS", "synthetic_trace"]

PAPER_FEEDS = 9634
_POSTS_PER_WEEK = 180_000.0  # all 9,634 feeds together (Figure 3(a))
_EXPONENT = -0.78
_START = datetime(2004, 9, 6, tzinfo=timezone.utc).timestamp()  # a Monday, as in the paper's crawl

# (share of feeds, peak hours, concentrations, baseline share): the 12 cluster shapes
CLUSTER_SHAPES: tuple[tuple[float, tuple[float, ...], tuple[float, ...], float], ...] = (
    (0.16, (15.0,), (1.5,), 0.35),      # broad afternoon
    (0.13, (11.0,), (2.0,), 0.30),      # broad late morning
    (0.11, (18.0,), (2.0,), 0.30),      # late afternoon
    (0.10, (21.5,), (2.5,), 0.30),      # evening
    (0.09, (11.0,), (14.0,), 0.10),     # bursty 10AM-12PM
    (0.08, (0.0,), (14.0,), 0.10),      # bursty 11PM-1AM
    (0.08, (3.0,), (2.0,), 0.35),       # night
    (0.07, (8.5,), (4.0,), 0.20),       # early morning
    (0.06, (9.5, 20.0), (4.0, 4.0), 0.20),  # two peaks
    (0.05, (14.0,), (6.0,), 0.15),      # sharp early afternoon
    (0.04, (12.0,), (0.0,), 1.00),      # flat, around the clock
    (0.03, (6.0,), (8.0,), 0.15),       # dawn
)


def _x_max(mean_count: float) -> float:
    """x_max such that the density x^b on [1, x_max] has the given mean (bisection)."""
    e1, e2 = _EXPONENT + 1.0, _EXPONENT + 2.0

    def mean(x_max: float) -> float:
        return (e1 / e2) * (x_max**e2 - 1.0) / (x_max**e1 - 1.0)

    lo, hi = 1.0 + 1e-9, 1e7
    for _ in range(200):
        mid = (lo * hi) ** 0.5
        if mean(mid) < mean_count:
            lo = mid
        else:
            hi = mid
    return lo


def _profile(hours: np.ndarray, peaks: tuple[float, ...], kappas: tuple[float, ...],
             baseline: float, shift: float, sharpness: float) -> np.ndarray:
    shape = np.zeros_like(hours)
    for peak, kappa in zip(peaks, kappas):
        angle = 2 * np.pi * (hours - peak - shift) / 24.0
        k = kappa * sharpness
        shape += np.exp(k * (np.cos(angle) - 1.0))
    shape /= shape.mean()
    return baseline + (1.0 - baseline) * shape


def synthetic_trace(*, feeds: int = PAPER_FEEDS, days: int = 90, seed: int = 2005,
                    start: float = _START) -> Trace:
    """Postings of ``feeds`` feeds over ``days`` days, generated from ``seed``."""
    rng = np.random.default_rng(seed)
    mean_count = _POSTS_PER_WEEK * (days / 7.0) / PAPER_FEEDS
    x_max = _x_max(mean_count)
    e1 = _EXPONENT + 1.0
    u = rng.random(feeds)
    expected = (1.0 + u * (x_max**e1 - 1.0)) ** (1.0 / e1)  # inverse CDF of x^b on [1, x_max]
    counts = np.maximum(rng.poisson(expected), 1)
    shares = np.array([c[0] for c in CLUSTER_SHAPES])
    clusters = rng.choice(len(CLUSTER_SHAPES), size=feeds, p=shares / shares.sum())
    shifts = rng.normal(0.0, 1.0, feeds)
    sharpness = rng.lognormal(0.0, 0.3, feeds)
    weekend = rng.uniform(0.2, 1.0, feeds)

    steps_per_day = 96  # 15-minute resolution for the within-day shape
    hours = (np.arange(steps_per_day) + 0.5) * 24.0 / steps_per_day
    day_index = np.arange(days)
    weekday = ((start // 86400 + day_index + 3) % 7).astype(np.int64)  # Monday = 0
    times: list[np.ndarray] = []
    for i in range(feeds):
        _, peaks, kappas, baseline = CLUSTER_SHAPES[clusters[i]]
        daily = _profile(hours, peaks, kappas, baseline, shifts[i], sharpness[i])
        day_weight = np.where(weekday >= 5, weekend[i], 1.0)
        cumulative = np.cumsum((day_weight[:, None] * daily[None, :]).ravel())
        cumulative /= cumulative[-1]
        draws = np.searchsorted(cumulative, rng.random(counts[i]), side="right")
        offsets = (draws + rng.random(counts[i])) * (86400.0 / steps_per_day)
        times.append(np.sort(start + np.minimum(offsets, days * 86400.0 - 1e-3)))
    ids = [f"synthetic-{i:05d}" for i in range(feeds)]
    return Trace(feed_ids=ids, hosts=ids, times=times, source=f"synthetic(seed={seed})")
