"""Feeds: bytes <-> records. Parse RSS/RDF/Atom/JSON Feed safely, identify entries, render feeds.

The public surface other packages use:

* :func:`parse_feed` - bytes (plus the document URL and Content-Type) to a
  :class:`~feedmesh.model.ParsedFeed`; never raises, caps its work (:class:`ParseLimits`);
* :func:`entry_key`, :func:`content_hash` - entry identity, defined once in
  :mod:`feedmesh.feeds.identity`;
* :func:`parse_date` - the date reader the parser uses (for HTTP dates and tests).

The package is pure: no sockets, no clock, no environment. ``feedmesh parse`` (:mod:`.cli`) is
the only part that reads files or calls the fetcher.
"""

from feedmesh.feeds.dates import parse_date
from feedmesh.feeds.identity import content_hash, entry_key
from feedmesh.feeds.limits import DEFAULT_LIMITS, ParseLimits
from feedmesh.feeds.parser import parse_feed

__all__ = ["DEFAULT_LIMITS", "ParseLimits", "content_hash", "entry_key", "parse_date",
           "parse_feed"]
