"""Which crawler fetches which feed: random, Cobra's first fit, and ours (equal work, near first).

Every function is pure: feeds, crawlers and a latency matrix in, ``{feed: crawler}`` out.

* :func:`random_assignment` - the baseline: feeds shuffled and dealt, equal counts.
* :func:`first_fit` - Cobra 3.7: crawlers take turns; in its turn a crawler takes its nearest
  unassigned feed, until each has F/C. Equal counts, whatever the feeds cost.
* :func:`balanced` - ours: equal *work* (each feed weighed by :func:`~.cost.cost_matrix`:
  polls per cycle times round trips times latency), near crawlers first:

  1. every crawler may take up to a capacity of work, first ``(1 + slack)`` times an equal
     share of what the feeds would cost at their nearest crawlers;
  2. feeds go in order of regret (what it would cost to give a feed the next crawler that is
     actually worse than its best; heavy feeds first, as in longest-processing-time-first
     scheduling), each to the cheapest crawler that still has room, or, when none has, to the
     one that would finish it soonest;
  3. a local search then moves single feeds off the busiest crawler while that lowers the
     busier of the two crawlers involved, choosing the move that pays the least extra work per
     unit of work moved (a far crawler pays more round trips for the same feed);
  4. steps 2-3 again, bisecting on the capacity: the smallest capacity at which every feed
     finds room in step 2 (spilling the feeds that lose least by going far) gives the
     assignment; the best makespan seen is kept.

* :func:`reassign` - crawlers came or went: feeds of crawlers still present stay where they are;
  feeds of departed crawlers (and new feeds) are placed as in steps 2 and 4; a crawler left short of
  an equal share (a newcomer) takes over feeds one at a time from the busiest crawler, heavy and
  near ones first, so that few feeds move; step 3 runs only if some crawler is still over.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np

from feedmesh.locality.cost import FeedLoad, cost_matrix
from feedmesh.locality.errors import LocalityError
from feedmesh.locality.latency import LatencyMatrix

__all__ = ["balanced", "first_fit", "random_assignment", "reassign", "work"]

Assignment = dict[str, str]


def _check(loads: Sequence[FeedLoad], crawlers: Sequence[str]) -> None:
    if not crawlers:
        raise LocalityError("no crawlers to assign feeds to")
    if len(set(crawlers)) != len(crawlers):
        raise LocalityError(f"crawler names must be distinct, got {list(crawlers)}")
    feeds = [load.feed for load in loads]
    if len(set(feeds)) != len(feeds):
        raise LocalityError("a feed is listed twice")


def random_assignment(feeds: Sequence[str], crawlers: Sequence[str], seed: int) -> Assignment:
    """Feeds shuffled (by ``seed``) and dealt to the crawlers in turn."""
    if not crawlers:
        raise LocalityError("no crawlers to assign feeds to")
    order = sorted(feeds)
    random.Random(seed).shuffle(order)
    return {feed: crawlers[i % len(crawlers)] for i, feed in enumerate(order)}


def first_fit(loads: Sequence[FeedLoad], crawlers: Sequence[str],
              latency: LatencyMatrix) -> Assignment:
    """Cobra's first-fit mapping: crawlers in turn take their nearest remaining feed, F/C each
    (the first F mod C crawlers one more). Ties in latency go to the feed listed first."""
    _check(loads, crawlers)
    groups = sorted({load.group for load in loads})
    column = {g: j for j, g in enumerate(groups)}
    rtt = latency.rows(crawlers, groups)
    index = np.array([column[load.group] for load in loads], dtype=np.int64)
    feeds, count = len(loads), len(crawlers)
    orders = [np.argsort(rtt[c, index], kind="stable") for c in range(count)]
    positions = [0] * count
    quota = [feeds // count + (1 if c < feeds % count else 0) for c in range(count)]
    taken = np.zeros(feeds, dtype=bool)
    result: Assignment = {}
    for _ in range(max(quota)):
        for c in range(count):
            if quota[c] == 0:
                continue
            order, position = orders[c], positions[c]
            while taken[order[position]]:
                position += 1
            feed = order[position]
            taken[feed] = True
            positions[c] = position + 1
            quota[c] -= 1
            result[loads[feed].feed] = crawlers[c]
    return result


def balanced(loads: Sequence[FeedLoad], crawlers: Sequence[str], latency: LatencyMatrix, *,
             slack: float = 0.05, overhead_s: float = 0.002, searches: int = 14) -> Assignment:
    """Ours: equal work per crawler, each feed as near as that allows (see the module doc)."""
    _check(loads, crawlers)
    if not loads:
        return {}
    cost = cost_matrix(loads, crawlers, latency, overhead_s)
    best = cost.min(axis=1)
    lower = max(best.sum() / len(crawlers), float(best.max()))
    owner = np.full(len(loads), -1, dtype=np.int64)
    busy = np.zeros(len(crawlers))
    _place(cost, np.arange(len(loads)), owner, busy, lower * (1.0 + slack))
    _even_out(cost, owner, busy)
    # Then the smallest capacity at which placing by regret fits every feed, by bisection.
    low, high = lower, float(busy.max())
    for _ in range(searches):
        if high - low <= 0.002 * high:
            break
        middle = (low + high) / 2
        trial_owner = np.full(len(loads), -1, dtype=np.int64)
        trial_busy = np.zeros(len(crawlers))
        if not _place(cost, np.arange(len(loads)), trial_owner, trial_busy, middle, strict=True):
            low = middle
            continue
        _even_out(cost, trial_owner, trial_busy)
        if trial_busy.max() < busy.max():
            owner, busy = trial_owner, trial_busy
        high = min(middle, float(busy.max()))
    return {load.feed: crawlers[owner[i]] for i, load in enumerate(loads)}


def reassign(previous: Mapping[str, str], loads: Sequence[FeedLoad], crawlers: Sequence[str],
             latency: LatencyMatrix, *, slack: float = 0.05, overhead_s: float = 0.002,
             searches: int = 14) -> Assignment:
    """The assignment after crawlers came or went (and feeds were added or dropped), moving as
    few feeds as keep the work balanced (see the module doc)."""
    _check(loads, crawlers)
    if not loads:
        return {}
    cost = cost_matrix(loads, crawlers, latency, overhead_s)
    column = {name: c for c, name in enumerate(crawlers)}
    owner = np.array([column.get(previous.get(load.feed, ""), -1) for load in loads],
                     dtype=np.int64)
    kept = owner >= 0
    busy = np.bincount(owner[kept], weights=cost[np.flatnonzero(kept), owner[kept]],
                       minlength=len(crawlers)).astype(float)
    total = busy.sum() + cost[~kept].min(axis=1).sum()
    share = total / len(crawlers)
    capacity = share * (1.0 + slack)
    orphans = np.flatnonzero(~kept)
    placed_owner, placed_busy = owner.copy(), busy.copy()
    _place(cost, orphans, placed_owner, placed_busy, capacity)
    # As in balanced(): the smallest capacity at which every orphan finds room near.
    low, high = capacity, float(placed_busy.max())
    for _ in range(searches):
        if high - low <= 0.002 * high:
            break
        middle = (low + high) / 2
        trial_owner, trial_busy = owner.copy(), busy.copy()
        if _place(cost, orphans, trial_owner, trial_busy, middle, strict=True):
            placed_owner, placed_busy, high = trial_owner, trial_busy, middle
        else:
            low = middle
    owner, busy = placed_owner, placed_busy
    floor = share * (1.0 - slack)
    for crawler in np.argsort(busy, kind="stable"):
        if busy[crawler] < floor:
            _take_over(cost, owner, busy, int(crawler), share, floor, capacity)
    if busy.max() > busy.mean() * (1.0 + slack):
        _even_out(cost, owner, busy)
    return {load.feed: crawlers[owner[i]] for i, load in enumerate(loads)}


def work(assignment: Mapping[str, str], loads: Sequence[FeedLoad], crawlers: Sequence[str],
         latency: LatencyMatrix, overhead_s: float = 0.002) -> dict[str, float]:
    """Seconds of fetching per cycle each crawler has under ``assignment``."""
    cost = cost_matrix(loads, crawlers, latency, overhead_s)
    column = {name: c for c, name in enumerate(crawlers)}
    busy = dict.fromkeys(crawlers, 0.0)
    for i, load in enumerate(loads):
        crawler = assignment[load.feed]
        busy[crawler] += float(cost[i, column[crawler]])
    return busy


# -- the steps -------------------------------------------------------------------------------

def _place(cost: np.ndarray, feeds: np.ndarray, owner: np.ndarray, busy: np.ndarray,
           capacity: float, strict: bool = False) -> bool:
    """Step 2: by regret, each feed to its cheapest crawler with room, else (unless ``strict``:
    then give up and say so) to the one done soonest. True when every feed found room."""
    if len(feeds) == 0:
        return True
    fitted = True
    rows = cost[feeds]
    best = rows.min(axis=1)
    # Crawlers alike (one site, one region) tie for best: the regret is against the next
    # crawler that is actually worse.
    worse = np.where(rows > best[:, None] * (1 + 1e-9), rows, np.inf).min(axis=1)
    regret = np.where(np.isfinite(worse), worse - best, best)
    for k in np.lexsort((-best, -regret)):
        feed = feeds[k]
        row = cost[feed]
        room = busy + row <= capacity
        if room.any():
            crawler = int(np.argmin(np.where(room, row, np.inf)))
        elif strict:
            return False
        else:
            fitted = False
            crawler = int(np.argmin(busy + row))
        owner[feed] = crawler
        busy[crawler] += row[crawler]
    return fitted


def _take_over(cost: np.ndarray, owner: np.ndarray, busy: np.ndarray, taker: int, share: float,
               floor: float, capacity: float) -> None:
    """A crawler short of its share takes feeds from the busiest crawlers above the share, one
    feed at a time: of the busiest donor's feeds that fit, the heaviest one that is no farther
    from the taker than from its crawler (so few feeds move and none goes far), else the one
    freeing most work per work it adds."""
    while busy[taker] < share:
        for donor in np.argsort(-busy, kind="stable"):
            if busy[donor] <= share:
                return
            if donor == taker:
                continue
            mine = np.flatnonzero(owner == donor)
            freed = cost[mine, donor]
            added = cost[mine, taker]
            fits = ((busy[taker] + added <= capacity) & (busy[donor] - freed >= floor)
                    & (busy[taker] + added < busy[donor]))
            if fits.any():
                break
        else:
            return
        # Near feeds (no farther from the taker than from their crawler) first, heaviest first;
        # farther ones only when no near one fits, by work freed per work added.
        near = added <= freed * (1.0 + 1e-9)
        score = np.where(near, freed, 1e-6 * freed * freed / added)
        feed = mine[int(np.argmax(np.where(fits, score, -np.inf)))]
        busy[donor] -= cost[feed, donor]
        owner[feed] = taker
        busy[taker] += cost[feed, taker]


def _even_out(cost: np.ndarray, owner: np.ndarray, busy: np.ndarray,
              max_moves: int | None = None) -> None:
    """Step 3: move single feeds off the busiest crawler while that lowers the busier of the two
    crawlers involved; of those moves, the one paying least extra work per unit of work moved
    (a near crawler), then the one lowering it most."""
    count = len(busy)
    if count < 2:
        return
    limit = max_moves if max_moves is not None else 4 * len(owner)
    for _ in range(limit):
        busiest = int(np.argmax(busy))
        mine = np.flatnonzero(owner == busiest)
        if len(mine) == 0:
            return
        after_other = busy[None, :] + cost[mine]
        after_busiest = busy[busiest] - cost[mine, busiest]
        pair = np.maximum(after_other, after_busiest[:, None])
        pair[:, busiest] = np.inf
        ratio = cost[mine] / cost[mine, busiest][:, None]
        # Of the moves that help, the one paying least extra work per unit moved, then the
        # one that helps most.
        score = np.where(pair < busy[busiest] * (1.0 - 1e-9), ratio + 1e-6 * pair / busy[busiest],
                         np.inf)
        flat = int(np.argmin(score))
        k, target = divmod(flat, count)
        if not np.isfinite(score[k, target]):
            return
        feed = mine[k]
        busy[busiest] -= cost[feed, busiest]
        busy[target] += cost[feed, target]
        owner[feed] = target
