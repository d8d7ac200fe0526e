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
import hashlib
import itertools
import math
import random
from collections.abc import Iterable, Sequence

__all__ = ["CROWDED_SHARE", "MAX_PLANS_PER_FEED", "MOVE_CHANCE", "RELAX_MIN_STEP", "RELAX_SHARE",
           "best_in_window", "better_in_window", "clearance_at", "crowded", "feed_origin",
           "fill_largest_gap", "follower_key", "future_slots", "rank_slots", "slot_in_window",
           "toward_middle"]

MAX_PLANS_PER_FEED = 64
"""Relayed planned fetch times advertised per feed (the latest)."""

MOVE_CHANCE = 0.2
"""The chance, each round, that a crowded planned fetch moves (:func:`better_in_window`)."""

CROWDED_SHARE = 0.5
"""Crowded: closer to a known fetch than this share of the even spacing."""

RELAX_SHARE = 0.5
"""How far a planned fetch steps, each round, towards the middle of its two nearest known
fetches (:func:`toward_middle`)."""

RELAX_MIN_STEP = 0.15
"""Steps shorter than this share of the even spacing are not made."""


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
    """Where to move the planned fetch in [now, latest], or None if it stays. With ``chance``,
    when it sits closer (mod ``interval_s``) to a known fetch than half the even spacing
    (:func:`crowded`), the best time of the window (:func:`best_in_window`: the largest gap).
    The chance keeps followers that decide at once from the same (slightly old) knowledge from
    all jumping into one gap (measured on 46 followers knowing 70% of each other: mean wait
    13.1 min against 13.4 moving every round, 19.5 for random phases, 10.4 evenly spaced).
    Otherwise a step towards the middle of its two nearest known fetches
    (:func:`toward_middle`), which evens out what the jumps leave."""
    known = list(known)
    if not known or planned < now:
        return None
    if rng.random() < chance and crowded(planned, known, interval_s, CROWDED_SHARE):
        at, clear = best_in_window(now, latest, interval_s, known, rng)
        if clear > clearance_at(min(planned, latest) - now, _offsets(now, interval_s, known)):
            return at
    return toward_middle(planned, now, latest, interval_s, known)


def toward_middle(planned: float, now: float, latest: float, interval_s: float,
                  known: Sequence[float], share: float = RELAX_SHARE,
                  min_step: float = RELAX_MIN_STEP) -> float | None:
    """The planned fetch moved ``share`` of the way to the middle of the known fetches just
    before and just after it (mod ``interval_s``), within [now, latest] (and no later than an
    interval from now, as :func:`best_in_window`; a step past an end goes half way to it); None
    for a step under ``min_step`` of the even spacing (each move is advertised, and relayed). Every
    follower doing so each round is a relaxation of the schedule towards even spacing: a gap
    wider than its neighbours' pulls both its ends in, and followers that sit together push
    apart, without any two of them aiming at one point (the jumps' herd). Measured in the
    simulator (docs/mesh-feedex.md, "Stepping towards the middle")."""
    if not known or planned < now:
        return None
    base = now % interval_s
    points = sorted({((t % interval_s) - base) % interval_s for t in known})
    offset = ((planned % interval_s) - base) % interval_s
    k = bisect.bisect_left(points, offset)
    before = points[k - 1] if k > 0 else points[-1] - interval_s
    after = points[k] if k < len(points) else points[0] + interval_s
    step = share * ((before + after) / 2 - offset)
    if abs(step) < min_step * interval_s / (len(points) + 1):
        return None
    lo, hi = now, min(latest, now + interval_s)
    at = planned + step
    if at < lo:    # at most half way to an end of the window: followers stepping past it
        at = planned - (planned - lo) / 2   # together must not meet there (nor fetch at once)
    elif at > hi:
        at = planned + (hi - planned) / 2
    return at if abs(at - planned) >= 1.0 and lo <= at <= hi else None


# -- placement by rank: every follower computes the same schedule from the same knowledge ---------

