"""Read text and markup out of lxml elements, and name elements by well-known namespace prefixes.

Format modules compare element names as short keys (``"title"``, ``"dc:creator"``,
``"atom:link"``) instead of Clark names (``"{http://purl.org/dc/elements/1.1/}creator"``): the
prefix a document chose is irrelevant, the namespace URI is what counts, and a feed's own namespace
(RSS 1.0, Atom) reads as no prefix at all. Keys are cached per format: tags repeat in every entry.

Text is read the way a reader would: character data, CDATA and character references joined;
entities the document did not declare (``&eacute;`` in RSS 0.91 feeds that point at Netscape's
DTD) resolved from the HTML table; comments and processing instructions skipped.
"""

from __future__ import annotations

import html
import html.entities
from collections.abc import Callable

from lxml import etree

__all__ = ["NAMESPACES", "XHTML", "child_elements", "inner_markup", "language_of", "make_keyer",
           "namespace_of", "text_of"]

NAMESPACES = {
    "http://purl.org/rss/1.0/": "rss",
    "http://my.netscape.com/rdf/simple/0.9/": "rss",
    "http://backend.userland.com/rss2": "rss",
    "http://backend.userland.com/rss": "rss",
    "http://blogs.law.harvard.edu/tech/rss": "rss",
    "http://purl.org/net/rss1.1#": "rss",
    "http://www.w3.org/2005/Atom": "atom",
    "http://purl.org/atom/ns#": "atom03",
    "http://purl.org/rss/1.0/modules/content/": "content",
    "http://purl.org/dc/elements/1.1/": "dc",
    "http://purl.org/dc/terms/": "dcterms",
    "http://purl.org/rss/1.0/modules/syndication/": "sy",
    "http://www.itunes.com/dtds/podcast-1.0.dtd": "itunes",
    "http://www.itunes.com/DTDs/Podcast-1.0.dtd": "itunes",
    "http://search.yahoo.com/mrss/": "media",
    "http://search.yahoo.com/mrss": "media",
    "http://www.w3.org/1999/xhtml": "xhtml",
    "http://www.w3.org/1999/02/22-rdf-syntax-ns#": "rdf",
    "http://rssnamespace.org/feedburner/ext/1.0": "feedburner",
    "https://feedmesh.org/ns/scribe-rss/1.0": "fm",   # SCRIBE-RSS <subscribe> (feeds.subscribe)
}
# Publishers misspell namespace URIs in harmless ways (no trailing slash, https, upper case):
# lookups go through this normalized table so that such feeds still read as intended.
_NORMALIZED = {}


def _normal_namespace(namespace: str) -> str:
    lowered = namespace.strip().lower()
    if lowered.startswith("https://"):
        lowered = "http://" + lowered[len("https://"):]
    return lowered.rstrip("/#")


for _uri, _prefix in NAMESPACES.items():
    _NORMALIZED[_normal_namespace(_uri)] = _prefix

XHTML = "http://www.w3.org/1999/xhtml"
_XHTML_PREFIX = "{" + XHTML + "}"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_COMMENT, _PI, _ENTITY = etree.Comment, etree.ProcessingInstruction, etree.Entity


def make_keyer(home_prefix: str, home_namespace: str = "") -> Callable[[object], str]:
    """A cached ``tag -> key`` function for one format; ``home_prefix`` reads as no prefix.

    ``home_namespace`` adds one more namespace that reads as no prefix: a document whose root
    uses a namespace of its own (``<rss xmlns="http://backend.userland.com/rss2.1">``, the
    pre-Atom drafts' ``<feed xmlns="http://purl.org/echo/">``).
    Non-element nodes (comments, entities) get ``""``; unknown namespaces keep their Clark name,
    so they never collide with a key a format module looks for.
    """
    cache: dict[str, str] = {}

    def key(tag: object) -> str:
        if not isinstance(tag, str):
            return ""
        known = cache.get(tag)
        if known is not None:
            return known
        if tag[0] == "{":
            namespace, _, local = tag[1:].partition("}")
            prefix = home_prefix if namespace == home_namespace else NAMESPACES.get(namespace)
            if prefix is None:
                prefix = _NORMALIZED.get(_normal_namespace(namespace))
            if prefix is None:
                result = tag
            elif prefix == home_prefix:
                result = local
            else:
                result = f"{prefix}:{local}"
        else:
            result = tag
        if len(cache) < 4096:  # a hostile document could invent endless names
            cache[tag] = result
        return result

    return key


def namespace_of(tag: object) -> str:
    """The namespace URI of an element tag ("" when it has none)."""
    if isinstance(tag, str) and tag[:1] == "{":
        return tag[1:].partition("}")[0]
    return ""


def language_of(element: etree._Element, inherited: str) -> str:
    """The ``xml:lang`` in scope inside ``element``; ``xml:lang=""`` means "unknown" (XML 2.12)."""
    value = element.get(_XML_LANG)
    if value is None:
        return inherited
    return value.strip().replace("_", "-")[:35]


def child_elements(element: etree._Element) -> list[etree._Element]:
    """Direct child elements, without comments, entities and processing instructions."""
    return [child for child in element if isinstance(child.tag, str)]


def text_of(element: etree._Element) -> str:
    """All character data of ``element`` and its descendants, entities resolved."""
    if len(element) == 0:
        return element.text or ""
    parts = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag is _ENTITY:
            parts.append(_entity_text(child.name))
        elif tag is not _COMMENT and tag is not _PI:
            parts.append(text_of(child))
        parts.append(child.tail or "")
    return "".join(parts)


def inner_markup(element: etree._Element) -> str:
    """The content of ``element`` as an HTML string: its text escaped, its children serialized.

    XHTML elements lose their namespace so that the HTML sanitizer recognizes them.
    """
    if len(element) == 0:
        return html.escape(element.text or "", quote=False)
    for descendant in list(element.iterdescendants()):
        tag = descendant.tag
        if isinstance(tag, str) and tag.startswith(_XHTML_PREFIX):
            try:
                descendant.tag = tag[len(_XHTML_PREFIX):]
            except ValueError:  # a name libxml2's recovery let through but lxml refuses
                parent = descendant.getparent()
                if parent is not None:
                    parent.remove(descendant)
    etree.cleanup_namespaces(element)
    parts = [html.escape(element.text or "", quote=False)]
    for child in element:
        if child.tag is _ENTITY:
            parts.append(html.escape(_entity_text(child.name), quote=False))
            parts.append(html.escape(child.tail or "", quote=False))
        elif child.tag is _COMMENT or child.tag is _PI:
            parts.append(html.escape(child.tail or "", quote=False))
        else:
            parts.append(etree.tostring(child, encoding="unicode", with_tail=True))
    return "".join(parts)


def _entity_text(name: str) -> str:
    return html.entities.html5.get(name + ";", "&" + name + ";")
