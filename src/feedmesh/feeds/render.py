"""Feed writers: a normalized feed and its entries -> the bytes of an RSS, Atom or JSON Feed document.

The hub's reflector serves each subscription with these writers, and the feed farm builds every
synthetic feed with them, so the output must be valid for every format, not merely parseable:

* titles are plain text, summaries and contents are HTML, and both are escaped for XML (the HTML
  travels as escaped text: ``&lt;p&gt;``); characters XML 1.0 forbids are dropped;
* RSS 2.0 and 0.91 dates are RFC 822 (``Tue, 10 Jun 2003 04:00:00 GMT``); RSS 1.0 (``dc:date``),
  Atom and JSON Feed dates are RFC 3339 (``2003-06-10T04:00:00Z``); naive datetimes are taken as UTC;
* a guid equal to the entry's http(s) link is written ``isPermaLink="true"``, any other guid
  ``isPermaLink="false"``;
* the publisher's polling hints are written where the format has a place for them: ``ttl``,
  ``skipHours``, ``skipDays`` (RSS 2.0; the skips also in 0.91), ``sy:updatePeriod`` /
  ``sy:updateFrequency`` (RSS 2.0, RSS 1.0, Atom), and a ``_feedmesh`` object in JSON Feed, whose
  spec allows such extensions.

Documents are built as strings, not DOMs (a 10-entry feed renders in tens of microseconds).
Rendering is split into a *head*, one *item* per entry and a *tail* (:class:`FeedWriter`) so that
a caller that keeps documents up to date, like the farm, can reuse the items it already rendered.

Per-entry provenance (``source_titles``) is written as RSS 2.0 ``<source url="...">title</source>``
(only when the source URL is known: the element requires it), Atom ``<source><title>``, and a JSON
Feed item extension ``"_feedmesh": {"source_title": ..., "source_url": ...}``. RSS 0.91 and RSS 1.0
have no such element and omit it.
"""

from __future__ import annotations

import html
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Union
from urllib.parse import quote

import msgspec

from feedmesh.model import Entry, FeedInfo, Person

__all__ = [
    "CONTENT_TYPES",
    "FORMATS",
    "FeedWriter",
    "SourceRef",
    "render_feed",
    "rfc822_date",
    "rfc3339_date",
    "writer_for",
    "xml_attr",
    "xml_text",
]

FORMATS: tuple[str, ...] = ("rss0.91", "rss2.0", "rss1.0", "atom1.0", "json1.0", "json1.1")

CONTENT_TYPES: dict[str, str] = {
    "rss0.91": "application/rss+xml; charset=utf-8",
    "rss2.0": "application/rss+xml; charset=utf-8",
    "rss1.0": "application/rdf+xml; charset=utf-8",
    "atom1.0": "application/atom+xml; charset=utf-8",
    "json1.0": "application/feed+json; charset=utf-8",
    "json1.1": "application/feed+json; charset=utf-8",
}

SourceRef = Union[str, tuple[str, str], None]
"""Where an entry came from: its source feed's title, or ``(title, url)``, or None."""

# Characters XML 1.0 cannot carry at all (C0 controls but tab/LF/CR, lone surrogates, U+FFFE/F).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_TAG = re.compile(r"<[^>]*>")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_XML_DECL = '<?xml version="1.0" encoding="utf-8"?>\n'


def xml_text(value: str) -> str:
    """Escape ``value`` for XML character data (dropping characters XML 1.0 forbids)."""
    if _NOT_XML.search(value):
        value = _NOT_XML.sub("", value)
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def xml_attr(value: str) -> str:
    """Escape ``value`` for a double-quoted XML attribute."""
    return xml_text(value).replace('"', "&quot;")


