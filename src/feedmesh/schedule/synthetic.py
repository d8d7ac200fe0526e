"""A synthetic posting trace with the statistics of the monitoring paper's 9,634 feeds.

The trace is drawn from a :class:`SyntheticModel`: every feed's true, weekly-periodic posting
rate (the paper's periodic inhomogeneous Poisson model, section 2.2). The model is kept, not just
the sample, so that calibration and tests can compare what a policy learned with the truth.

What the paper states, and how it is used here:

* 9,634 feeds with at least one post in three months (section 4.1): ``feeds``, ``days = 90``;
* posts per feed over three months follow a power law y = a x^b with b ~ -0.78 (Figure 7, note 4):
  each feed's expected count x is drawn from the density proportional to x^-0.78 on [1, x_max];
  x_max is set so that all feeds together post about 180,000 times a week (Figure 3(a)), which
  gives x_max ~ 1,000 (about 11 posts a day for the busiest feeds). This rate distribution alone
  fixes what Theorem 1 can gain: its allocation-only policy lands at 0.66 of uniform, the paper's
  433 / 645 = 0.67 (Table 1, strategy 3);
* strong daily rhythm, with 12 K-means clusters of 24-hour profiles, some broad, some bursty "within
  a very limited time window, like 10AM-12PM and 11PM-1AM" (section 4.3.1, Figure 12): 12 cluster
  shapes (von Mises bumps over a baseline) of unequal sizes;
* how *strong* that rhythm is, the paper gives only through what placing fetches by it gained:
  581 / 645 = 0.90 of uniform with one fetch a day (Table 1, strategy 2). Each feed's profile is
  ``1 - contrast + contrast * shape``; ``contrast`` (:data:`DAILY_CONTRAST`) is the one number
  calibrated against that figure, by simulating the paper's own strategy 2 on the trace (see
  docs/scheduling.md, "Calibration"). Sharper shapes would hand every placement policy a larger
  gain than the paper measured;
* "more activities during the weekdays than on weekends" (section 2.2, and the weekly fluctuation
  of note 6): each feed has a weekend factor drawn uniformly from [0.2, 1]. The paper gives no size;
  this range is an assumption (it moves no paper policy, which all plan per day).

What the paper does not give, chosen and stated here: each feed's profile is its cluster's shape
rotated by a feed-specific shift (normal, sd 1 h) with a feed-specific sharpness (log-normal, sd
0.3), because real feeds scatter around their centroid; rates are stationary over the three
months (Figure 9: "the posting rates of most sources are stable"). Postings are an inhomogeneous
Poisson process with the periodic rate. Everything comes from one seeded numpy Generator, so a
seed names a trace.
"""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import numpy as np

from .trace import Trace

__all__ = ["CLUSTER_SHAPES", "DAILY_CONTRAST", "PAPER_FEEDS", "SyntheticModel", "model_bound",
           "synthetic_model", "synthetic_trace"]

PAPER_FEEDS = 9634
_POSTS_PER_WEEK = 180_000.0  # all 9,634 feeds together (Figure 3(a))
_EXPONENT = -0.78
_START = datetime(2004, 9, 6, tzinfo=UTC).timestamp()  # a Monday, as in the paper's crawl
_DAY_S = 86400.0

DAILY_CONTRAST = 0.4
"""Share of a feed's posts that follow its cluster's daily shape (the rest are spread evenly).
Calibrated so that the paper's strategy 2 (one fetch a day, placed by Theorem 2 on the learned
cluster centroid) gains what Table 1 reports, 581 / 645 = 0.90."""

# (share of feeds, ((start hour, end hour), ...)): the 12 cluster shapes, as activity windows
CLUSTER_SHAPES: tuple[tuple[float, tuple[tuple[float, float], ...]], ...] = (
    (0.16, ((13.0, 21.0),)),              # afternoon and evening
    (0.13, ((9.0, 17.0),)),               # office hours
    (0.11, ((14.0, 20.0),)),              # late afternoon
    (0.10, ((18.0, 24.0),)),              # evening
    (0.09, ((10.0, 12.0),)),              # bursty 10AM-12PM (section 4.3.1)
    (0.08, ((23.0, 25.0),)),              # bursty 11PM-1AM (section 4.3.1)
    (0.08, ((0.0, 6.0),)),                # night (other time zones)
    (0.07, ((6.0, 11.0),)),               # morning
    (0.06, ((8.0, 11.0), (19.0, 22.0))),  # before and after work
    (0.05, ((12.0, 16.0),)),              # early afternoon
    (0.04, ()),                           # around the clock
    (0.03, ((5.0, 7.0),)),                # dawn
)
_EDGE_H = 0.5  # the windows' edges are logistic ramps of this scale (hours)


