"""Polite HTTP for feeds: conditional GET, RFC 3229 deltas, bounded decoding, an address guard
and a cap on connections per host (:mod:`.client`), over a transport port (:mod:`.transport`:
real sockets, or a function answering in-process), and the pure decisions a result implies for a
feed (:mod:`.state`).

Exceptions drawn from this package::

    Exception
     └── FetchFailure             a fetch failed (its outcome and a message naming the URL)
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
from feedmesh.fetch.transport import (
    AiohttpTransport,
    FetchFailure,
    HandlerResponse,
    HandlerTransport,
    Transport,
    TransportRequest,
)

__all__ = [
    "AddressGuard",
    "AiohttpTransport",
    "BackoffPolicy",
    "BlockedAddressError",
    "FeedFetchState",
    "FetchFailure",
    "FetchRequest",
    "FetchSettings",
    "Fetcher",
    "HandlerResponse",
    "HandlerTransport",
    "StaticResolver",
    "Transport",
    "TransportRequest",
    "backoff_delay",
    "fetch_url",
    "next_fetch_state",
    "not_a_feed",
    "user_agent",
]
