"""What the scheduler has learned about each feed's postings, kept as arrays over feed slots.

Two memories, both updated from the same observations (a posting time per new entry):

* an exact **sliding window** of ``window_days`` days (14 in the paper): per feed, per UTC day, per
  hour, a count (``uint16[feeds, days, 24]`` ring). It gives the paper's posting rate (count over
  the window) and its hourly profile over the window's weeks;
* a **long memory** whose counts decay with a half-life (28 days by default): per feed a total, a
  24-hour profile and a 7-day profile. feedmesh's Bayesian estimates use it, because a 14-day
  window holds too few posts for the many slow feeds.

Observations are appended to a pending buffer (O(1) per entry, so a fetch costs little) and folded
into the arrays with vectorized numpy when anything reads them or the UTC day changes; the result
is the same as updating the arrays one observation at a time.

Exposure matters as much as counts: a feed we have watched for three days with three posts posts
once a day, not 3/14 a day. ``observed_since`` is the instant from which a feed's record is
complete (its first fetch, or the oldest entry of the history it came with).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np

from .kernels import njit
from .units import DAY_S, HOUR_S

__all__ = ["LearnedState", "LearnedSummary"]

_THURSDAY = 3  # weekday index (Monday = 0) of day 0 of the Unix epoch


@njit(cache=True)
def _count_into(ring, slots, days, hours):
    """ring[slots[i], days[i], hours[i]] += 1 (np.add.at is slow for this)."""
    for i in range(len(slots)):
        ring[slots[i], days[i], hours[i]] += 1


@njit(cache=True)
def _add_into(hourly, weekday, total, slots, hours, weekdays, weights):
    """The decayed long memory: each posting adds its weight to three per-feed arrays."""
    for i in range(len(slots)):
        slot = slots[i]
        hourly[slot, hours[i]] += weights[i]
        weekday[slot, weekdays[i]] += weights[i]
        total[slot] += weights[i]


class LearnedSummary(msgspec.Struct, frozen=True):
    """A read-only view of the learned state of the given slots at ``now`` (numpy arrays)."""

    now: float
    slots: np.ndarray  # int64[n]
    window_count: np.ndarray  # float64[n]   posts in the sliding window
    window_exposure_days: np.ndarray  # float64[n] days of the window the feed was watched
    window_hourly: np.ndarray  # float64[n, 24]
    long_count: np.ndarray  # float64[n]   decayed post count
    long_exposure_days: np.ndarray  # float64[n] decayed exposure (same decay)
    long_hourly: np.ndarray  # float64[n, 24]
    long_weekday: np.ndarray  # float64[n, 7]

    @property
    def window_rate_per_day(self) -> np.ndarray:
        """The paper's estimate: posts in the window over the days watched (0 when unwatched)."""
        exposure = self.window_exposure_days
        return np.divide(self.window_count, exposure, out=np.zeros_like(exposure),
                         where=exposure > 1e-9)


