"""The storage port: what every store implementation (SQLite now, PostgreSQL next) must offer.

Writes are *intents* (:class:`FeedUpdate`: "this fetch happened, with this outcome, and these
entries were in the document"), applied atomically: a feed's new fetch state (validators, document
hash) and the entries it brought are committed in the same transaction, so a crash can never leave
validators that claim "seen" for entries that were not stored (which would lose them behind 304s),
nor store entries twice. Deduplication runs inside that transaction against the stored truth.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import msgspec

from feedmesh.fetch.state import FeedFetchState
from feedmesh.model import Entry, FeedInfo

__all__ = ["FeedRow", "FeedUpdate", "IngestedEntry", "Posting", "Store", "StoreError"]


class StoreError(Exception):
    """A storage operation failed (the message names the operation and the cause)."""


class FeedRow(msgspec.Struct, frozen=True, kw_only=True):
    id: int
    source_url: str
    """The URL as first added (the fetch state's ``url`` follows confirmed permanent redirects)."""
    state: FeedFetchState
    title: str = ""
    info: FeedInfo | None = None
    added_at: float = 0.0


class FeedUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """The intent of one fetch, applied atomically by :meth:`Store.apply`."""

    feed_id: int
    state: FeedFetchState
    seen_at: float
    info: FeedInfo | None = None
    entries: tuple[Entry, ...] = ()
    """Every entry of the document (or delta); the store keeps the new and updated ones."""
    backlog: bool = False
    """The feed's first document: its entries were not *posted* at ``seen_at``, so the scheduler
    must not learn posting times from them."""


class IngestedEntry(msgspec.Struct, frozen=True, kw_only=True):
    """An entry the store found new or updated; what the filter tier receives."""

    id: int
    feed_id: int
    entry: Entry
    first_seen_at: float
    updated: bool = False
    backlog: bool = False
    """Found in the feed's first document: already published before we followed the feed."""


class Posting(msgspec.Struct, frozen=True, array_like=True):
    """One observed posting: when we first saw it, and when the publisher says it was posted."""

    first_seen_at: float
    published: float | None
    backlog: bool


class Store(Protocol):
    def add_feeds(self, urls: Iterable[str], now: float) -> list[FeedRow]: ...
    def feeds(self, *, active_only: bool = False) -> list[FeedRow]: ...
    def feed(self, feed_id: int) -> FeedRow | None: ...
    def remove_feed(self, feed_id: int) -> None: ...
    def set_active(self, feed_id: int, active: bool, reason: str = "") -> None: ...
    def apply(self, updates: Sequence[FeedUpdate]) -> list[IngestedEntry]: ...
    def entries(self, feed_id: int, limit: int = 50) -> list[IngestedEntry]: ...
    def recent_entries(self, limit: int = 100) -> list[IngestedEntry]: ...
    def entries_after(self, after_id: int, limit: int = 500) -> list[IngestedEntry]: ...
    def max_entry_id(self) -> int: ...
    def entry_count(self) -> int: ...
    def postings(self, feed_id: int, since: float = 0.0) -> list[Posting]: ...
    def prune_postings(self, before: float) -> int: ...
    def close(self) -> None: ...
