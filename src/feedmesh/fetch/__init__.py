"""Polite HTTP for feeds: conditional GET, RFC 3229 deltas, bounded decoding, an address guard and
per-host limits (:mod:`.client`), and the pure decisions a result implies for a feed (:mod:`.state`).

Exceptions drawn from this package::

    OSError
     └── BlockedAddressError      the guard refused a destination (surfaces as FetchOutcome.BLOCKED)
    ValueError
     ├── DecodeError              invalid compressed body (FetchOutcome.PROTOCOL_ERROR)
     └── DecodedTooLarge          inflated body over the cap (FetchOutcome.TOO_LARGE)

None of them escapes :meth:`Fetcher.fetch`: every failure becomes a typed :class:`FetchResult`.
"""

from feedmesh.fetch.client import Fetcher, FetchRequest, fetch_url
from feedmesh.fetch.guard import AddressGuard, BlockedAddressError, StaticResolver
from feedmesh.fetch.settings import FetchSettings, user_agent
from feedmesh.fetch.state import (
    BackoffPolicy,
    FeedFetchState,
    backoff_delay,
    next_fetch_state,
    not_a_feed,
)

__all__ = [
    "AddressGuard",
    "BackoffPolicy",
    "BlockedAddressError",
    "FeedFetchState",
    "FetchRequest",
    "FetchSettings",
    "Fetcher",
    "StaticResolver",
    "backoff_delay",
    "fetch_url",
    "next_fetch_state",
    "not_a_feed",
    "user_agent",
]
