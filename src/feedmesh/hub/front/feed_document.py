"""A subscription's private feed as a document: what a reader polling ``/f/<token>.rss`` gets, and
what the WebSub hub pushes to the topic's subscribers (a fat ping is the same document).

Every private feed advertises where it lives and where to subscribe to it: ``rel="self"`` (the
topic) and ``rel="hub"`` (``<base>/hub``), in the document and in the HTTP ``Link`` header.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from feedmesh.feeds.render import render_feed, writer_for
from feedmesh.hub.entry_ids import entry_id_in, feed_mark
from feedmesh.hub.front.archive import feed_ttl_minutes, key_data, make_key
from feedmesh.model import Entry, FeedInfo
from feedmesh.store import ReflectedItem, Subscription

__all__ = ["EXTENSIONS", "RenderedItems", "archive_key", "archive_url", "entry_id_in",
           "feed_mark", "feed_urls", "hub_url", "link_header", "prev_archive_url",
           "published_entry", "render_private_feed"]

EXTENSIONS = {"rss": "rss2.0", "atom": "atom1.0", "json": "json1.1"}
"""A private feed URL's extension -> the format served there."""


_MARK = "feedmesh" + secrets.token_hex(16)
"""Where an item rendered for every feed holds its feed's mark: random per process, so no entry's
text can hold it, and replaced before anything is served."""


def feed_urls(base_url: str, token: str) -> dict[str, str]:
    return {ext: f"{base_url}/f/{token}.{ext}" for ext in EXTENSIONS}


def archive_url(base_url: str, token: str, key: str, ext: str) -> str:
    """An archive page of the feed at ``token`` (RFC 5005), in the format of ``ext``."""
    return f"{base_url}/f/{token}/archive/{key}.{ext}"


def archive_key(sign: Callable[[bytes], str], sub: Subscription, before: int) -> str:
    """The key of ``sub``'s archive page below entry id ``before``, MAC'd by ``sign``
    (:meth:`~.tokens.FeedTokens.sign`)."""
    return make_key(before, sign(key_data(sub.id, sub.generation, sub.query, before)))


def prev_archive_url(sign: Callable[[bytes], str] | None, sub: Subscription | None,
                     items: Sequence[ReflectedItem], self_url: str) -> str:
    """The ``prev-archive`` of the feed at ``self_url`` (``<base>/f/<token>.<ext>``) holding
    ``items``: the page of the matches below the oldest it holds ("" when it holds none, or
    no ``sign`` is given). The web's feeds and WebSub's fat pings name the same one."""
    if sign is None or sub is None or not items:
        return ""
    base, _, name = self_url.rpartition("/f/")
    token, _, ext = name.partition(".")
    return archive_url(base, token, archive_key(sign, sub, min(i.entry_id for i in items)),
                       ext)


def hub_url(base_url: str) -> str:
    """The WebSub hub every private feed of this hub names."""
    return f"{base_url}/hub"


def link_header(base_url: str, self_url: str) -> str:
    """The ``Link`` header of a private feed (WebSub section 4: discovery)."""
    return f'<{hub_url(base_url)}>; rel="hub", <{self_url}>; rel="self"'


class RenderedItems:
    """Entries as each format writes them, kept across feeds and their versions (least
    recently used dropped past ``max_chars``): an entry that a thousand subscriptions match is
    written once per format, not once per version of each of their feeds.

    Sound because an item of a private feed depends on nothing but its entry and its source:
    :func:`published_entry` always dates it (so Atom never falls back to the feed's date) and
    gives it an id of its own, cached with a placeholder for the feed's mark
    (:func:`~feedmesh.hub.entry_ids.feed_mark`) that each feed's render fills in. An entry is
    known by its id and when its reflector stored it (a changed entry is stored anew), with its
    source's title and URL, and whether its body was dropped under memory pressure."""

    def __init__(self, max_chars: int = 32 * 1024 * 1024) -> None:
        self.max_chars = max_chars
        self.chars = 0
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[tuple, tuple[str, ...]] = OrderedDict()

    def get(self, fmt: str, item: ReflectedItem,
            make: Callable[[], tuple[str, ...]]) -> tuple[str, ...]:
        """The item's text in pieces, between which each feed writes its mark."""
        key = (fmt, item.entry_id, item.stored_at, item.degraded, item.feed_title,
               item.feed_url)
        text = self._items.get(key)
        if text is not None:
            self._items.move_to_end(key)
            self.hits += 1
            return text
        text = make()
        self.misses += 1
        self._items[key] = text
        self.chars += sum(map(len, text))
        while self.chars > self.max_chars and self._items:
            self.chars -= sum(map(len, self._items.popitem(last=False)[1]))
        return text


