"""What the web layer may ask of the hub: the one door between them.

The web layer (:mod:`feedmesh.hub.web`) holds a :class:`HubFacade` and nothing else of the hub:
no tier, no store, no bus. Every call that reads or writes storage is a coroutine that keeps the
disk off the event loop. Its one implementation, :class:`~.hub_front.HubFront`, is built
with the seams of its deployment (the embedded hub's reflectors and crawler in the same
process, or a web process's reflector processes and bus), so the web layer runs unchanged on
either. The errors it raises are :mod:`feedmesh.hub.errors`' (re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from feedmesh.clock import Clock
from feedmesh.feeds.opml import OpmlOutline
from feedmesh.hub.errors import FeedUnavailable, FollowLimitError, PushRefusedError
from feedmesh.hub.front.archive import ArchivePage
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector_api import FeedVersion
from feedmesh.match import Query
from feedmesh.store import (
    Account,
    IngestedEntry,
    PushAttempt,
    PushTarget,
    ReflectedItem,
    Subscription,
)
from feedmesh.websub.hub_requests import HubRequest, LeaseBounds
from feedmesh.websub.lease import Verdict
from feedmesh.websub.subscriber import Delivery

__all__ = ["ArchivePage", "FeedUnavailable", "FeedVersion", "FollowLimitError", "HubFacade",
           "PushRefusedError", "RecentMatch", "SourceView"]


class SourceView(msgspec.Struct, frozen=True, kw_only=True):
    """A source feed as an account follows it, with how its fetching goes."""

    id: int
    url: str
    title: str
    added_at: float
    active: bool
    last_outcome: str = ""
    last_error: str = ""
    category: str = ""
    """The account's folders for it, outermost first, joined with "/" (as in OPML)."""
    html_url: str = ""
    next_fetch_at: float | None = None
    """When it will be fetched next (None: not scheduled: gone, or being fetched now)."""
    last_fetched_at: float = 0.0
    """When it was last fetched (0: not yet)."""
    errors: int = 0
    """Its failed fetches in a row (0: the last one went well)."""


class RecentMatch(msgspec.Struct, frozen=True):
    """A recently stored entry a query matches, with its source and why it matched."""

    item: IngestedEntry
    feed_url: str
    feed_title: str
    feed_language: str
    terms: tuple[str, ...]
    """The query's terms it holds (``word``, ``prefix*``, ``"a phrase"``)."""


