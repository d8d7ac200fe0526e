"""What the farm answers to a request for a feed: conditional GET, deltas, compression, faults.

``feed_reply`` turns (farm, request, feed) into a :class:`Reply`; the connection (``server.py``)
carries it out, including the timed behaviours (delays, trickles, streams, silence). Keeping the
decisions here and the socket work there keeps both small and lets tests read the rules in one
place:

* If-None-Match is compared (weakly) with the current ETag when the feed has ETags; when it
  matches, 304. Otherwise, for a delta-capable feed asked with ``A-IM: feed``, an ETag of an older
  version still listed yields ``226 IM Used`` with only the newer entries.
* If-Modified-Since is used when the feed has Last-Modified and the request carries no
  If-None-Match the feed understands (RFC 9110 13.1.3): 304 when nothing was posted since.
* Compression follows Accept-Encoding among the codings the feed supports (br preferred).
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from typing import TYPE_CHECKING

from feedmesh.farm.documents import compress, http_date, parse_etag_version
from feedmesh.farm.faultbodies import endless_chunks, gzip_bomb, html_page, huge_chunks
from feedmesh.farm.faults import Fault
from feedmesh.farm.http import Request, accepted_codings, etag_list, http_time

if TYPE_CHECKING:
    from feedmesh.farm.catalog import FeedSpec
    from feedmesh.farm.documents import FeedDocument
    from feedmesh.farm.server import FarmServer

__all__ = ["REDIRECT_STATUS", "Reply", "feed_reply", "text_reply"]

REDIRECT_STATUS = {Fault.REDIRECT_301: 301, Fault.REDIRECT_302: 302, Fault.REDIRECT_307: 307,
                   Fault.REDIRECT_308: 308}
_ERROR_STATUS = {Fault.NOT_FOUND: 404, Fault.GONE: 410, Fault.HTTP_500: 500, Fault.HTTP_502: 502,
                 Fault.HTTP_503: 503}
PRIVATE_TARGETS = ("http://10.1.2.3/feeds/{id}", "http://169.254.169.254/latest/meta-data/")


class Reply:
    """A response and how to deliver it (at once, late, trickled, streamed, or never)."""

    __slots__ = ("body", "chunked", "chunks", "delay_s", "fault", "headers", "hold", "pending",
                 "status", "trickle")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes = b"", *,
                 fault: Fault = Fault.NONE) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.fault = fault
        self.chunks: Iterator[bytes] | None = None
        self.chunked = False
        self.delay_s = 0.0
        self.trickle: tuple[int, float] | None = None
        self.hold = False
        self.pending: Awaitable[Reply] | None = None
        """Set when the reply is still being made (off the event loop): await it, then deliver."""


def text_reply(status: int, text: str, content_type: str = "text/plain; charset=utf-8",
               extra: list[tuple[str, str]] | None = None) -> Reply:
    body = text.encode()
    headers = [("Content-Type", content_type), ("Content-Length", str(len(body)))]
    return Reply(status, headers + (extra or []), body)


def _coding(spec_compression: str, accept: str) -> str:
    if spec_compression == "none" or not accept:
        return "identity"
    accepted = accepted_codings(accept)
    if "br" in spec_compression and ("br" in accepted or "*" in accepted):
        return "br"
    if "gzip" in spec_compression and ("gzip" in accepted or "*" in accepted):
        return "gzip"
    return "identity"


def feed_reply(farm: FarmServer, request: Request, feed_id: int, variant: str, now: float) -> Reply:
    """The reply for ``/feeds/<id>`` (variant ``""``), ``/feeds/<id>/moved`` or ``/loop``."""
    model = farm.model
    spec = model.spec(feed_id)
    fault = spec.fault
    base = model.base_url(feed_id)
    if variant == "moved":
        if fault not in REDIRECT_STATUS:
            return text_reply(404, f"feed {feed_id} has not moved\n")
        fault = Fault.NONE
    elif variant == "loop":
        if fault is not Fault.REDIRECT_LOOP:
            return text_reply(404, f"feed {feed_id} has no loop\n")
        return _redirect(302, f"{base}/feeds/{feed_id}", fault)
    if fault in _ERROR_STATUS:
        status = _ERROR_STATUS[fault]
        extra = [("Retry-After", str(farm.config.retry_after_s))] if status == 503 else None
        reply = text_reply(status, f"feed {feed_id}: {status}\n", extra=extra)
        reply.fault = fault
        return reply
    if fault in (Fault.RATE_LIMIT, Fault.RATE_LIMIT_DATE):
        wait = farm.rate_gate(feed_id, now)
        if wait > 0:
            retry = (str(max(1, round(wait))) if fault is Fault.RATE_LIMIT
                     else http_date(now + wait))
            reply = text_reply(429, f"feed {feed_id}: slow down\n", extra=[("Retry-After", retry)])
            reply.fault = fault
            return reply
    if fault in REDIRECT_STATUS:
        return _redirect(REDIRECT_STATUS[fault], f"{base}/feeds/{feed_id}/moved", fault)
    if fault is Fault.REDIRECT_LOOP:
        return _redirect(302, f"{base}/feeds/{feed_id}/loop", fault)
    if fault is Fault.REDIRECT_PRIVATE:
        return _redirect(302, PRIVATE_TARGETS[feed_id % 2].format(id=feed_id), fault)
    if fault is Fault.HTML:
        reply = text_reply(200, "", "text/html; charset=utf-8")
        reply.body = html_page(spec.title, f"{base}/sites/{feed_id}/")
        reply.headers[1] = ("Content-Length", str(len(reply.body)))
        reply.fault = fault
        return reply
    if fault is Fault.TIMEOUT:
        reply = Reply(0, [], fault=fault)
        reply.hold = True
        return reply
    if fault is Fault.ENDLESS:
        reply = Reply(200, [("Content-Type", "application/rss+xml"),
                            ("Transfer-Encoding", "chunked")], fault=fault)
        reply.chunks = endless_chunks(spec.title, f"{base}/sites/{feed_id}/")
        reply.chunked = True
        return reply
    if fault is Fault.HUGE:
        size = farm.config.huge_bytes
        reply = Reply(200, [("Content-Type", "application/rss+xml"),
                            ("Content-Length", str(size))], fault=fault)
        reply.chunks = huge_chunks(spec.title, f"{base}/sites/{feed_id}/", size)
        return reply
    if fault is Fault.GZIP_BOMB:
        bomb = gzip_bomb(farm.config.bomb_bytes)
        return Reply(200, [("Content-Type", "application/rss+xml"), ("Content-Encoding", "gzip"),
                           ("Content-Length", str(len(bomb)))], bomb, fault=fault)
    if fault is Fault.FLOOD and farm.model.cached(feed_id, now) is None:
        # Ten thousand entries take a while to render: do it in a thread, answer when ready.
        reply = Reply(0, [], fault=fault)
        reply.pending = _flood_reply(farm, request, feed_id, spec, now)
        return reply
    reply = _document_reply(farm, request, feed_id, spec, now)
    if fault is Fault.SLOW:
        reply.delay_s = farm.config.slow_delay_s
    elif fault is Fault.SLOW_BODY and reply.body:
        reply.trickle = (farm.config.trickle_bytes, farm.config.trickle_interval_s)
    if fault is not Fault.NONE:
        reply.fault = fault
    return reply


async def _flood_reply(farm: FarmServer, request: Request, feed_id: int, spec: FeedSpec,
                       now: float) -> Reply:
    doc = await farm.render_off_loop(feed_id, now)
    reply = _document_reply(farm, request, feed_id, spec, now, doc)
    reply.fault = Fault.FLOOD
    return reply


def _redirect(status: int, location: str, fault: Fault) -> Reply:
    reply = text_reply(status, f"moved to {location}\n", extra=[("Location", location)])
    reply.fault = fault
    return reply


def _document_reply(farm: FarmServer, request: Request, feed_id: int, spec: FeedSpec,
                    now: float, doc: FeedDocument | None = None) -> Reply:
    model = farm.model
    if doc is not None:
        pass
    elif spec.fault is Fault.CHANGING_GUIDS:
        doc = model.render(feed_id, now, nonce=farm.next_nonce(feed_id))
    else:
        doc = model.document(feed_id, now)
    headers = [("Content-Type", doc.content_type)]
    validators: list[tuple[str, str]] = []
    if spec.etag:
        validators.append(("ETag", doc.etag))
    if spec.last_modified and doc.last_modified:
        validators.append(("Last-Modified", doc.last_modified))
    if spec.max_age_s is not None:
        validators.append(("Cache-Control", f"max-age={spec.max_age_s}"))
    if spec.compression != "none":
        validators.append(("Vary", "Accept-Encoding"))
    get = request.headers.get
    inm = get("if-none-match", "")
    tags = etag_list(inm) if inm and spec.etag else []
    if tags:
        if doc.etag in tags or "*" in tags:
            return Reply(304, validators)
        if spec.delta and "feed" in {p.strip().lower() for p in get("a-im", "").split(",")}:
            for tag in tags:
                version = parse_etag_version(tag, farm.config.seed, feed_id)
                delta = model.delta(doc, version) if version is not None else None
                if delta is not None:
                    coding = _coding(spec.compression, get("accept-encoding", ""))
                    body = delta if coding == "identity" else compress(delta, coding)
                    extra = [("IM", "feed"), ("Cache-Control", "im")]
                    if coding != "identity":
                        extra.append(("Content-Encoding", coding))
                    return Reply(226, headers + [v for v in validators if v[0] != "Cache-Control"]
                                 + extra + [("Content-Length", str(len(body)))], body)
    elif spec.last_modified and doc.posts:
        ims = get("if-modified-since", "")
        since = http_time(ims) if ims else None
        if since is not None and doc.posts[0].time <= since:
            return Reply(304, validators)
    coding = _coding(spec.compression, get("accept-encoding", ""))
    body = model.body(doc, coding)
    if coding != "identity":
        headers.append(("Content-Encoding", coding))
    headers.extend(validators)
    headers.append(("Content-Length", str(len(body))))
    return Reply(200, headers, body)