def _clean(value: str) -> str:
    return _NOT_XML.sub("", value) if _NOT_XML.search(value) else value


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def rfc822_date(moment: datetime) -> str:
    """``Tue, 10 Jun 2003 04:00:00 GMT`` (RFC 822 with a four-digit year, as RSS asks)."""
    m = _utc(moment)
    return (f"{_DAYS[m.weekday()]}, {m.day:02d} {_MONTHS[m.month - 1]} {m.year:04d} "
            f"{m.hour:02d}:{m.minute:02d}:{m.second:02d} GMT")


def rfc3339_date(moment: datetime) -> str:
    """``2003-06-10T04:00:00Z`` (with a fraction only when there is one)."""
    m = _utc(moment)
    text = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    return f"{text}.{m.microsecond:06d}Z" if m.microsecond else text + "Z"


def _is_web_url(value: str) -> bool:
    return value.startswith(("http://", "https://"))


def _entry_id(entry: Entry) -> str:
    """The id to publish: the declared guid, else the link, else our stable key."""
    return entry.guid or entry.link or entry.key


def _iri_id(value: str) -> str:
    """Atom ids and RSS 1.0 ``rdf:about`` must be IRIs; wrap anything else in a URN."""
    scheme, colon, _ = value.partition(":")
    if colon and scheme and scheme[0].isalpha() and all(c.isalnum() or c in "+-." for c in scheme):
        return value
    return "urn:feedmesh:entry:" + quote(value, safe="")


def _source(ref: SourceRef) -> tuple[str, str] | None:
    if ref is None:
        return None
    if isinstance(ref, str):
        return (ref, "")
    return (ref[0], ref[1])


def _plain_text(fragment: str) -> str:
    return html.unescape(_TAG.sub("", fragment)).strip()


class FeedWriter(ABC):
    """Renders one format in three parts: ``head(feed, entries)``, ``item(...)`` per entry, ``tail``.

    A document is ``head + separator.join(items) + tail``, encoded as UTF-8. The head may depend on
    the entries (Atom's ``<updated>``, RSS 1.0's item table of contents); an item depends only on
    its entry, the feed and its source, so callers may cache items between versions of a feed.
    """

    format = ""
    content_type = ""
    separator = "\n"

    @abstractmethod
    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str: ...

    @abstractmethod
    def item(self, entry: Entry, feed: FeedInfo, source: SourceRef = None) -> str: ...

    @abstractmethod
    def tail(self, feed: FeedInfo) -> str: ...

    def render(self, feed: FeedInfo, entries: Sequence[Entry],
               sources: Sequence[SourceRef] | None = None) -> str:
        if sources is not None and len(sources) != len(entries):
            raise ValueError(f"source_titles has {len(sources)} items for {len(entries)} entries")
        items = [self.item(e, feed, None if sources is None else sources[i])
                 for i, e in enumerate(entries)]
        return self.head(feed, entries) + self.separator.join(items) + self.tail(feed)


def _rss_author(person: Person, tag_email: str) -> str:
    if person.email:
        label = f"{person.email} ({person.name})" if person.name else person.email
        return f"<{tag_email}>{xml_text(label)}</{tag_email}>"
    if person.name:
        return f"<dc:creator>{xml_text(person.name)}</dc:creator>"
    return ""


def _sy_hints(feed: FeedInfo) -> str:
    out = ""
    if feed.update_period:
        out += f"<sy:updatePeriod>{xml_text(feed.update_period)}</sy:updatePeriod>"
    if feed.update_frequency is not None:
        out += f"<sy:updateFrequency>{int(feed.update_frequency)}</sy:updateFrequency>"
    return out


def _skips(feed: FeedInfo) -> str:
    out = ""
    if feed.skip_hours:
        out += "<skipHours>" + "".join(f"<hour>{int(h)}</hour>" for h in feed.skip_hours) + "</skipHours>"
    if feed.skip_days:
        out += "<skipDays>" + "".join(f"<day>{xml_text(d)}</day>" for d in feed.skip_days) + "</skipDays>"
    return out


