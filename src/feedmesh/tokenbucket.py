"""The one token bucket: ``rate`` tokens a second, at most ``burst`` held, on whatever clock the
caller reads (its injected :class:`~feedmesh.clock.Clock`: the same bucket runs live, in
accelerated tests and under a manual clock). The web layer's per-key limits
(:class:`feedmesh.hub.web.limits.RateLimiter`) and push's delivery budget
(:meth:`feedmesh.hub.push.PushService.run`) are made of it."""

from __future__ import annotations

import math

__all__ = ["TokenBucket", "seconds_to_say"]


class TokenBucket:
    """Starts full. ``now`` is seconds on the caller's clock; a clock that goes back is taken
    as standing still."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate_per_s: float, burst: float, now: float) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError(f"a token bucket needs rate > 0 and burst >= 1, got {rate_per_s} "
                             f"and {burst}")
        self.rate = rate_per_s
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = now

    def level(self, now: float) -> float:
        """The tokens held at ``now`` (refilled since the last look)."""
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
        return self.tokens

    def take(self, now: float, count: float = 1.0) -> bool:
        """Spend ``count`` tokens if held (True), else spend none (False)."""
        if self.level(now) >= count:
            self.tokens -= count
            return True
        return False

    def wait_s(self, now: float, count: float = 1.0) -> float:
        """Seconds until ``count`` tokens are held (0: now)."""
        missing = count - self.level(now)
        return max(0.0, missing / self.rate)

    def full_at(self, now: float) -> bool:
        """Whether it is full: a full bucket carries no information (it can be forgotten)."""
        return self.level(now) >= self.burst

    def __repr__(self) -> str:
        return f"TokenBucket({self.rate:g}/s, {self.tokens:.1f} of {self.burst:g})"


def seconds_to_say(wait: float) -> str:
    """A wait as a ``Retry-After`` header says it: whole seconds, at least 1."""
    return str(max(1, math.ceil(wait)))
