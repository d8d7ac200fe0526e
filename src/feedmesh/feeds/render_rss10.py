"""The RSS 1.0 (RDF) writer: ``rdf:about`` IRIs, the channel's item table of contents, Dublin Core
dates and creators, mod_enclosure.
"""

from __future__ import annotations

from collections.abc import Sequence

from feedmesh.feeds.render_base import (
    XML_DECL,
    FeedWriter,
    SourceRef,
    atom_links,
    entry_id,
    iri_id,
    mesh_marks,
    rfc3339_date,
    sy_hints,
    xml_attr,
    xml_text,
)
from feedmesh.model import Entry, FeedInfo

__all__ = ["Rss10Writer"]


class Rss10Writer(FeedWriter):
    """RSS 1.0 (RDF): dates are ``dc:date`` in RFC 3339, enclosures use mod_enclosure."""

    format = "rss1.0"
    content_type = "application/rdf+xml; charset=utf-8"

    @staticmethod
    def _about(entry: Entry) -> str:
        return iri_id(entry_id(entry))

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        link = feed.link or feed.self_link
        about = feed.self_link or link
        parts = [
            XML_DECL,
            ('<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
             'xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/" '
             'xmlns:content="http://purl.org/rss/1.0/modules/content/" '
             'xmlns:sy="http://purl.org/rss/1.0/modules/syndication/" '
             'xmlns:enc="http://purl.oclc.org/net/rss_2.0/enc#" '
             'xmlns:atom="http://www.w3.org/2005/Atom">\n'),
            f'<channel rdf:about="{xml_attr(about)}">\n<title>{xml_text(feed.title)}</title>\n',
            f"<link>{xml_text(link)}</link>\n",
            f"<description>{xml_text(feed.description or feed.title)}</description>\n",
        ]
        if feed.language:
            parts.append(f"<dc:language>{xml_text(feed.language)}</dc:language>\n")
        if feed.updated is not None:
            parts.append(f"<dc:date>{rfc3339_date(feed.updated)}</dc:date>\n")
        for person in feed.authors[:1]:
            parts.append(f"<dc:creator>{xml_text(person.name or person.email)}</dc:creator>")
        parts.append(atom_links(feed, "application/rdf+xml") + sy_hints(feed))
        parts.append("\n<items><rdf:Seq>")
        parts.extend(f'<rdf:li rdf:resource="{xml_attr(self._about(e))}"/>' for e in entries)
        parts.append("</rdf:Seq></items>\n</channel>\n")
        return "".join(parts)

    def item(self, entry: Entry, feed: FeedInfo, source: SourceRef = None) -> str:
        parts = [f'<item rdf:about="{xml_attr(self._about(entry))}">',
                 f"<title>{xml_text(entry.title)}</title>",
                 f"<link>{xml_text(entry.link or feed.link)}</link>"]
        description = entry.summary or entry.content
        if description:
            parts.append(f"<description>{xml_text(description)}</description>")
        if entry.content and entry.content != description:
            parts.append(f"<content:encoded>{xml_text(entry.content)}</content:encoded>")
        date = entry.published or entry.updated
        if date is not None:
            parts.append(f"<dc:date>{rfc3339_date(date)}</dc:date>")
        for person in entry.authors:
            parts.append(f"<dc:creator>{xml_text(person.name or person.email)}</dc:creator>")
        for term in entry.categories:
            parts.append(f"<dc:subject>{xml_text(term)}</dc:subject>")
        for enclosure in entry.enclosures:
            length = "" if enclosure.length is None else f' enc:length="{enclosure.length}"'
            parts.append(f'<enc:enclosure rdf:resource="{xml_attr(enclosure.url)}" '
                         f'enc:type="{xml_attr(enclosure.type)}"{length}/>')
        parts.append(mesh_marks(entry))
        parts.append("</item>")
        return "".join(parts)

    def tail(self, feed: FeedInfo) -> str:
        return "\n</rdf:RDF>\n"