def _atom_links(feed: FeedInfo, self_type: str) -> str:
    out = ""
    if feed.self_link:
        out += f'<atom:link rel="self" type="{self_type}" href="{xml_attr(feed.self_link)}"/>'
    for hub in feed.hub_links:
        out += f'<atom:link rel="hub" href="{xml_attr(hub)}"/>'
    return out


class Rss20Writer(FeedWriter):
    format = "rss2.0"
    content_type = CONTENT_TYPES["rss2.0"]

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        link = feed.link or feed.self_link
        parts = [
            _XML_DECL,
            '<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" '
            'xmlns:content="http://purl.org/rss/1.0/modules/content/" '
            'xmlns:sy="http://purl.org/rss/1.0/modules/syndication/">\n<channel>\n',
            f"<title>{xml_text(feed.title)}</title>\n<link>{xml_text(link)}</link>\n",
            f"<description>{xml_text(feed.description or feed.title)}</description>\n",
        ]
        if feed.language:
            parts.append(f"<language>{xml_text(feed.language)}</language>\n")
        if feed.updated is not None:
            parts.append(f"<lastBuildDate>{rfc822_date(feed.updated)}</lastBuildDate>\n")
        for person in feed.authors[:1]:
            parts.append(_rss_author(person, "managingEditor"))
        parts.append(_atom_links(feed, "application/rss+xml"))
        if feed.ttl_minutes is not None:
            parts.append(f"<ttl>{int(feed.ttl_minutes)}</ttl>")
        parts.append(_skips(feed) + _sy_hints(feed))
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
        guid = _entry_id(entry)
        if guid:
            permalink = "true" if guid == entry.link and _is_web_url(guid) else "false"
            parts.append(f'<guid isPermaLink="{permalink}">{xml_text(guid)}</guid>')
        date = entry.published or entry.updated
        if date is not None:
            parts.append(f"<pubDate>{rfc822_date(date)}</pubDate>")
        for person in entry.authors:
            parts.append(_rss_author(person, "author"))
        for term in entry.categories:
            parts.append(f"<category>{xml_text(term)}</category>")
        for enclosure in entry.enclosures[:1]:  # RSS 2.0 allows one enclosure per item
            parts.append(f'<enclosure url="{xml_attr(enclosure.url)}" length="{enclosure.length or 0}" '
                         f'type="{xml_attr(enclosure.type or "application/octet-stream")}"/>')
        origin = _source(source)
        if origin is not None and origin[1]:
            parts.append(f'<source url="{xml_attr(origin[1])}">{xml_text(origin[0])}</source>')
        parts.append("</item>")
        return "".join(parts)

    def tail(self, feed: FeedInfo) -> str:
        return "\n</channel>\n</rss>\n"


class Rss091Writer(FeedWriter):
    """RSS 0.91 (UserLand): items have only title, link and description; language is required."""

    format = "rss0.91"
    content_type = CONTENT_TYPES["rss0.91"]

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        link = feed.link or feed.self_link
        parts = [
            _XML_DECL, '<rss version="0.91">\n<channel>\n',
            f"<title>{xml_text(feed.title)}</title>\n<link>{xml_text(link)}</link>\n",
            f"<description>{xml_text(feed.description or feed.title)}</description>\n",
            f"<language>{xml_text(feed.language or 'en')}</language>\n",
        ]
        if feed.updated is not None:
            parts.append(f"<lastBuildDate>{rfc822_date(feed.updated)}</lastBuildDate>\n")
        for person in feed.authors[:1]:
            if person.email:
                parts.append(_rss_author(person, "managingEditor"))
        if feed.icon:
            parts.append(f"<image><url>{xml_text(feed.icon)}</url><title>{xml_text(feed.title)}"
                         f"</title><link>{xml_text(link)}</link></image>")
        parts.append(_skips(feed) + "\n")
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


