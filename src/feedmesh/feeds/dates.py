"""Publisher dates in, timezone-aware UTC ``datetime`` out (or ``None``).

Feeds declare dates in RFC 822 (RSS), RFC 3339 / W3C-DTF (Atom, RSS 1.0 ``dc:date``, JSON Feed) and
in every broken variant of both: no weekday or a wrong one, no seconds, no zone, zone names
(``EST``, ``CEST``), ``GMT+2``, a comment after the zone, two-digit years, month before day,
``asctime`` order, a space instead of ``T``. One function, :func:`parse_date`, tries the two exact
shapes first (fast), then the loose ones.

Absurd values (month 13, year 0 or 99999, an offset beyond 18 hours) give ``None``: a missing date
is honest, a made-up one is not. Dates in the future are kept as declared: the parser is not the
place to know what "now" is (it is pure); the store clamps them for display and ordering.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from email.utils import parsedate_tz

__all__ = ["parse_date"]

_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
    # a few spellings met in real feeds
    "sept": 9, "mrz": 3, "mär": 3, "mai": 5, "okt": 10, "dez": 12, "déc": 12, "fév": 2,
}

# Zone names in the wild, in minutes east of UTC. Ambiguous names take their most common meaning
# in feeds (IST: India; BST: British Summer Time).
_ZONES = {
    "UT": 0, "UTC": 0, "GMT": 0, "Z": 0, "WET": 0, "Z0": 0,
    "EST": -300, "EDT": -240, "CST": -360, "CDT": -300, "MST": -420, "MDT": -360,
    "PST": -480, "PDT": -420, "AKST": -540, "AKDT": -480, "HST": -600, "AST": -240, "ADT": -180,
    "NST": -210, "NDT": -150, "BST": 60, "IST": 330, "CET": 60, "CEST": 120, "MET": 60,
    "MEST": 120, "MEZ": 60, "MESZ": 120, "EET": 120, "EEST": 180, "WEST": 60, "MSK": 180,
    "JST": 540, "KST": 540, "HKT": 480, "SGT": 480, "AEST": 600, "AEDT": 660, "ACST": 570,
    "ACDT": 630, "AWST": 480, "NZST": 720, "NZDT": 780, "BRT": -180, "ART": -180,
}

_ISO = re.compile(
    r"(\d{4})(?:-?(\d{2})(?:-?(\d{2})"
    r"(?:[Tt ]+(\d{1,2}):?(\d{2})(?::?(\d{2})(?:[.,]\d+)?)?)?)?)?"
    r"\s*(Z|z|[+-]\d{1,2}(?::?\d{2})?|[A-Za-z]{1,5})?\s*$"
)
_RFC822 = re.compile(
    r"(?:[^\W\d]+\.?,?\s*)?(\d{1,2})[\s-]+([^\W\d]+)\.?,?[\s-]+(\d{2,4})"
    r"(?:[\sT,]+(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?)?\s*(.*)$"
)
_MONTH_FIRST = re.compile(
    r"(?:[^\W\d]+\.?,?\s*)?([^\W\d]+)\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+"
    r"(?:(\d{4})\s*)?(?:(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?)?\s*(.*?)\s*(\d{4})?$"
)
_NUMERIC_ZONE = re.compile(r"(?:GMT|UTC|UT)?\s*([+-])(\d{1,2}):?(\d{2})?$")


def parse_date(value: str) -> datetime | None:
    """Parse a date as feeds write them; ``None`` when it is missing, unreadable or absurd."""
    text = value.strip()
    if not text or len(text) > 80:
        return None
    try:
        if text[0].isdigit() and len(text) >= 4 and text[:4].isdigit():
            found = _ISO.match(text)
            if found is not None:
                return _from_iso(found)
        found = _RFC822.match(text)
        if found is not None:
            day, month_name, year, hour, minute, second, zone = found.groups()
            result = _build(year, _month(month_name), int(day), hour, minute, second, zone)
            if result is not None:
                return result
        found = _MONTH_FIRST.match(text)
        if found is not None:
            month_name, day, year, hour, minute, second, zone, trailing_year = found.groups()
            year = year or trailing_year
            if year is not None:
                result = _build(year, _month(month_name), int(day), hour, minute, second, zone)
                if result is not None:
                    return result
        return _from_email(text)
    except (ValueError, OverflowError):
        return None


def _month(name: str) -> int:
    lowered = name.lower()
    return _MONTHS.get(lowered[:3]) or _MONTHS.get(lowered[:4]) or 0


def _from_iso(found: re.Match[str]) -> datetime | None:
    year, month, day, hour, minute, second, zone = found.groups()
    return _build(year, int(month or 1), int(day or 1), hour, minute, second, zone)


def _build(year_text: str, month: int, day: int, hour: str | None, minute: str | None,
           second: str | None, zone: str | None) -> datetime | None:
    year = int(year_text)
    if len(year_text) <= 2:  # RFC 822 two-digit years (RFC 2822 section 4.3)
        year += 2000 if year < 50 else 1900
    if not (1 <= year <= 9999 and 1 <= month <= 12):
        return None
    h = int(hour) if hour else 0
    m = int(minute) if minute else 0
    s = int(second) if second else 0
    extra = timedelta(0)
    if h == 24 and m == 0 and s == 0:  # ISO 8601 end of day
        h, extra = 0, timedelta(days=1)
    s = min(s, 59)  # leap second
    offset = _zone_minutes(zone or "")
    if offset is None:
        return None
    return datetime(year, month, day, h, m, s, tzinfo=UTC) + extra - timedelta(minutes=offset)


def _zone_minutes(zone: str) -> int | None:
    """Minutes east of UTC for a zone as written; 0 when absent or unknown, None when absurd."""
    zone = zone.strip().strip("()").strip()
    if not zone:
        return 0
    known = _ZONES.get(zone.upper())
    if known is not None:
        return known
    numeric = _NUMERIC_ZONE.match(zone)
    if numeric is not None:
        sign, hours, minutes = numeric.groups()
        total = int(hours) * 60 + int(minutes or 0)
        if total > 18 * 60:
            return None
        return -total if sign == "-" else total
    first_word = zone.split()[0].upper()  # "+0200 (CEST)", "GMT (Greenwich)"
    if first_word != zone.upper():
        return _zone_minutes(first_word)
    return 0  # an unknown name (or a military letter): RFC 2822 says read it as UTC


def _from_email(text: str) -> datetime | None:
    """Last resort: the standard library's forgiving RFC 2822 reader."""
    parts = parsedate_tz(text)
    if parts is None:
        return None
    year, month, day, hour, minute, second = parts[:6]  # two-digit years already widened
    if not (1 <= year <= 9999 and 1 <= month <= 12):
        return None
    offset = parts[9] or 0
    if abs(offset) > 18 * 3600:
        return None
    moment = datetime(year, month, day, hour, minute, min(second, 59),
                      tzinfo=timezone(timedelta(seconds=offset)))
    return moment.astimezone(UTC)
