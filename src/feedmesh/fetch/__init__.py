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

The names below are imported on first use (PEP 562), so that a pure consumer of :mod:`.state`
(the scheduler, the trace simulator) does not load the HTTP client and aiohttp with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from feedmesh.fetch.client import Fetcher, FetchRequest, fetch_url
    from feedmesh.fetch.guard import AddressGuard, BlockedAddressError, StaticResolver
    from feedmesh.fetch.settings import FetchSettings, user_agent
    from feedmesh.fetch.state import (
        BackoffPolicy,
        FeedFetchState,
        backoff_delay,
        next_fetch_state,
        not_a_feed,
        wait_after_failure,
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
    "wait_after_failure",
]

_MODULE_OF = {
    "Fetcher": "client", "FetchRequest": "client", "fetch_url": "client",
    "AddressGuard": "guard", "BlockedAddressError": "guard", "StaticResolver": "guard",
    "FetchSettings": "settings", "user_agent": "settings",
    "BackoffPolicy": "state", "FeedFetchState": "state", "backoff_delay": "state",
    "next_fetch_state": "state", "not_a_feed": "state", "wait_after_failure": "state",
    "AiohttpTransport": "transport", "FetchFailure": "transport",
    "HandlerResponse": "transport", "HandlerTransport": "transport", "Transport": "transport",
    "TransportRequest": "transport",
}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