class Rss10Writer(FeedWriter):
    """RSS 1.0 (RDF): dates are ``dc:date`` in RFC 3339, enclosures use mod_enclosure."""

    format = "rss1.0"
    content_type = CONTENT_TYPES["rss1.0"]

    @staticmethod
    def _about(entry: Entry) -> str:
        return _iri_id(_entry_id(entry))

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        link = feed.link or feed.self_link
        about = feed.self_link or link
        parts = [
            _XML_DECL,
            '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
            'xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/" '
            'xmlns:content="http://purl.org/rss/1.0/modules/content/" '
            'xmlns:sy="http://purl.org/rss/1.0/modules/syndication/" '
            'xmlns:enc="http://purl.oclc.org/net/rss_2.0/enc#" '
            'xmlns:atom="http://www.w3.org/2005/Atom">\n',
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
        parts.append(_atom_links(feed, "application/rdf+xml") + _sy_hints(feed))
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
        parts.append("</item>")
        return "".join(parts)

    def tail(self, feed: FeedInfo) -> str:
        return "\n</rdf:RDF>\n"


def _atom_person(tag: str, person: Person) -> str:
    out = f"<{tag}><name>{xml_text(person.name or person.email or 'unknown')}</name>"
    if person.email:
        out += f"<email>{xml_text(person.email)}</email>"
    if person.uri:
        out += f"<uri>{xml_text(person.uri)}</uri>"
    return out + f"</{tag}>"


def _latest(entries: Sequence[Entry]) -> datetime | None:
    dates = [_utc(d) for e in entries for d in (e.updated, e.published) if d is not None]
    return max(dates) if dates else None


class AtomWriter(FeedWriter):
    """Atom 1.0. ``updated`` falls back to ``published``, then the feed's, then the newest entry's."""

    format = "atom1.0"
    content_type = CONTENT_TYPES["atom1.0"]

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        updated = feed.updated or _latest(entries)
        feed_id = _iri_id(feed.self_link or feed.link or feed.title)
        lang = f' xml:lang="{xml_attr(feed.language)}"' if feed.language else ""
        parts = [
            _XML_DECL,
            f'<feed xmlns="http://www.w3.org/2005/Atom" '
            f'xmlns:sy="http://purl.org/rss/1.0/modules/syndication/"{lang}>\n',
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
        if updated is not None:
            parts.append(f"<updated>{rfc3339_date(updated)}</updated>\n")
        authors = feed.authors
        if not authors and any(not e.authors for e in entries):
            # An Atom feed needs an author unless every entry has one.
            authors = (Person(name=feed.title or "unknown"),)
        parts.extend(_atom_person("author", p) for p in authors)
        if feed.icon:
            parts.append(f"<icon>{xml_text(feed.icon)}</icon>")
        parts.append(_sy_hints(feed) + "\n")
        return "".join(parts)

    def item(self, entry: Entry, feed: FeedInfo, source: SourceRef = None) -> str:
        parts = [f"<entry><id>{xml_text(_iri_id(_entry_id(entry)))}</id>",
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
        origin = _source(source)
        if origin is not None:
            link = f'<link rel="self" href="{xml_attr(origin[1])}"/>' if origin[1] else ""
            parts.append(f'<source><title type="text">{xml_text(origin[0])}</title>{link}</source>')
        parts.append("</entry>")
        return "".join(parts)

    def tail(self, feed: FeedInfo) -> str:
        return "\n</feed>\n"


_json = msgspec.json.Encoder()


class JsonFeedWriter(FeedWriter):
    """JSON Feed 1.0 or 1.1. HTML goes to ``content_html``; ``summary`` is plain text by the spec."""

    separator = ","

    def __init__(self, version: str) -> None:
        self.format = f"json{version}"
        self.content_type = CONTENT_TYPES[self.format]
        self._v11 = version == "1.1"
        self._version_url = "https://jsonfeed.org/version/" + ("1.1" if self._v11 else "1")

    def _people(self, people: Sequence[Person], target: dict) -> None:
        rendered = []
        for p in people:
            person = {k: _clean(v) for k, v in (("name", p.name), ("url", p.uri)) if v}
            if not person and p.email:
                person = {"url": "mailto:" + _clean(p.email)}
            if person:
                rendered.append(person)
        if rendered:
            if self._v11:
                target["authors"] = rendered
            target["author"] = rendered[0]  # 1.0's field; 1.1 readers may still look for it

    def head(self, feed: FeedInfo, entries: Sequence[Entry]) -> str:
        doc: dict = {"version": self._version_url, "title": _clean(feed.title)}
        for key, value in (("home_page_url", feed.link), ("feed_url", feed.self_link),
                           ("description", feed.description), ("icon", feed.icon)):
            if value:
                doc[key] = _clean(value)
        if self._v11 and feed.language:
            doc["language"] = _clean(feed.language)
        self._people(feed.authors, doc)
        if feed.hub_links:
            doc["hubs"] = [{"type": "WebSub", "url": _clean(h)} for h in feed.hub_links]
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
        if hints:
            doc["_feedmesh"] = hints
        text = _json.encode(doc).decode()
        return text[:-1] + ',"items":['

    def item(self, entry: Entry, feed: FeedInfo, source: SourceRef = None) -> str:
        item: dict = {"id": _clean(_entry_id(entry))}
        if entry.link:
            item["url"] = _clean(entry.link)
        if entry.title:
            item["title"] = _clean(entry.title)
        if entry.content:
            item["content_html"] = _clean(entry.content)
            if entry.summary:
                item["summary"] = _clean(_plain_text(entry.summary))
        elif entry.summary:
            item["content_html"] = _clean(entry.summary)
        else:
            item["content_text"] = ""  # the spec requires content_html or content_text
        if entry.published is not None:
            item["date_published"] = rfc3339_date(entry.published)
        if entry.updated is not None:
            item["date_modified"] = rfc3339_date(entry.updated)
        self._people(entry.authors, item)
        if entry.categories:
            item["tags"] = [_clean(c) for c in entry.categories]
        if self._v11 and entry.language:
            item["language"] = _clean(entry.language)
        if entry.enclosures:
            attachments = []
            for enc in entry.enclosures:
                attachment: dict = {"url": _clean(enc.url),
                                    "mime_type": enc.type or "application/octet-stream"}
                if enc.length is not None:
                    attachment["size_in_bytes"] = enc.length
                attachments.append(attachment)
            item["attachments"] = attachments
        origin = _source(source)
        if origin is not None:
            ext = {"source_title": _clean(origin[0])}
            if origin[1]:
                ext["source_url"] = _clean(origin[1])
            item["_feedmesh"] = ext
        return _json.encode(item).decode()

    def tail(self, feed: FeedInfo) -> str:
        return "]}\n"


_WRITERS: dict[str, FeedWriter] = {
    "rss0.91": Rss091Writer(),
    "rss2.0": Rss20Writer(),
    "rss1.0": Rss10Writer(),
    "atom1.0": AtomWriter(),
    "json1.0": JsonFeedWriter("1.0"),
    "json1.1": JsonFeedWriter("1.1"),
}


def writer_for(fmt: str) -> FeedWriter:
    """The writer of ``fmt`` (one of :data:`FORMATS`); ValueError names the known formats."""
    try:
        return _WRITERS[fmt]
    except KeyError:
        raise ValueError(f"unknown feed format {fmt!r}; expected one of {', '.join(FORMATS)}") from None


def render_feed(feed: FeedInfo, entries: Sequence[Entry], fmt: str, *,
                source_titles: Sequence[SourceRef] | None = None) -> bytes:
    """Render ``entries`` of ``feed`` as a UTF-8 document of format ``fmt``.

    ``source_titles``, when given, has one item per entry: the title of the feed the entry came
    from, or ``(title, url)``, or None. Entries are written in the order given (newest first is
    the convention readers expect).
    """
    return writer_for(fmt).render(feed, entries, source_titles).encode("utf-8")
