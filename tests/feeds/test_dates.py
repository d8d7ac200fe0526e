"""Dates as feeds write them, to UTC (table-driven)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from feedmesh.feeds.dates import parse_date

NOON = datetime(2004, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "expected"), [
    # RFC 822 / 2822 and their usual breakages
    ("Thu, 01 Jan 2004 12:00:00 GMT", NOON),
    ("Thu, 01 Jan 2004 12:00:00 +0000", NOON),
    ("Thu, 01 Jan 2004 07:00:00 -0500", NOON),
    ("Thu, 01 Jan 2004 07:00:00 EST", NOON),
    ("Thu, 01 Jan 2004 13:00:00 CET", NOON),
    ("Thu, 01 Jan 2004 14:00:00 +0200 (CEST)", NOON),
    ("Thu, 01 Jan 2004 14:00:00 GMT+2", NOON),
    ("Thu, 01 Jan 2004 14:00:00 +02:00", NOON),
    ("01 Jan 2004 12:00:00 GMT", NOON),            # no weekday
    ("Mon, 01 Jan 2004 12:00:00 GMT", NOON),       # wrong weekday: the date wins
    ("Thu, 1 Jan 2004 12:00 GMT", NOON),           # one-digit day, no seconds
    ("Thu, 01 Jan 04 12:00:00 GMT", NOON),         # two-digit year
    ("Thu, 01 January 2004 12:00:00 GMT", NOON),   # full month name
    ("Thu, 01-Jan-2004 12:00:00 GMT", NOON),
    ("Thu, 01 Jan 2004 12:00:00", NOON),           # no zone: UTC
    ("Thu, 01 Jan 2004 12:00:00 Z", NOON),
    ("Thu, 01 Jan 2004 12:00:00 XYZ", NOON),       # unknown zone name: UTC (RFC 2822 4.3)
    ("Thursday, January 1, 2004 12:00:00 GMT", NOON),  # month first
    ("Jan 1 2004 12:00:00 GMT", NOON),
    ("Thu Jan 01 12:00:00 2004", NOON),            # asctime
    ("01 Jan 2004", datetime(2004, 1, 1, tzinfo=UTC)),
    # ISO 8601 / RFC 3339 / W3C-DTF
    ("2004-01-01T12:00:00Z", NOON),
    ("2004-01-01T12:00:00.123456Z", NOON),
    ("2004-01-01T13:00:00+01:00", NOON),
    ("2004-01-01T07:00:00-05:00", NOON),
    ("2004-01-01T13:00:00+0100", NOON),
    ("2004-01-01 12:00:00", NOON),                 # space instead of T, no zone
    ("20040101T120000Z", NOON),                    # basic format
    ("2004-01-01T12:00Z", NOON),
    ("2004-01-01", datetime(2004, 1, 1, tzinfo=UTC)),
    ("2004-01", datetime(2004, 1, 1, tzinfo=UTC)),
    ("2004", datetime(2004, 1, 1, tzinfo=UTC)),
    ("2003-12-31T24:00:00Z", datetime(2004, 1, 1, tzinfo=UTC)),  # end of day
    ("2004-01-01T12:00:60Z", datetime(2004, 1, 1, 12, 0, 59, tzinfo=UTC)),  # leap second
    ("  2004-01-01T12:00:00Z\n", NOON),
])
def test_parses(text: str, expected: datetime) -> None:
    parsed = parse_date(text)
    assert parsed == expected
    assert parsed is not None and parsed.utcoffset() is not None
    assert parsed.utcoffset().total_seconds() == 0


@pytest.mark.parametrize("text", [
    "", "   ", "yesterday", "not a date at all", "2004-13-01T00:00:00Z", "2004-02-30",
    "Thu, 32 Jan 2004 12:00:00 GMT", "0000-01-01T00:00:00Z", "99999-01-01", "-2004-01-01",
    "Thu, 01 Foo 2004 12:00:00 GMT", "2004-01-01T12:00:00+25:00", "2004-01-01T25:61:00Z",
    "9" * 200, "Thu, 01 Jan 2004 99:99:99 GMT",
])
def test_absurd_or_unreadable_is_none(text: str) -> None:
    assert parse_date(text) is None


def test_far_future_is_kept_as_declared() -> None:
    # The parser does not know "now" (it is pure); the store clamps future dates for display.
    assert parse_date("Fri, 01 Jan 2100 00:00:00 GMT") == datetime(2100, 1, 1, tzinfo=UTC)


def test_extremes_do_not_overflow() -> None:
    assert parse_date("9999-12-31T23:59:59-05:00") is None  # past datetime.max in UTC
    assert parse_date("0001-01-01T00:00:00+05:00") is None
    assert parse_date("9999-12-31T23:59:59Z") == datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)


@given(st.text(max_size=100))
def test_never_raises(text: str) -> None:
    result = parse_date(text)
    assert result is None or result.tzinfo is not None


# hypothesis takes naive bounds (the zone comes from timezones=).
@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),  # noqa: DTZ001
                    timezones=st.just(UTC)))
def test_round_trips_both_standard_forms(moment: datetime) -> None:
    moment = moment.replace(microsecond=0)
    assert parse_date(moment.strftime("%a, %d %b %Y %H:%M:%S GMT")) == moment
    assert parse_date(moment.isoformat()) == moment
