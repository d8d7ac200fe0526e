"""Replay a posting trace against a policy, driving the real :class:`Scheduler` with a simulated
clock.

The loop is the crawler's loop with the network replaced by the trace::

    t = scheduler.next_due_at(); for feed in scheduler.pop_due(t): scheduler.record(fetch(feed, t))

A simulated fetch of a feed at time t sees the feed as a reader would: its last ``feed_size``
(10) postings published at or before t. Postings published since the previous fetch are *new*
(their declared times are reported, as a parser would read them); new postings that already
scrolled out of the 10-entry window are *lost* (the scheduler never hears of them).

Evaluation follows the paper: the first ``train_days`` of the window are history the scheduler
starts with (the feeds count as fetched at the end of training); every posting of the remaining
days gets delay = (first fetch at or after its publication) - (publication). Fetches are counted
over the test days; the clock keeps running after the last day (up to T_max) only so that the
last postings get fetched.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import msgspec
import numpy as np

from .errors import TraceError
from .kernels import njit
from .oracle import oracle_mean_delay
from .policies import Policy
from .scheduler import Scheduler
from .settings import SchedulerSettings
from .trace import Trace
from .units import DAY_S

__all__ = ["PolicyResult", "SimWindow", "simulate", "window_of"]


class SimWindow(msgspec.Struct, frozen=True):
    """The part of a trace to replay: feeds kept, postings per feed inside [start, end)."""

    start: float
    train_end: float
    end: float
    feed_ids: list[str]
    hosts: list[str]
    times: list[np.ndarray]  # per feed, sorted, inside [start, end)
    dropped_feeds: int = 0

    @property
    def test_days(self) -> float:
        return (self.end - self.train_end) / DAY_S

    def test_times(self) -> list[np.ndarray]:
        return [t[t >= self.train_end] for t in self.times]


class PolicyResult(msgspec.Struct, frozen=True):
    """One policy's figures over the test days (delays in minutes)."""

    policy: str
    mean_delay_min: float
    median_delay_min: float
    p90_delay_min: float
    max_delay_min: float
    std_delay_min: float
    fetches: int
    fetches_per_feed_per_day: float
    lost_pct: float
    postings: int
    seconds: float
    """Wall time of the replay."""
    cpu_seconds: float = 0.0
    """CPU time of the replay (this process; the kernels use one thread)."""


def window_of(trace: Trace, *, days: float | None = 90.0, train_days: float = 14.0,
              only_complete_feeds: bool = False) -> SimWindow:
    """Cut the last ``days`` days (whole UTC days) of ``trace`` (None: all of it).

    ``only_complete_feeds`` keeps only feeds whose first posting is at or before the window start,
    for traces where a feed's record begins at its oldest listed entry (the techblogs trace).
    """
    if trace.posting_count == 0:
        raise TraceError("the trace has no postings", path=trace.source)
    end = math.ceil(trace.last_time / DAY_S) * DAY_S
    if days is None:
        start = math.floor(trace.first_time / DAY_S) * DAY_S
    else:
        if days <= 0:
            raise TraceError(f"the window must be longer than 0 days, got {days}",
                             path=trace.source)
        start = end - days * DAY_S
    if not 0 <= train_days < (end - start) / DAY_S:
        raise TraceError(f"train_days must be in [0, {(end - start) / DAY_S:g}) for this "
                         f"{(end - start) / DAY_S:g}-day window, got {train_days}",
                         path=trace.source)
    ids, hosts, times = [], [], []
    dropped = 0
    for feed_id, host, series in zip(trace.feed_ids, trace.hosts, trace.times, strict=True):
        if only_complete_feeds and (len(series) == 0 or series[0] > start):
            dropped += 1
            continue
        lo, hi = np.searchsorted(series, [start, end])
        ids.append(feed_id)
        hosts.append(host)
        times.append(series[lo:hi])
    if not ids:
        raise TraceError("no feed is left in the window (try a shorter --days, or drop "
                         "--only-complete-feeds)", path=trace.source)
    return SimWindow(start=start, train_end=start + train_days * DAY_S, end=end, feed_ids=ids,
                     hosts=hosts, times=times, dropped_feeds=dropped)


