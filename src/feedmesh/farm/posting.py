"""When each farm feed posts: a periodic inhomogeneous Poisson process per feed.

Statistics (the monitoring paper, section 4.1 and Figures 7 and 10):

* **Rates** are spread by a power law: a feed's mean rate ``r`` (posts/day) has density
  proportional to ``r**-(1 + ALPHA)`` on ``[1/90, 100]`` (from one post in three months, the
  paper's inclusion threshold, to a busy wire). ``ALPHA = 0.2`` puts ~30 % of the feeds at one post
  a day or more (the paper: 3,116 of 9,634 feeds, 32 %).
* **Daily rhythm**: each feed follows one of :data:`PROFILES`, 24 hourly weights (UTC, mean 1);
  the rate at time t is ``r * profile[hour(t)]``. Posts are drawn by thinning: candidates from a
  homogeneous process at the peak rate, each kept with probability ``profile[h] / peak``.

Posts are generated per *block* of time (a power-of-two number of days sized for ~8 posts), each
block from its own counter-based seed (:func:`feedmesh.farm.rand.mix64`). Any window of any feed
can thus be produced alone, lazily and in any order, with the same result; nothing is stored.
"""

from __future__ import annotations

import math
import random
from typing import NamedTuple

import numpy as np

from feedmesh.farm.rand import mix64

__all__ = ["ALPHA", "PROFILES", "RATE_MAX", "RATE_MIN", "Post", "PostingProcess",
           "rates_from_units"]

ALPHA = 0.2
RATE_MIN = 1.0 / 90.0
RATE_MAX = 100.0
_SALT_POSTS = 0x9057


def _profile(weights: list[float]) -> tuple[float, ...]:
    mean = sum(weights) / 24.0
    return tuple(w / mean for w in weights)


# Hourly shapes, UTC. Distinct enough that a learner must tell them apart.
PROFILES: dict[str, tuple[float, ...]] = {
    # US newsroom: working hours in New York (13-22 UTC), little at night.
    "us_newsroom": _profile([3, 2, 1.5, 1, 0.6, 0.4, 0.4, 0.5, 0.8, 1.2, 2, 3, 5, 7, 8, 8.5, 8.5,
                             8, 7.5, 7, 6.5, 6, 5, 4]),
    # European office: 7-17 UTC with a lunch dip.
    "eu_office": _profile([0.3, 0.2, 0.2, 0.2, 0.3, 1, 3, 7, 9, 9, 8.5, 6, 5, 8, 8.5, 8, 6, 3, 1.5,
                           1, 0.8, 0.6, 0.5, 0.4]),
    # Evening blogger in the Americas: 0-5 UTC.
    "evening_blogger": _profile([9, 9.5, 9, 7, 5, 3, 1.5, 0.8, 0.5, 0.3, 0.3, 0.3, 0.4, 0.6, 0.8,
                                 1, 1.2, 1.5, 2, 2.5, 3.5, 5, 6.5, 8]),
    # East Asian day: 0-9 UTC.
    "asia_day": _profile([7, 8, 8.5, 8, 7, 7.5, 7, 6, 4.5, 2.5, 1.2, 0.6, 0.4, 0.3, 0.3, 0.3, 0.3,
                          0.4, 0.5, 0.8, 1.5, 3, 4.5, 6]),
    # Wire service: round the clock with a mild daytime bulge.
    "wire": _profile([0.8, 0.75, 0.7, 0.7, 0.7, 0.75, 0.85, 0.95, 1.05, 1.1, 1.15, 1.2, 1.2, 1.2,
                      1.2, 1.2, 1.15, 1.1, 1.05, 1.0, 0.95, 0.9, 0.85, 0.8]),
    # Morning digest: a sharp spike at 06 UTC, quiet otherwise.
    "morning_digest": _profile([0.2, 0.2, 0.2, 0.2, 0.5, 3, 20, 6, 1, 0.5, 0.3, 0.3, 0.3, 0.3, 0.3,
                                0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.2, 0.2]),
}
PROFILE_NAMES: tuple[str, ...] = tuple(PROFILES)