class LearnedState:
    """Per-feed posting statistics in struct-of-arrays form, indexed by slot."""

    def __init__(self, *, window_days: int = 14, half_life_days: float = 28.0,
                 capacity: int = 64) -> None:
        self.window_days = int(window_days)
        self.tau_s = half_life_days * DAY_S / math.log(2.0)
        self._capacity = 0
        self.ring = np.zeros((0, self.window_days, 24), dtype=np.uint16)
        self.ring_days = np.full(self.window_days, -(10**9), dtype=np.int64)
        self.current_day: int | None = None
        self.long_hourly = np.zeros((0, 24))
        self.long_weekday = np.zeros((0, 7))
        self.long_total = np.zeros(0)
        self.observed_since = np.zeros(0)
        self.decay_ref = 0.0
        self._pending_slots: list[np.ndarray] = []
        self._pending_times: list[np.ndarray] = []
        self.ensure_capacity(capacity)

    # -- slots ----------------------------------------------------------------------------------
    def ensure_capacity(self, capacity: int) -> None:
        if capacity <= self._capacity:
            return
        new = max(capacity, 2 * self._capacity, 64)
        grow = new - self._capacity

        def pad(a: np.ndarray) -> np.ndarray:
            return np.concatenate([a, np.zeros((grow, *a.shape[1:]), dtype=a.dtype)])

        self.ring = pad(self.ring)
        self.long_hourly = pad(self.long_hourly)
        self.long_weekday = pad(self.long_weekday)
        self.long_total = pad(self.long_total)
        self.observed_since = pad(self.observed_since)
        self._capacity = new

    def reset_slot(self, slot: int, observed_since: float, *, reused: bool = False) -> None:
        """Forget a slot (a new feed takes it; ``reused``: another feed held it before)."""
        if reused and self._pending_slots:  # drop the previous holder's observations
            pairs = [(s, t) for s, t in zip(self._pending_slots, self._pending_times, strict=True)]
            self._pending_slots = [s[s != slot] for s, _ in pairs]
            self._pending_times = [t[s != slot] for s, t in pairs]
        self.ring[slot] = 0
        self.long_hourly[slot] = 0.0
        self.long_weekday[slot] = 0.0
        self.long_total[slot] = 0.0
        self.observed_since[slot] = observed_since

    def extend_exposure(self, slot: int, since: float) -> None:
        """The feed's record is complete from ``since`` (e.g. the oldest entry of its history)."""
        self.observed_since[slot] = min(self.observed_since[slot], since)

    # -- observations -------------------------------------------------------------------------
    def observe(self, slot: int, times: Sequence[float]) -> None:
        """Note postings of ``slot`` at ``times`` (cheap: buffered until the next read)."""
        if len(times):
            self._pending_slots.append(np.full(len(times), slot, dtype=np.int64))
            self._pending_times.append(np.asarray(times, dtype=np.float64))

    def observe_many(self, slots: np.ndarray, times: np.ndarray) -> None:
        """Note postings of ``slots[i]`` at ``times[i]`` (the arrays are kept, not copied)."""
        if len(times):
            self._pending_slots.append(slots)
            self._pending_times.append(times)

    def advance(self, now: float) -> None:
        """Move the sliding window to the UTC day of ``now`` (flushing what belongs to old days)."""
        day = int(now // DAY_S)
        if self.current_day is None:
            self.decay_ref = now
            self._rotate_to(day)
            return
        if day <= self.current_day:
            return
        self.flush()
        self._rotate_to(day)

    def _rotate_to(self, day: int) -> None:
        start = day - self.window_days + 1
        if self.current_day is not None and self.ring_days.max() >= start:
            start = max(start, self.current_day + 1)
        for d in range(start, day + 1):
            index = d % self.window_days
            if self.ring_days[index] != d:
                self.ring[:, index, :] = 0
                self.ring_days[index] = d
        self.current_day = day

    def flush(self) -> None:
        """Fold the pending observations into the arrays (vectorized)."""
        if not self._pending_times or self.current_day is None:
            return  # nothing to fold, or no reference time yet (advance() sets it)
        slots = np.concatenate(self._pending_slots)
        times = np.concatenate(self._pending_times)
        self._pending_slots = []
        self._pending_times = []
        days = np.floor(times / DAY_S).astype(np.int64)
        hours = ((times - days * DAY_S) // HOUR_S).astype(np.int64).clip(0, 23)
        weekdays = (days + _THURSDAY) % 7
        if self.current_day is not None:
            in_window = (days <= self.current_day) & (days > self.current_day - self.window_days)
            index = days % self.window_days
            in_window &= self.ring_days[index] == days
            _count_into(self.ring, slots[in_window], index[in_window], hours[in_window])
        weights = np.exp(np.clip((times - self.decay_ref) / self.tau_s, -50.0, 50.0))
        _add_into(self.long_hourly, self.long_weekday, self.long_total, slots, hours, weekdays,
                  weights)

    def _decay_to(self, now: float) -> None:
        if now <= self.decay_ref:
            return
        factor = math.exp(-(now - self.decay_ref) / self.tau_s)
        self.long_hourly *= factor
        self.long_weekday *= factor
        self.long_total *= factor
        self.decay_ref = now

    # -- reading --------------------------------------------------------------------------------
    def summary(self, slots: np.ndarray, now: float) -> LearnedSummary:
        """Everything the policies need about ``slots``, as of ``now``."""
        self.advance(now)
        self.flush()
        self._decay_to(now)
        slots = np.asarray(slots, dtype=np.int64)
        n = len(slots)
        if n and slots[0] == 0 and slots[-1] == n - 1 and (
                n == 1 or bool((np.diff(slots) == 1).all())):
            ring = self.ring[:n]  # the common case: every slot, in order; no copy
        else:
            ring = self.ring[slots]
        window_hourly = ring.sum(axis=1, dtype=np.float64)
        assert self.current_day is not None
        window_start = (self.current_day - self.window_days + 1) * DAY_S
        since = self.observed_since[slots]
        window_exposure = np.clip((now - np.maximum(since, window_start)) / DAY_S, 0.0,
                                  float(self.window_days))
        age = np.maximum(now - since, 0.0)
        long_exposure = self.tau_s * (1.0 - np.exp(-age / self.tau_s)) / DAY_S
        return LearnedSummary(
            now=now, slots=slots, window_count=window_hourly.sum(axis=1),
            window_exposure_days=window_exposure, window_hourly=window_hourly,
            long_count=self.long_total[slots].copy(),
            long_exposure_days=long_exposure, long_hourly=self.long_hourly[slots].copy(),
            long_weekday=self.long_weekday[slots].copy(),
        )

    # -- persistence ----------------------------------------------------------------------------
    def to_state(self, slots: np.ndarray) -> dict[str, object]:
        """The learned arrays of ``slots`` (in that order), ready for a msgspec snapshot."""
        self.flush()
        slots = np.asarray(slots, dtype=np.int64)
        return {
            "window_days": self.window_days,
            "ring_days": self.ring_days.tolist(),
            "current_day": self.current_day,
            "decay_ref": self.decay_ref,
            "ring": self.ring[slots].tobytes(),
            "long_hourly": self.long_hourly[slots].tobytes(),
            "long_weekday": self.long_weekday[slots].tobytes(),
            "long_total": self.long_total[slots].tobytes(),
            "observed_since": self.observed_since[slots].tobytes(),
        }

    def load_state(self, state: dict[str, object], slots: np.ndarray) -> None:
        """Inverse of :meth:`to_state` (slots must already be allocated)."""
        n = len(slots)
        if int(state["window_days"]) != self.window_days:  # type: ignore[arg-type]
            raise ValueError(
                f"snapshot learned a {state['window_days']}-day window, settings ask for "
                f"{self.window_days}"
            )
        self.ring_days = np.asarray(state["ring_days"], dtype=np.int64)
        self.current_day = state["current_day"]  # type: ignore[assignment]
        self.decay_ref = float(state["decay_ref"])  # type: ignore[arg-type]

        def load(key: str, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
            return np.frombuffer(state[key], dtype=dtype).reshape(shape)  # type: ignore[arg-type]

        self.ring[slots] = load("ring", np.uint16, (n, self.window_days, 24))
        self.long_hourly[slots] = load("long_hourly", np.float64, (n, 24))
        self.long_weekday[slots] = load("long_weekday", np.float64, (n, 7))
        self.long_total[slots] = load("long_total", np.float64, (n,))
        self.observed_since[slots] = load("observed_since", np.float64, (n,))
