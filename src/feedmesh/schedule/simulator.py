"""Replay a posting trace against a policy, driving the real :class:`Scheduler` with a simulated clock.

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
from bisect import bisect_right

import msgspec
import numpy as np

from feedmesh.model import FetchOutcome

from .errors import TraceError
from .oracle import oracle_mean_delay
from .records import FetchReport
from .scheduler import Scheduler
from .settings import DAY_S, SchedulerSettings
from .trace import Trace

__all__ = ["PolicyResult", "SimWindow", "simulate", "window_of"]

_OK = FetchOutcome.OK
_NOT_MODIFIED = FetchOutcome.NOT_MODIFIED


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
    for feed_id, host, series in zip(trace.feed_ids, trace.hosts, trace.times):
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


def simulate(window: SimWindow, settings: SchedulerSettings, *, feed_size: int = 10,
             tick_s: float = 60.0) -> PolicyResult:
    """Replay ``window`` against ``settings.policy``.

    ``tick_s``: the simulated crawler asks the scheduler for due feeds on a grid of this many
    seconds (a live crawler polls too); 0 means at every due instant exactly. A tick adds at most
    ``tick_s`` to a delay (on average half of it) and makes the replay several times faster.
    """
    began = time.perf_counter()
    t0 = window.train_end
    scheduler = Scheduler(settings)
    n = len(window.feed_ids)
    series: list[list[float]] = []
    seen: list[int] = []
    first_test: list[int] = []
    feed_of_slot: dict[int, int] = {}
    for i, (feed_id, host, times) in enumerate(zip(window.feed_ids, window.hosts, window.times)):
        history = times[times < t0]
        scheduler.add_feed(feed_id, now=t0, host=host, history=history.tolist(),
                           history_since=window.start, last_fetched_at=t0)
        feed_of_slot[scheduler.slot_of(feed_id)] = i
        series.append(times.tolist())
        k = bisect_right(series[i], t0)
        seen.append(k)
        first_test.append(k)
    pending = sum(len(s) - k for s, k in zip(series, first_test))
    fetch_log: list[tuple[int, int, int, float]] = []  # (feed, first new, end, when)
    lost = 0
    fetches = 0
    end = window.end
    horizon = end + settings.max_interval_s + DAY_S
    record, pop_due = scheduler.record_slot, scheduler.pop_due_slots
    next_due_at = scheduler.next_due_at
    log = fetch_log.append
    ceil = math.ceil
    while True:
        now = next_due_at()
        if now is None or now > horizon or (now >= end and pending == 0):
            break
        if tick_s > 0:
            now = ceil(now / tick_s) * tick_s
        for slot in pop_due(now):
            i = feed_of_slot[slot]
            times = series[i]
            j = bisect_right(times, now)
            k = seen[i]
            if now < end:
                fetches += 1
            if j > k:
                visible = j - feed_size if j - feed_size > k else k
                lost += visible - k
                log((i, k, j, now))
                pending -= j - k
                seen[i] = j
                record(slot, now, _OK, j - visible, times[visible:j],
                       j if j < feed_size else feed_size)
            else:
                record(slot, now, _NOT_MODIFIED, 0, (), j if j < feed_size else feed_size)
    delays = _delays(series, first_test, fetch_log, horizon)
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
    )


def _delays(series: list[list[float]], first_test: list[int],
            fetch_log: list[tuple[int, int, int, float]], horizon: float) -> np.ndarray:
    """Delay (minutes) of every test posting, from the log of which fetch took which postings."""
    sizes = np.array([len(s) - f for s, f in zip(series, first_test)], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    posted = np.concatenate([np.asarray(s[f:], dtype=np.float64)
                             for s, f in zip(series, first_test)]) if series else np.zeros(0)
    fetched = np.full(len(posted), np.nan)
    if fetch_log:
        log = np.asarray(fetch_log, dtype=np.float64)
        feed = log[:, 0].astype(np.int64)
        base = offsets[feed] - np.asarray(first_test, dtype=np.int64)[feed]
        starts = base + log[:, 1].astype(np.int64)
        stops = base + log[:, 2].astype(np.int64)
        lengths = stops - starts
        index = np.repeat(starts - np.cumsum(np.concatenate([[0], lengths[:-1]])), lengths) + \
            np.arange(int(lengths.sum()))
        fetched[index] = np.repeat(log[:, 3], lengths)
    missing = np.isnan(fetched)
    if missing.any():  # never fetched before the horizon: censored at the horizon
        fetched[missing] = horizon
    return (fetched - posted) / 60.0


def oracle_for(window: SimWindow, fetches: float) -> float:
    """The clairvoyant lower bound (minutes) for the test postings of ``window``."""
    return oracle_mean_delay(window.test_times(), fetches) / 60.0
