"""OPML subscription lists in and out: the one interchange format every reader speaks.

Reading is as guarded as feed parsing (the bytes come from users): a DTD declaring entities is
refused, the parser never resolves entities nor touches the network, and the document size and
outline count are capped. Outlines without an http(s) ``xmlUrl`` are reported, not silently kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from xml.sax.saxutils import quoteattr

import msgspec
from lxml import etree

from feedmesh.errors import FeedmeshError
from feedmesh.feeds.xmlsafe import declares_entities

__all__ = ["OpmlError", "OpmlOutline", "OpmlResult", "parse_opml", "render_opml"]

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                          huge_tree=False, remove_comments=True, remove_pis=True)


class OpmlError(FeedmeshError, ValueError):
    """The document is not a usable OPML list (message says why and, if known, where)."""


class OpmlOutline(msgspec.Struct, frozen=True, omit_defaults=True):
    url: str
    title: str = ""
    html_url: str = ""
    category: str = ""
    """The titles of the enclosing folders, joined with "/"."""


class OpmlResult(msgspec.Struct, frozen=True):
    title: str
    outlines: tuple[OpmlOutline, ...]
    skipped: tuple[str, ...] = ()
    """One line per outline that was not kept, with the reason."""


def parse_opml(data: bytes, *, max_bytes: int = 5 * 1024 * 1024,
               max_outlines: int = 100_000) -> OpmlResult:
    if len(data) > max_bytes:
        raise OpmlError(f"OPML document is {len(data)} bytes, over the {max_bytes}-byte limit")
    if declares_entities(data):
        raise OpmlError("OPML document declares entities in a DTD (entity bombs and external "
                        "entities are refused)")
    try:
        root = etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as exc:
        line, column = exc.position if exc.position else (None, None)
        raise OpmlError(f"OPML is not well-formed XML at line {line}, column {column}: "
                        f"{exc.msg}") from exc
    if root is None or etree.QName(root).localname.lower() != "opml":
        name = etree.QName(root).localname if root is not None else "nothing"
        raise OpmlError(f"not an OPML document: the root element is <{name}>, expected <opml>")
    title = (root.findtext("head/title") or "").strip()
    body = root.find("body")
    if body is None:
        raise OpmlError("OPML document has no <body>")
    outlines: list[OpmlOutline] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for element, folders in _outlines(body):
        attrs = element.attrib
        url = (attrs.get("xmlUrl") or attrs.get("xmlurl") or attrs.get("url") or "").strip()
        label = (attrs.get("title") or attrs.get("text") or "").strip()
        line = element.sourceline
        if not url:
            if len(element) == 0:  # a leaf without a feed; a folder holds outlines
                name = f"{label[:200]!r}" if label else "an outline"
                skipped.append(f"line {line}: {name} has no feed URL (xmlUrl)")
            continue
        if not url.lower().startswith(("http://", "https://")):
            skipped.append(f"line {line}: {url[:200]!r} is not an http(s) URL")
            continue
        if url in seen:
            skipped.append(f"line {line}: {url[:200]} is listed twice")
            continue
        if len(outlines) >= max_outlines:
            raise OpmlError(f"OPML lists more than {max_outlines} feeds (limit reached at line "
                            f"{line})")
        seen.add(url)
        outlines.append(OpmlOutline(url=url, title=label,
                                    html_url=(attrs.get("htmlUrl") or "").strip(),
                                    category="/".join(folders)))
    return OpmlResult(title=title, outlines=tuple(outlines), skipped=tuple(skipped))


def _outlines(body: etree._Element) -> Iterable[tuple[etree._Element, tuple[str, ...]]]:
    """Every outline in document order, with the labels of the folders around it."""
    for element in body.iter("outline", "Outline"):
        folders = [(a.get("title") or a.get("text") or "").strip()
                   for a in element.iterancestors("outline", "Outline")]
        yield element, tuple(reversed(folders))


def render_opml(title: str, outlines: Iterable[OpmlOutline]) -> bytes:
    """An OPML 2.0 list; outlines with a ``category`` go into nested folders ("News/Tech"), in
    the order they first appear, so that a reader importing it finds them where they were."""
    root = _Folder()
    for outline in outlines:
        folder = root
        for name in (part for part in outline.category.split("/") if part):
            folder = folder.child(name)
        folder.feeds.append(outline)
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<opml version="2.0">',
             f"  <head><title>{_text(title)}</title></head>", "  <body>"]
    root.render(lines, depth=2)
    lines += ["  </body>", "</opml>", ""]
    return "\n".join(lines).encode("utf-8")


class _Folder:
    def __init__(self) -> None:
        self.feeds: list[OpmlOutline] = []
        self.folders: dict[str, _Folder] = {}

    def child(self, name: str) -> _Folder:
        return self.folders.setdefault(name, _Folder())

    def render(self, lines: list[str], depth: int) -> None:
        pad = "  " * depth
        for o in self.feeds:
            attrs = f'type="rss" text={quoteattr(o.title or o.url)} xmlUrl={quoteattr(o.url)}'
            if o.title:
                attrs += f" title={quoteattr(o.title)}"
            if o.html_url:
                attrs += f" htmlUrl={quoteattr(o.html_url)}"
            lines.append(f"{pad}<outline {attrs}/>")
        for name, folder in self.folders.items():
            lines.append(f"{pad}<outline text={quoteattr(name)} title={quoteattr(name)}>")
            folder.render(lines, depth + 1)
            lines.append(f"{pad}</outline>")


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