def follower_key(address: tuple[str, int], feed: str) -> bytes:
    """The order of a feed's followers: a hash of (address, feed URL), the same at every node
    (and different for each feed, so no node is always first)."""
    return hashlib.sha1(f"{address[0]}:{address[1]}|{feed}".encode(),
                        usedforsecurity=False).digest()[:8]


def feed_origin(feed: str, interval_s: float) -> float:
    """The feed's common phase origin in [0, interval_s), from its URL hash."""
    digest = hashlib.sha1(f"origin|{feed}".encode(), usedforsecurity=False).digest()[:8]
    return int.from_bytes(digest, "big") / 2.0 ** 64 * interval_s


def rank_slots(interval_s: float, waiting: int) -> list[float]:
    """Phase offsets from the feed's origin of ``waiting`` fetches when none is made yet:
    (k + 0.5) * interval / waiting."""
    return [(k + 0.5) * interval_s / waiting for k in range(waiting)]


def future_slots(made: Iterable[float], waiting: int, interval_s: float,
                 latest: float) -> list[float]:
    """Times for ``waiting`` fetches not yet made, given the ``made`` ones (at most an interval
    old; their next ones, an interval later, stay where they are): the gaps between the last
    made fetch and the made ones' next occurrences, those that begin by ``latest`` (a waiting
    fetch can be no later: the gaps beyond are in the past of this round, their phases taken),
    get them one at a time, each to the gap whose spacing would be widest (the schedule's
    largest gap is as small as it can be), spaced evenly within it. A pure function of its
    arguments: followers that know the same fetches compute the same times."""
    made = sorted(set(made))
    if waiting <= 0 or not made:
        return []
    last = made[-1]
    bounds = [last, *(m + interval_s for m in made)]
    gaps = [(a, b - a) for a, b in itertools.pairwise(bounds) if a <= latest and b > a]
    counts = [0] * len(gaps)
    widest = sorted((-g, i) for i, (_, g) in enumerate(gaps))  # spacing if one more came
    for _ in range(waiting):
        _, i = widest.pop(0)
        counts[i] += 1
        bisect.insort(widest, (-gaps[i][1] / (counts[i] + 1), i))
    return [a + g * (j + 1) / (counts[i] + 1)
            for i, (a, g) in enumerate(gaps) for j in range(counts[i])]


def slot_in_window(now: float, start: float, latest: float, interval_s: float, feed: str,
                   me: tuple[str, int], plans: Iterable[tuple[tuple[str, int], float]]) -> float:
    """Our fetch time in [start, latest] by rank: the other followers' ``plans`` (origin, time)
    at or before ``now`` are made (their phases stay), those after it wait like ours; the waiting
    ones, ourselves among them, ordered by :func:`follower_key`, take the slots
    (:func:`rank_slots` from the feed's :func:`feed_origin` while none is made, then
    :func:`future_slots`) in the order of their phases from that origin, and we take our rank's.
    No herding (every node computes the same order) and no relaxing step by step: a node
    learning a follower, or that one's fetch being made, re-slots at once, and the others keep
    their slots when the one due first is made. Of the slot's occurrences the one nearest the
    window is taken, clamped into it: never sooner than ``start`` nor later than ``latest``."""
    made: list[float] = []
    waiting = {me: follower_key(me, feed)}
    for origin, at in plans:
        if at <= now:
            made.append(at)
        elif origin not in waiting:
            waiting[origin] = follower_key(origin, feed)
    order = sorted(waiting, key=lambda o: (waiting[o], o))
    rank = order.index(me)
    origin = feed_origin(feed, interval_s)
    slots = future_slots(made, len(order), interval_s, latest)
    if slots:
        slots.sort(key=lambda t: (t - origin) % interval_s)
        return min(max(slots[rank], start), latest)
    slot = origin + rank_slots(interval_s, len(order))[rank]
    following = now + (slot - now) % interval_s
    best, best_off = start, math.inf
    for at in (following - interval_s, following, following + interval_s):
        clamped = min(max(at, start), latest)
        if abs(clamped - at) < best_off:
            best, best_off = clamped, abs(clamped - at)
    return best
