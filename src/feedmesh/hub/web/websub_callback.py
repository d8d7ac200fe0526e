"""``/websub/<callback id>``: where publishers' WebSub hubs call us (docs/websub.md).

* ``GET``: the hub verifies our intent (``hub.mode=subscribe|unsubscribe``, echo
  ``hub.challenge``) or tells of a denial (``hub.mode=denied``). Only a request we sent and still
  wait for is echoed; anything else is a 404 (WebSub section 5.3).
* ``POST``: content distribution. The body is read up to ``WebLimits.max_push_bytes`` (413
  beyond), then checked by the subscriber (the hub's rate: 429; ``X-Hub-Signature``: a bad or
  missing one is dropped yet answered 202, as section 8 requires; an unknown callback: 410, which
  tells a hub to stop).

Every refusal is the web layer's JSON error shape, with a message saying why.
"""

from __future__ import annotations

from aiohttp import web

from feedmesh.hub.front.facade import HubFacade
from feedmesh.hub.web.errors import error_response

__all__ = ["WebSubCallback"]

_CODES = {400: "bad_request", 404: "not_found", 410: "gone", 413: "body_too_large",
          429: "rate_limited"}


class WebSubCallback:
    def __init__(self, hub: HubFacade, max_body_bytes: int) -> None:
        self.hub = hub
        self.max_body_bytes = max_body_bytes

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/websub/{callback_id}", self.verify),
                web.post("/websub/{callback_id}", self.deliver)]

    async def verify(self, request: web.Request) -> web.Response:
        params = {key: request.query.get(key, "") for key in
                  ("hub.mode", "hub.topic", "hub.challenge", "hub.lease_seconds", "hub.reason")}
        verdict = await self.hub.websub_verify(request.match_info["callback_id"], params)
        if verdict.status == 200:
            return web.Response(status=200, text=verdict.body, content_type="text/plain")
        return error_response(verdict.status, _CODES.get(verdict.status, "refused"),
                              f"WebSub verification refused: {verdict.reason}")

    async def deliver(self, request: web.Request) -> web.Response:
        cap = self.max_body_bytes
        if request.content_length is not None and request.content_length > cap:
            return error_response(413, "body_too_large", f"a pushed document may have at most "
                                  f"{cap} bytes; this one declares {request.content_length}")
        body = bytearray()
        while chunk := await request.content.read(64 * 1024):
            body += chunk
            if len(body) > cap:
                return error_response(413, "body_too_large",
                                      f"a pushed document may have at most {cap} bytes")
        delivery = await self.hub.websub_deliver(
            request.match_info["callback_id"], request.headers.get("X-Hub-Signature"),
            request.headers.get("Content-Type", ""), bytes(body))
        if 200 <= delivery.status < 300:
            return web.Response(status=delivery.status, text="received\n",
                                content_type="text/plain")
        headers = {"Retry-After": "1"} if delivery.status == 429 else None
        return error_response(delivery.status, _CODES.get(delivery.status, "refused"),
                              f"WebSub delivery refused: {delivery.reason}", headers)
