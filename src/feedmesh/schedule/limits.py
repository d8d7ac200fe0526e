"""Rate limits the scheduler reads before handing out a fetch: per host, and for the deployment.

* :class:`HostLimiter` keeps, per host, the time of the last fetch, the times of the last N
  fetches (for "at most N per minute"), and a ``blocked_until`` set by 429/503 responses; it
  answers "when may this host be fetched next?" in O(1).
* :class:`BudgetBucket` is the global fetch budget as a token bucket: M tokens a day, holding at
  most ``burst_s`` seconds' worth. Plans already spend M a day; the bucket stops what plans cannot
  foresee (retries, a policy gone wrong) from exceeding it.
* :class:`SpendControl` closes the loop: it compares the fetches actually made over the last
  week with M and scales the budget the next plans are given, so that what plans do not count
  (error retries, a fetch made at once when a new plan would otherwise leave a long gap) comes out
  of the plans instead of piling up against the bucket.

Both are plain data with explicit ``now``; nothing here reads a clock.
"""

from __future__ import annotations

from collections import deque

import msgspec

__all__ = ["BudgetBucket", "HostLimiter", "HostRecord", "SpendControl"]


class HostRecord(msgspec.Struct, frozen=True, omit_defaults=True):
    """A host's politeness state, as stored in a snapshot."""

    host: str
    last_fetch_at: float | None = None
    recent: tuple[float, ...] = ()
    blocked_until: float = 0.0
    min_spacing_s: float | None = None
    max_per_minute: int | None = None


class _Host:
    __slots__ = ("last_fetch_at", "recent", "blocked_until", "min_spacing_s", "max_per_minute",
                 "queue_until")

    def __init__(self, min_spacing_s: float, max_per_minute: int) -> None:
        self.queue_until = -1e18  # feeds held back are queued one spacing apart from here
        self.last_fetch_at = -1e18
        self.recent: deque[float] = deque(maxlen=max_per_minute)
        self.blocked_until = 0.0
        self.min_spacing_s = min_spacing_s
        self.max_per_minute = max_per_minute


class HostLimiter:
    """Per-host minimum spacing, fetches-per-minute cap, and server-requested pauses."""

    def __init__(self, min_spacing_s: float, max_per_minute: int) -> None:
        self.default_spacing_s = min_spacing_s
        self.default_per_minute = max_per_minute
        self.states: dict[str, _Host] = {}
        self._custom: set[str] = set()

    def state(self, host: str) -> _Host:
        """The mutable state of ``host`` (created with the defaults when new)."""
        state = self.states.get(host)
        if state is None:
            state = self.states[host] = _Host(self.default_spacing_s, self.default_per_minute)
        return state

    def set_limits(self, host: str, *, min_spacing_s: float | None = None,
                   max_per_minute: int | None = None) -> None:
        """Override the defaults for one host (e.g. from robots.txt Crawl-delay)."""
        state = self.state(host)
        if min_spacing_s is not None:
            state.min_spacing_s = max(0.0, float(min_spacing_s))
        if max_per_minute is not None:
            state.max_per_minute = max(1, int(max_per_minute))
            state.recent = deque(state.recent, maxlen=state.max_per_minute)
        self._custom.add(host)

    def ready_at(self, host: str, now: float) -> float:
        """The earliest instant >= now at which ``host`` may be fetched."""
        state = self.states.get(host)
        if state is None:
            return now
        ready = max(now, state.last_fetch_at + state.min_spacing_s, state.blocked_until)
        if len(state.recent) == state.max_per_minute:
            ready = max(ready, state.recent[0] + 60.0)
        return ready

    def defer(self, host: str, ready: float) -> float:
        """When a feed held back until ``ready`` should be offered again: feeds queued behind a
        busy host are spaced out, so they are not all retried (and re-queued) at one instant."""
        state = self.state(host)
        when = max(ready, state.queue_until)
        state.queue_until = when + max(state.min_spacing_s, 60.0 / state.max_per_minute)
        return when

    def note_fetch(self, host: str, now: float) -> None:
        state = self.state(host)
        state.last_fetch_at = now
        state.recent.append(now)

    def block(self, host: str, until: float) -> None:
        """The server asked us to stay away until ``until`` (429 / 503 Retry-After)."""
        state = self.state(host)
        state.blocked_until = max(state.blocked_until, until)

    def shift(self, delta: float) -> None:
        """Move every remembered instant by ``delta`` (after a clock jump)."""
        for state in self.states.values():
            state.last_fetch_at += delta
            state.queue_until += delta
            state.recent = deque((t + delta for t in state.recent), maxlen=state.max_per_minute)
            if state.blocked_until:
                state.blocked_until += delta

    def records(self) -> list[HostRecord]:
        out = []
        for host, s in self.states.items():
            custom = host in self._custom
            out.append(HostRecord(
                host=host,
                last_fetch_at=s.last_fetch_at if s.last_fetch_at > -1e17 else None,
                recent=tuple(s.recent), blocked_until=s.blocked_until,
                min_spacing_s=s.min_spacing_s if custom else None,
                max_per_minute=s.max_per_minute if custom else None))
        return out

    def load(self, records: list[HostRecord]) -> None:
        for record in records:
            if record.min_spacing_s is not None or record.max_per_minute is not None:
                self.set_limits(record.host, min_spacing_s=record.min_spacing_s,
                                max_per_minute=record.max_per_minute)
            state = self.state(record.host)
            if record.last_fetch_at is not None:
                state.last_fetch_at = record.last_fetch_at
            state.recent.extend(record.recent)
            state.blocked_until = record.blocked_until


