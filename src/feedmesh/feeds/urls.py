"""Absolute, safe URLs: xml:base scoping and relative reference resolution (RFC 3986).

Every URL feedmesh stores is absolute, because entries travel far from the document they came in:
a relative ``link`` or ``src`` is resolved against the nearest ``xml:base`` in scope, which is
itself resolved against its parent's base, up to the document's own URL (the fetch URL, or the
HTTP Content-Location). A base or URL with a script-capable scheme (``javascript:``, ``data:``,
``vbscript:``) is ignored: it could never be a place to link to.
"""

from __future__ import annotations

from urllib.parse import urljoin

__all__ = ["XML_BASE", "XML_LANG", "resolve_url", "scoped_base"]

XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_ABSOLUTE = ("http://", "https://")
_UNSAFE_SCHEMES = frozenset(("javascript", "data", "vbscript", "livescript", "about", "file"))


def resolve_url(base: str, url: str) -> str:
    """``url`` made absolute against ``base``; "" when it is empty or has an unsafe scheme."""
    url = url.strip()
    if not url:
        return ""
    if url.startswith(_ABSOLUTE):
        return url
    if _scheme(url) in _UNSAFE_SCHEMES:
        return ""
    if not base:
        return url
    try:
        joined = urljoin(base, url)
    except ValueError:  # e.g. an invalid IPv6 literal in a hostile document
        return url
    return "" if _scheme(joined) in _UNSAFE_SCHEMES else joined


def scoped_base(element_base: str | None, parent_base: str) -> str:
    """The base in scope inside an element carrying ``xml:base=element_base``."""
    if element_base is None:
        return parent_base
    resolved = resolve_url(parent_base, element_base)
    if not resolved:
        return parent_base
    if resolved.startswith(("http:///", "https:///")):  # "http:///x": one slash too many
        resolved = resolved.replace(":///", "://", 1)
    return resolved


def _scheme(url: str) -> str:
    colon = url.find(":")
    if colon <= 0:
        return ""
    candidate = url[:colon]
    if candidate[0].isalpha() and all(c.isalnum() or c in "+-." for c in candidate):
        return candidate.lower().strip()
    return ""
