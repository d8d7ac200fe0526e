"""Feed writers: a normalized feed and its entries -> the bytes of an RSS, Atom or JSON Feed
document.

The hub's reflector serves each subscription with these writers, and the feed farm builds every
synthetic feed with them, so the output must be valid for every format, not merely parseable:

* titles are plain text, summaries and contents are HTML, and both are escaped for XML (the HTML
  travels as escaped text: ``&lt;p&gt;``); characters XML 1.0 forbids are dropped;
* RSS 2.0 and 0.91 dates are RFC 822 (``Tue, 10 Jun 2003 04:00:00 GMT``); RSS 1.0 (``dc:date``),
  Atom and JSON Feed dates are RFC 3339 (``2003-06-10T04:00:00Z``); naive datetimes are taken as
  UTC;
* a guid equal to the entry's http(s) link is written ``isPermaLink="true"``, any other guid
  ``isPermaLink="false"``;
* the publisher's polling hints are written where the format has a place for them: ``ttl``,
  ``skipHours``, ``skipDays`` (RSS 2.0; the skips also in 0.91), ``sy:updatePeriod`` /
  ``sy:updateFrequency`` (RSS 2.0, RSS 1.0, Atom), and a ``_feedmesh`` object in JSON Feed, whose
  spec allows such extensions.

Documents are built as strings, not DOMs (a 10-entry feed renders in tens of microseconds).
Rendering is split into a *head*, one *item* per entry and a *tail* (:class:`FeedWriter`) so that
a caller that keeps documents up to date, like the farm, can reuse the items it already rendered.

This module is the front door: it knows the formats and dispatches to one writer module each
(``render_rss20``, ``render_rss091``, ``render_rss10``, ``render_atom``, ``render_jsonfeed``),
which share escaping, dates and the :class:`FeedWriter` base in ``render_base``.

Per-entry provenance (``source_titles``) is written as RSS 2.0 ``<source url="...">title</source>``
(only when the source URL is known: the element requires it), Atom ``<source><title>``, and a JSON
Feed item extension ``"_feedmesh": {"source_title": ..., "source_url": ...}``. RSS 0.91 and RSS 1.0
have no such element and omit it.
"""

from __future__ import annotations

from collections.abc import Sequence

from feedmesh.feeds.render_atom import AtomWriter
from feedmesh.feeds.render_base import (
    FeedWriter,
    SourceRef,
    rfc822_date,
    rfc3339_date,
    xml_attr,
    xml_text,
)
from feedmesh.feeds.render_jsonfeed import JsonFeedWriter
from feedmesh.feeds.render_rss091 import Rss091Writer
from feedmesh.feeds.render_rss10 import Rss10Writer
from feedmesh.feeds.render_rss20 import Rss20Writer
from feedmesh.model import Entry, FeedInfo

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

_WRITERS: dict[str, FeedWriter] = {
    "rss0.91": Rss091Writer(),
    "rss2.0": Rss20Writer(),
    "rss1.0": Rss10Writer(),
    "atom1.0": AtomWriter(),
    "json1.0": JsonFeedWriter("1.0"),
    "json1.1": JsonFeedWriter("1.1"),
}

FORMATS: tuple[str, ...] = tuple(_WRITERS)

CONTENT_TYPES: dict[str, str] = {fmt: writer.content_type for fmt, writer in _WRITERS.items()}


def writer_for(fmt: str) -> FeedWriter:
    """The writer of ``fmt`` (one of :data:`FORMATS`); ValueError names the known formats."""
    try:
        return _WRITERS[fmt]
    except KeyError:
        raise ValueError(f"unknown feed format {fmt!r}; "
                         f"expected one of {', '.join(FORMATS)}") from None


def render_feed(feed: FeedInfo, entries: Sequence[Entry], fmt: str, *,
                source_titles: Sequence[SourceRef] | None = None) -> bytes:
    """Render ``entries`` of ``feed`` as a UTF-8 document of format ``fmt``.

    ``source_titles``, when given, has one item per entry: the title of the feed the entry came
    from, or ``(title, url)``, or None. Entries are written in the order given (newest first is
    the convention readers expect).
    """
    return writer_for(fmt).render(feed, entries, source_titles).encode("utf-8")
