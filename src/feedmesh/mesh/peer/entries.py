"""Entries between the archive and the wire: the store's :class:`feedmesh.model.Entry` and the
FeedEx wire entry (key, published, title, link, summary) are turned into each other here only.

A wire entry's key is the feed's own entry key (``feeds/identity.py``); on arrival it becomes the
stored entry's key and, unless it is one of our hash keys, its guid, so a reader of the local
proxy sees the publisher's id. Text over the wire caps is cut (a summary longer than 16 KB loses
its end), never refused: the entry is still news.

What a peer sends is not trusted to be what its parser made: :func:`from_wire` passes every entry
through the hub parser's own rules (:func:`feedmesh.feeds.foreign.clean_foreign`: plain-text
title, http(s) link, sanitized summary, no date beyond now) before it reaches the archive.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import msgspec

from feedmesh.feeds.foreign import clean_foreign
from feedmesh.feeds.identity import content_hash
from feedmesh.mesh.feedex.messages import Entry as WireEntry
from feedmesh.model import Entry

__all__ = ["from_wire", "to_wire"]

_TEXT = 16_384
_URL = 2048


def to_wire(entries: Iterable[Entry]) -> list[WireEntry]:
    """The entries as FeedEx sends them; an entry whose key is over the wire's cap is left out
    (no such key is stable enough to dedup by anyway)."""
    out = []
    for entry in entries:
        if not entry.key or len(entry.key) > _URL:
            continue
        published = entry.published or entry.updated
        out.append(WireEntry(entry.key, published.timestamp() if published else None,
                             entry.title[:_TEXT], entry.link if len(entry.link) <= _URL else "",
                             (entry.summary or entry.content)[:_TEXT]))
    return out


def from_wire(entries: Iterable[WireEntry], feed: str = "", now: float | None = None
              ) -> list[Entry]:
    """Stored entries made from what a peer sent, cleaned as the parser cleans (relative links
    against ``feed``; dates after ``now`` clamped)."""
    out = []
    for wire in entries:
        published = None
        if wire.published is not None:
            try:
                published = datetime.fromtimestamp(wire.published, UTC)
            except (OverflowError, OSError, ValueError):
                published = None
        guid = "" if wire.key.startswith("hash:") else wire.key
        entry = clean_foreign(Entry(key=wire.key, guid=guid, title=wire.title, link=wire.link,
                                    published=published, summary=wire.summary), feed, now)
        out.append(msgspec.structs.replace(entry, content_hash=content_hash(
            entry.title, entry.link, entry.summary, "")))
    return out
