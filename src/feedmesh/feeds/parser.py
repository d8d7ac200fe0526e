"""The front door: bytes in, :class:`~feedmesh.model.ParsedFeed` out. It never raises.

1. Size: a document over ``limits.max_bytes`` is cut (XML: after the last complete entry that fits)
   or refused (JSON), with a ``too_large`` problem.
2. Sniff: the first significant character says XML (``<``) or JSON (``{``); an HTML page, plain
   text and binary data are ``not_a_feed`` straight away (with the feed links an HTML page
   advertises, when it has some).
3. Decode (:mod:`~feedmesh.feeds.encoding`) and parse safely (:mod:`~feedmesh.feeds.xmlsafe`).
4. Dispatch on the root element to one module per format family: :mod:`~feedmesh.feeds.rss`,
   :mod:`~feedmesh.feeds.rdf`, :mod:`~feedmesh.feeds.atom`, :mod:`~feedmesh.feeds.jsonfeed`
   (and :mod:`~feedmesh.feeds.cdf` for the archaeology);
   when a broken document lost entries in recovery, :mod:`~feedmesh.feeds.loose` gets a try.
5. Identity (:mod:`~feedmesh.feeds.identity`): keys and content hashes, unique per document.

``url`` is the document's own URL (after redirects, or its Content-Location): relative URLs are
resolved against it. ``content_type`` is the HTTP Content-Type, for its charset.
"""

from __future__ import annotations

import re

import msgspec

from feedmesh.feeds.atom import read_atom
from feedmesh.feeds.cdf import read_cdf
from feedmesh.feeds.common import Context, EntryDraft, finish_entries
from feedmesh.feeds.encoding import decode_document
from feedmesh.feeds.jsonfeed import is_json_feed, read_json_feed
from feedmesh.feeds.limits import DEFAULT_LIMITS, ParseLimits, Problems
from feedmesh.feeds.loose import LOOSE_MAX_BYTES, read_loose
from feedmesh.feeds.rdf import read_rdf
from feedmesh.feeds.rss import read_rss
from feedmesh.feeds.urls import resolve_url
from feedmesh.feeds.xmlsafe import parse_xml
from feedmesh.model import FeedInfo, ParsedFeed, ParseProblem

__all__ = ["parse_feed"]

_ATOM10 = "http://www.w3.org/2005/Atom"
_ATOM03 = "http://purl.org/atom/ns#"
_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff", b"\xff\xfe", b"\xfe\xff")
_HTML_START = re.compile(r"\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>]|head[\s>]|body[\s>])",
                         re.IGNORECASE | re.DOTALL)
_FEED_START = re.compile(rb"<\?xml|<rss[\s>]|<feed[\s>]|<rdf:RDF[\s>]")
_FEED_LINK = re.compile(
    r"<link\b[^>]*\btype\s*=\s*[\"']application/(?:rss|atom|feed)\+(?:xml|json)[\"'][^>]*>",
    re.IGNORECASE)
