"""The JSON Feed 1.0 / 1.1 writer: HTML in ``content_html``, plain-text summaries, attachments,
and the publisher's hints and per-item provenance in ``_feedmesh`` extension objects.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from feedmesh.feeds.render_base import (
    FeedWriter,
    SourceRef,
    clean,
    entry_id,
    plain_text,
    rfc3339_date,
    source_parts,
)
from feedmesh.feeds.subscribe import json_subscribe
from feedmesh.model import Entry, FeedInfo, Person

__all__ = ["JsonFeedWriter"]


_json = msgspec.json.Encoder()


class JsonFeedWriter(FeedWriter):
    """JSON Feed 1.0 or 1.1. HTML goes to ``content_html``; ``summary`` is plain text by the
    spec."""

    separator = ","

    def __init__(self, version: str) -> None:
        self.format = f"json{version}"
        self.content_type = "application/feed+json; charset=utf-8"
        self._v11 = version == "1.1"
        self._version_url = "https://jsonfeed.org/version/" + ("1.1" if self._v11 else "1")

    def _people(self, people: Sequence[Person], target: dict) -> None:
        rendered = []
        for p in people:
            person = {k: clean(v) for k, v in (("name", p.name), ("url", p.uri)) if v}
            if not person and p.email:
                person = {"url": "mailto:" + clean(p.email)}
            if person:
                rendered.append(person)
        if rendered:
            if self._v11:
                target["authors"] = rendered
            target["author"] = rendered[0]  # 1.0's field; 1.1 readers may still look for it

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        doc: dict = {"version": self._version_url, "title": clean(feed.title)}
        for key, value in (("home_page_url", feed.link), ("feed_url", feed.self_link),
                           ("description", feed.description), ("icon", feed.icon)):
            if value:
                doc[key] = clean(value)
        if self._v11 and feed.language:
            doc["language"] = clean(feed.language)
        if feed.prev_archive:  # JSON Feed's paging: "the next n items", older ones
            doc["next_url"] = clean(feed.prev_archive)
        self._people(feed.authors, doc)
        if feed.hub_links:
            doc["hubs"] = [{"type": "WebSub", "url": clean(h)} for h in feed.hub_links]
        hints: dict = {}
        if feed.ttl_minutes is not None:
            hints["ttl_minutes"] = int(feed.ttl_minutes)
        if feed.skip_hours:
            hints["skip_hours"] = [int(h) for h in feed.skip_hours]
        if feed.skip_days:
            hints["skip_days"] = list(feed.skip_days)
        if feed.update_period:
            hints["update_period"] = feed.update_period
        if feed.update_frequency is not None:
            hints["update_frequency"] = int(feed.update_frequency)
        if feed.updated is not None:
            hints["updated"] = rfc3339_date(feed.updated)
        if feed.subscribe is not None:
            hints["subscribe"] = json_subscribe(feed.subscribe)
        if feed.archive:  # RFC 5005's fh:archive and rel="current", which JSON Feed lacks
            hints["archive"] = True
        if feed.current_link:
            hints["current_url"] = clean(feed.current_link)
        if hints:
            doc["_feedmesh"] = hints
        text = _json.encode(doc).decode()
        return text[:-1] + ',"items":['

    def item(self, entry: Entry, feed: FeedInfo, source: SourceRef = None) -> str:
        item: dict = {"id": clean(entry_id(entry))}
        if entry.link:
            item["url"] = clean(entry.link)
        if entry.title:
            item["title"] = clean(entry.title)
        if entry.content:
            item["content_html"] = clean(entry.content)
            if entry.summary:
                item["summary"] = clean(plain_text(entry.summary))
        elif entry.summary:
            item["content_html"] = clean(entry.summary)
        else:
            item["content_text"] = ""  # the spec requires content_html or content_text
        if entry.published is not None:
            item["date_published"] = rfc3339_date(entry.published)
        if entry.updated is not None:
            item["date_modified"] = rfc3339_date(entry.updated)
        self._people(entry.authors, item)
        if entry.categories:
            item["tags"] = [clean(c) for c in entry.categories]
        if self._v11 and entry.language:
            item["language"] = clean(entry.language)
        if entry.enclosures:
            attachments = []
            for enc in entry.enclosures:
                attachment: dict = {"url": clean(enc.url),
                                    "mime_type": enc.type or "application/octet-stream"}
                if enc.length is not None:
                    attachment["size_in_bytes"] = enc.length
                attachments.append(attachment)
            item["attachments"] = attachments
        origin = source_parts(source)
        ext: dict = {}
        if origin is not None:
            ext["source_title"] = clean(origin[0])
            if origin[1]:
                ext["source_url"] = clean(origin[1])
        if entry.republished_by:
            ext["republished_by"] = clean(entry.republished_by)
        if entry.backlog:
            ext["backlog"] = True
        if ext:
            item["_feedmesh"] = ext
        return _json.encode(item).decode()

    def tail(self, feed: FeedInfo) -> str:
        return "]}\n"