@njit(cache=True)
def _fetch_batch(slots, now, feed_of_slot, times, feed_end, seen, feed_size, new_counts,
                 pub_start, pub_end, in_document, log_feed, log_first, log_end, log_at, log_n):
    """What each fetch at ``now`` sees: a feed lists its ``feed_size`` latest postings at or
    before now; those after ``seen`` are new (older new ones scrolled out: lost). Fills the
    report arrays and the fetch log; returns (postings taken, postings lost)."""
    taken = 0
    lost = 0
    n = log_n[0]
    for i in range(len(slots)):
        feed = feed_of_slot[slots[i]]
        k = seen[feed]
        lo, hi = k, feed_end[feed]
        while lo < hi:  # first posting after now (times within a feed are sorted)
            mid = (lo + hi) >> 1
            if times[mid] <= now:
                lo = mid + 1
            else:
                hi = mid
        j = lo
        first = feed_end[feed - 1] if feed > 0 else 0
        listed = j - first
        in_document[i] = min(feed_size, listed)
        if j > k:
            visible = max(k, j - feed_size)
            lost += visible - k
            taken += j - k
            seen[feed] = j
            new_counts[i] = j - visible
            pub_start[i] = visible
            pub_end[i] = j
            log_feed[n] = feed
            log_first[n] = k
            log_end[n] = j
            log_at[n] = now
            n += 1
        else:
            new_counts[i] = 0
            pub_start[i] = 0
            pub_end[i] = 0
    log_n[0] = n
    return taken, lost


