"""``POST /hub``: the WebSub hub endpoint of every private feed (W3C WebSub section 5).

A form-encoded ``hub.mode=subscribe|unsubscribe``, ``hub.topic``, ``hub.callback`` and optional
``hub.lease_seconds`` and ``hub.secret`` (other fields ignored) is answered ``202 Accepted`` when it
is well formed and its topic is one of this hub's private feeds; the verification of intent then
goes to the callback in the background (:mod:`feedmesh.hub.push.service`). A topic is a feed URL
exactly as issued (``<base>/f/<token>.rss|.atom|.json``, or without extension for RSS): only someone
who holds a private feed's URL can subscribe to it, and any other topic gets ``404 unknown_topic``.
Requests are limited in size and, per client address, in rate.

``GET /hub/deliveries?hub.topic=...&hub.callback=...``: the delivery log of one WebSub
subscription (its last attempts, with status codes), for whoever holds both its topic (a private
feed URL) and its callback: the subscriber, or the feed's owner.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from feedmesh.fetch.redact import redact_credentials
from feedmesh.hub.front.facade import HubFacade, PushRefusedError
from feedmesh.hub.front.feed_document import EXTENSIONS
from feedmesh.hub.web.errors import ApiError
from feedmesh.hub.web.limits import RateLimiter, WebLimits
from feedmesh.store import PushAttempt, PushTarget
from feedmesh.websub.hub_requests import (
    HubRequestError,
    LeaseBounds,
    parse_hub_request,
    read_form,
)

__all__ = ["HubEndpoint", "attempt_json", "push_error", "websub_subscriber_json"]

_FORM = "application/x-www-form-urlencoded"


def websub_subscriber_json(target: PushTarget,
                           attempts: list[PushAttempt]) -> dict[str, Any]:
    """A WebSub subscription as its feed's owner (and its subscriber) sees it."""
    return {"id": target.id, "callback": redact_credentials(target.url),
            "format": target.format, "signed": bool(target.secret),
            "signature": target.signature,
            "lease_seconds": target.lease_seconds, "expires_at": target.expires_at,
            "created_at": target.created_at, "deliveries": [attempt_json(a) for a in attempts]}


def attempt_json(attempt: PushAttempt) -> dict[str, Any]:
    return {"at": attempt.at, "attempt": attempt.attempt, "status": attempt.status,
            "ok": 200 <= attempt.status < 300, "error": attempt.error,
            "entries": attempt.entries, "elapsed_ms": attempt.elapsed_ms}


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
        # Reading a delivery log is like polling a feed: the feeds' limits, not the hub's.
        self.log_limiter = RateLimiter(hub.clock, limits.feed_rate_per_s, limits.feed_burst)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/hub", self.handle), web.get("/hub/deliveries", self.deliveries)]

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

    @staticmethod
    def _limit(request: web.Request, limiter: RateLimiter) -> None:
        wait = limiter.allow(f"ip:{request.remote}")
        if wait:
            error = ApiError(429, "rate_limited", f"too many hub requests from this address; "
                             f"retry in {wait:.0f} s", retry_after_s=round(wait, 1))
            error.headers["Retry-After"] = limiter.retry_after(wait)
            raise error

    async def deliveries(self, request: web.Request) -> web.Response:
        """The delivery log of the subscription of ``hub.callback`` to ``hub.topic``."""
        self._limit(request, self.log_limiter)
        topic = request.query.get("hub.topic", "")
        callback = request.query.get("hub.callback", "")
        for field, value in (("hub.topic", topic), ("hub.callback", callback)):
            if not value:
                raise ApiError(400, "invalid_hub_request", f"{field}: is required (the "
                               "subscription's topic and callback, as subscribed)", field=field)
        sub_id, _ = await self.topic_of(topic)
        found = next((t for t in self.hub.push_targets(sub_id)
                      if t.kind == "websub" and t.topic == topic and t.url == callback), None)
        if found is None:
            raise ApiError(404, "not_subscribed", "this callback has no subscription to this "
                           "topic (never confirmed, unsubscribed, expired or cancelled)")
        attempts = await self.hub.push_attempts(found.id)
        return web.json_response({"topic": topic,
                                  "subscriber": websub_subscriber_json(found, attempts)})

    async def handle(self, request: web.Request) -> web.Response:
        self._limit(request, self.limiter)
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
