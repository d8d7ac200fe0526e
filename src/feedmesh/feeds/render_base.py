"""What every feed writer shares: XML escaping, the two date forms, entry ids, the
:class:`FeedWriter` base, and the elements several formats write alike (RSS authors, publisher
hints, Atom links in RSS).

The rules these helpers implement are listed in :mod:`feedmesh.feeds.render`.
"""

from __future__ import annotations

import html
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import UTC, datetime
from urllib.parse import quote

from feedmesh.model import Entry, FeedInfo, Person

__all__ = [
    "MESH_NAMESPACE",
    "XML_DECL",
    "FeedWriter",
    "SourceRef",
    "atom_links",
    "clean",
    "entry_id",
    "history_links",
    "iri_id",
    "is_web_url",
    "mesh_marks",
    "plain_text",
    "rfc822_date",
    "rfc3339_date",
    "rss_author",
    "skips",
    "source_parts",
    "sy_hints",
    "utc",
    "xml_attr",
    "xml_text",
]

SourceRef = str | tuple[str, str] | None
"""Where an entry came from: its source feed's title, or ``(title, url)``, or None."""

# Characters XML 1.0 cannot carry at all (C0 controls but tab/LF/CR, lone surrogates, U+FFFE/F).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_TAG = re.compile(r"<[^>]*>")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
XML_DECL = '<?xml version="1.0" encoding="utf-8"?>\n'


def xml_text(value: str) -> str:
    """Escape ``value`` for XML character data (dropping characters XML 1.0 forbids)."""
    if _NOT_XML.search(value):
        value = _NOT_XML.sub("", value)
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def xml_attr(value: str) -> str:
    """Escape ``value`` for a double-quoted XML attribute."""
    return xml_text(value).replace('"', "&quot;")


def clean(value: str) -> str:
    """``value`` without the characters XML 1.0 forbids (JSON Feed drops them too)."""
    return _NOT_XML.sub("", value) if _NOT_XML.search(value) else value


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is taken as UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def rfc822_date(moment: datetime) -> str:
    """``Tue, 10 Jun 2003 04:00:00 GMT`` (RFC 822 with a four-digit year, as RSS asks)."""
    m = utc(moment)
    return (f"{_DAYS[m.weekday()]}, {m.day:02d} {_MONTHS[m.month - 1]} {m.year:04d} "
            f"{m.hour:02d}:{m.minute:02d}:{m.second:02d} GMT")


def rfc3339_date(moment: datetime) -> str:
    """``2003-06-10T04:00:00Z`` (with a fraction only when there is one)."""
    m = utc(moment)
    text = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    return f"{text}.{m.microsecond:06d}Z" if m.microsecond else text + "Z"


def is_web_url(value: str) -> bool:
    return value.startswith(("http://", "https://"))


def entry_id(entry: Entry) -> str:
    """The id to publish: the declared guid, else the link, else our stable key."""
    return entry.guid or entry.link or entry.key


def iri_id(value: str) -> str:
    """Atom ids and RSS 1.0 ``rdf:about`` must be IRIs; wrap anything else in a URN."""
    scheme, colon, _ = value.partition(":")
    if colon and scheme and scheme[0].isalpha() and all(c.isalnum() or c in "+-." for c in scheme):
        return value
    return "urn:feedmesh:entry:" + quote(value, safe="")


def source_parts(ref: SourceRef) -> tuple[str, str] | None:
    """``(title, url)`` of an entry's source (url ``""`` when only the title is known)."""
    if ref is None:
        return None
    if isinstance(ref, str):
        return (ref, "")
    return (ref[0], ref[1])


MESH_NAMESPACE = "https://feedmesh.org/ns/scribe-rss/1.0"
"""The namespace of the mesh's marks on an entry (the ``<subscribe>`` element's namespace)."""


def mesh_marks(entry: Entry) -> str:
    """An entry's mesh marks as namespaced elements (RSS 2.0, RSS 1.0, Atom): who republished it
    (``fm:republishedBy``) and that it was the feed's state when followed (``fm:backlog``).
    Readers show neither: the mark is not a ``<category>``."""
    out = ""
    if entry.republished_by:
        out += (f'<fm:republishedBy xmlns:fm="{MESH_NAMESPACE}">'
                f"{xml_text(entry.republished_by)}</fm:republishedBy>")
    if entry.backlog:
        out += f'<fm:backlog xmlns:fm="{MESH_NAMESPACE}">true</fm:backlog>'
    return out


def plain_text(fragment: str) -> str:
    """The text of an HTML fragment (tags dropped, entities decoded)."""
    return html.unescape(_TAG.sub("", fragment)).strip()


class FeedWriter(ABC):
    """Renders one format in three parts: ``head(feed, entries)``, ``item(...)`` per entry,
    ``tail``.

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


def rss_author(person: Person, tag_email: str) -> str:
    """An RSS author: ``<tag_email>`` when there is an address (RSS wants one), else
    ``<dc:creator>`` with the name."""
    if person.email:
        label = f"{person.email} ({person.name})" if person.name else person.email
        return f"<{tag_email}>{xml_text(label)}</{tag_email}>"
    if person.name:
        return f"<dc:creator>{xml_text(person.name)}</dc:creator>"
    return ""


def sy_hints(feed: FeedInfo) -> str:
    """``sy:updatePeriod`` / ``sy:updateFrequency`` (RSS 2.0, RSS 1.0, Atom)."""
    out = ""
    if feed.update_period:
        out += f"<sy:updatePeriod>{xml_text(feed.update_period)}</sy:updatePeriod>"
    if feed.update_frequency is not None:
        out += f"<sy:updateFrequency>{int(feed.update_frequency)}</sy:updateFrequency>"
    return out


def skips(feed: FeedInfo) -> str:
    """``skipHours`` and ``skipDays`` (RSS 2.0 and 0.91)."""
    out = ""
    if feed.skip_hours:
        hours = "".join(f"<hour>{int(h)}</hour>" for h in feed.skip_hours)
        out += f"<skipHours>{hours}</skipHours>"
    if feed.skip_days:
        days = "".join(f"<day>{xml_text(d)}</day>" for d in feed.skip_days)
        out += f"<skipDays>{days}</skipDays>"
    return out


def atom_links(feed: FeedInfo, self_type: str) -> str:
    """``atom:link`` self, hub and RFC 5005 archive links in an RSS channel (RSS 2.0 and
    1.0)."""
    out = ""
    if feed.self_link:
        out += f'<atom:link rel="self" type="{self_type}" href="{xml_attr(feed.self_link)}"/>'
    for hub in feed.hub_links:
        out += f'<atom:link rel="hub" href="{xml_attr(hub)}"/>'
    return out + history_links(feed, "atom:link", self_type)


FH_NS = "http://purl.org/syndication/history/1.0"
"""RFC 5005's namespace (``fh:archive``, ``fh:complete``)."""


def history_links(feed: FeedInfo, tag: str, media_type: str) -> str:
    """RFC 5005 links of a feed document (``current`` and ``prev-archive``), and
    ``<fh:archive/>`` when it is an archive page (its namespace declared on it: no root changes)."""
    out = ""
    for rel, url in (("current", feed.current_link), ("prev-archive", feed.prev_archive)):
        if url:
            out += f'<{tag} rel="{rel}" type="{media_type}" href="{xml_attr(url)}"/>'
    if feed.archive:
        out += f'<fh:archive xmlns:fh="{FH_NS}"/>'
    return out