_HREF = re.compile(r"""\bhref\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_ENTRY_TAG = re.compile(rb"<(?:[A-Za-z][\w.-]*:)?(?:item|entry)[\s>/]")
_DECODE_POSITION = re.compile(r"\(byte (\d+)\)")


def parse_feed(data: bytes, *, url: str = "", content_type: str = "",
               limits: ParseLimits = DEFAULT_LIMITS) -> ParsedFeed:
    """Read a feed document. Problems are returned in ``ParsedFeed.error``, never raised."""
    try:
        return _parse(bytes(data), url, content_type, limits)
    except (RecursionError, MemoryError) as exc:
        return _failed("too_large", f"the document is nested too deeply or too big to read "
                       f"({type(exc).__name__})")
    except Exception as exc:  # noqa: BLE001 - a bug of ours must not take the crawler down
        return _failed("internal", f"internal error while reading the document (a feedmesh bug, "
                       f"please report it): {type(exc).__name__}: {exc}")


def _failed(kind: str, message: str, encoding: str = "", **where: int | None) -> ParsedFeed:
    return ParsedFeed(feed=FeedInfo(), error=ParseProblem(kind=kind, message=message, **where),
                      encoding=encoding)


def _parse(data: bytes, url: str, content_type: str, limits: ParseLimits) -> ParsedFeed:
    problems = Problems()
    if url and not resolve_url("", url):  # javascript:, data:: never a base for anything
        url = ""
    if not data or (len(data) < 4096 and not data.strip()):
        return _failed("not_a_feed", "the document is empty")
    oversized = len(data) > limits.max_bytes
    if oversized:
        problems.add("too_large", f"the document is {len(data)} bytes long; read only the first "
                     f"{limits.max_bytes} bytes")
        data = data[:limits.max_bytes]
    head = _head_text(data)
    stripped = head.lstrip()
    if stripped.startswith(("{", "[")):
        if oversized:
            return _failed("too_large", f"the JSON document is longer than {limits.max_bytes} "
                           f"bytes (a JSON document cannot be read in part)")
        return _parse_json(data, url, content_type, limits, problems)
    if _HTML_START.match(head):
        return _failed("not_a_feed", _html_message(data, url))
    if not stripped.startswith("<"):
        found = _FEED_START.search(data, 0, 4096)
        if found is None:
            return _failed("not_a_feed", _describe_non_xml(data, stripped))
        problems.add("malformed", f"{found.start()} bytes of text before the XML document "
                     "(ignored)", 1, 1)
        data = data[found.start():]
    return _parse_xml(data, url, content_type, limits, problems, oversized)


def _parse_xml(data: bytes, url: str, content_type: str, limits: ParseLimits,
               problems: Problems, oversized: bool) -> ParsedFeed:
    decoded = decode_document(data, content_type)
    problems.add_problem(decoded.problem)
    utf8 = decoded.utf8
    if oversized:
        utf8 = _cut_after_last_entry(utf8)
    root = parse_xml(utf8, problems)
    ctx = Context(url, limits, problems, has_xml_base=b"xml:base" in utf8)
    result = _dispatch(root, ctx) if root is not None else None
    if result is None and root is not None and "malformed" not in problems.kinds:
        return _failed("not_a_feed", _describe_root(root), decoded.encoding)
    if "malformed" in problems.kinds and len(utf8) <= LOOSE_MAX_BYTES \
            and b"<!ENTITY" not in utf8:
        found = len(result[1]) if result is not None else -1
        if found < len(_ENTRY_TAG.findall(utf8)) or result is None:
            loose = read_loose(utf8, ctx)
            if loose is not None and len(loose[1]) > found:
                result = loose
    if result is None:
        first = problems.first
        if first is not None and first.kind in ("forbidden", "too_large"):
            return ParsedFeed(feed=FeedInfo(), error=first, encoding=decoded.encoding)
        reason = _describe_root(root) if root is not None else "no feed could be recovered"
        where = {"line": first.line, "column": first.column} if first is not None else {}
        message = f"{first.message}; {reason}" if first is not None else reason
        return _failed("not_a_feed", message, decoded.encoding, **where)
    info, drafts = result
    return ParsedFeed(feed=info, entries=finish_entries(drafts), error=problems.first,
                      encoding=decoded.encoding, warnings=tuple(problems.warnings))


def _dispatch(root, ctx: Context) -> tuple[FeedInfo, list[EntryDraft]] | None:
    tag = root.tag
    if not isinstance(tag, str):
        return None
    namespace, _, local = tag[1:].partition("}") if tag[0] == "{" else ("", "", tag)
    if local == "rss":
        return read_rss(root, ctx)
    if local == "feed":
        if namespace == _ATOM03 or (not namespace and root.get("version", "").startswith("0.")):
            return read_atom(root, ctx, "0.3")
        if namespace in (_ATOM10, ""):
            return read_atom(root, ctx, "1.0")
        return read_atom(root, ctx, "0.3")  # the drafts before Atom 0.3 (Echo, Necho, Pie)
    if local == "entry" and namespace == _ATOM10:  # an Atom entry document (RFC 4287 4.1.2)
        return read_atom(root, ctx, "1.0")
    if local in ("RDF", "rdf") and namespace in (_RDF, ""):  # also a sloppy <rdf> without one
        return read_rdf(root, ctx)
    if local == "channel" and not namespace:  # an RSS 0.9x channel without its <rss>
        return read_rss(root, ctx)
    if local == "CHANNEL" and not namespace:
        return read_cdf(root, ctx)
    return None


def _parse_json(data: bytes, url: str, content_type: str, limits: ParseLimits,
                problems: Problems) -> ParsedFeed:
    decoded = decode_document(data, content_type)
    problems.add_problem(decoded.problem)
    try:
        document = msgspec.json.decode(decoded.utf8)
    except msgspec.DecodeError as exc:
        line, column = _json_position(decoded.utf8, str(exc))
        return _failed("malformed" if b"jsonfeed.org" in decoded.utf8[:4096] else "not_a_feed",
                       f"{exc}", decoded.encoding, line=line, column=column)
    if not is_json_feed(document):
        return _failed("not_a_feed", "JSON, but not a JSON Feed (no \"version\": "
                       "\"https://jsonfeed.org/version/...\" and no \"items\" list)",
                       decoded.encoding)
    ctx = Context(url, limits, problems, has_xml_base=False)
    info, drafts = read_json_feed(document, ctx)
    return ParsedFeed(feed=info, entries=finish_entries(drafts), error=problems.first,
                      encoding=decoded.encoding, warnings=tuple(problems.warnings))


def _json_position(utf8: bytes, message: str) -> tuple[int | None, int | None]:
    found = _DECODE_POSITION.search(message)
    if found is None:
        return None, None
    offset = min(int(found.group(1)), len(utf8))
    line = utf8.count(b"\n", 0, offset) + 1
    return line, offset - (utf8.rfind(b"\n", 0, offset) + 1) + 1


def _head_text(data: bytes) -> str:
    """The first kilobyte as text, decoded just enough to see what kind of document this is."""
    head = data[:1024]
    for bom in _BOMS:
        if head.startswith(bom):
            codec = {3: "utf-8-sig", 4: "utf-32", 2: "utf-16"}[len(bom)]
            return head.decode(codec, errors="ignore")
    if head[:4] in (b"\x00\x00\x00<", b"<\x00\x00\x00"):
        return head.decode("utf-32-be" if head[0] == 0 else "utf-32-le", errors="ignore")
    if head[:2] in (b"\x00<", b"<\x00"):
        return head.decode("utf-16-be" if head[0] == 0 else "utf-16-le", errors="ignore")
    return head.decode("latin-1")


def _cut_after_last_entry(utf8: bytes) -> bytes:
    """Drop the partial entry at the end of a cut document, so no half entry is reported."""
    end = max(utf8.rfind(b"</item>"), utf8.rfind(b"</entry>"), utf8.rfind(b":item>"),
              utf8.rfind(b":entry>"))
    return utf8[:utf8.find(b">", end) + 1] if end > 0 else utf8


def _html_message(data: bytes, url: str) -> str:
    page = data[:65536].decode("utf-8", errors="replace")
    links = []
    for tag in _FEED_LINK.findall(page):
        href = _HREF.search(tag)
        if href is not None:
            resolved = resolve_url(url, href.group(1))
            if resolved and resolved not in links:
                links.append(resolved)
    message = "an HTML page, not a feed"
    if links:
        message += "; it links to these feeds: " + ", ".join(links[:5])
    return message


def _describe_non_xml(data: bytes, head: str) -> str:
    sample = data[:512]
    binary = sum(byte < 9 or 13 < byte < 32 for byte in sample)
    if binary > len(sample) // 20:
        return f"binary data, not a feed (starts with bytes {sample[:8].hex(' ')})"
    first = head[:40].splitlines()[0] if head.strip() else ""
    return f"plain text, neither XML nor JSON (starts with {first!r})"


def _describe_root(root) -> str:
    tag = root.tag if isinstance(root.tag, str) else "?"
    local = tag.rpartition("}")[2]
    if local.lower() == "html":
        return "an HTML page, not a feed"
    return f"the root element <{tag}> is not RSS, RDF, Atom or a JSON Feed"
