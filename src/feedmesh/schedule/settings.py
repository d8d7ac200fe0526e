"""The scheduler's settings: one frozen, validated record per deployment.

Every number that shapes a schedule lives here, with the unit in its name (``_s`` seconds,
``_per_day``). :meth:`SchedulerSettings.validated` checks ranges and cross-field consistency and
raises :class:`~feedmesh.schedule.errors.SettingsError` naming the field, so that a bad flag or a
bad config file fails at start-up, not at the first fetch.

The fetch budget can be given per feed (``budget_per_feed_per_day``, what the paper's tables use)
or for the whole deployment (``budget_per_day``); the scheduler turns it into M fetches per day
for the feeds it holds now.
"""

from __future__ import annotations

import math

import msgspec

from .errors import SettingsError, UnknownPolicyError
from .policy_names import KNOWN_POLICY_NAMES
from .units import DAY_S, HOUR_S, WEEK_S

__all__ = ["SchedulerSettings"]


class SchedulerSettings(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How one deployment schedules its fetches. Defaults suit a live crawler."""

    policy: str = "feedmesh"
    """uniform, adaptive, adaptive-literal, cgm-age, cgm-freshness, optimal or feedmesh."""

    # -- budget ---------------------------------------------------------------------------------
    budget_per_feed_per_day: float | None = None
    """Average fetches per feed per day (the paper's x axis). Default 24 when neither is set."""
    budget_per_day: float | None = None
    """Total fetches per day for the whole deployment (alternative to the per-feed budget)."""
    budget_burst_s: float = 2 * DAY_S
    """The global token bucket holds this many seconds' worth of budget (and starts full). Plans
    already spend M a day on average; the bucket is the guard against what
    plans do not foresee (retries, a misbehaving policy). Two days, because a weekly plan spends
    less than M on quiet weekend days and more on weekdays (the real trace: weekend posts are a
    tenth of a weekday's), which a half-day bucket would throttle."""

    # -- intervals ------------------------------------------------------------------------------
    min_interval_s: float = 300.0
    """T_min: never fetch one feed more often than this (also adaptive's lower bound)."""
    max_interval_s: float = 7 * DAY_S
    """T_max: the safety net; every healthy feed is fetched at least this often."""
    max_delay_target_s: float = 46 * HOUR_S
    """feedmesh only: the largest gap it allows between two fetches of a feed (bounds max delay)."""

    # -- learning -------------------------------------------------------------------------------
    rate_window_days: int = 14
    """Sliding window for posting rates and the hourly profiles (the paper found 14 days enough)."""
    rate_smoothing_posts: float = 0.5
    """The paper's policies (optimal, its strategies 2-3, cgm-*) estimate a feed's rate as
    (posts in the window + this) / days watched: the posterior mean under Jeffreys' prior. It is
    the paper's posts / days for any feed that posts, but a feed watched for 14 days without a
    post is not "rate 0" (Theorem 1 then gives it nothing but the T_max floor, which on the real
    trace starves the 70% of feeds that post less than once a fortnight). 0 is the paper as
    printed."""
    memory_half_life_days: float = 28.0
    """Half-life of the decayed long-memory counts that feedmesh's Bayesian estimates use."""
    clusters: int = 12
    """K of the K-means clustering of 24-hour profiles (12 in the paper)."""
    cluster_min_posts: int = 5
    """A feed's own profile enters the K-means fit only with at least this many posts in window."""
    refit_interval_s: float = DAY_S
    """How often rates, allocations and fetch plans are recomputed."""
    cluster_refit_interval_s: float = WEEK_S
    """How often the K-means clusters are refit (warm-started from the previous centroids)."""

    # -- adaptive (FeedEx 3.3) -----------------------------------------------------------------
    adaptive_target_new_share: float = 0.2
    """f_t: the share of new entries per fetch the adaptive controller aims for."""

    # -- politeness and hints ----------------------------------------------------------------
    # (When to retry a failed feed is not set here: the fetch state decides it, see
    # feedmesh.fetch.state.BackoffPolicy, and the scheduler follows that decision.)
    host_concurrency: int = 2
    """At most this many fetches in flight to one host at once (many feeds on one host is normal:
    hosted blogs, podcast hosts). A fetch that ends wakes the crawler for the host's next."""
    host_delay_factor: float = 1.0
    """The time between two fetch starts to one host is this times the host's smoothed answer
    time, divided by ``host_concurrency`` (so a host is kept at most about that busy), within
    the minimum and maximum spacing below; a 429, a 503 or a timeout doubles it."""
    host_min_spacing_s: float = 0.1
    """The least time between two fetch starts to one host, however fast it answers."""
    host_max_spacing_s: float = 60.0
    """The most that pacing by a slow or overloaded host's answers stretches that time to (a
    server's own Retry-After pauses the host for as long as it asks, within the fetch state's
    cap)."""
    host_max_per_minute: int = 0
    """At most this many fetches to one host in any 60 seconds; 0: no such cap (pacing by the
    host's answers holds it back instead). NewsBlur uses 30, which makes the first pass of 200
    feeds on one host take 7 minutes."""
    hint_max_s: float = DAY_S
    """ttl, Cache-Control max-age and Expires can delay a fetch by at most this much."""
    honour_skip_hours: bool = True
    """Honour RSS skipHours/skipDays (unless they cover every hour or day; then they are
    ignored)."""
    websub_safety_interval_s: float = DAY_S
    """Feeds whose WebSub push is live are polled only this often, as a safety net."""

    # -- start-up and spreading ---------------------------------------------------------------
    first_fetch_spread_s: float = 600.0
    """Feeds without history get their first fetch spread uniformly over this window at most:
    found at start-up, or added many at once (an OPML list of 100k feeds is not a burst)."""
    new_feeds_per_s: float = 50.0
    """Feeds added together (:meth:`Scheduler.add_feed`'s ``first_fetch_within_s``) get their first
    fetches at this rate, so a feed a person just added is fetched within a second or so, and a
    list of thousands is spread over ``first_fetch_spread_s``; politeness applies either way."""
    restart_spread_s: float = 900.0
    """After a restore, overdue feeds are spread over at least this window (more if the budget
    needs it), instead of all being fetched at once."""
    phase_dither_s: float = 300.0
    """Each feed's planned times are shifted by a fixed per-feed offset in [0, this), so feeds
    with the same plan do not all fire in the same second."""

    seed: int = 0
    """Seed of the scheduler's RNGs (start-up spreading, K-means init, and the jitter of a backoff
    it computes for a report that carries no decision)."""

    def validated(self) -> SchedulerSettings:
        """Return self after checking every field; raise SettingsError naming the first bad one."""
        if self.policy not in KNOWN_POLICY_NAMES:
            raise UnknownPolicyError(
                f"unknown policy {self.policy!r}; known policies: {', '.join(KNOWN_POLICY_NAMES)}"
            )
        if self.budget_per_feed_per_day is not None and self.budget_per_day is not None:
            raise SettingsError(
                "set either budget_per_feed_per_day or budget_per_day, not both "
                f"(got {self.budget_per_feed_per_day} and {self.budget_per_day})"
            )
        for name in ("budget_per_feed_per_day", "budget_per_day"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise SettingsError(f"{name} must be a finite number > 0, got {value}")
        positive = (
            "budget_burst_s", "min_interval_s", "max_interval_s", "max_delay_target_s",
            "memory_half_life_days", "refit_interval_s", "cluster_refit_interval_s",
            "hint_max_s", "websub_safety_interval_s",
        )
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise SettingsError(f"{name} must be a finite number > 0, got {value}")
        non_negative = ("first_fetch_spread_s", "new_feeds_per_s", "restart_spread_s",
                        "phase_dither_s", "host_min_spacing_s", "rate_smoothing_posts")
        for name in non_negative:
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise SettingsError(f"{name} must be a finite number >= 0, got {value}")
        if self.min_interval_s > self.max_interval_s:
            raise SettingsError(
                f"min_interval_s ({self.min_interval_s}) must not exceed max_interval_s "
                f"({self.max_interval_s})"
            )
        if self.max_delay_target_s < self.min_interval_s:
            raise SettingsError(
                f"max_delay_target_s ({self.max_delay_target_s}) must be at least "
                f"min_interval_s ({self.min_interval_s})"
            )
        if not 1 <= self.rate_window_days <= 365:
            raise SettingsError(f"rate_window_days must be in 1..365, got {self.rate_window_days}")
        if not 1 <= self.clusters <= 256:
            raise SettingsError(f"clusters must be in 1..256, got {self.clusters}")
        if self.cluster_min_posts < 1:
            raise SettingsError(f"cluster_min_posts must be >= 1, got {self.cluster_min_posts}")
        if not 0.0 <= self.adaptive_target_new_share <= 1.0:
            raise SettingsError(
                f"adaptive_target_new_share must be in [0, 1], got {self.adaptive_target_new_share}"
            )
        if self.host_max_per_minute < 0:
            raise SettingsError(
                f"host_max_per_minute must be >= 0 (0: no cap), got {self.host_max_per_minute}"
            )
        if self.host_concurrency < 1:
            raise SettingsError(f"host_concurrency must be >= 1, got {self.host_concurrency}")
        if not (math.isfinite(self.host_delay_factor) and self.host_delay_factor >= 0):
            raise SettingsError(
                f"host_delay_factor must be a finite number >= 0, got {self.host_delay_factor}")
        if not (math.isfinite(self.host_max_spacing_s)
                and self.host_max_spacing_s >= self.host_min_spacing_s):
            raise SettingsError(
                f"host_max_spacing_s ({self.host_max_spacing_s}) must be finite and at least "
                f"host_min_spacing_s ({self.host_min_spacing_s})")
        return self

    def total_budget_per_day(self, feed_count: int) -> float:
        """M: fetches per day for ``feed_count`` feeds."""
        if self.budget_per_day is not None:
            return float(self.budget_per_day)
        per_feed = 24.0 if self.budget_per_feed_per_day is None else self.budget_per_feed_per_day
        return per_feed * feed_count