def rates_from_units(u: np.ndarray) -> np.ndarray:
    """Inverse CDF of the truncated power law: uniforms in [0, 1) -> rates in posts/day."""
    lo, hi = RATE_MIN ** -ALPHA, RATE_MAX ** -ALPHA
    return (lo - u * (lo - hi)) ** (-1.0 / ALPHA)


class Post(NamedTuple):
    """One post: when (farm seconds, whole), and where it sits in its feed's process.

    ``(block, index, burst)`` orders posts like their times do and names them stably:
    :attr:`key` (``"block.index"``, plus ``".burst"`` inside a flood burst) is the entry's id.
    """

    time: int
    block: int
    index: int
    burst: int = -1

    @property
    def key(self) -> str:
        if self.burst < 0:
            return f"{self.block}.{self.index}"
        return f"{self.block}.{self.index}.{self.burst}"

    @property
    def order(self) -> tuple[int, int, int]:
        return (self.block, self.index, self.burst)


def block_seconds(rate_per_day: float) -> int:
    """Block length for a rate: 86400 * 2**k seconds, k in [-5, 10], holding ~8 posts."""
    k = round(math.log2(8.0 / max(rate_per_day, 1e-9)))
    return int(86400 * 2.0 ** max(-5, min(10, k)))


class PostingProcess:
    """The posting times of one feed. Pure: every method is a function of the constructor's args.

    ``burst > 1`` turns every posting event into that many posts at the same second (a flood).
    """

    __slots__ = ("_cache", "block_s", "burst", "feed_id", "peak", "profile", "rate_per_day",
                 "seed")

    def __init__(self, seed: int, feed_id: int, rate_per_day: float, profile: tuple[float, ...],
                 burst: int = 1) -> None:
        self.seed = seed
        self.feed_id = feed_id
        self.rate_per_day = rate_per_day
        self.profile = profile
        self.peak = max(profile)
        self.block_s = block_seconds(rate_per_day)
        self.burst = burst
        self._cache: dict[int, list[Post]] = {}

    def block_of(self, t: float) -> int:
        return math.floor(t / self.block_s)

    def block_posts(self, block: int) -> list[Post]:
        """Posts of one block, in time order."""
        cached = self._cache.get(block)
        if cached is not None:
            return cached
        rng = random.Random(mix64(self.seed, self.feed_id, _SALT_POSTS, block))
        peak_rate = self.rate_per_day / 86400.0 * self.peak
        start = block * self.block_s
        end = start + self.block_s
        profile, peak = self.profile, self.peak
        posts: list[Post] = []
        events = 0
        t = float(start)
        while True:
            t += rng.expovariate(peak_rate)
            if t >= end:
                break
            if rng.random() * peak < profile[int(t % 86400.0) // 3600]:
                second = int(t)
                if self.burst > 1:
                    posts.extend(Post(second, block, events, m) for m in range(self.burst))
                else:
                    posts.append(Post(second, block, events))
                events += 1
        if len(self._cache) >= 16:
            self._cache.clear()
        self._cache[block] = posts
        return posts

    def posts_between(self, start: float, end: float) -> list[Post]:
        """Posts with ``start < time <= end``, oldest first."""
        out: list[Post] = []
        for block in range(self.block_of(start), self.block_of(end) + 1):
            out.extend(p for p in self.block_posts(block) if start < p.time <= end)
        return out

    def last_posts(self, t: float, count: int, earliest: float) -> list[Post]:
        """Up to ``count`` latest posts with ``earliest <= time <= t``, newest first."""
        out: list[Post] = []
        block = self.block_of(t)
        while len(out) < count and (block + 1) * self.block_s > earliest:
            for post in reversed(self.block_posts(block)):
                if post.time <= t and post.time >= earliest:
                    out.append(post)
                    if len(out) == count:
                        break
            block -= 1
        return out

    def next_post_after(self, t: float, horizon_s: float) -> float:
        """Time of the first post after ``t``, or ``t + horizon_s`` if none comes sooner."""
        limit = t + horizon_s
        block = self.block_of(t)
        while block * self.block_s <= limit:
            for post in self.block_posts(block):
                if post.time > t:
                    return float(min(post.time, limit))
            block += 1
        return limit