class SyntheticModel(msgspec.Struct, frozen=True):
    """Every feed's true posting rate: a posts-per-day level, a daily shape and a weekend factor."""

    start: float
    """Epoch seconds of the first day (a Monday, 00:00 UTC)."""
    days: int
    expected_posts: np.ndarray
    """float64[n]: each feed's expected posts over ``days`` (the power-law draw)."""
    clusters: np.ndarray
    """int64[n]: the cluster shape (index into :data:`CLUSTER_SHAPES`) of each feed."""
    shifts_h: np.ndarray
    """float64[n]: each feed's windows are moved by this many hours from its cluster's."""
    widths: np.ndarray
    """float64[n]: each feed's windows are this many times as long as its cluster's."""
    weekend: np.ndarray
    """float64[n]: Saturday and Sunday rate relative to a weekday."""
    contrast: float = DAILY_CONTRAST

    @property
    def feeds(self) -> int:
        return len(self.expected_posts)

    def daily_shapes(self, steps_per_day: int = 96) -> np.ndarray:
        """float64[n, steps]: each feed's daily rate shape at the middle of each step (mean 1)."""
        hours = (np.arange(steps_per_day) + 0.5) * 24.0 / steps_per_day
        shapes = np.ones((self.feeds, steps_per_day))
        for cluster, (_, windows) in enumerate(CLUSTER_SHAPES):
            rows = np.flatnonzero(self.clusters == cluster)
            if len(rows) == 0 or not windows:
                continue
            active = np.zeros((len(rows), steps_per_day))
            for begin, end in windows:
                centre = (begin + end) / 2.0 + self.shifts_h[rows, None]
                half = (end - begin) / 2.0 * self.widths[rows, None]
                distance = np.abs((hours[None, :] - centre + 12.0) % 24.0 - 12.0)
                active += 1.0 / (1.0 + np.exp((distance - half) / _EDGE_H))
            shapes[rows] = active / active.mean(axis=1, keepdims=True)
        return 1.0 - self.contrast + self.contrast * shapes

    def day_weights(self) -> np.ndarray:
        """float64[n, days]: relative rate of each day (weekend factor on Saturdays and Sundays)."""
        weekday = ((self.start // _DAY_S + np.arange(self.days) + 3) % 7).astype(np.int64)
        return np.where(weekday[None, :] >= 5, self.weekend[:, None], 1.0)

    def weekly_rates(self, steps_per_day: int = 24) -> np.ndarray:
        """float64[n, 7 * steps]: expected posts per step over a week starting on Monday 00:00."""
        daily = self.daily_shapes(steps_per_day)
        week = np.where(np.arange(7)[None, :] >= 5, self.weekend[:, None], 1.0)
        mean_day = week.mean(axis=1, keepdims=True)
        per_day = self.expected_posts[:, None] / self.days / mean_day * week
        return (per_day[:, :, None] * daily[:, None, :] / steps_per_day).reshape(self.feeds, -1)


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


def synthetic_model(*, feeds: int = PAPER_FEEDS, days: int = 90, seed: int = 2005,
                    start: float = _START, contrast: float = DAILY_CONTRAST,
                    rng: np.random.Generator | None = None) -> SyntheticModel:
    """The true rates of ``feeds`` feeds (drawn from ``seed``, or from ``rng`` when given)."""
    rng = rng if rng is not None else np.random.default_rng(seed)
    mean_count = _POSTS_PER_WEEK * (days / 7.0) / PAPER_FEEDS
    x_max = _x_max(mean_count)
    e1 = _EXPONENT + 1.0
    u = rng.random(feeds)
    expected = (1.0 + u * (x_max**e1 - 1.0)) ** (1.0 / e1)  # inverse CDF of x^b on [1, x_max]
    shares = np.array([c[0] for c in CLUSTER_SHAPES])
    clusters = rng.choice(len(CLUSTER_SHAPES), size=feeds, p=shares / shares.sum())
    shifts = rng.normal(0.0, 1.0, feeds)
    widths = rng.lognormal(0.0, 0.3, feeds)
    weekend = rng.uniform(0.2, 1.0, feeds)
    return SyntheticModel(start=start, days=days, expected_posts=expected,
                          clusters=clusters.astype(np.int64), shifts_h=shifts,
                          widths=widths, weekend=weekend, contrast=contrast)


def synthetic_trace(*, feeds: int = PAPER_FEEDS, days: int = 90, seed: int = 2005,
                    start: float = _START, contrast: float = DAILY_CONTRAST) -> Trace:
    """Postings of ``feeds`` feeds over ``days`` days, generated from ``seed``.

    Each feed posts max(1, Poisson(x)) times (the paper kept feeds with at least one post), at
    instants drawn from its rate over the days at 15-minute resolution, uniform within a step.
    """
    rng = np.random.default_rng(seed)
    model = synthetic_model(feeds=feeds, days=days, start=start, contrast=contrast, rng=rng)
    counts = np.maximum(rng.poisson(model.expected_posts), 1)
    steps_per_day = 96
    shapes = model.daily_shapes(steps_per_day)
    day_weights = model.day_weights()
    step_s = _DAY_S / steps_per_day
    times: list[np.ndarray] = []
    for i in range(feeds):
        cumulative = np.cumsum((day_weights[i][:, None] * shapes[i][None, :]).ravel())
        cumulative /= cumulative[-1]
        draws = np.searchsorted(cumulative, rng.random(counts[i]), side="right")
        offsets = (draws + rng.random(counts[i])) * step_s
        times.append(np.sort(start + np.minimum(offsets, days * _DAY_S - 1e-3)))
    ids = [f"synthetic-{i:05d}" for i in range(feeds)]
    return Trace(feed_ids=ids, hosts=ids, times=times, source=f"synthetic(seed={seed})")


def model_bound(model: SyntheticModel, budget_per_feed_per_day: float, *,
                max_gap_s: float | None = None, span: float = 2.0,
                steps_per_day: int = 96) -> float:
    """The least expected mean delay (minutes) a policy can reach on ``model`` with this budget.

    The policy this bound describes knows every feed's true weekly rate function (it never has
    to learn) and fetches each feed at the instants Theorem 3 finds best for it, with the counts
    that minimize the total (Lagrangian allocation on the exact per-feed delay curves D_i(m)).
    For a periodic Poisson process the delay a schedule gets does not depend on what earlier
    fetches found, so no policy that learns from fetches can do better in expectation; the
    clairvoyant oracle of :mod:`.oracle` (which knows the posting instants) is lower still.

    Theorem 3 placement is a local search, so strictly this is the best plan we can compute for
    the true rates (hourly and 15-minute placements, the better kept), not a proof of optimality;
    the refinement is exact within its reach and tested against brute force.

    ``max_gap_s`` adds feedmesh's constraint (no gap between fetches above it, so at least
    ceil(week / max_gap) fetches a week). Counts are searched within a factor ``span`` of the
    square-root rule's, which holds the optimum in practice. ``steps_per_day`` bins (96: the
    trace's own 15-minute resolution, finer than the policies' hours, so the bound holds for a
    policy that could see within the hour too).
    """
    from .allocation import sqrt_allocation
    from .placement import RateGrid, expected_delay, place_batch

    width_h = 24.0 / steps_per_day
    rates = model.weekly_rates(steps_per_day) / width_h  # posts per hour, bin by bin
    coarse = model.weekly_rates(24)
    week_posts = rates.sum(axis=1) * width_h
    budget = budget_per_feed_per_day * 7.0 * model.feeds
    floor = 1 if max_gap_s is None else max(1, int(np.ceil(7 * _DAY_S / max_gap_s - 1e-9)))
    guess = sqrt_allocation(week_posts, budget, floors=float(floor))
    low = np.maximum(np.floor(guess / span), floor).astype(np.int64)
    high = np.maximum(np.ceil(guess * span) + 1, low + 1).astype(np.int64)
    counts = np.arange(int(low.min()), int(high.max()) + 1)
    delay = np.full((model.feeds, len(counts)), np.inf)  # expected delay per week, post-hours
    gap_h = None if max_gap_s is None else max_gap_s / 3600.0
    for column, m in enumerate(counts):
        rows = np.flatnonzero((low <= m) & (m <= high))
        if len(rows) == 0:
            continue
        sub = RateGrid(rates[rows], width_h)
        best = expected_delay(sub, place_batch(rates[rows], width_h, int(m), max_gap=gap_h))
        if steps_per_day != 24:  # also the hourly plan (refinement is local): keep the better
            hourly = place_batch(coarse[rows], 1.0, int(m), max_gap=gap_h)
            best = np.minimum(best, expected_delay(sub, np.sort(hourly, axis=1)))
        delay[rows, column] = best
    lo_price, hi_price = 1e-9, 1e9
    for _ in range(100):  # bisection on the price of a fetch (log scale)
        price = (lo_price * hi_price) ** 0.5
        chosen = np.argmin(delay + price * counts[None, :], axis=1)
        if counts[chosen].sum() > budget:
            lo_price = price
        else:
            hi_price = price
    chosen = np.argmin(delay + hi_price * counts[None, :], axis=1)
    total = delay[np.arange(model.feeds), chosen].sum()
    return float(total / week_posts.sum() * 60.0)