class BudgetBucket:
    """A token bucket refilled at ``per_day`` tokens a day, capped at ``burst_s`` of refill."""

    def __init__(self, per_day: float, burst_s: float, now: float | None = None) -> None:
        self.burst_s = burst_s
        self.rate_per_s = per_day / 86400.0
        self.capacity = max(1.0, self.rate_per_s * burst_s)
        self.tokens = self.capacity
        self.updated_at = now

    def set_rate(self, per_day: float, now: float) -> None:
        """Change the budget; a bucket that had no rate yet starts full."""
        self._refill(now)
        was_unset = self.rate_per_s <= 0
        self.rate_per_s = per_day / 86400.0
        self.capacity = max(1.0, self.rate_per_s * self.burst_s)
        self.tokens = self.capacity if was_unset else min(self.tokens, self.capacity)

    def refill(self, now: float) -> None:
        """Add the tokens earned since the last call."""
        self._refill(now)

    def _refill(self, now: float) -> None:
        if self.updated_at is None:
            self.updated_at = now
            return
        if now <= self.updated_at:
            return  # never earn the same interval twice (a clock jump resets updated_at instead)
        self.tokens = min(self.capacity, self.tokens + (now - self.updated_at) * self.rate_per_s)
        self.updated_at = now

    def take(self, now: float) -> bool:
        """Spend one token if there is one."""
        self._refill(now)
        if self.tokens >= 1.0 - 1e-9:
            self.tokens = max(self.tokens - 1.0, 0.0)
            return True
        return False

    def tokens_at(self, when: float) -> float:
        """The tokens the bucket will hold at ``when`` if nothing is spent (no state change)."""
        if self.updated_at is None or when <= self.updated_at:
            return self.tokens
        return min(self.capacity, self.tokens + (when - self.updated_at) * self.rate_per_s)

    def next_token_at(self, now: float) -> float:
        """The first instant at or after ``now`` at which a token is available (read only: asking
        about a future instant must not book the refill up to it)."""
        tokens = self.tokens_at(now)
        if tokens >= 1.0 - 1e-9:
            return now
        if self.rate_per_s <= 0:
            return float("inf")
        # counted from the last refill when that is later than ``now`` (tokens are as of then);
        # at least a millisecond on: epoch floats cannot represent smaller steps reliably
        base = now if self.updated_at is None else max(now, self.updated_at)
        return base + max((1.0 - tokens) / self.rate_per_s, 1e-3)


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
        spans = list(marks)
        budget = b0 * (t1 - start) + sum((b[0] - a[0]) * a[2] for a, b in zip(spans[1:],
                                                                             spans[2:]))
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
