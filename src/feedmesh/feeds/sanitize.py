"""Make feed HTML safe to serve, and turn titles into plain text.

Summaries and contents are served back to users' browsers and readers, so they pass through
``nh3`` (Rust's ammonia): an allow-list of presentational HTML (text structure, links, images,
tables, audio and video) with URLs restricted to safe schemes; ``script`` and ``style`` are removed
with their content; comments, event handlers, ``style``, ``class`` and ``id`` attributes are
dropped. Relative URLs in ``href``/``src`` are resolved against the element's base (xml:base or
the document URL), because the HTML will be read far from where it was published.

No ``rel`` is added to links: nothing may open a new window (``target`` is not allowed), so
``noopener`` would be noise, and leaving the markup as published keeps content hashes stable.

Titles are plain text everywhere in feedmesh (:func:`html_to_text`): an HTML title loses its tags,
its entities become characters, and runs of whitespace become one space.
"""

from __future__ import annotations

import html
import re
from contextvars import ContextVar
from urllib.parse import urljoin

import nh3

__all__ = ["collapse_space", "html_to_text", "looks_like_html", "sanitize_html", "text_to_html"]

_TAGS = (nh3.ALLOWED_TAGS | {"audio", "video", "source", "track", "picture"}) - {"map", "area"}
_GENERIC_ATTRIBUTES = {"title", "lang", "dir"}
_ATTRIBUTES: dict[str, set[str]] = {
    tag: set(allowed) | _GENERIC_ATTRIBUTES for tag, allowed in nh3.ALLOWED_ATTRIBUTES.items()
}
_ATTRIBUTES["*"] = _GENERIC_ATTRIBUTES
_ATTRIBUTES["a"] = {"href", "hreflang"} | _GENERIC_ATTRIBUTES
_ATTRIBUTES["img"] = {"src", "alt", "width", "height"} | _GENERIC_ATTRIBUTES
_ATTRIBUTES["audio"] = {"src", "controls", "preload", "loop"} | _GENERIC_ATTRIBUTES
_ATTRIBUTES["video"] = {"src", "controls", "preload", "loop", "width", "height"}
_ATTRIBUTES["source"] = {"src", "type", "media"}
_ATTRIBUTES["track"] = {"src", "kind", "srclang", "label"}
_ATTRIBUTES["abbr"] = {"title"}
_ATTRIBUTES["time"] = {"datetime"} | _GENERIC_ATTRIBUTES
_DROPPED_WITH_CONTENT = {"script", "style"}

_PLAIN = nh3.Cleaner(tags=set(), attributes={}, clean_content_tags=_DROPPED_WITH_CONTENT,
                     link_rel=None)
_HTML_HINT = re.compile(
    r"</?[A-Za-z][A-Za-z0-9]{0,15}(?:\s[^<>]*)?/?>|&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"
)
_SPACE = re.compile(r"\s+")


class _Base:
    """The base URL of one sanitize call, with the two prefixes most relative URLs need."""

    __slots__ = ("directory", "origin", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        scheme_end = url.find("://") + 3
        path_start = url.find("/", scheme_end)
        self.origin = url if path_start == -1 else url[:path_start]
        cut = min((i for i in (url.find("?"), url.find("#")) if i != -1), default=len(url))
        self.directory = url[: url.rfind("/", 0, cut) + 1] if path_start != -1 else url + "/"


def _resolve_relative(url: str) -> str | None:
    """ammonia's callback for relative URLs: resolve against the base of the current call.

    The common shapes ("/path", "//host/path", "name.png") are joined by hand: urljoin costs
    ~10 us and a content can hold dozens of relative URLs.
    """
    base = _BASE.get()
    url = url.strip(_URL_SPACE)  # HTML strips these around URL attribute values
    if base is None:
        return url
    if "\\" in url or any(char in url for char in _URL_SPACE):
        return _join(base.url, url)
    first = url[:1]
    if first == "/":
        if url[1:2] == "/":
            return base.url[: base.url.find(":") + 1] + url
        if "/." not in url:
            return base.origin + url
    elif first and first not in ".?#" and "/." not in url and ":" not in url:
        return base.directory + url
    return _join(base.url, url)


def _join(base: str, url: str) -> str:
    try:
        return urljoin(base, url.replace("\\", "/"))
    except ValueError:  # e.g. a malformed IPv6 literal
        return url


_URL_SPACE = " \t\n\r\f"
# One cleaner for every call (building one costs ~0.1 ms); the base of the current call reaches
# the callback through a context variable, which is per thread and per asyncio task.
_BASE: ContextVar[_Base | None] = ContextVar("feedmesh_sanitize_base", default=None)
_CLEANER = nh3.Cleaner(tags=_TAGS, attributes=_ATTRIBUTES, clean_content_tags=_DROPPED_WITH_CONTENT,
                       link_rel=None, url_relative=_resolve_relative)


def sanitize_html(markup: str, base: str = "") -> str:
    """Sanitized HTML, relative URLs resolved against ``base`` when it is an http(s) URL."""
    if "<" not in markup and "&" not in markup:
        return markup.strip().replace(">", "&gt;")
    token = _BASE.set(_Base(base) if base.startswith(("http://", "https://")) else None)
    try:
        return _CLEANER.clean(markup).strip()
    finally:
        _BASE.reset(token)


def html_to_text(markup: str) -> str:
    """Plain text of an HTML fragment: tags dropped, entities decoded, whitespace collapsed."""
    if "<" in markup or "&" in markup:
        markup = html.unescape(_PLAIN.clean(markup))
    return collapse_space(markup)


def text_to_html(text: str) -> str:
    """Plain text as an HTML fragment that shows the same characters."""
    return html.escape(text.strip(), quote=False)


def looks_like_html(text: str) -> bool:
    """True when ``text`` holds a tag or an entity: RSS leaves "is it HTML?" to guesswork."""
    return ("<" in text or "&" in text) and _HTML_HINT.search(text) is not None


def collapse_space(text: str) -> str:
    if "  " in text or "\n" in text or "\t" in text or "\r" in text or "\xa0" in text:
        return _SPACE.sub(" ", text).strip()
    return text.strip()
