"""Limits the web layer enforces, and per-key token-bucket rate limiting."""

from __future__ import annotations

import math

import msgspec

from feedmesh.clock import Clock

__all__ = ["RateLimiter", "WebLimits"]


class WebLimits(msgspec.Struct, frozen=True, kw_only=True):
    max_body_bytes: int = 256 * 1024
    max_opml_bytes: int = 2 * 1024 * 1024
    max_opml_outlines: int = 10_000
    max_subscriptions_per_account: int = 100
    max_sources_per_account: int = 5_000
    max_keep: int = 100
    preview_entries: int = 500
    api_rate_per_s: float = 10.0
    api_burst: int = 40
    signup_rate_per_s: float = 0.2
    """Accounts created per second per client address (one every 5 s, burst below)."""
    signup_burst: int = 5
    feed_rate_per_s: float = 0.2
    """Polls per second per personalized feed (one every 5 s sustained, burst below). A reader
    polling every 100 ms gets 429 with Retry-After instead of a free render."""
    feed_burst: int = 10
    hub_rate_per_s: float = 1.0
    """WebSub hub requests (POST /hub) per second per client address (burst below)."""
    hub_burst: int = 30
    max_hub_request_bytes: int = 16 * 1024
    max_push_bytes: int = 4 * 1024 * 1024
    """Largest document a publisher's WebSub hub may push to a callback (413 above)."""
    rendered_feeds_bytes: int = 64 * 1024 * 1024
    """Memory for feeds as rendered and compressed, served to every reader of a version."""


class RateLimiter:
    """Token buckets keyed by any string; ``allow`` returns 0 or the seconds to wait."""

    def __init__(self, clock: Clock, rate_per_s: float, burst: int,
                 max_keys: int = 100_000) -> None:
        self.clock = clock
        self.rate = rate_per_s
        self.burst = float(burst)
        self.max_keys = max_keys
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, key: str) -> float:
        now = self.clock.now()
        tokens, stamp = self._buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - stamp) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            self._trim()
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def retry_after(self, wait: float) -> str:
        return str(max(1, math.ceil(wait)))

    def _trim(self) -> None:
        if len(self._buckets) > self.max_keys:
            # Full buckets carry no information: forget them first.
            now = self.clock.now()
            full = [k for k, (t, s) in self._buckets.items()
                    if t + (now - s) * self.rate >= self.burst]
            for key in full[: len(self._buckets) - self.max_keys // 2]:
                del self._buckets[key]
