"""feedparser's ``wellformed`` suite: every case parses, is not flagged, and meets its mappable
``Expect:`` (or is a listed, reasoned difference)."""

from __future__ import annotations

import pytest

from tests.conformance.cases import FeedparserCase, feedparser_cases
from tests.conformance.corpus import available
from tests.conformance.feedparser_adapter import Verdict
from tests.conformance.known import REASONS

CASES = feedparser_cases() if available() else ()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_wellformed_case(case: FeedparserCase, request: pytest.FixtureRequest) -> None:
    if case.known is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=REASONS[case.known]))
    error = case.parsed.error
    assert error is None or error.kind != "internal", error.message
    # Every case in this suite is well-formed: reporting a problem is a failure on its own.
    assert error is None, f"flagged a well-formed document: {error.kind}: {error.message}"
    if case.unmappable:
        return
    assert case.verdict != Verdict.FAIL, (
        f"Expect: {case.expect}\nparsed: {case.parsed.feed} / {case.parsed.entries[:2]}")
