"""Personalized feeds: each subscription served at a private URL as RSS 2.0, Atom 1.0 or JSON Feed
1.1, to any standard reader.

``/f/<token>.rss``, ``.atom``, ``.json``, or ``/f/<token>`` with the format chosen from Accept.
The token is verified as an HMAC (no lookup, constant time); a wrong token, a revoked one and an
unknown subscription all get the same 404, so a guess learns nothing.

Readers are polled cheaply and politely: a weak ETag (subscription, URL generation, content
version, format) and Last-Modified answer 304 without touching the disk; a 200 is served
from the feed's bytes as rendered once for its version, gzip-compressed once (:mod:`.rendered`),
each entry written once per format for all the feeds that hold it
(:class:`~feedmesh.hub.front.feed_document.RenderedItems`); ``Cache-Control: private, max-age=60``;
a reader polling faster than the feed limit gets 429 with Retry-After.

Older matches than a feed holds are in its archive (RFC 5005, :mod:`feedmesh.hub.front.archive`):
the feed links ``prev-archive`` to ``/f/<token>/archive/<key>.<ext>``, the page of the matches
just older than its oldest, and each page to the next older one, read from the stored entries by
the subscription's query (no reflector memory). A page is fixed once made (new matches never
enter it): ``Cache-Control: private, max-age=86400``, an ETag of its bytes; its key is MAC'd,
so a key the hub did not make answers the same 404 as an unknown token; it counts against the
same per-feed, per-client rate as the feed.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime

from aiohttp import web

from feedmesh.feeds.render import CONTENT_TYPES
from feedmesh.hub.front.facade import ArchivePage, HubFacade
from feedmesh.hub.front.feed_document import (
    EXTENSIONS,
    RenderedItems,
    archive_url,
    feed_urls,
    link_header,
    prev_archive_url,
    published_entry,
    render_private_feed,
)
from feedmesh.hub.web.errors import ApiError
from feedmesh.hub.web.limits import RateLimiter, WebLimits
from feedmesh.hub.web.rendered import Rendered, RenderedFeeds
from feedmesh.store import Subscription

__all__ = ["FeedServer", "choose_format", "published_entry"]
_ACCEPT = (("application/atom+xml", "atom1.0"), ("application/feed+json", "json1.1"),
           ("application/json", "json1.1"), ("application/rss+xml", "rss2.0"))
_NOT_FOUND = ("no feed at this address (the link may have been replaced or the subscription "
              "deleted)")
ARCHIVE_PAGES_HELD = 64
"""Archive pages kept gathered (their entries, for every format of one page at one scan)."""


def choose_format(extension: str, accept: str) -> str:
    if extension:
        fmt = EXTENSIONS.get(extension)
        if fmt is None:
            raise ApiError(404, "not_found", f"unknown feed format .{extension}; use .rss, "
                           ".atom or .json")
        return fmt
    for media, fmt in _ACCEPT:
        if media in accept:
            return fmt
    return "rss2.0"


class FeedServer:
    def __init__(self, hub: HubFacade, limits: WebLimits, base_url: str) -> None:
        self.hub = hub
        self.base_url = base_url.rstrip("/")
        self.limiter = RateLimiter(hub.clock, limits.feed_rate_per_s, limits.feed_burst)
        self.rendered = RenderedFeeds(limits.rendered_feeds_bytes)
        self.items = RenderedItems(limits.rendered_feeds_bytes // 4)
        self.page_entries = limits.archive_page_entries
        self.scan_ids = limits.archive_scan_ids
        self._pages: OrderedDict[tuple, ArchivePage] = OrderedDict()
        self._archives: OrderedDict[tuple, Rendered] = OrderedDict()
        self._archive_bytes = 0
        self._max_archive_bytes = limits.rendered_feeds_bytes // 4

    def urls(self, token: str) -> dict[str, str]:
        return feed_urls(self.base_url, token)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["token"]
        token, _, extension = name.partition(".")
        fmt = choose_format(extension, request.headers.get("Accept", ""))
        identity = self.hub.read_feed_token(token)  # only the exact spelling we issued
        found = await self.hub.feed_version(*identity) if identity is not None else None
        if identity is None or found is None:
            self.hub.metrics.feed_requests.labels("404").inc()
            raise ApiError(404, "not_found", _NOT_FOUND)
        sub_id, generation = identity
        self._limit(sub_id, request)
        version, modified = found.version, found.modified
        # The feed names the URL the hub makes now (rel="self", Link): after a key rotation a
        # reader that came by the old URL is pointed to the new one, and no document naming
        # the old URL is cached for the new one's readers.
        current = self.hub.feed_token_of(sub_id, generation)
        # The same from every web process and across a reflector's restarts (versions are
        # checkpointed with the held entries): a reader's copy stays valid wherever it asks.
        # A process reuses a version for VERSION_TTL_S, so for that long after a change two
        # processes may differ; the body is read after the version, never older than it, so
        # the worst a reader sees is one 200 again, never a 304 for entries it lacks.
        etag = f'W/"{sub_id}-{generation}-{version}-{fmt}"'
        last_modified = datetime.fromtimestamp(modified or self.hub.clock.now(), UTC)
        headers = {"ETag": etag, "Last-Modified": format_datetime(last_modified, usegmt=True),
                   "Cache-Control": "private, max-age=60", "Vary": "Accept, Accept-Encoding",
                   "Link": link_header(self.base_url, self.urls(current)[_ext(fmt)])}
        if _not_modified(request, etag, last_modified):
            self.hub.metrics.feed_requests.labels("304").inc()
            return web.Response(status=304, headers=headers)
        rendered = await self.rendered.get(sub_id, fmt, (generation, version, current),
                                           lambda: self._render(sub_id, current, fmt))
        return self._answer(request, rendered, fmt, headers)

    def _answer(self, request: web.Request, rendered: Rendered, fmt: str,
                headers: dict[str, str]) -> web.Response:
        """A 200 with ``rendered`` in ``fmt`` (a feed or one of its archive pages)."""
        self.hub.metrics.feed_requests.labels("200").inc()
        headers["Content-Type"] = CONTENT_TYPES[fmt]
        if _accepts_gzip(request.headers.get("Accept-Encoding", "")):
            # gzip, compressed once per version: deflate is what readers have long decoded
            # inconsistently (zlib-wrapped or raw).
            headers["Content-Encoding"] = "gzip"
            body = rendered.gzipped
        else:
            body = rendered.body
        # What readers' polling costs the front (bodies of 200s; 304s are headers alone).
        self.hub.metrics.bytes_out.labels("web").inc(len(body))
        return web.Response(body=body, headers=headers)

    def _limit(self, sub_id: int, request: web.Request) -> None:
        # Per feed *and* client: someone hammering a leaked URL does not lock out its reader.
        wait = self.limiter.allow(f"{sub_id}:{request.remote}")
        if wait:
            self.hub.metrics.feed_requests.labels("429").inc()
            error = ApiError(429, "rate_limited", f"this feed was polled too often; retry in "
                             f"{wait:.0f} s", retry_after_s=round(wait, 1))
            error.headers["Retry-After"] = self.limiter.retry_after(wait)
            raise error

    async def _render(self, sub_id: int, token: str, fmt: str) -> bytes:
        self.hub.metrics.feed_renders.inc()
        sub = await self.hub.subscription(sub_id)
        items = await self.hub.feed_items(sub_id)
        self_url = self.urls(token)[_ext(fmt)]
        # The matches below the oldest held are in the archive.
        older = prev_archive_url(self.hub.archive_sign, sub, items, self_url)
        return render_private_feed(sub, items, fmt, base_url=self.base_url, self_url=self_url,
                                   cache=self.items, prev_archive=older)

    # -- archive pages (RFC 5005) -----------------------------------------------------------

    async def archive(self, request: web.Request) -> web.StreamResponse:
        """``/f/<token>/archive/<key>.<ext>``: the page of matches below the key's boundary."""
        key, _, extension = request.match_info["page"].partition(".")
        fmt = choose_format(extension, request.headers.get("Accept", ""))
        identity = self.hub.read_feed_token(request.match_info["token"])
        sub = await self.hub.subscription(identity[0]) if identity is not None else None
        before = None
        if sub is not None and identity is not None and sub.generation == identity[1]:
            before = self.hub.read_archive_key(sub, key)
        if sub is None or before is None:
            self.hub.metrics.feed_requests.labels("404").inc()
            raise ApiError(404, "not_found", _NOT_FOUND)
        self._limit(sub.id, request)
        current = self.hub.feed_token_of(sub.id, sub.generation)
        rendered = await self._archive_page(sub, before, current, fmt)
        etag = f'W/"a{hashlib.sha256(rendered.body).hexdigest()[:20]}-{fmt}"'
        headers = {"ETag": etag, "Cache-Control": "private, max-age=86400",
                   "Vary": "Accept, Accept-Encoding",
                   "Link": f'<{self.urls(current)[_ext(fmt)]}>; rel="current"'}
        if _etag_matches(request, etag):
            self.hub.metrics.feed_requests.labels("304").inc()
            return web.Response(status=304, headers=headers)
        return self._answer(request, rendered, fmt, headers)

    async def _archive_page(self, sub: Subscription, before: int, token: str,
                            fmt: str) -> Rendered:
        """The page rendered (held, least recently served dropped past a quarter of the
        rendered feeds' memory), its entries gathered once for every format."""
        key = (sub.id, sub.generation, sub.query, before, token, fmt)
        held = self._archives.get(key)
        if held is not None:
            self._archives.move_to_end(key)
            return held
        page_key = key[:4]
        page = self._pages.get(page_key)
        if page is None:
            page = await self.hub.feed_archive(sub, before, page_entries=self.page_entries,
                                               scan_ids=self.scan_ids)
            self._pages[page_key] = page
            while len(self._pages) > ARCHIVE_PAGES_HELD:
                self._pages.popitem(last=False)
        else:
            self._pages.move_to_end(page_key)
        ext = _ext(fmt)
        older = ""
        if page.older is not None:
            older = archive_url(self.base_url, token, self.hub.archive_key(sub, page.older), ext)
        rendered = Rendered(render_private_feed(
            sub, page.items, fmt, base_url=self.base_url,
            self_url=archive_url(self.base_url, token, self.hub.archive_key(sub, before), ext),
            prev_archive=older, current_url=self.urls(token)[ext]))
        self._archives[key] = rendered
        self._archive_bytes += rendered.size
        while self._archive_bytes > self._max_archive_bytes and self._archives:
            self._archive_bytes -= self._archives.popitem(last=False)[1].size
        return rendered


