"""What a fetch result means for a feed: pure decisions, no I/O, no clock reads.

:func:`next_fetch_state` takes the feed's state, one :class:`FetchResult`, ``now`` and a uniform
random number (for jitter; the caller owns the seeded RNG) and returns the new state:

* validators: kept exactly as the server sent them; replaced by a 200/226, kept on a 304;
* 410 Gone deactivates the feed (a person can reactivate it);
* 301/308 chains: the stored URL changes only after the same permanent target was seen
  ``confirm_redirects`` times in a row (a one-off misconfiguration must not lose the feed);
  302/307 never change it;
* 404, 5xx, timeouts and network errors back off exponentially with jitter, from ``base_s`` up to
  ``cap_s``, and so does a document that is not a feed (:func:`not_a_feed`: an HTML page or
  garbage, found only once the body is parsed); 429/503 with Retry-After wait exactly as asked
  (either form), capped at ``retry_after_cap_s``, since a week-long Retry-After is far more often
  a misconfiguration than a wish to be forgotten (:func:`wait_after_failure`); Cache-Control
  max-age only lower-bounds the next fetch (``min_refresh_at``).

This is the one place that decides when a feed may be fetched again: the scheduler reads
``not_before`` from each fetch report, and asks :func:`wait_after_failure` itself only for
reports that carry no state (the trace simulator).
"""

from __future__ import annotations

import msgspec

from feedmesh.model import FetchOutcome, FetchResult

__all__ = [
    "BackoffPolicy", "FeedFetchState", "backoff_delay", "next_fetch_state", "not_a_feed",
    "wait_after_failure",
]


class BackoffPolicy(msgspec.Struct, frozen=True, kw_only=True):
    base_s: float = 300.0
    cap_s: float = 7 * 86400.0
    jitter: float = 0.25
    """Fraction of the delay added at random (0.25: up to +25%), to de-synchronize retries."""
    retry_after_cap_s: float = 86400.0
    max_age_cap_s: float = 86400.0
    confirm_redirects: int = 3


class FeedFetchState(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True):
    """Everything the crawler remembers about fetching one feed (kept small: ~1 KB per feed)."""

    url: str
    etag: str = ""
    last_modified: str = ""
    doc_hash: int = 0
    """Hash of the last complete document we parsed (0: none yet)."""
    active: bool = True
    inactive_reason: str = ""
    errors: int = 0
    """Consecutive failed fetches."""
    not_before: float = 0.0
    """No fetch before this instant (backoff or Retry-After)."""
    min_refresh_at: float = 0.0
    """The server said the document stays fresh until then (Cache-Control / Expires)."""
    redirect_to: str = ""
    redirect_seen: int = 0
    last_outcome: str = ""
    last_error: str = ""
    last_fetched_at: float = 0.0


_FAILURES = {
    FetchOutcome.NOT_FOUND, FetchOutcome.CLIENT_ERROR, FetchOutcome.SERVER_ERROR,
    FetchOutcome.TIMEOUT, FetchOutcome.TOO_LARGE, FetchOutcome.REDIRECT_ERROR,
    FetchOutcome.BLOCKED, FetchOutcome.DNS_ERROR, FetchOutcome.CONNECTION_ERROR,
    FetchOutcome.PROTOCOL_ERROR, FetchOutcome.INVALID_URL, FetchOutcome.RATE_LIMITED,
}


def backoff_delay(errors: int, policy: BackoffPolicy, jitter_u: float) -> float:
    """Delay before retrying after ``errors`` consecutive failures (errors >= 1)."""
    delay = min(policy.cap_s, policy.base_s * 2.0 ** min(errors - 1, 40))
    return delay * (1.0 + policy.jitter * jitter_u)


DEFAULT_POLICY = BackoffPolicy()


def wait_after_failure(outcome: FetchOutcome, errors: int, retry_after_s: float | None,
                       jitter_u: float, policy: BackoffPolicy = DEFAULT_POLICY) -> float:
    """Seconds to wait after a failed fetch (``outcome``, not 410), the ``errors``-th in a row:
    a Retry-After as asked, capped; else the backoff of a failure."""
    if retry_after_s is not None:
        return min(retry_after_s, policy.retry_after_cap_s)
    if outcome in _FAILURES:
        return backoff_delay(errors, policy, jitter_u)
    return 0.0


def next_fetch_state(state: FeedFetchState, result: FetchResult, now: float, jitter_u: float,
                     policy: BackoffPolicy = DEFAULT_POLICY) -> FeedFetchState:
    outcome = result.outcome
    changes: dict[str, object] = {"last_outcome": str(outcome), "last_fetched_at": now}
    changes.update(_redirect_changes(state, result, policy))

    if outcome in (FetchOutcome.OK, FetchOutcome.DELTA, FetchOutcome.NOT_MODIFIED):
        changes.update(errors=0, not_before=0.0, last_error="")
        if outcome != FetchOutcome.NOT_MODIFIED:
            changes.update(etag=result.etag, last_modified=result.last_modified)
        else:  # a 304 may carry refreshed validators; otherwise keep ours
            changes.update(etag=result.etag or state.etag,
                           last_modified=result.last_modified or state.last_modified)
        if result.max_age_s is not None and result.max_age_s > 0:
            changes["min_refresh_at"] = now + min(result.max_age_s, policy.max_age_cap_s)
        return msgspec.structs.replace(state, **changes)

    message = result.error.message if result.error else str(outcome)
    changes["last_error"] = message
    if outcome == FetchOutcome.GONE:
        changes.update(active=False, inactive_reason=f"410 Gone: {message}", errors=0)
        return msgspec.structs.replace(state, **changes)
    errors = state.errors + 1
    changes["errors"] = errors
    changes["not_before"] = now + wait_after_failure(outcome, errors, result.retry_after_s,
                                                     jitter_u, policy)
    return msgspec.structs.replace(state, **changes)


def _redirect_changes(state: FeedFetchState, result: FetchResult,
                      policy: BackoffPolicy) -> dict[str, object]:
    target = result.permanent_redirect
    if not target or (not result.ok and result.outcome != FetchOutcome.NOT_MODIFIED):
        # Only a redirect that ends in a working feed counts towards moving it.
        return {"redirect_to": "", "redirect_seen": 0} if state.redirect_to else {}
    seen = state.redirect_seen + 1 if target == state.redirect_to else 1
    if seen >= policy.confirm_redirects:
        return {"url": target, "redirect_to": "", "redirect_seen": 0}
    return {"redirect_to": target, "redirect_seen": seen}


def not_a_feed(state: FeedFetchState, previous: FeedFetchState, now: float, message: str,
               jitter_u: float, policy: BackoffPolicy = DEFAULT_POLICY) -> FeedFetchState:
    """The state after a fetch that succeeded at the HTTP level but brought no feed (an HTML
    page, garbage): a failure like any other, counted and backed off from ``previous`` (the
    state before the fetch), with the validators dropped so that the next fetch gets a whole
    document rather than a 304 for this one. ``state`` is :func:`next_fetch_state`'s answer for
    the HTTP result, whose other changes (redirects, last fetch time) stand."""
    errors = previous.errors + 1
    return msgspec.structs.replace(
        state, etag="", last_modified="", doc_hash=0, errors=errors, last_outcome="not_a_feed",
        last_error=message, not_before=now + backoff_delay(errors, policy, jitter_u))
