"""Units of time the schedule package counts in (seconds, as every ``_s`` name says)."""

from __future__ import annotations

__all__ = ["DAY_S", "HOUR_S", "WEEK_S"]

HOUR_S = 3600.0
DAY_S = 86400.0
WEEK_S = 7 * DAY_S
