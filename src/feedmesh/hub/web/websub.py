"""``POST /hub``: the WebSub hub endpoint of every private feed (W3C WebSub section 5).

A form-encoded ``hub.mode=subscribe|unsubscribe``, ``hub.topic``, ``hub.callback`` and optional
``hub.lease_seconds`` and ``hub.secret`` (other fields ignored) is answered ``202 Accepted`` when it
is well formed and its topic is one of this hub's private feeds; the verification of intent then
goes to the callback in the background (:mod:`feedmesh.hub.push`). A topic is a feed URL exactly
as issued (``<base>/f/<token>.rss|.atom|.json``, or without extension for RSS): only someone who
holds a private feed's URL can subscribe to it, and any other topic gets ``404 unknown_topic``.
Requests are limited in size and, per client address, in rate.
"""

from __future__ import annotations

from aiohttp import web

from feedmesh.hub.facade import HubFacade, PushRefusedError
from feedmesh.hub.feed_document import EXTENSIONS
from feedmesh.hub.web.errors import ApiError
from feedmesh.hub.web.limits import RateLimiter, WebLimits
from feedmesh.websub.hub_requests import (
    HubRequestError,
    LeaseBounds,
    parse_hub_request,
    read_form,
)

__all__ = ["HubEndpoint", "push_error"]

_FORM = "application/x-www-form-urlencoded"


def push_error(exc: PushRefusedError) -> ApiError:
    """The answer to a refused push request (429 and 503 say when to retry)."""
    error = ApiError(exc.status, exc.code, exc.message, **exc.detail)
    if exc.status in (429, 503):
        error.headers["Retry-After"] = "60"
    return error


class HubEndpoint:
    def __init__(self, hub: HubFacade, limits: WebLimits, base_url: str) -> None:
        self.hub = hub
        self.limits = limits
        self.base_url = base_url.rstrip("/")
        self.lease: LeaseBounds = hub.lease_bounds
        self.limiter = RateLimiter(hub.clock, limits.hub_rate_per_s, limits.hub_burst)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/hub", self.handle)]

    async def topic_of(self, topic: str) -> tuple[int, str]:
        """``(subscription id, format)`` of a topic that is one of our feeds, else 404."""
        prefix = f"{self.base_url}/f/"
        name = topic[len(prefix):] if topic.startswith(prefix) else ""
        token, dot, extension = name.partition(".")
        fmt = EXTENSIONS.get(extension) if dot else "rss2.0"
        identity = self.hub.read_feed_token(token) if token and "/" not in name else None
        if fmt is None or identity is None or await self.hub.feed_version(*identity) is None:
            raise ApiError(404, "unknown_topic", f"hub.topic {topic[:200]!r} is not a feed of "
                           f"this hub: topics are private feed URLs ({prefix}<token>.rss, "
                           ".atom or .json) as the subscription's owner got them")
        return identity[0], fmt

    async def handle(self, request: web.Request) -> web.Response:
        wait = self.limiter.allow(f"ip:{request.remote}")
        if wait:
            error = ApiError(429, "rate_limited", f"too many hub requests from this address; "
                             f"retry in {wait:.0f} s", retry_after_s=round(wait, 1))
            error.headers["Retry-After"] = self.limiter.retry_after(wait)
            raise error
        if request.content_type != _FORM:
            raise ApiError(415, "unsupported_media_type", f"send the request as a form "
                           f"(Content-Type: {_FORM}), not {request.content_type}")
        limit = self.limits.max_hub_request_bytes
        if (request.content_length or 0) > limit:
            raise ApiError(413, "body_too_large", f"a hub request is at most {limit} bytes",
                           limit=limit)
        body = await request.content.read(limit + 1)
        if len(body) > limit:
            raise ApiError(413, "body_too_large", f"a hub request is at most {limit} bytes",
                           limit=limit)
        try:
            hub_request = parse_hub_request(read_form(body), self.lease)
        except HubRequestError as exc:
            raise ApiError(400, "invalid_hub_request", str(exc), field=exc.field) from exc
        sub_id, fmt = await self.topic_of(hub_request.topic)
        try:
            self.hub.websub_request(hub_request, sub_id, fmt)
        except PushRefusedError as exc:
            raise push_error(exc) from exc
        return web.Response(status=202, text=f"{hub_request.mode} request accepted; verifying "
                            "intent with the callback\n")
