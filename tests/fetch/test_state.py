"""The pure decisions a fetch result implies, table by table."""

import pytest

from feedmesh.fetch import BackoffPolicy, FeedFetchState, backoff_delay, next_fetch_state
from feedmesh.model import FetchError, FetchOutcome, FetchResult

NOW = 1_800_000_000.0
POLICY = BackoffPolicy(base_s=60, cap_s=3600, jitter=0.5, confirm_redirects=3)


def result(outcome: FetchOutcome, **kw) -> FetchResult:
    error = None if outcome in (FetchOutcome.OK, FetchOutcome.NOT_MODIFIED, FetchOutcome.DELTA) \
        else FetchError(outcome=outcome, message=f"http://x/feed: {outcome}")
    return FetchResult(url="http://x/feed", outcome=outcome, fetched_at=NOW, error=error, **kw)


def test_ok_replaces_validators_and_resets_errors():
    state = FeedFetchState(url="http://x/feed", etag='"a"', errors=3, not_before=NOW + 5)
    new = next_fetch_state(state, result(FetchOutcome.OK, etag='"b"', last_modified="LM"),
                           NOW, 0.0, POLICY)
    assert (new.etag, new.last_modified, new.errors, new.not_before) == ('"b"', "LM", 0, 0.0)
    assert new.last_fetched_at == NOW and new.last_outcome == "ok"


def test_not_modified_keeps_validators_unless_refreshed():
    state = FeedFetchState(url="u", etag='"a"', last_modified="LM")
    assert next_fetch_state(state, result(FetchOutcome.NOT_MODIFIED), NOW, 0, POLICY).etag == '"a"'
    refreshed = next_fetch_state(state, result(FetchOutcome.NOT_MODIFIED, etag='"c"'), NOW, 0,
                                 POLICY)
    assert refreshed.etag == '"c"' and refreshed.last_modified == "LM"


def test_gone_deactivates():
    new = next_fetch_state(FeedFetchState(url="u"), result(FetchOutcome.GONE, status=410), NOW, 0,
                           POLICY)
    assert not new.active and new.inactive_reason.startswith("410 Gone")


@pytest.mark.parametrize("outcome", [FetchOutcome.NOT_FOUND, FetchOutcome.SERVER_ERROR,
                                     FetchOutcome.TIMEOUT, FetchOutcome.DNS_ERROR])
def test_failures_back_off_exponentially_with_bounded_jitter(outcome):
    state = FeedFetchState(url="u")
    delays = []
    for _ in range(8):
        state = next_fetch_state(state, result(outcome), NOW, 1.0, POLICY)
        delays.append(state.not_before - NOW)
    assert delays[:3] == [90.0, 180.0, 360.0]  # 60 * 2^k * (1 + 0.5 * 1.0)
    assert max(delays) == 3600 * 1.5
    assert state.errors == 8 and "http://x/feed" in state.last_error
    assert backoff_delay(1, POLICY, 0.0) == 60.0


def test_retry_after_is_honoured_and_capped():
    state = FeedFetchState(url="u")
    new = next_fetch_state(state, result(FetchOutcome.RATE_LIMITED, retry_after_s=120.0), NOW, 0.9,
                           POLICY)
    assert new.not_before == NOW + 120.0
    week = next_fetch_state(state, result(FetchOutcome.RATE_LIMITED, retry_after_s=7 * 86400.0),
                            NOW, 0, POLICY)
    assert week.not_before == NOW + POLICY.retry_after_cap_s


def test_max_age_sets_min_refresh():
    new = next_fetch_state(FeedFetchState(url="u"), result(FetchOutcome.OK, max_age_s=600.0), NOW,
                           0, POLICY)
    assert new.min_refresh_at == NOW + 600


def test_permanent_redirect_needs_confirmation():
    state = FeedFetchState(url="http://old/feed")
    moved = result(FetchOutcome.OK, permanent_redirect="http://new/feed")
    for seen in (1, 2):
        state = next_fetch_state(state, moved, NOW, 0, POLICY)
        assert state.url == "http://old/feed" and state.redirect_seen == seen
    state = next_fetch_state(state, moved, NOW, 0, POLICY)
    assert state.url == "http://new/feed" and state.redirect_to == ""


def test_interrupted_redirect_sequence_starts_over():
    state = FeedFetchState(url="http://old/feed")
    moved = result(FetchOutcome.OK, permanent_redirect="http://new/feed")
    state = next_fetch_state(state, moved, NOW, 0, POLICY)
    state = next_fetch_state(state, result(FetchOutcome.OK), NOW, 0, POLICY)
    assert state.redirect_seen == 0
    state = next_fetch_state(state, moved, NOW, 0, POLICY)
    state = next_fetch_state(state, result(FetchOutcome.SERVER_ERROR,
                                           permanent_redirect="http://new/feed"), NOW, 0, POLICY)
    assert state.redirect_seen == 0 and state.url == "http://old/feed"
