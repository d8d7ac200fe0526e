"""What the farm answers to a request for a feed: conditional GET, deltas, compression, faults.

``feed_reply`` turns (model, feed state, request, feed) into a :class:`~feedmesh.farm.reply.Reply`;
the connection (``server.py``) carries it out, including the timed behaviours (delays, trickles,
streams, silence). Keeping the decisions here and the socket work there keeps both small and lets
tests read the rules in one place. What the rules need from whoever serves them beyond the pure
model (rate-limit windows, nonces, rendering off the event loop) is the small :class:`FeedState`
protocol, which :class:`~feedmesh.farm.server.FarmServer` implements; this module does not know
the server.


* If-None-Match is compared (weakly) with the current ETag when the feed has ETags; when it
  matches, 304. Otherwise, for a delta-capable feed asked with ``A-IM: feed``, an ETag of an older
  version still listed yields ``226 IM Used`` with only the newer entries.
* If-Modified-Since is used when the feed has Last-Modified and the request carries no
  If-None-Match the feed understands (RFC 9110 13.1.3): 304 when nothing was posted since.
* Compression follows Accept-Encoding among the codings the feed supports (br preferred).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Protocol

from feedmesh.farm.documents import FarmModel, compress, http_date, parse_etag_version
from feedmesh.farm.faultbodies import endless_chunks, gzip_bomb, html_page, huge_chunks
from feedmesh.farm.faults import Fault
from feedmesh.farm.http import Request, accepted_codings, etag_list, http_time
from feedmesh.farm.reply import Reply, text_reply

if TYPE_CHECKING:
    from feedmesh.farm.catalog import FeedSpec
    from feedmesh.farm.documents import FeedDocument
    from feedmesh.farm.posting import Post

__all__ = ["REDIRECT_STATUS", "FeedState", "article_reply", "feed_reply"]

REDIRECT_STATUS = {Fault.REDIRECT_301: 301, Fault.REDIRECT_302: 302, Fault.REDIRECT_307: 307,
                   Fault.REDIRECT_308: 308}
_ERROR_STATUS = {Fault.NOT_FOUND: 404, Fault.GONE: 410, Fault.HTTP_500: 500, Fault.HTTP_502: 502,
                 Fault.HTTP_503: 503}
PRIVATE_TARGETS = ("http://10.1.2.3/feeds/{id}", "http://169.254.169.254/latest/meta-data/")


class FeedState(Protocol):
    """Per-feed state that lives as long as the server, not in the pure model."""

    def rate_gate(self, feed_id: int, now: float) -> float:
        """Seconds a rate-limited client must still wait (0: let it through)."""
        ...

    def next_nonce(self, feed_id: int) -> int:
        """A new number for each render of a feed whose guids change on every fetch."""
        ...

    async def render_off_loop(self, feed_id: int, now: float) -> FeedDocument:
        """The feed's document, rendered in a worker thread (for the 10,000-entry flood)."""
        ...


def article_reply(model: FarmModel, feed_id: int, post: Post) -> Reply:
    """The page an entry's link leads to: a small HTML article (its title, date and text, and
    its feed), so that a reader's click on a farm entry opens something, as on the web."""
    entry = model.maker(feed_id).entry(post)
    feed = f"{model.base_url(feed_id)}/feeds/{feed_id}"
    when = entry.published.isoformat() if entry.published else ""
    page = ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(entry.title)}</title></head>\n<body><article>"
            f"<h1>{html.escape(entry.title)}</h1>\n"
            f"<p><time datetime=\"{when}\">{when}</time> · "
            f"<a href=\"{html.escape(feed)}\">feed {feed_id}</a></p>\n"
            f"<p>{html.escape(entry.summary or '')}</p>\n</article></body></html>\n")
    return text_reply(200, page, "text/html; charset=utf-8",
                      extra=[("Cache-Control", "max-age=3600")])


def _coding(spec_compression: str, accept: str) -> str:
    if spec_compression == "none" or not accept:
        return "identity"
    accepted = accepted_codings(accept)
    if "br" in spec_compression and ("br" in accepted or "*" in accepted):
        return "br"
    if "gzip" in spec_compression and ("gzip" in accepted or "*" in accepted):
        return "gzip"
    return "identity"


def feed_reply(model: FarmModel, state: FeedState, request: Request, feed_id: int, variant: str,
               now: float) -> Reply:
    """The reply for ``/feeds/<id>`` (variant ``""``), ``/feeds/<id>/moved`` or ``/loop``."""
    config = model.config
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
        extra = [("Retry-After", str(config.retry_after_s))] if status == 503 else None
        reply = text_reply(status, f"feed {feed_id}: {status}\n", extra=extra)
        reply.fault = fault
        return reply
    if fault in (Fault.RATE_LIMIT, Fault.RATE_LIMIT_DATE):
        wait = state.rate_gate(feed_id, now)
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
        size = config.huge_bytes
        reply = Reply(200, [("Content-Type", "application/rss+xml"),
                            ("Content-Length", str(size))], fault=fault)
        reply.chunks = huge_chunks(spec.title, f"{base}/sites/{feed_id}/", size)
        return reply
    if fault is Fault.GZIP_BOMB:
        bomb = gzip_bomb(config.bomb_bytes)
        return Reply(200, [("Content-Type", "application/rss+xml"), ("Content-Encoding", "gzip"),
                           ("Content-Length", str(len(bomb)))], bomb, fault=fault)
    if fault is Fault.FLOOD and model.cached(feed_id, now) is None:
        # Ten thousand entries take a while to render: do it in a thread, answer when ready.
        reply = Reply(0, [], fault=fault)
        reply.pending = _flood_reply(model, state, request, feed_id, spec, now)
        return reply
    reply = _document_reply(model, state, request, feed_id, spec, now)
    if fault is Fault.SLOW:
        reply.delay_s = config.slow_delay_s
    elif fault is Fault.SLOW_BODY and reply.body:
        reply.trickle = (config.trickle_bytes, config.trickle_interval_s)
    if fault is not Fault.NONE:
        reply.fault = fault
    return reply


async def _flood_reply(model: FarmModel, state: FeedState, request: Request, feed_id: int,
                       spec: FeedSpec, now: float) -> Reply:
    doc = await state.render_off_loop(feed_id, now)
    reply = _document_reply(model, state, request, feed_id, spec, now, doc)
    reply.fault = Fault.FLOOD
    return reply


def _redirect(status: int, location: str, fault: Fault) -> Reply:
    reply = text_reply(status, f"moved to {location}\n", extra=[("Location", location)])
    reply.fault = fault
    return reply


def _document_reply(model: FarmModel, state: FeedState, request: Request, feed_id: int,
                    spec: FeedSpec, now: float, doc: FeedDocument | None = None) -> Reply:
    if doc is not None:
        pass
    elif spec.fault is Fault.CHANGING_GUIDS:
        doc = model.render(feed_id, now, nonce=state.next_nonce(feed_id))
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
                version = parse_etag_version(tag, model.config.seed, feed_id)
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