def _ext(fmt: str) -> str:
    return next(ext for ext, f in EXTENSIONS.items() if f == fmt)



def _accepts_gzip(accept_encoding: str) -> bool:
    """Whether Accept-Encoding allows gzip (``gzip``, ``x-gzip`` or ``*``, with q > 0)."""
    for part in accept_encoding.lower().split(","):
        coding, _, params = part.partition(";")
        if coding.strip() not in ("gzip", "x-gzip", "*"):
            continue
        name, _, value = params.strip().partition("=")
        if name.strip() != "q":
            return True
        try:
            return float(value) > 0
        except ValueError:
            return False
    return False


def _etag_matches(request: web.Request, etag: str) -> bool:
    """Whether If-None-Match names ``etag`` (weak comparison) or ``*``."""
    candidates = {tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")}
    weak = {tag.removeprefix("W/") for tag in candidates}
    return "*" in candidates or etag in candidates or etag[2:] in weak


def _not_modified(request: web.Request, etag: str, last_modified: datetime) -> bool:
    if request.headers.get("If-None-Match") is not None:
        return _etag_matches(request, etag)
    since = request.headers.get("If-Modified-Since")
    if since:
        try:
            when = parsedate_to_datetime(since)
        except (TypeError, ValueError):
            return False
        if when is not None:
            if when.tzinfo is None:  # "-0000" (RFC 5322: UTC, source unknown) parses naive
                when = when.replace(tzinfo=UTC)
            return last_modified.replace(microsecond=0) <= when
    return False