def simulate(window: SimWindow, settings: SchedulerSettings, *, feed_size: int = 10,
             tick_s: float = 60.0,
             policy: Callable[[SchedulerSettings], Policy] | None = None) -> PolicyResult:
    """Replay ``window`` against ``settings.policy``.

    ``tick_s``: the simulated crawler asks the scheduler for due feeds on a grid of this many
    seconds (a live crawler polls too); 0 means at every due instant exactly. A tick adds at most
    ``tick_s`` to a delay (on average half of it) and makes the replay several times faster.
    Each batch of fetches made at one instant is reported with one
    :meth:`~feedmesh.schedule.scheduler.Scheduler.record_batch` call. ``policy`` builds the
    policy object from the settings instead of ``settings.policy`` (ablations, your own).
    """
    began = time.perf_counter()
    began_cpu = time.process_time()
    t0 = window.train_end
    scheduler = Scheduler(settings, policy=None if policy is None else policy(settings))
    n = len(window.feed_ids)
    sizes = np.array([len(t) for t in window.times], dtype=np.int64)
    times = np.concatenate([np.asarray(t, dtype=np.float64) for t in window.times]) if n else \
        np.zeros(0)
    feed_end = np.cumsum(sizes)
    feed_start = feed_end - sizes
    seen = np.empty(n, dtype=np.int64)
    feed_of_slot = np.zeros(max(n, 1), dtype=np.int64)
    for i, (feed_id, host) in enumerate(zip(window.feed_ids, window.hosts, strict=True)):
        a, b = feed_start[i], feed_end[i]
        k = a + int(np.searchsorted(times[a:b], t0, side="right"))
        scheduler.add_feed(feed_id, now=t0, host=host, history=times[a:k].tolist(),
                           history_since=window.start, last_fetched_at=t0)
        slot = scheduler.slot_of(feed_id)
        if slot >= len(feed_of_slot):
            feed_of_slot = np.concatenate([feed_of_slot, np.zeros(slot + 1, dtype=np.int64)])
        feed_of_slot[slot] = i
        seen[i] = k
    first_test = seen.copy()
    pending = int((feed_end - seen).sum())
    capacity = max(1024, 4 * n)
    log_feed = np.empty(capacity, dtype=np.int64)
    log_first = np.empty(capacity, dtype=np.int64)
    log_end = np.empty(capacity, dtype=np.int64)
    log_at = np.empty(capacity)
    log_n = np.zeros(1, dtype=np.int64)
    buffers = np.empty((4, max(n, 1)), dtype=np.int64)
    lost = 0
    fetches = 0
    end = window.end
    horizon = end + settings.max_interval_s + DAY_S
    pop_due, record_batch = scheduler.pop_due_slots, scheduler.record_batch
    next_due_at = scheduler.next_due_at
    ceil = math.ceil
    while True:
        now = next_due_at()
        if now is None or now > horizon or (now >= end and pending == 0):
            break
        if tick_s > 0:
            now = ceil(now / tick_s) * tick_s
        slots = pop_due(now)
        count = len(slots)
        if count == 0:
            continue
        if now < end:
            fetches += count
        if int(log_n[0]) + count > len(log_feed):
            grow = 2 * len(log_feed) + count
            log_feed, log_first, log_end = (np.resize(a, grow) for a in
                                            (log_feed, log_first, log_end))
            log_at = np.resize(log_at, grow)
        if count > buffers.shape[1]:
            buffers = np.empty((4, count), dtype=np.int64)
        new_counts, starts, stops, in_document = buffers[0], buffers[1], buffers[2], buffers[3]
        taken, gone = _fetch_batch(slots, now, feed_of_slot, times, feed_end, seen, feed_size,
                                   new_counts, starts, stops, in_document, log_feed, log_first,
                                   log_end, log_at, log_n)
        pending -= taken
        lost += gone
        record_batch(slots, now, new_counts, times, starts, stops, in_document)
    m = int(log_n[0])
    delays = _delays(times, feed_start, feed_end, first_test, log_first[:m], log_end[:m],
                     log_at[:m], horizon)
    count = len(delays)
    return PolicyResult(
        policy=settings.policy,
        mean_delay_min=float(delays.mean()) if count else 0.0,
        median_delay_min=float(np.median(delays)) if count else 0.0,
        p90_delay_min=float(np.percentile(delays, 90)) if count else 0.0,
        max_delay_min=float(delays.max()) if count else 0.0,
        std_delay_min=float(delays.std()) if count else 0.0,
        fetches=fetches,
        fetches_per_feed_per_day=fetches / max(n, 1) / max(window.test_days, 1e-9),
        lost_pct=100.0 * lost / count if count else 0.0,
        postings=count,
        seconds=time.perf_counter() - began,
        cpu_seconds=time.process_time() - began_cpu,
    )


def _delays(times: np.ndarray, feed_start: np.ndarray, feed_end: np.ndarray,
            first_test: np.ndarray, log_first: np.ndarray, log_end: np.ndarray,
            log_at: np.ndarray, horizon: float) -> np.ndarray:
    """Delay (minutes) of every test posting, from the log of which fetch took which postings
    (indices into the flat ``times``); postings never fetched are censored at the horizon."""
    fetched = np.full(len(times), np.nan)
    lengths = log_end - log_first
    if len(lengths):
        index = np.repeat(log_first - np.cumsum(np.concatenate([[0], lengths[:-1]])), lengths) \
            + np.arange(int(lengths.sum()))
        fetched[index] = np.repeat(log_at, lengths)
    test = np.zeros(len(times), dtype=bool)
    counts = feed_end - first_test
    if counts.sum():
        test[np.repeat(first_test - np.cumsum(np.concatenate([[0], counts[:-1]])), counts)
             + np.arange(int(counts.sum()))] = True
    fetched = fetched[test]
    fetched[np.isnan(fetched)] = horizon
    return (fetched - times[test]) / 60.0


def oracle_for(window: SimWindow, fetches: float) -> float:
    """The clairvoyant lower bound (minutes) for the test postings of ``window``."""
    return oracle_mean_delay(window.test_times(), fetches) / 60.0
