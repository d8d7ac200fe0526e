"""feed-rs and rss-parser: their stored results compared with ours field by field."""

from __future__ import annotations

import pytest

from tests.conformance.cases import FieldCase, feed_rs_cases, rss_parser_cases
from tests.conformance.corpus import available

FEED_RS = feed_rs_cases() if available() else ()
RSS_PARSER = rss_parser_cases() if available() else ()


def _assert_agrees(case: FieldCase) -> None:
    error = case.parsed.error
    assert error is None or error.kind != "internal", error.message
    unexplained = [check for check, reason in case.failures() if reason is None]
    assert not unexplained, "\n".join(
        f"{check.field}: expected {check.expected[:200]!r}, got {check.actual[:200]!r}"
        for check in unexplained)
    stale = case.stale_known()
    assert not stale, f"listed as known differences but now agreeing (update known.py): {stale}"


@pytest.mark.parametrize("case", FEED_RS, ids=[case.id for case in FEED_RS])
def test_feed_rs_case(case: FieldCase) -> None:
    _assert_agrees(case)


@pytest.mark.parametrize("case", RSS_PARSER, ids=[case.id for case in RSS_PARSER])
def test_rss_parser_case(case: FieldCase) -> None:
    _assert_agrees(case)
