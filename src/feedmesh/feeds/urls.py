"""Absolute, safe URLs: xml:base scoping and relative reference resolution (RFC 3986).

Every URL feedmesh stores is absolute, because entries travel far from the document they came in:
a relative ``link`` or ``src`` is resolved against the nearest ``xml:base`` in scope, which is
itself resolved against its parent's base, up to the document's own URL (the fetch URL, or the
HTTP Content-Location). A base or URL with a script-capable scheme (``javascript:``, ``data:``,
``vbscript:``) is ignored: it could never be a place to link to.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urljoin, urlsplit

__all__ = ["XML_BASE", "XML_LANG", "check_feed_url", "resolve_url", "scoped_base"]

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


MAX_FEED_URL = 2048


def check_feed_url(url: str) -> str:
    """``url`` stripped, if it can be followed as a feed: http(s), a host name or address, a port
    in 1-65535, no spaces or control characters, no credentials, at most 2048 characters.
    ValueError saying what is wrong otherwise (one line, the URL quoted)."""
    url = url.strip()
    shown = repr(url[:200])
    if len(url) > MAX_FEED_URL:
        raise ValueError(f"the feed URL is longer than {MAX_FEED_URL} characters")
    if not url.lower().startswith(_ABSOLUTE):
        raise ValueError(f"{shown} is not an http:// or https:// URL")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ValueError(f"{shown} holds a space or a control character (encode it as %20)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:  # "http://[::1" (unclosed), "http://h:99999" (port range)
        if "port" in str(error).lower():
            raise ValueError(f"{shown} has a port outside 1-65535") from None
        raise ValueError(f"{shown} is not a valid URL: {error}") from None
    host = parts.hostname or ""
    if not host:
        raise ValueError(f"{shown} names no host")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{shown} carries credentials; a feed URL may not")
    if port == 0:
        raise ValueError(f"{shown} has a port outside 1-65535")
    if "[" in parts.netloc:
        try:
            ipaddress.IPv6Address(host.split("%")[0])
        except ValueError:
            raise ValueError(f"{shown} has an invalid IPv6 address") from None
    elif not all(c.isalnum() or c in "-._~%" for c in host):
        raise ValueError(f"{shown} has an invalid host name {host!r}")
    return url
