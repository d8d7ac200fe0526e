"""The RSS 0.91 (UserLand) writer: items carry only title, link and description.
"""

from __future__ import annotations

from collections.abc import Sequence

from feedmesh.feeds.render_base import (
    XML_DECL,
    FeedWriter,
    SourceRef,
    rfc822_date,
    rss_author,
    skips,
    xml_text,
)
from feedmesh.model import Entry, FeedInfo

__all__ = ["Rss091Writer"]


class Rss091Writer(FeedWriter):
    """RSS 0.91 (UserLand): items have only title, link and description; language is required."""

    format = "rss0.91"
    content_type = "application/rss+xml; charset=utf-8"

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        link = feed.link or feed.self_link
        parts = [
            XML_DECL, '<rss version="0.91">\n<channel>\n',
            f"<title>{xml_text(feed.title)}</title>\n<link>{xml_text(link)}</link>\n",
            f"<description>{xml_text(feed.description or feed.title)}</description>\n",
            f"<language>{xml_text(feed.language or 'en')}</language>\n",
        ]
        if feed.updated is not None:
            parts.append(f"<lastBuildDate>{rfc822_date(feed.updated)}</lastBuildDate>\n")
        for person in feed.authors[:1]:
            if person.email:
                parts.append(rss_author(person, "managingEditor"))
        if feed.icon:
            parts.append(f"<image><url>{xml_text(feed.icon)}</url><title>{xml_text(feed.title)}"
                         f"</title><link>{xml_text(link)}</link></image>")
        parts.append(skips(feed) + "\n")
        return "".join(parts)

    def item(self, entry: Entry, feed: FeedInfo, source: SourceRef = None) -> str:
        parts = [f"<item><title>{xml_text(entry.title)}</title>"]
        if entry.link:
            parts.append(f"<link>{xml_text(entry.link)}</link>")
        description = entry.summary or entry.content
        if description:
            parts.append(f"<description>{xml_text(description)}</description>")
        parts.append("</item>")
        return "".join(parts)

    def tail(self, feed: FeedInfo) -> str:
        return "\n</channel>\n</rss>\n"
