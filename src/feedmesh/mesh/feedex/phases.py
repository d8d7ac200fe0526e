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

import random
from collections.abc import Iterable

__all__ = ["MAX_PLANS_PER_FEED", "crowded", "fill_largest_gap"]

MAX_PLANS_PER_FEED = 64
"""Relayed planned fetch times advertised per feed (the latest)."""


def crowded(planned: float, known: Iterable[float], interval_s: float) -> bool:
    """Is ``planned`` closer (mod ``interval_s``) to a known plan than a quarter of the even
    spacing, interval / (known + 1)? Then moving it into the largest gap shortens waits."""
    others = [t % interval_s for t in known]
    if not others:
        return False
    phase = planned % interval_s
    nearest = min(min(abs(phase - o), interval_s - abs(phase - o)) for o in others)
    return nearest < interval_s / (len(others) + 1) / 4


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