class HubFacade(Protocol):
    clock: Clock
    metrics: HubMetrics
    lease_bounds: LeaseBounds
    """The WebSub leases the hub grants."""

    # accounts
    async def create_account(self, name: str) -> tuple[Account, str]: ...
    async def authenticate(self, token: str) -> Account | None: ...
    async def rotate_token(self, account_id: int) -> str: ...

    # subscriptions: changes are applied by every tier before these return
    async def subscriptions(self, account_id: int) -> list[Subscription]: ...
    async def subscription(self, sub_id: int) -> Subscription | None: ...
    async def count_subscriptions(self, account_id: int) -> int: ...

    async def add_subscription(self, account_id: int, *, name: str, query: str,
                               keep: int) -> Subscription:
        """A new subscription, its feed already holding the newest matches among the stored
        entries (as many as it keeps, from those :meth:`recent_matches` searches)."""
        ...

    async def change_subscription(self, sub: Subscription, *, name: str | None,
                                  query: str | None, keep: int | None,
                                  new_url: bool) -> Subscription: ...

    async def remove_subscription(self, sub: Subscription) -> None: ...

    # private feeds
    def feed_token(self, sub: Subscription) -> str: ...

    def feed_token_of(self, sub_id: int, generation: int) -> str:
        """The token the hub makes now for ``(sub_id, generation)``: after a key rotation, the
        new URL's, whichever URL a reader came by."""
        ...

    def read_feed_token(self, token: str) -> tuple[int, int] | None:
        """``(sub_id, generation)`` of an authentic token spelled exactly as issued."""
        ...

    async def feed_version(self, sub_id: int, generation: int) -> FeedVersion | None:
        """The feed's version, from its reflector's memory (no disk: a reader's 304 costs
        nothing; one round trip when the reflector is another process); None when no feed is
        served at that subscription and generation. Raises :class:`FeedUnavailable`."""
        ...

    async def feed_items(self, sub_id: int) -> list[ReflectedItem]:
        """The entries a subscription's feed shows, newest first. Raises
        :class:`FeedUnavailable`."""
        ...

    # archives: older matches, read from the store by the subscription's query
    def archive_key(self, sub: Subscription, before: int) -> str:
        """The key naming ``sub``'s archive page below entry id ``before`` (MAC'd: only the
        hub mints them)."""
        ...

    def archive_sign(self, data: bytes) -> str:
        """The MAC of archive page keys (see :func:`~.feed_document.archive_key`)."""
        ...

    def read_archive_key(self, sub: Subscription, key: str) -> int | None:
        """The boundary of an archive page key the hub made for ``sub`` as it is now (its
        generation and query), else None."""
        ...

    async def archive_reach(self) -> float | None:
        """When the oldest entry stored was first seen: how far back archives reach (None:
        nothing stored)."""
        ...

    async def feed_archive(self, sub: Subscription, before: int, *, page_entries: int,
                           scan_ids: int) -> ArchivePage:
        """The newest (at most ``page_entries``) stored entries below id ``before`` that
        ``sub``'s query matches, looking at no more than ``scan_ids`` ids; from the store,
        no reflector asked."""
        ...

    # source feeds
    async def sources(self, account_id: int) -> list[SourceView]: ...

    async def follow_sources(self, account_id: int, outlines: Sequence[OpmlOutline], *,
                             limit: int | None = None) -> list[tuple[int, bool]]:
        """Follow these feeds (added to the crawl when new, fetched soon), keeping each
        outline's title, folder and site; ``(feed id, newly followed)`` for each, in the order
        given (False: the account already followed it, and nothing changed). Raises
        :class:`FollowLimitError`, having followed nothing, when the feeds not yet followed
        would take the account past ``limit``."""
        ...

    async def unfollow_source(self, account_id: int, feed_id: int) -> bool: ...

    # WebSub: publishers' hubs calling back (the hub as a subscriber)
    async def websub_verify(self, callback_id: str, params: dict[str, str]) -> Verdict:
        """A hub's GET to a callback: the challenge to echo, or why not."""
        ...

    async def websub_deliver(self, callback_id: str, signature: str | None, content_type: str,
                             body: bytes) -> Delivery:
        """A hub's POST to a callback: checked, and ingested when it passes."""
        ...

    # the rest
    async def recent_matches(self, query: Query, searched: int) -> tuple[int, list[RecentMatch]]:
        """Which of the ``searched`` newest stored entries ``query`` matches, newest first, and
        how many were searched: the preview, and what a new subscription starts with."""
        ...

    async def stats(self) -> dict[str, object]:
        """The figures ``/api/stats`` and ``feedmesh stats`` show."""
        ...

    # push: WebSub subscribers of private feeds, webhooks (see :mod:`feedmesh.hub.push.service`)
    def websub_request(self, request: HubRequest, sub_id: int, fmt: str) -> None:
        """Verify intent with the callback in the background, then (un)subscribe it to the
        feed ``sub_id`` serves in ``fmt``. Raises :class:`PushRefusedError`."""
        ...

    def push_targets(self, sub_id: int) -> list[PushTarget]: ...

    async def add_webhook(self, sub_id: int, url: str) -> PushTarget:
        """A webhook (with its new signing secret), or the one already at ``url``. Raises
        :class:`PushRefusedError`."""
        ...

    async def remove_push_target(self, target: PushTarget) -> None: ...

    async def set_push_signature(self, target: PushTarget, method: object) -> PushTarget:
        """Sign a WebSub subscriber's deliveries with ``method`` (kept when it subscribes
        again). Raises :class:`PushRefusedError` (400: not a method, or not WebSub)."""
        ...

    async def push_attempts(self, target_id: int) -> list[PushAttempt]: ...

    def test_webhook(self, target: PushTarget) -> None:
        """Queue a delivery without entries, in order behind what waits for it."""
        ...
