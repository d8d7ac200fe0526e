"""The network as one monitor: spread the fetches of a shared feed over time (issue 13, section 3).

FeedEx nodes fetch independently, so with random phases n nodes that fetch a feed every T leave
gaps that are exponential-like: an entry waits T/(n+1) on average for the first of them. Spread
evenly, it would wait T/(2n). Nodes therefore advertise, with their subscription set, the planned
fetch times they know of for each feed (their own and their neighbours', a bounded list), and a
node joining picks for each feed the phase in the middle of the largest gap between the known
phases (times taken modulo its interval), then keeps that phase. No node fetches a feed more often
than its own interval: only the phase moves, and only before its first fetch.

Not done: re-planning when neighbours come and go. Weighting the gaps by the feed's posting rhythm
was measured in the simulator with an oracle (``SimConfig.phase_oracle``): at a 16 h interval it
does no better than even spacing, and cannot last (the phase walks through the day every 48 h);
see docs/mesh-feedex.md, "What spreading can reach at all".
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Iterable, Sequence

__all__ = ["CROWDED_SHARE", "MAX_PLANS_PER_FEED", "MOVE_CHANCE", "best_in_window",
           "better_in_window", "clearance_at", "crowded", "fill_largest_gap"]

MAX_PLANS_PER_FEED = 64
"""Relayed planned fetch times advertised per feed (the latest)."""

MOVE_CHANCE = 0.2
"""The chance, each round, that a crowded planned fetch moves (:func:`better_in_window`)."""

CROWDED_SHARE = 0.5
"""Crowded: closer to a known fetch than this share of the even spacing."""


def crowded(planned: float, known: Iterable[float], interval_s: float,
            share: float = 0.25) -> bool:
    """Is ``planned`` closer (mod ``interval_s``) to a known plan than ``share`` of the even
    spacing, interval / (known + 1)? Then moving it into the largest gap shortens waits."""
    others = [t % interval_s for t in known]
    if not others:
        return False
    phase = planned % interval_s
    nearest = min(min(abs(phase - o), interval_s - abs(phase - o)) for o in others)
    return nearest < interval_s / (len(others) + 1) * share


def fill_largest_gap(now: float, interval_s: float, known: Iterable[float],
                     rng: random.Random) -> float:
    """The first time at or after ``now`` whose phase (mod ``interval_s``) lies in the middle half
    of the largest gap between the ``known`` phases (uniformly there: nodes that plan at once from
    the same knowledge must not all pick one point); a random phase if none is known."""
    phases = sorted({t % interval_s for t in known})
    if not phases:
        return now + rng.random() * interval_s
    best_gap, best_start = -1.0, 0.0
    for k, phase in enumerate(phases):
        following = phases[k + 1] if k + 1 < len(phases) else phases[0] + interval_s
        gap = following - phase
        if gap > best_gap:
            best_gap, best_start = gap, phase
    chosen = (best_start + best_gap * (0.25 + 0.5 * rng.random())) % interval_s
    return now + (chosen - now % interval_s) % interval_s


def clearance_at(offset: float, points: Sequence[float]) -> float:
    """Distance from ``offset`` to the nearest of ``points`` (sorted, with the sentinels of
    :func:`_offsets`); infinite when there are none."""
    if not points:
        return math.inf
    k = bisect.bisect_left(points, offset)
    left = offset - points[k - 1] if k > 0 else math.inf
    right = points[k] - offset if k < len(points) else math.inf
    return min(left, right)


def _offsets(now: float, interval_s: float, known: Iterable[float]) -> list[float]:
    """The known phases as offsets from ``now`` in [0, interval_s), sorted, with the last one
    repeated an interval before and the first an interval after (so every gap is a pair)."""
    base = now % interval_s
    points = sorted({round(((t % interval_s) - base) % interval_s, 3) for t in known})
    if not points:
        return []
    return [points[-1] - interval_s, *points, points[0] + interval_s]


def best_in_window(now: float, latest: float, interval_s: float, known: Iterable[float],
                   rng: random.Random) -> tuple[float, float]:
    """The time in [now, latest] farthest (mod ``interval_s``) from every ``known`` fetch time,
    jittered within half its clearance (nodes that choose at once from the same knowledge must
    not all pick one point), and that clearance; a random time in the window if none is known.
    ``latest - now`` is at most the interval: a node never waits longer than its interval for
    the fetch it plans, whatever it was told."""
    span = max(0.0, min(latest - now, interval_s))
    points = _offsets(now, interval_s, known)
    if not points:
        return now + rng.random() * span, math.inf
    best, best_clear, seg = 0.0, -1.0, (0.0, 0.0)
    for x, y in itertools.pairwise(points):
        lo, hi = max(x, 0.0), min(y, span)
        if lo > hi:
            continue
        mid = min(max((x + y) / 2, lo), hi)
        clear = min(mid - x, y - mid)
        if clear > best_clear:
            best, best_clear, seg = mid, clear, (lo, hi)
    jitter = best_clear / 2 * (2 * rng.random() - 1)
    chosen = min(max(best + jitter, seg[0]), seg[1])
    return now + chosen, best_clear


def better_in_window(planned: float, now: float, latest: float, interval_s: float,
                     known: Iterable[float], rng: random.Random,
                     chance: float = MOVE_CHANCE) -> float | None:
    """Where to move the planned fetch in [now, latest], or None if it stays: with ``chance``,
    when it sits closer (mod ``interval_s``) to a known fetch than half the even spacing
    (:func:`crowded`), the best time of the window (:func:`best_in_window`: the largest gap).
    The chance keeps followers that decide at once from the same (slightly old) knowledge from
    all jumping into one gap (measured on 46 followers knowing 70% of each other: mean wait
    13.1 min against 13.4 moving every round, 19.5 for random phases, 10.4 evenly spaced)."""
    known = list(known)
    if not known or planned < now or rng.random() >= chance:
        return None
    if not crowded(planned, known, interval_s, CROWDED_SHARE):
        return None
    at, clear = best_in_window(now, latest, interval_s, known, rng)
    points = _offsets(now, interval_s, known)
    if clear <= clearance_at(min(planned, latest) - now, points):
        return None
    return at
