"""WebSub discovery (W3C WebSub section 4): which hubs push a topic, and what the topic's URL is.

A publisher advertises its hubs and the topic's canonical URL (``rel="self"``) in HTTP ``Link:``
headers, in the document (``<link rel="hub">`` in Atom and HTML, ``<atom:link rel="hub">`` in RSS,
``hubs`` in JSON Feed: the feed parser reads those into :class:`~feedmesh.model.FeedInfo`), or
both. The rules, in one place:

1. ``Link:`` headers win: when they name a hub, the document's links are not read (websub.rocks
   subscriber test 104, "discovery priority");
2. the topic is the ``rel="self"`` of the same source that gave the hubs; without one, the URL the
   document finally came from (after redirects: the topic of a moved feed is its new address,
   websub.rocks 201/202);
3. only absolute ``http``/``https`` URLs count, relative ones resolved against the document URL;
   at most :data:`MAX_HUBS` hubs are kept, in the order given (a publisher listing fifty hubs
   does not get fifty subscriptions).
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import msgspec

from feedmesh.model import FeedInfo

__all__ = ["MAX_HUBS", "Discovery", "discover", "html_links", "parse_link_header"]

MAX_HUBS = 4
_MAX_HEADER_CHARS = 16 * 1024


class Discovery(msgspec.Struct, frozen=True):
    """The topic to subscribe to and the hubs that push it (empty: no push for this feed)."""

    topic: str
    hubs: tuple[str, ...] = ()
    source: str = ""
    """Where the hubs were found: ``header``, ``document`` or "" (none)."""


def _absolute(href: str, base: str) -> str:
    href = href.strip()
    if not href:
        return ""
    try:
        url = urljoin(base, href) if base else href
        parts = urlsplit(url)
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ""
    return url


def parse_link_header(value: str, base: str = "") -> list[tuple[str, frozenset[str]]]:
    """``(url, rels)`` for each link of an RFC 8288 ``Link:`` value (several headers joined
    with commas), URLs resolved against ``base``. Malformed parts are skipped, never raised."""
    links: list[tuple[str, frozenset[str]]] = []
    text = value[:_MAX_HEADER_CHARS]
    i, n = 0, len(text)
    while i < n:
        start = text.find("<", i)
        if start < 0:
            break
        end = text.find(">", start)
        if end < 0:
            break
        target = text[start + 1:end]
        # Parameters run to the next comma that is outside a quoted string.
        j, quoted = end + 1, False
        while j < n and (quoted or text[j] != ","):
            if text[j] == '"':
                quoted = not quoted
            j += 1
        rels: set[str] = set()
        for param in text[end + 1:j].split(";"):
            name, sep, arg = param.partition("=")
            if sep and name.strip().lower() == "rel":
                rels.update(r.lower() for r in arg.strip().strip('"').split())
        url = _absolute(target, base)
        if url and rels:
            links.append((url, frozenset(rels)))
        i = j + 1
    return links


class _LinkTags(HTMLParser):
    """Collects ``<link rel=... href=...>`` of an HTML page (websub.rocks 101)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, frozenset[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "link" or len(self.links) >= 64:
            return
        values = {k.lower(): (v or "") for k, v in attrs}
        rels = frozenset(r.lower() for r in values.get("rel", "").split())
        if rels and values.get("href"):
            self.links.append((values["href"], rels))


def html_links(body: bytes, base: str = "",
               max_bytes: int = 512 * 1024) -> list[tuple[str, frozenset[str]]]:
    """``(url, rels)`` of the ``<link>`` elements of an HTML page (its first ``max_bytes``)."""
    parser = _LinkTags()
    try:
        parser.feed(body[:max_bytes].decode("utf-8", errors="replace"))
        parser.close()
    except (ValueError, AssertionError):  # html.parser gives up on some garbage: keep what it had
        pass
    return [(url, rels) for href, rels in parser.links if (url := _absolute(href, base))]


def _pick(links: list[tuple[str, frozenset[str]]]) -> tuple[str, tuple[str, ...]]:
    hubs = tuple(dict.fromkeys(url for url, rels in links if "hub" in rels))[:MAX_HUBS]
    selves = [url for url, rels in links if "self" in rels]
    return (selves[0] if selves else ""), hubs


def discover(url: str, *, link_header: str = "", info: FeedInfo | None = None,
             html: bytes | None = None) -> Discovery:
    """The topic and hubs of the document fetched from ``url`` (its final URL after redirects),
    from its ``Link:`` header value, its parsed feed ``info``, or, for a web page, its ``html``
    body. See the module docstring for the rules."""
    header_self, header_hubs = _pick(parse_link_header(link_header, url))
    if header_hubs:
        return Discovery(topic=header_self or url, hubs=header_hubs, source="header")
    if info is not None:
        hubs = tuple(dict.fromkeys(h for h in (_absolute(x, url) for x in info.hub_links)
                                   if h))[:MAX_HUBS]
        if hubs:
            return Discovery(topic=_absolute(info.self_link, url) or url, hubs=hubs,
                             source="document")
    if html is not None:
        page_self, page_hubs = _pick(html_links(html, url))
        if page_hubs:
            return Discovery(topic=page_self or url, hubs=page_hubs, source="document")
    return Discovery(topic=header_self or url)