def render_private_feed(sub: Subscription | None, items: Sequence[ReflectedItem], fmt: str, *,
                        base_url: str, self_url: str,
                        cache: RenderedItems | None = None, prev_archive: str = "",
                        current_url: str = "", ttl_minutes: int | None = None) -> bytes:
    """The feed of ``sub`` holding ``items`` (newest first) in format ``fmt``; each entry
    written by ``cache`` when given (the same bytes either way). ``prev_archive``: the archive
    page of the matches just older; ``current_url``: this document is an archive page of the
    feed there (RFC 5005); ``ttl_minutes``: the poll interval advertised (RSS ``ttl``), by
    default :func:`~.archive.feed_ttl_minutes` of the items held."""
    title = sub.name if sub and sub.name else (sub.query if sub else "feedmesh")
    if ttl_minutes is None and not current_url:
        ttl_minutes = feed_ttl_minutes([item.first_seen_at for item in items],
                                       sub.keep if sub else len(items))
    info = FeedInfo(title=f"feedmesh: {title}" + (" (archive)" if current_url else ""),
                    link=f"{base_url}/",
                    description=f"Articles matching {sub.query if sub else ''!s}",
                    self_link=self_url, hub_links=() if current_url else (hub_url(base_url),),
                    ttl_minutes=ttl_minutes, prev_archive=prev_archive,
                    current_link=current_url, archive=bool(current_url))
    mark = feed_mark(sub)
    sources = [(item.feed_title or item.feed_url, item.feed_url) for item in items]
    if cache is None:
        entries = [published_entry(item, mark) for item in items]
        return render_feed(info, entries, fmt, source_titles=sources)
    # Items are cached as every feed writes them, in pieces split where the feed's mark goes
    # (a placeholder when written), and joined with this feed's mark.
    entries = [published_entry(item, _MARK) for item in items]
    writer = writer_for(fmt)
    parts = [mark.join(cache.get(fmt, item, lambda e=entry, s=source: tuple(
                 writer.item(e, info, s).split(_MARK))))
             for item, entry, source in zip(items, entries, sources, strict=True)]
    return (writer.head(info, entries) + writer.separator.join(parts) +
            writer.tail(info)).encode("utf-8")


def published_entry(item: ReflectedItem, mark: str = "") -> Entry:
    """The entry as our feed publishes it: a stable id of our own (the source's guid is only
    unique within its feed; ``mark``, the feed's :func:`feed_mark`, makes it unique among
    private feeds too), the source's link, and dates never later than when we first saw
    it (a future-dated entry would sit on top of every reader's list for ever, and it would
    push the feed's own ``updated`` / ``date_modified`` into the future with it)."""
    entry = item.entry
    seen = datetime.fromtimestamp(item.first_seen_at, UTC)
    published = min(entry.published or entry.updated or seen, seen)
    updated = min(entry.updated, seen) if entry.updated is not None else None
    own_id = f"tag:feedmesh,2026:entry-{item.entry_id}{mark}"
    return Entry(key=own_id, guid=own_id, title=entry.title,
                 link=entry.link, published=published, updated=updated, authors=entry.authors,
                 summary=entry.summary, categories=entry.categories, language=entry.language,
                 enclosures=entry.enclosures)
