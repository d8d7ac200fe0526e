"""The id an entry has in a private feed: its own in each feed that holds it.

One id for an entry in every feed would be simpler, but readers key items by id across feeds
(newsboat does): after importing the subscriptions OPML, an entry two subscriptions match shows in
one of them only, and a subscription whose entries all show elsewhere looks empty. So the id is
``tag:feedmesh,2026:entry-<n>.<mark>``, the mark the feed's own (:func:`feed_mark`). The front
writes it in every format, push in every webhook's JSON.
"""

from __future__ import annotations

import functools
import hashlib
import struct

from feedmesh.store import Subscription

__all__ = ["entry_id_in", "feed_mark"]


def feed_mark(sub: Subscription | None) -> str:
    """What makes an entry's id in the feed of ``sub`` its own: 16 hex digits of a hash of the
    subscription's id and the instant it was made (to the microsecond, known only to the hub and
    the owner). Readers that key items by id across feeds (newsboat does) then keep an entry
    that two subscriptions match in both; the mark is stable across restarts and URL-key
    rotations (neither changes), and does not say which subscription it is or how many exist.
    No subscription (a feed being deleted): no mark."""
    return "" if sub is None else _mark(sub.id, sub.created_at)


@functools.lru_cache(maxsize=1 << 16)
def _mark(sub_id: int, created_at: float) -> str:
    digest = hashlib.blake2b(struct.pack(">qd", sub_id, created_at), digest_size=8,
                             person=b"feedmesh entry")
    return "." + digest.hexdigest()


def entry_id_in(sub: Subscription | None, entry_id: int) -> str:
    """The id entry ``entry_id`` has in the feed of ``sub`` (every format, every push)."""
    return f"tag:feedmesh,2026:entry-{entry_id}{feed_mark(sub)}"
