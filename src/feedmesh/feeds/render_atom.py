"""The Atom 1.0 writer: IRI ids, text titles, HTML summaries and contents, enclosure links,
``<source>`` provenance, and a feed author whenever an entry lacks one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from feedmesh.feeds.render_base import (
    XML_DECL,
    FeedWriter,
    SourceRef,
    entry_id,
    history_links,
    iri_id,
    mesh_marks,
    rfc3339_date,
    source_parts,
    sy_hints,
    utc,
    xml_attr,
    xml_text,
)
from feedmesh.feeds.subscribe import xml_subscribe
from feedmesh.model import Entry, FeedInfo, Person

__all__ = ["AtomWriter"]


def _atom_person(tag: str, person: Person) -> str:
    out = f"<{tag}><name>{xml_text(person.name or person.email or 'unknown')}</name>"
    if person.email:
        out += f"<email>{xml_text(person.email)}</email>"
    if person.uri:
        out += f"<uri>{xml_text(person.uri)}</uri>"
    return out + f"</{tag}>"


def _latest(entries: Sequence[Entry]) -> datetime | None:
    dates = [utc(d) for e in entries for d in (e.updated, e.published) if d is not None]
    return max(dates) if dates else None


class AtomWriter(FeedWriter):
    """Atom 1.0. ``updated`` falls back to ``published``, then the feed's, then the newest
    entry's."""

    format = "atom1.0"
    content_type = "application/atom+xml; charset=utf-8"

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        updated = feed.updated or _latest(entries)
        # An archive page is part of the feed it belongs to (RFC 5005): the same id.
        feed_id = iri_id(feed.current_link or feed.self_link or feed.link or feed.title)
        lang = f' xml:lang="{xml_attr(feed.language)}"' if feed.language else ""
        parts = [
            XML_DECL,
            (f'<feed xmlns="http://www.w3.org/2005/Atom" '
             f'xmlns:sy="http://purl.org/rss/1.0/modules/syndication/"{lang}>\n'),
            f"<id>{xml_text(feed_id)}</id>\n<title type=\"text\">{xml_text(feed.title)}</title>\n",
        ]
        if feed.description:
            parts.append(f'<subtitle type="text">{xml_text(feed.description)}</subtitle>\n')
        if feed.link:
            parts.append(f'<link rel="alternate" type="text/html" href="{xml_attr(feed.link)}"/>\n')
        if feed.self_link:
            parts.append(f'<link rel="self" type="application/atom+xml" '
                         f'href="{xml_attr(feed.self_link)}"/>\n')
        for hub in feed.hub_links:
            parts.append(f'<link rel="hub" href="{xml_attr(hub)}"/>\n')
        history = history_links(feed, "link", "application/atom+xml")
        if history:
            parts.append(history + "\n")
        if updated is not None:
            parts.append(f"<updated>{rfc3339_date(updated)}</updated>\n")
        authors = feed.authors
        if not authors and any(not e.authors for e in entries):
            # An Atom feed needs an author unless every entry has one.
            authors = (Person(name=feed.title or "unknown"),)
        parts.extend(_atom_person("author", p) for p in authors)
        if feed.icon:
            parts.append(f"<icon>{xml_text(feed.icon)}</icon>")
        parts.append(sy_hints(feed) + "\n")
        parts.append(xml_subscribe(feed.subscribe))
        return "".join(parts)

    def item(self, entry: Entry, feed: FeedInfo, source: SourceRef = None) -> str:
        parts = [f"<entry><id>{xml_text(iri_id(entry_id(entry)))}</id>",
                 f'<title type="text">{xml_text(entry.title)}</title>']
        if entry.link:
            parts.append(f'<link rel="alternate" type="text/html" href="{xml_attr(entry.link)}"/>')
        if entry.published is not None:
            parts.append(f"<published>{rfc3339_date(entry.published)}</published>")
        updated = entry.updated or entry.published or feed.updated
        if updated is not None:
            parts.append(f"<updated>{rfc3339_date(updated)}</updated>")
        parts.extend(_atom_person("author", p) for p in entry.authors)
        if entry.summary:
            parts.append(f'<summary type="html">{xml_text(entry.summary)}</summary>')
        if entry.content:
            parts.append(f'<content type="html">{xml_text(entry.content)}</content>')
        for term in entry.categories:
            parts.append(f'<category term="{xml_attr(term)}"/>')
        for enclosure in entry.enclosures:
            extra = f' type="{xml_attr(enclosure.type)}"' if enclosure.type else ""
            if enclosure.length is not None:
                extra += f' length="{enclosure.length}"'
            parts.append(f'<link rel="enclosure" href="{xml_attr(enclosure.url)}"{extra}/>')
        origin = source_parts(source)
        if origin is not None:
            link = f'<link rel="self" href="{xml_attr(origin[1])}"/>' if origin[1] else ""
            parts.append(f'<source><title type="text">{xml_text(origin[0])}</title>{link}</source>')
        parts.append(mesh_marks(entry))
        parts.append("</entry>")
        return "".join(parts)

    def tail(self, feed: FeedInfo) -> str:
        return "\n</feed>\n"
