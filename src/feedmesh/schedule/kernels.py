"""The scheduler's hot path as compiled kernels over flat arrays: the due-time heap, politeness,
the budget bucket, and "fetched now: when next?".

Why arrays and kernels: the live crawler asks "what is due?" and reports fetches a few times a
second, the trace simulator ten thousand times a simulated day for every policy. Python objects
per feed (a tuple per heap entry, a deque per host) cost 10-20 us per fetch; the same decisions
over numpy arrays compiled by numba cost well under one. The :class:`~.scheduler.Scheduler`
keeps every per-feed number here (rows of ``F`` and ``I``, fields named below) and calls these
functions from both the crawler's and the simulator's loop, so both run the same code. Without
numba (it is the ``fast`` extra) the same functions run as plain Python, slower but identical.

State, all indexed by slot (a feed's row) or host index:

* ``F[slot, F_*]`` float64 and ``I[slot, I_*]`` int64 per-feed fields (due time, last fetch,
  backoff, dither, ttl, the plan's period/origin and where its offsets sit in ``pool``, flags...);
* an *indexed* binary min-heap of due times (``heap_keys``/``heap_slots``/``I[:, I_HEAP_POS]``,
  size in ``heap_n[0]``): a feed is in it at most once and a new due time moves it in place, so
  nothing stale accumulates;
* ``HF[host, H_*]``/``HI[host, HI_*]`` per-host politeness, ``ring[host, :]`` the times of the
  host's last fetches (a ring of ``max_per_minute`` entries);
* ``bucket`` = [tokens, rate per second, capacity, updated_at (NaN before the first refill)];
* ``K`` the settings the kernels need (``K_*``).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "FULL_RECHECK_S", "F_FIELDS", "I_FIELDS", "K_FIELDS", "MODE_ADAPTIVE", "MODE_ADAPTIVE_LITERAL",
    "MODE_PLAN",
    "bucket_refill", "heap_remove", "heap_update", "learn_batch", "next_allowed", "plan_next",
    "pop_due", "push", "record_success", "replan", "respace_line",
]

try:  # pragma: no cover - exercised whichever way the environment is
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

    def njit(*args, **kwargs):  # type: ignore[no-redef]
        def wrap(function):
            return function
        return wrap(args[0]) if args and callable(args[0]) else wrap

# -- per-feed float fields ----------------------------------------------------------------------
F_DUE, F_LAST_FETCH, F_LAST_SUCCESS, F_BACKOFF, F_DITHER, F_PHASE, F_TTL, F_WEIGHT, \
    F_PLAN_PERIOD, F_PLAN_ORIGIN, F_INTERVAL = range(11)
F_FIELDS = 11
# -- per-feed integer fields --------------------------------------------------------------------
I_HOST, I_FLAGS, I_ERRORS, I_PLAN_START, I_PLAN_COUNT, I_PLAN_CAP, I_SKIP_HOURS, I_SKIP_DAYS, \
    I_HEAP_POS = range(9)
I_FIELDS = 9
# flags
FLAG_HELD, FLAG_IN_FLIGHT, FLAG_GONE, FLAG_AWAITING, FLAG_WEBSUB, FLAG_SKIP_ALL = 1, 2, 4, 8, 16, 32
FLAG_QUEUED = 64  # holds a place in its host's line (moved there by host pacing)
FLAG_URGENT = 128  # a person just added it: waits for its host at the head of the line
# -- per-host fields ----------------------------------------------------------------------------
H_LAST, H_SPACING, H_BLOCKED, H_QUEUE, H_LATENCY = range(5)
H_FIELDS = 5
HI_PER_MINUTE, HI_HEAD, HI_COUNT, HI_IN_FLIGHT, HI_URGENT, HI_HELD = range(6)
HI_FIELDS = 6
FULL_RECHECK_S = 5.0
"""A feed whose host has its fetches in flight looks again this much later at the latest (the
end of one of them gives it its place sooner: :func:`respace_line`)."""
# -- settings the kernels read ------------------------------------------------------------------
K_MIN_INTERVAL, K_MAX_GAP, K_HINT_MAX, K_WEBSUB_S, K_HONOUR_SKIP, K_BASE_INTERVAL, \
    K_TARGET_SHARE, K_T_MIN, K_T_MAX, K_SKEW, K_DAY, K_WINDOW_DAYS, K_HOST_CONCURRENCY = range(13)
K_FIELDS = 13
# -- how the next fetch is chosen ----------------------------------------------------------------
MODE_PLAN, MODE_ADAPTIVE, MODE_ADAPTIVE_LITERAL = 0, 1, 2

_HOUR = 3600.0


# -- the heap -----------------------------------------------------------------------------------
@njit(cache=True)
def _sift_up(keys, slots, I, i):
    key = keys[i]
    slot = slots[i]
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] <= key:
            break
        keys[i] = keys[parent]
        slots[i] = slots[parent]
        I[slots[i], I_HEAP_POS] = i
        i = parent
    keys[i] = key
    slots[i] = slot
    I[slot, I_HEAP_POS] = i


@njit(cache=True)
def _sift_down(keys, slots, I, i, n):
    key = keys[i]
    slot = slots[i]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and keys[child + 1] < keys[child]:
            child += 1
        if keys[child] >= key:
            break
        keys[i] = keys[child]
        slots[i] = slots[child]
        I[slots[i], I_HEAP_POS] = i
        i = child
    keys[i] = key
    slots[i] = slot
    I[slot, I_HEAP_POS] = i


@njit(cache=True)
def heap_update(keys, slots, heap_n, I, slot, due):
    """Put ``slot`` in the heap at ``due`` (insert, or move it if it is there)."""
    pos = I[slot, I_HEAP_POS]
    if pos < 0:
        n = heap_n[0]
        keys[n] = due
        slots[n] = slot
        heap_n[0] = n + 1
        _sift_up(keys, slots, I, n)
        return
    old = keys[pos]
    keys[pos] = due
    if due < old:
        _sift_up(keys, slots, I, pos)
    else:
        _sift_down(keys, slots, I, pos, heap_n[0])


@njit(cache=True)
def heap_remove(keys, slots, heap_n, I, slot):
    """Take ``slot`` out of the heap (nothing if it is not there)."""
    pos = I[slot, I_HEAP_POS]
    if pos < 0:
        return
    I[slot, I_HEAP_POS] = -1
    n = heap_n[0] - 1
    heap_n[0] = n
    if pos == n:
        return
    keys[pos] = keys[n]
    slots[pos] = slots[n]
    I[slots[pos], I_HEAP_POS] = pos
    if pos > 0 and keys[pos] < keys[(pos - 1) >> 1]:
        _sift_up(keys, slots, I, pos)
    else:
        _sift_down(keys, slots, I, pos, n)


# -- time rules ---------------------------------------------------------------------------------
@njit(cache=True)
def next_allowed(when, skip_hours, skip_days):
    """The first instant at or after ``when`` outside skipHours/skipDays (GMT bit masks).

    The search is bounded by a week; masks that forbid everything are not passed here (the
    feed's FLAG_SKIP_ALL: such hints are ignored, see :mod:`.hints`)."""
    t = when
    for _ in range(24 * 7 + 1):
        hour_index = math.floor(t / _HOUR)
        hour = hour_index % 24
        weekday = (hour_index // 24 + 3) % 7  # 1970-01-01 was a Thursday (index 3)
        if not (skip_hours >> hour) & 1 and not (skip_days >> weekday) & 1:
            return t
        t = (hour_index + 1) * _HOUR
    return when


@njit(cache=True)
def plan_next(F, I, pool, slot, t):
    """The first planned instant of ``slot``'s plan more than a second after ``t`` (NaN: no plan).

    A fetch made at a planned instant, give or take float rounding, must not select that instant
    again, hence the second."""
    period = F[slot, F_PLAN_PERIOD]
    if not period > 0.0:
        return np.nan
    origin = F[slot, F_PLAN_ORIGIN]
    start = I[slot, I_PLAN_START]
    count = I[slot, I_PLAN_COUNT]
    t1 = t + 1.0  # shifted before flooring: a t a hair before a period boundary is on it
    k = math.floor((t1 - origin) / period)
    base = origin + k * period
    x = t1 - base
    lo, hi = start, start + count  # offsets are sorted: first offset > x by bisection
    while lo < hi:
        mid = (lo + hi) >> 1
        if pool[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    if lo < start + count:
        return base + pool[lo]
    return base + period + pool[start]


@njit(cache=True)
def push(keys, slots, heap_n, F, I, K, slot, due):
    """Schedule ``slot`` at ``due``, after the rules every due time obeys: a live WebSub feed only
    every safety interval, skipHours/skipDays, and error backoff."""
    flags = I[slot, I_FLAGS]
    last = F[slot, F_LAST_FETCH]
    if flags & FLAG_WEBSUB and not math.isnan(last):
        due = max(due, last + K[K_WEBSUB_S])
    if K[K_HONOUR_SKIP] > 0 and not flags & FLAG_SKIP_ALL:
        hours = I[slot, I_SKIP_HOURS]
        days = I[slot, I_SKIP_DAYS]
        if hours or days:
            due = next_allowed(due, hours, days)
    due = max(due, F[slot, F_BACKOFF])
    F[slot, F_DUE] = due
    heap_update(keys, slots, heap_n, I, slot, due)


@njit(cache=True)
def replan(moved, now, longest, keys, slots, heap_n, F, I, K, pool):
    """Feeds whose plan just changed: their next fetch follows the new plan from ``now`` on (not
    after the fetch the old plan had scheduled: moving both ways keeps the spend at the budget),
    but a change of plan must not open a gap longer than the new plan's own longest one
    (``longest[i]``; a daily fetch moved from 14:00 to 11:00 at noon would otherwise wait 45
    hours): then the feed is fetched now."""
    for i in range(len(moved)):
        slot = moved[i]
        dither = F[slot, F_DITHER]
        due = plan_next(F, I, pool, slot, now - dither) + dither
        last = F[slot, F_LAST_FETCH]
        if not math.isnan(last):
            gap = min(K[K_MAX_GAP], longest[i])
            due = min(due, last + gap)
            due = max(due, now)
        push(keys, slots, heap_n, F, I, K, slot, due)


# -- the budget ---------------------------------------------------------------------------------
@njit(cache=True)
def bucket_refill(bucket, now):
    """Add the tokens earned since the last refill (never the same interval twice)."""
    updated = bucket[3]
    if math.isnan(updated):  # the first call
        bucket[3] = now
        return
    if now <= updated:
        return
    tokens = bucket[0] + (now - updated) * bucket[1]
    bucket[0] = min(bucket[2], tokens)
    bucket[3] = now


# -- what is due --------------------------------------------------------------------------------
@njit(cache=True)
def pop_due(now, limit, keys, slots, heap_n, F, I, K, HF, HI, ring, bucket, out):
    """Write into ``out`` the feeds to fetch at ``now`` (at most ``limit``; < 0: no limit) and
    return how many. A due feed whose host is not ready (its fetches in flight at the host's
    concurrency, inside the spacing its answers set, paused, or at its per-minute cap) takes the
    next place in the host's line: its due time moves to that place, one spacing after the
    last, so what it reports is when it will be fetched, and a long line is not offered again at
    every call. A feed that already holds a place, or that a person just added, waits at the
    head instead (it is moved to the instant the host is ready). When the budget is out,
    everyone keeps their place."""
    bucket_refill(bucket, now)
    n = 0
    concurrency = K[K_HOST_CONCURRENCY]
    while heap_n[0] > 0 and keys[0] <= now:
        if limit >= 0 and n >= limit:
            break
        if bucket[0] < 1.0 - 1e-9:
            break
        slot = slots[0]
        host = I[slot, I_HOST]
        spacing = HF[host, H_SPACING]
        ready = HF[host, H_LAST] + spacing
        ready = max(ready, HF[host, H_BLOCKED])
        per_minute = HI[host, HI_PER_MINUTE]
        step = spacing
        if per_minute > 0:
            step = max(step, 60.0 / per_minute)
            if HI[host, HI_COUNT] >= per_minute:
                oldest = ring[host, HI[host, HI_HEAD]] + 60.0
                ready = max(ready, oldest)
        if concurrency > 0 and HI[host, HI_IN_FLIGHT] >= concurrency:
            # the end of one of them gives the feed its place; this is the latest it looks again
            ready = max(ready, now + max(spacing, FULL_RECHECK_S))
        if ready > now:
            HI[host, HI_HELD] = 1
            flags = I[slot, I_FLAGS]
            if flags & FLAG_URGENT:
                when = ready
            elif flags & FLAG_QUEUED:  # after the host's urgent feeds (ties go to them)
                when = ready + HI[host, HI_URGENT] * step
            else:
                when = max(HF[host, H_QUEUE], ready + HI[host, HI_URGENT] * step)
                HF[host, H_QUEUE] = when + step
                I[slot, I_FLAGS] = flags | FLAG_QUEUED
            push(keys, slots, heap_n, F, I, K, slot, when)
            continue
        heap_remove(keys, slots, heap_n, I, slot)
        bucket[0] -= 1.0
        HF[host, H_LAST] = now
        HF[host, H_QUEUE] = max(HF[host, H_QUEUE], now + step)  # the line starts after it
        if per_minute > 0:
            count = HI[host, HI_COUNT]
            head = HI[host, HI_HEAD]
            if count < per_minute:
                ring[host, (head + count) % per_minute] = now
                HI[host, HI_COUNT] = count + 1
            else:
                ring[host, head] = now
                HI[host, HI_HEAD] = (head + 1) % per_minute
        HI[host, HI_IN_FLIGHT] += 1
        if I[slot, I_FLAGS] & FLAG_URGENT:
            HI[host, HI_URGENT] = max(0, HI[host, HI_URGENT] - 1)
        F[slot, F_DUE] = np.inf
        I[slot, I_FLAGS] = (I[slot, I_FLAGS] | FLAG_IN_FLIGHT) & ~(FLAG_QUEUED | FLAG_URGENT)
        out[n] = slot
        n += 1
    return n


@njit(cache=True)
def respace_line(host, start, step, keys, slots, heap_n, F, I, K, HI):
    """Give the feeds ``host`` holds back (its line, and the feeds people just added, which
    go first) their places again: the first at ``start``, each next ``step`` later, in the
    order they hold (the host answered faster or slower than when they took their places, one
    of its fetches ended, or a pause moved its ready time). Returns where the line ends (the
    next place to give); a host that holds nothing back any more is marked so."""
    n = heap_n[0]
    members = np.empty(n, dtype=np.int64)
    order_keys = np.empty(n)
    m = 0
    for i in range(n):
        slot = slots[i]
        if I[slot, I_HOST] == host and I[slot, I_FLAGS] & (FLAG_QUEUED | FLAG_URGENT):
            members[m] = slot
            # people's feeds first, then the line in its order
            order_keys[m] = keys[i] - (1e18 if I[slot, I_FLAGS] & FLAG_URGENT else 0.0)
            m += 1
    if m == 0:
        HI[host, HI_HELD] = 0
        return start
    order = np.argsort(order_keys[:m], kind="mergesort")
    t = start
    for k in range(m):
        push(keys, slots, heap_n, F, I, K, members[order[k]], t)
        t += step
    return t


# -- fetched: what was learned, and when next ----------------------------------------------------
@njit(cache=True)
def learn_batch(fetched, now, F, K, published, starts, ends, new_counts, obs_slots, obs_times,
                first_min, undated):
    """Turn the new entries of a batch of successful fetches into posting times.

    Declared dates are believed when they are not in the future (beyond ``K_SKEW``) and not
    before the previous fetch - 1 day (before the window on a first fetch); others are placed
    midway between the previous fetch and now (on a first fetch they are not counted). Entries
    without a date (``new_counts`` above the dates given) count as undated.

    Writes the times to ``obs_slots``/``obs_times`` and returns (how many, what happened): bit 1
    some first fetch learned dates (``first_min[i]``: its oldest, else NaN), bit 2 a first fetch
    had undated entries, bit 4 a later one did (``undated[i]``: 1 first, 2 later, else 0). Returns
    (-1, 0) when the buffers are too small. Must run before :func:`record_success` (it reads the
    previous fetch time)."""
    n_obs = 0
    events = 0
    day = K[K_DAY]
    capacity = len(obs_times)
    for i in range(len(fetched)):
        slot = fetched[i]
        first_min[i] = np.nan
        undated[i] = 0
        count = new_counts[i]
        dated = ends[i] - starts[i]
        if count <= 0 and dated <= 0:
            continue
        if n_obs + (max(dated, count)) > capacity:
            return -1, 0
        previous = F[slot, F_LAST_FETCH]
        first = math.isnan(previous)
        lower = now - K[K_WINDOW_DAYS] * day if first else previous - day
        upper = now + K[K_SKEW]
        untrusted = 0
        oldest = np.inf
        for j in range(starts[i], ends[i]):
            t = published[j]
            if not math.isnan(t) and lower <= t <= upper:
                t = min(t, now)
                obs_slots[n_obs] = slot
                obs_times[n_obs] = t
                n_obs += 1
                oldest = min(oldest, t)
            else:
                untrusted += 1
        if count > dated:
            untrusted += count - dated
        if first and oldest < np.inf:
            first_min[i] = oldest
            events |= 1
        if untrusted:
            if first:
                undated[i] = 1
                events |= 2
            else:
                begin = max(now - day, previous)
                guess = 0.5 * (begin + now)
                for _ in range(untrusted):
                    obs_slots[n_obs] = slot
                    obs_times[n_obs] = guess
                    n_obs += 1
                undated[i] = 2
                events |= 4
    return n_obs, events


@njit(cache=True)
def record_success(fetched, now, new_counts, in_document, max_age, keys, slots, heap_n, F, I, K,
                   pool, mode, totals):
    """A batch of fetches succeeded at ``now``: schedule each feed's next fetch.

    The next instant comes from the feed's plan (``MODE_PLAN``) or from FeedEx's adaptive
    interval (``MODE_ADAPTIVE``: more new entries than the target share halves it, fewer doubles
    it; ``MODE_ADAPTIVE_LITERAL``: the other way round). Then: no earlier than ttl / max-age allow
    (capped at ``K_HINT_MAX``), no later than ``K_MAX_GAP``, no sooner than ``K_MIN_INTERVAL``.
    ``totals`` = [sum of 1 / interval over adaptive feeds, budget per second] (adaptive modes)."""
    for i in range(len(fetched)):
        slot = fetched[i]
        I[slot, I_FLAGS] &= ~FLAG_IN_FLIGHT
        F[slot, F_LAST_FETCH] = now
        F[slot, F_LAST_SUCCESS] = now
        I[slot, I_ERRORS] = 0
        dither = F[slot, F_DITHER]
        if mode == MODE_PLAN:
            due = plan_next(F, I, pool, slot, now - dither) + dither
            if math.isnan(due):
                due = now + K[K_BASE_INTERVAL]
        else:
            interval = F[slot, F_INTERVAL]
            if not math.isnan(interval):
                size = in_document[i]
                share = new_counts[i] / size if size > 0 else 0.0
                target = K[K_TARGET_SHARE]
                if share != target:
                    faster = share < target if mode == MODE_ADAPTIVE_LITERAL else share > target
                    updated = interval / 2.0 if faster else interval * 2.0
                    updated = min(max(updated, K[K_T_MIN]), K[K_T_MAX])
                    totals[0] += 1.0 / updated - 1.0 / interval
                    F[slot, F_INTERVAL] = updated
                    interval = updated
                scale = totals[0] / totals[1] if totals[1] > 0 else 1.0
                due = now + min(max(interval * scale, K[K_T_MIN]), K[K_T_MAX])
            else:
                due = now + K[K_BASE_INTERVAL]
        hint = max_age[i]
        ttl = F[slot, F_TTL]
        if not math.isnan(ttl):
            hint = ttl if math.isnan(hint) or ttl > hint else hint
        if not math.isnan(hint) and hint > 0:
            floor = now + (min(K[K_HINT_MAX], hint))
            due = max(due, floor)
        due = min(due, now + K[K_MAX_GAP])
        due = max(due, now + K[K_MIN_INTERVAL])
        push(keys, slots, heap_n, F, I, K, slot, due)
