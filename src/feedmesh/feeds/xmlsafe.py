"""Turn UTF-8 bytes into an lxml tree safely: fast when the XML is good, forgiving when it is not.

Safety first, because the bytes come from anyone:

* a document type declaration that declares entities is refused before any parsing
  (``forbidden``): that is how the "billion laughs" entity bomb and external entities (XXE:
  ``<!ENTITY x SYSTEM "file:///etc/passwd">``) are written, and no feed needs them;
* the parser itself never substitutes entities, never loads a DTD, never touches the network and
  keeps libxml2's limits on depth (256) and text node size (``huge_tree=False``).

Then speed and recovery, in this order (each step only when the previous failed):

1. a strict parse: the fast path for the well-formed majority;
2. repair the usual sins and parse strictly again: control characters XML forbids, HTML entities
   (``&nbsp;``) that XML does not know, and bare ``&`` in text;
3. libxml2's recovering parser on the repaired bytes, which keeps every element it could close.

Steps 2 and 3 report a ``malformed`` problem with the line and column of the *first* error in the
original document. The front door may still prefer feedparser's loose parser when step 3 lost
entries (see :mod:`feedmesh.feeds.loose`).
"""

from __future__ import annotations

import html.entities
import re

from lxml import etree

from feedmesh.feeds.limits import Problems

__all__ = ["declares_entities", "parse_xml"]

_PARSER_OPTIONS = {
    "resolve_entities": False,
    "no_network": True,
    "load_dtd": False,
    "dtd_validation": False,
    "huge_tree": False,
    "remove_pis": True,
    "encoding": "utf-8",  # encoding.py already turned the document into UTF-8
}
_STRICT = etree.XMLParser(**_PARSER_OPTIONS)
_RECOVER = etree.XMLParser(recover=True, **_PARSER_OPTIONS)

_DOCTYPE = re.compile(rb"<!DOCTYPE")
_ENTITY_DECL = re.compile(rb"<!ENTITY")
# XML 1.0 forbids C0 controls other than tab, LF, CR, and the non-characters U+FFFE/U+FFFF.
_ILLEGAL_CHARS = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]|\xef\xbf[\xbe\xbf]")
_AMPERSAND = re.compile(rb"&(#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z_][A-Za-z0-9._-]{0,31};)?")
_XML_ENTITIES = frozenset((b"amp;", b"lt;", b"gt;", b"quot;", b"apos;"))


def declares_entities(utf8: bytes) -> bool:
    """True when a document type declaration before the root element declares entities."""
    root_start = _first_element(utf8)
    prolog_end = len(utf8) if root_start == -1 else root_start
    doctype = _DOCTYPE.search(utf8, 0, prolog_end)
    if doctype is None:
        return False  # "<!DOCTYPE" later on is content (a CDATA section about XML, say)
    return _ENTITY_DECL.search(utf8, doctype.start(), prolog_end) is not None


def _first_element(utf8: bytes) -> int:
    """Offset of the root element's "<", skipping the prolog (declaration, comments, PIs, DTD)."""
    position, length = 0, len(utf8)
    while position < length:
        start = utf8.find(b"<", position)
        if start == -1 or start + 1 >= length:
            return -1
        follower = utf8[start + 1:start + 2]
        if follower == b"?":
            end = utf8.find(b"?>", start)
            position = length if end == -1 else end + 2
        elif utf8.startswith(b"<!--", start):
            end = utf8.find(b"-->", start)
            position = length if end == -1 else end + 3
        elif follower == b"!":  # the DOCTYPE: skip its internal subset, if any
            bracket = utf8.find(b"[", start)
            close = utf8.find(b">", start)
            if bracket != -1 and (close == -1 or bracket < close):
                end = utf8.find(b"]", bracket)
                close = -1 if end == -1 else utf8.find(b">", end)
            position = length if close == -1 else close + 1
        else:
            return start
    return -1


def parse_xml(utf8: bytes, problems: Problems) -> etree._Element | None:
    """Parse with the steps of the module docstring; ``None`` when nothing could be read."""
    if utf8[:1].isspace() and utf8.lstrip()[:5] == b"<?xml":
        utf8 = utf8.lstrip()  # blank lines before the declaration: harmless, and common
    if declares_entities(utf8):
        problems.add("forbidden", "the document type declaration declares entities (entity "
                     "expansion and external entities are refused; no feed needs them)")
        return None
    try:
        return _checked(etree.fromstring(utf8, _STRICT), problems)
    except etree.XMLSyntaxError as first_error:
        error = first_error
    line, column = _where(error)
    message = _describe(error)
    if "Excessive depth" in message or "amplification" in message:
        kind = "forbidden" if "amplification" in message else "too_large"
        problems.add(kind, message, line, column)
        return None
    repaired = _repair(utf8)
    try:
        root = etree.fromstring(repaired, _STRICT)
    except etree.XMLSyntaxError:
        try:
            root = etree.fromstring(repaired, _RECOVER)
        except etree.XMLSyntaxError:
            root = None
    problems.add("malformed", message, line, column)
    return None if root is None else _checked(root, problems)


def _checked(root: etree._Element | None, problems: Problems) -> etree._Element | None:
    """Refuse a tree whose DTD declares entities (the pre-scan's safety net)."""
    if root is None:
        return None
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None and any(True for _ in dtd.iterentities()):
        problems.add("forbidden", "the document type declaration declares entities")
        return None
    return root


def _repair(utf8: bytes) -> bytes:
    """Fix what breaks most real feeds: forbidden characters, HTML entities, bare ampersands."""
    cleaned = _ILLEGAL_CHARS.sub(b"", utf8)
    return _AMPERSAND.sub(_fix_reference, cleaned)


def _fix_reference(found: re.Match[bytes]) -> bytes:
    reference = found.group(1)
    if reference is None:
        return b"&amp;"
    if reference[:1] == b"#":
        try:
            code = int(reference[2:-1], 16) if reference[1:2] in b"xX" else int(reference[1:-1])
        except ValueError:
            return b"&amp;" + reference
        if code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0x10FFFF:
            return b"&" + reference
        return b""  # a reference to a character XML forbids
    if reference in _XML_ENTITIES:
        return b"&" + reference
    name = reference[:-1].decode("ascii")
    text = html.entities.html5.get(name + ";")
    if text is None:
        return b"&amp;" + reference
    return "".join(f"&#{ord(char)};" for char in text).encode("ascii")


def _where(error: etree.XMLSyntaxError) -> tuple[int | None, int | None]:
    position = getattr(error, "position", None)
    if position and position[0]:
        return position[0], position[1]
    return None, None


def _describe(error: etree.XMLSyntaxError) -> str:
    text = error.msg or str(error)
    return re.sub(r",? line \d+, column \d+.*$", "", text).strip() or "XML syntax error"
