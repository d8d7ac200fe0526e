"""The typed messages the hub's tiers exchange over the :class:`~feedmesh.bus.Bus`.

Every message is a frozen msgspec Struct tagged with its kind, so one decoder reads any of them;
every bus carries them as MessagePack bytes (:func:`encode`, :func:`decode`).

Subjects:

* ``articles``            crawler -> every filter shard: :class:`Article`
* ``matches.<reflector>`` filter -> one reflector: :class:`MatchedBatch` (a batch of articles
                          and their matches, one message per reflector per batch), or
                          :class:`Matched` (one article: older filters and stored entries a
                          new subscription starts with)
* ``control``             web -> filters and reflectors: :class:`SubscriptionAdded`,
                          :class:`SubscriptionRemoved`
* ``feeds``               web processes -> the crawler: :class:`FeedsAdded`,
                          :class:`FollowsChanged`; ``map --apply`` and named crawlers ->
                          every named crawler: :class:`OwnersChanged`
"""

from __future__ import annotations

import msgspec

from feedmesh.match.article import article_from_entry
from feedmesh.match.packed import PackedTokens, pack_tokens
from feedmesh.model import Entry
from feedmesh.store import IngestedEntry

__all__ = [
    "Article",
    "FeedMeta",
    "FeedsAdded",
    "FollowsChanged",
    "HubMessage",
    "Matched",
    "MatchedBatch",
    "OwnersChanged",
    "SubscriptionAdded",
    "SubscriptionRemoved",
    "article_of",
    "as_matched",
    "decode",
    "encode",
]


class Article(msgspec.Struct, frozen=True, tag="article", kw_only=True):
    """A new or updated entry, as the crawler committed it."""

    entry_id: int
    feed_id: int
    feed_url: str
    feed_title: str
    feed_language: str = ""
    entry: Entry
    first_seen_at: float
    updated: bool = False
    backlog: bool = False
    """Found in the feed's first document: published before the hub followed the feed."""
    tokens: PackedTokens | None = None
    """The entry tokenized once by the crawler (:mod:`feedmesh.match.packed`, versioned), so
    that no filter shard tokenizes it again; absent from older crawlers' articles, and dropped
    from what the filters send on to the reflectors when those do not match."""


def article_of(item: IngestedEntry, feed_url: str, feed_title: str,
               feed_language: str = "", *, tokenized: bool = True) -> Article:
    """The article the crawler publishes for an entry it committed (and the hub replays),
    with its packed tokens unless not ``tokenized``."""
    tokens = (pack_tokens(article_from_entry(item.entry, feed_url, feed_language))
              if tokenized else None)
    return Article(entry_id=item.id, feed_id=item.feed_id, feed_url=feed_url,
                   feed_title=feed_title, feed_language=feed_language, entry=item.entry,
                   first_seen_at=item.first_seen_at, updated=item.updated,
                   backlog=item.backlog, tokens=tokens)


class Matched(msgspec.Struct, frozen=True, tag="matched", kw_only=True):
    """An article and the subscriptions of one reflector that it matched.

    ``sub_ids`` is ``None`` when the filter chose to send the article alone and let the reflector
    re-run the match against its own subscriptions (Cobra's final design, section 3.3): we send ids
    when they are smaller than the article, which they almost always are.
    """

    article: Article
    sub_ids: bytes | None
    """Sorted subscription ids, encoded by :func:`feedmesh.hub.idcodec.encode_ids`; or None
    (the reflector re-matches)."""
    shard: int = 0
    """The filter shard that matched it; ``-sub_id`` for the stored entries a new subscription
    starts with (logged once per subscription and entry, no watermark)."""
    matched_at: float = 0.0


class MatchedBatch(msgspec.Struct, frozen=True, tag="matched_batch", kw_only=True):
    """The articles of one filter batch that matched subscriptions of one reflector, and those
    subscriptions: ``sub_ids[i]`` (:func:`feedmesh.hub.idcodec.encode_ids`, sorted) for
    ``articles[i]``, each article once; empty bytes when the filter sends the articles alone
    (its ``article`` delivery: the reflector re-matches). What :class:`Matched` carries for one
    article, for a batch in one message: a filter sends one per reflector per batch, not one
    per article."""

    articles: tuple[Article, ...]
    sub_ids: tuple[bytes, ...]
    shard: int = 0
    matched_at: float = 0.0

    def items(self) -> list[Matched]:
        """The batch as one :class:`Matched` per article (ValueError when the two tuples
        differ in length)."""
        if len(self.articles) != len(self.sub_ids):
            raise ValueError(f"matched batch: {len(self.articles)} articles but "
                             f"{len(self.sub_ids)} id lists")
        return [Matched(article=a, sub_ids=ids or None, shard=self.shard,
                        matched_at=self.matched_at)
                for a, ids in zip(self.articles, self.sub_ids, strict=True)]


def as_matched(message: HubMessage) -> list[Matched]:
    """What a ``matches.<reflector>`` message says, one :class:`Matched` per article (none for
    another kind of message)."""
    if isinstance(message, MatchedBatch):
        return message.items()
    return [message] if isinstance(message, Matched) else []


class SubscriptionAdded(msgspec.Struct, frozen=True, tag="sub_added", kw_only=True):
    """A subscription was created or changed (an upsert: the newest message wins)."""

    sub_id: int
    query: str
    reflector: int
    keep: int = 10
    generation: int = 0
    """Bumped when its owner asks for a new private URL (the old one stops working)."""


class SubscriptionRemoved(msgspec.Struct, frozen=True, tag="sub_removed", kw_only=True):
    sub_id: int
    reflector: int


class FeedsAdded(msgspec.Struct, frozen=True, tag="feeds_added", kw_only=True):
    """Crawl these feeds (a web process already stored them: known ones keep their ids)."""

    urls: tuple[str, ...]


class FollowsChanged(msgspec.Struct, frozen=True, tag="follows_changed", kw_only=True):
    """Feeds gained or lost followers: feed id -> change (what weighs a feed in the budget)."""

    changes: dict[int, int]


class OwnersChanged(msgspec.Struct, frozen=True, tag="owners_changed", kw_only=True):
    """The feed ownership table changed (``feedmesh map --apply``, or a crawler handed feeds
    over): every named crawler reads its rows again (hub/tiers/owners.py)."""

    by: str = ""
    """Who changed it: ``map`` or the crawler's name (for the logs)."""


class FeedMeta(msgspec.Struct, frozen=True):
    """What the tiers downstream need to know of a source feed besides its entries."""

    url: str
    title: str = ""
    language: str = ""


HubMessage = (Article | Matched | MatchedBatch | SubscriptionAdded | SubscriptionRemoved
              | FeedsAdded | FollowsChanged | OwnersChanged)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(HubMessage)


def encode(message: HubMessage) -> bytes:
    return _encoder.encode(message)


def decode(data: bytes) -> HubMessage:
    """Raises :class:`msgspec.DecodeError` (a ValueError) on bytes that are not a message."""
    return _decoder.decode(data)
