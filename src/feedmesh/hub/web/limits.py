"""Limits the web layer enforces, and per-key token-bucket rate limiting."""

from __future__ import annotations

import msgspec

from feedmesh.clock import Clock
from feedmesh.tokenbucket import TokenBucket, seconds_to_say

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
    archive_page_entries: int = 50
    """Matches on one archive page of a private feed (RFC 5005 ``prev-archive``)."""
    archive_scan_ids: int = 2_000
    """Stored entry ids one archive page request looks at, at most (a page of a rare query's
    matches may hold fewer, and link on to the next): ~80 ms of tokenizing and matching at
    most (5,000 synthetic entries of 8 + 60 words took 207 ms, 2026-12-02)."""


class RateLimiter:
    """Token buckets (:class:`~feedmesh.tokenbucket.TokenBucket`) keyed by any string, on the
    injected clock; ``allow`` returns 0 or the seconds to wait."""

    def __init__(self, clock: Clock, rate_per_s: float, burst: int,
                 max_keys: int = 100_000) -> None:
        self.clock = clock
        self.rate = rate_per_s
        self.burst = float(burst)
        self.max_keys = max_keys
        self._buckets: dict[str, TokenBucket] = {}

    def allow(self, key: str) -> float:
        now = self.clock.now()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self.rate, self.burst, now)
        if bucket.take(now):
            self._trim(now)
            return 0.0
        return bucket.wait_s(now)

    def retry_after(self, wait: float) -> str:
        return seconds_to_say(wait)

    def _trim(self, now: float) -> None:
        if len(self._buckets) > self.max_keys:
            # Full buckets carry no information: forget them first.
            full = [k for k, bucket in self._buckets.items() if bucket.full_at(now)]
            for key in full[: len(self._buckets) - self.max_keys // 2]:
                del self._buckets[key]
