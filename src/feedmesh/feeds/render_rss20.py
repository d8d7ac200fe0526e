"""The RSS 2.0 writer: a channel with the publisher's hints (``ttl``, skips, ``sy:*``), items
with one enclosure, ``<source>`` provenance and ``isPermaLink`` guids.
"""

from __future__ import annotations

from collections.abc import Sequence

from feedmesh.feeds.render_base import (
    XML_DECL,
    FeedWriter,
    SourceRef,
    atom_links,
    entry_id,
    is_web_url,
    mesh_marks,
    rfc822_date,
    rss_author,
    skips,
    source_parts,
    sy_hints,
    xml_attr,
    xml_text,
)
from feedmesh.feeds.subscribe import xml_subscribe
from feedmesh.model import Entry, FeedInfo

__all__ = ["Rss20Writer"]


class Rss20Writer(FeedWriter):
    format = "rss2.0"
    content_type = "application/rss+xml; charset=utf-8"

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        link = feed.link or feed.self_link
        parts = [
            XML_DECL,
            ('<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom" '
             'xmlns:dc="http://purl.org/dc/elements/1.1/" '
             'xmlns:content="http://purl.org/rss/1.0/modules/content/" '
             'xmlns:sy="http://purl.org/rss/1.0/modules/syndication/">\n<channel>\n'),
            f"<title>{xml_text(feed.title)}</title>\n<link>{xml_text(link)}</link>\n",
            f"<description>{xml_text(feed.description or feed.title)}</description>\n",
        ]
        if feed.language:
            parts.append(f"<language>{xml_text(feed.language)}</language>\n")
        if feed.updated is not None:
            parts.append(f"<lastBuildDate>{rfc822_date(feed.updated)}</lastBuildDate>\n")
        for person in feed.authors[:1]:
            parts.append(rss_author(person, "managingEditor"))
        parts.append(atom_links(feed, "application/rss+xml"))
        if feed.ttl_minutes is not None:
            parts.append(f"<ttl>{int(feed.ttl_minutes)}</ttl>")
        parts.append(skips(feed) + sy_hints(feed))
        parts.append(xml_subscribe(feed.subscribe))
        if feed.icon:
            parts.append(f"<image><url>{xml_text(feed.icon)}</url><title>{xml_text(feed.title)}"
                         f"</title><link>{xml_text(link)}</link></image>")
        parts.append("\n")
        return "".join(parts)

    def item(self, entry: Entry, feed: FeedInfo, source: SourceRef = None) -> str:
        parts = ["<item>"]
        if entry.title or not (entry.summary or entry.content):
            parts.append(f"<title>{xml_text(entry.title)}</title>")
        if entry.link:
            parts.append(f"<link>{xml_text(entry.link)}</link>")
        description = entry.summary or entry.content
        if description:
            parts.append(f"<description>{xml_text(description)}</description>")
        if entry.content and entry.content != description:
            parts.append(f"<content:encoded>{xml_text(entry.content)}</content:encoded>")
        guid = entry_id(entry)
        if guid:
            permalink = "true" if guid == entry.link and is_web_url(guid) else "false"
            parts.append(f'<guid isPermaLink="{permalink}">{xml_text(guid)}</guid>')
        date = entry.published or entry.updated
        if date is not None:
            parts.append(f"<pubDate>{rfc822_date(date)}</pubDate>")
        for person in entry.authors:
            parts.append(rss_author(person, "author"))
        for term in entry.categories:
            parts.append(f"<category>{xml_text(term)}</category>")
        for enclosure in entry.enclosures[:1]:  # RSS 2.0 allows one enclosure per item
            parts.append(f'<enclosure url="{xml_attr(enclosure.url)}" '
                         f'length="{enclosure.length or 0}" '
                         f'type="{xml_attr(enclosure.type or "application/octet-stream")}"/>')
        origin = source_parts(source)
        if origin is not None and origin[1]:
            parts.append(f'<source url="{xml_attr(origin[1])}">{xml_text(origin[0])}</source>')
        parts.append(mesh_marks(entry))
        parts.append("</item>")
        return "".join(parts)

    def tail(self, feed: FeedInfo) -> str:
        return "\n</channel>\n</rss>\n"
