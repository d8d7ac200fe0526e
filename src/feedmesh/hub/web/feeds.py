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
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime

from aiohttp import web

from feedmesh.feeds.render import CONTENT_TYPES
from feedmesh.hub.front.facade import HubFacade
from feedmesh.hub.front.feed_document import (
    EXTENSIONS,
    RenderedItems,
    feed_urls,
    link_header,
    published_entry,
    render_private_feed,
)
from feedmesh.hub.web.errors import ApiError
from feedmesh.hub.web.limits import RateLimiter, WebLimits
from feedmesh.hub.web.rendered import RenderedFeeds

__all__ = ["FeedServer", "choose_format", "published_entry"]
_ACCEPT = (("application/atom+xml", "atom1.0"), ("application/feed+json", "json1.1"),
           ("application/json", "json1.1"), ("application/rss+xml", "rss2.0"))


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
            raise ApiError(404, "not_found", "no feed at this address (the link may have been "
                           "replaced or the subscription deleted)")
        sub_id, generation = identity
        # Per feed *and* client: someone hammering a leaked URL does not lock out its reader.
        wait = self.limiter.allow(f"{sub_id}:{request.remote}")
        if wait:
            self.hub.metrics.feed_requests.labels("429").inc()
            error = ApiError(429, "rate_limited", f"this feed was polled too often; retry in "
                             f"{wait:.0f} s", retry_after_s=round(wait, 1))
            error.headers["Retry-After"] = self.limiter.retry_after(wait)
            raise error
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

    async def _render(self, sub_id: int, token: str, fmt: str) -> bytes:
        self.hub.metrics.feed_renders.inc()
        sub = await self.hub.subscription(sub_id)
        items = await self.hub.feed_items(sub_id)
        return render_private_feed(sub, items, fmt, base_url=self.base_url,
                                   self_url=self.urls(token)[_ext(fmt)], cache=self.items)


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


def _not_modified(request: web.Request, etag: str, last_modified: datetime) -> bool:
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match is not None:
        candidates = {tag.strip() for tag in if_none_match.split(",")}
        weak = {tag.removeprefix("W/") for tag in candidates}
        return "*" in candidates or etag in candidates or etag[2:] in weak
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
