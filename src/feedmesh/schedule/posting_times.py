"""Which posting times a batch of successful fetches teaches: declared dates when they are
believable, a guess between the two fetches otherwise (the rule itself is the compiled
:func:`~.kernels.learn_batch`; this keeps its buffers and notes what it decided)."""

from __future__ import annotations

import math

import numpy as np

from . import kernels
from .scheduler_state import SchedulerState

__all__ = ["PostingTimes"]


class PostingTimes:
    """Feeds the scheduler's learner from fetch reports, reusing its buffers from call to call."""

    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self._obs_slots = np.empty(1024, dtype=np.int64)
        self._obs_times = np.empty(1024)
        self._first_min = np.empty(64)
        self._undated = np.empty(64, dtype=np.int64)

    def learn(self, slots: np.ndarray, now: float, counts: np.ndarray, published: np.ndarray,
              starts: np.ndarray, ends: np.ndarray) -> None:
        """Fetch i of ``slots`` at ``now`` found ``counts[i]`` new entries, declared at
        ``published[starts[i]:ends[i]]`` (NaN: no date). Must run before the fetches are
        recorded (it reads each feed's previous fetch time)."""
        state = self.state
        n = len(slots)
        if len(self._first_min) < n:
            self._first_min = np.empty(2 * n)
            self._undated = np.empty(2 * n, dtype=np.int64)
        while True:
            m, events = kernels.learn_batch(slots, now, state.table.F, state.kernel_settings,
                                            published, starts, ends, counts, self._obs_slots,
                                            self._obs_times, self._first_min, self._undated)
            if m >= 0:
                break
            self._obs_slots = np.empty(2 * len(self._obs_slots), dtype=np.int64)
            self._obs_times = np.empty(2 * len(self._obs_times))
        if m:
            state.learner.observe_many(self._obs_slots[:m].copy(), self._obs_times[:m].copy())
        if not events:
            return
        for i in range(n):
            slot = int(slots[i])
            oldest = float(self._first_min[i])
            if not math.isnan(oldest):  # a first fetch shows history: complete from there on
                state.learner.extend_exposure(slot, oldest)
            if self._undated[i] == 1:
                state.note(slot, "dates", "entries without believable dates on the first fetch "
                           "were not counted as posts")
            elif self._undated[i] == 2:
                state.note(slot, "dates", "entries with missing, future or absurd dates were "
                           "placed between the two fetches")
