"""What publishers tell pollers, reduced to the few numbers the scheduler acts on.

A :class:`FeedHints` is built from the parsed feed (:meth:`FeedHints.from_feed_info`: RSS ``ttl``,
``skipHours``/``skipDays``, ``sy:updatePeriod``/``sy:updateFrequency``, WebSub hub links) and
updated with what the crawler knows about push (``websub_live``). HTTP-level hints (Cache-Control
max-age / Expires, Retry-After) arrive with each fetch report instead, because they change per
response.

How each hint is used, and why:

* ``ttl`` and max-age delay the next fetch to ``last fetch + hint``, capped by
  ``settings.hint_max_s`` (a one-year max-age must not silence a feed);
* ``skipHours``/``skipDays`` (GMT) move a fetch to the next allowed hour; a list that covers every
  hour (or every day) would mean "never fetch", so it is ignored and noted;
* ``updatePeriod``/``updateFrequency`` are a *prior* for the posting rate of a feed without
  history, never a constraint (publishers rarely keep them accurate);
* a hub link alone changes nothing; once the crawler reports the push subscription live, the feed
  is polled only every ``settings.websub_safety_interval_s`` and leaves the budget to the others.
"""

from __future__ import annotations

import math

import msgspec

from feedmesh.model import FeedInfo

from .units import DAY_S, HOUR_S

__all__ = ["DAY_NAMES", "FeedHints"]

DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_PERIOD_S = {"hourly": HOUR_S, "daily": DAY_S, "weekly": 7 * DAY_S, "monthly": 30.4375 * DAY_S,
             "yearly": 365.25 * DAY_S}


class FeedHints(msgspec.Struct, frozen=True, omit_defaults=True):
    """The publisher's and the push channel's hints for one feed."""

    ttl_s: float | None = None
    """RSS <ttl>, in seconds."""
    skip_hours_mask: int = 0
    """Bit h set: do not fetch during hour h (0-23, GMT)."""
    skip_days_mask: int = 0
    """Bit d set: do not fetch on weekday d (0 = Monday, GMT)."""
    update_interval_s: float | None = None
    """From sy:updatePeriod / sy:updateFrequency: the declared time between updates."""
    has_hub: bool = False
    """The feed declares a WebSub hub."""
    websub_live: bool = False
    """The crawler holds a verified, unexpired push subscription for this feed."""

    @classmethod
    def from_feed_info(cls, info: FeedInfo, *, websub_live: bool = False) -> FeedHints:
        """Read the hints of a parsed feed. Out-of-range values are dropped, never raised."""
        ttl_s = None
        if info.ttl_minutes is not None and info.ttl_minutes > 0:
            ttl_s = float(info.ttl_minutes) * 60.0
        hours = 0
        for hour in info.skip_hours:
            if 0 <= hour <= 23:
                hours |= 1 << hour
            elif hour == 24:  # some feeds write 1..24; 24 means midnight
                hours |= 1
        days = 0
        for name in info.skip_days:
            key = name.strip().capitalize()
            if key in DAY_NAMES:
                days |= 1 << DAY_NAMES.index(key)
        update_interval_s = None
        period = _PERIOD_S.get(info.update_period.strip().lower()) if info.update_period else None
        if period is not None:
            frequency = info.update_frequency if info.update_frequency else 1
            if frequency > 0:
                update_interval_s = period / frequency
        return cls(ttl_s=ttl_s, skip_hours_mask=hours, skip_days_mask=days,
                   update_interval_s=update_interval_s, has_hub=bool(info.hub_links),
                   websub_live=websub_live and bool(info.hub_links))

    @property
    def skips_everything(self) -> bool:
        """True when skipHours or skipDays would forbid every hour of the week."""
        return self.skip_hours_mask == (1 << 24) - 1 or self.skip_days_mask == (1 << 7) - 1

    def prior_rate_per_day(self) -> float | None:
        """The posting rate the publisher's sy: elements suggest, if any."""
        if self.update_interval_s is None or not math.isfinite(self.update_interval_s):
            return None
        return DAY_S / max(self.update_interval_s, 60.0)

