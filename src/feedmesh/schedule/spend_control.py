"""Spend control: the feedback loop that keeps the fetches made at the budget M.

:class:`SpendControl` compares the fetches actually made over the last week with M and scales the
budget the next plans are given, so that what plans do not count (error retries, a fetch made at
once when a new plan would otherwise leave a long gap) comes out of the plans instead of piling up
against the token bucket (M tokens a day, holding ``budget_burst_s`` of them), which stays the
guard against what nobody foresaw. The per-host and global limits themselves are arrays in
:mod:`.table`, checked by the kernels of :mod:`.kernels`.

Plain data with explicit ``now``; nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque
from itertools import pairwise

__all__ = ["SpendControl"]


class SpendControl:
    """Scale for the planned budget so that the fetches made over a week match M.

    At every refit the fetches of exactly the last ``window_s`` (a whole week, so that a weekly
    plan's quiet weekend and busy Monday both count; the count at the window's start is
    interpolated between refits) are compared with the budget of that window, and the scale
    moves by ``gain`` of the ratio's logarithm (a fraction of the correction per refit: the
    measurement lags a week behind, and a full correction every day would oscillate), within
    [``low``, ``high``]; errors within ``deadband`` are left alone.
    """

    def __init__(self, window_s: float = 7 * 86400.0, low: float = 0.75, high: float = 1.25,
                 deadband: float = 0.003, gain: float = 0.25) -> None:
        self.window_s = window_s
        self.low, self.high = low, high
        self.deadband = deadband
        self.gain = gain
        self.scale = 1.0
        self.fetches = 0  # fetches handed out since start (the scheduler counts them)
        self.marks: deque[tuple[float, int, float]] = deque()  # (time, fetches, budget/day)

    def update(self, now: float, budget_per_day: float) -> float:
        """Note the state at a refit and return the scale for the plans made now."""
        marks = self.marks
        marks.append((now, self.fetches, budget_per_day))
        start = now - self.window_s
        while len(marks) > 2 and marks[1][0] <= start:
            marks.popleft()
        if marks[0][0] > start:
            return self.scale  # less than a whole window seen yet
        (t0, f0, b0), (t1, f1, _) = marks[0], marks[1]
        share = (start - t0) / (t1 - t0) if t1 > t0 else 1.0
        made = self.fetches - (f0 + share * (f1 - f0))
        later = list(marks)[1:]
        budget = b0 * (t1 - start) + sum((b[0] - a[0]) * a[2] for a, b in pairwise(later))
        budget /= 86400.0
        if budget > 0 and made > 0 and abs(budget / made - 1.0) > self.deadband:
            scale = self.scale * (budget / made) ** self.gain
            self.scale = min(max(scale, self.low), self.high)
        return self.scale

    def shift(self, delta: float) -> None:
        self.marks = deque((t + delta, f, b) for t, f, b in self.marks)

    def state(self) -> dict[str, object]:
        return {"scale": self.scale, "fetches": self.fetches,
                "marks": [list(m) for m in self.marks]}

    def load(self, state: dict[str, object]) -> None:
        self.scale = float(state.get("scale", 1.0))  # type: ignore[arg-type]
        self.fetches = int(state.get("fetches", 0))  # type: ignore[call-overload]
        marks = state.get("marks", [])
        assert isinstance(marks, list)
        self.marks = deque((float(t), int(f), float(b)) for t, f, b in marks)
