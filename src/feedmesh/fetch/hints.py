"""What servers tell pollers in headers: Retry-After (both forms), Cache-Control, Expires."""

from __future__ import annotations

from collections.abc import Mapping
from email.utils import parsedate_to_datetime

__all__ = ["http_date", "max_age_seconds", "retry_after_seconds"]


def http_date(value: str) -> float | None:
    """An HTTP-date as epoch seconds, or None when it does not parse."""
    try:
        parsed = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    return parsed.timestamp()


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After value: delta-seconds or an HTTP-date (RFC 9110 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(int(value))
    when = http_date(value)
    if when is None:
        return None
    return max(0.0, when - now)


def max_age_seconds(headers: Mapping[str, str], now: float) -> float | None:
    """How long the response may be considered fresh: Cache-Control max-age, else Expires - Date."""
    cache_control = headers.get("Cache-Control", "")
    for directive in cache_control.split(","):
        name, _, arg = directive.strip().partition("=")
        name = name.strip().lower()
        if name in ("no-cache", "no-store"):
            return 0.0
        if name in ("s-maxage", "max-age"):
            arg = arg.strip().strip('"')
            if arg.isdigit():
                return float(int(arg))
    expires = headers.get("Expires")
    if expires:
        when = http_date(expires)
        if when is None:
            return 0.0  # RFC 9111: an invalid Expires means "already expired"
        date = http_date(headers.get("Date", "")) or now
        return max(0.0, when - date)
    return None
