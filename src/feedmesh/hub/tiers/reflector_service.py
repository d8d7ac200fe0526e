"""A reflector in a process of its own (``feedmesh reflector``) answers the hub and its web
processes on a small internal HTTP API (:mod:`feedmesh.hub.reflector_api`: paths, bodies).

The web layer serves private feeds; the held entries and the feeds' versions live in the
reflector that owns each subscription. In one process the hub asks its :class:`Reflector`
directly; across processes it asks this API, one loopback or LAN round trip per request.

Every request (``/metrics`` too: the token is the process's, :func:`token_required`) carries
``Authorization: Bearer TOKEN``, the token the reflector and its callers read from a file 0600
(:func:`feedmesh.secret_file.read_token`); any other request is answered 401 with a few bytes,
before anything is looked up. The token is compared in constant time, as bytes (so a header of
any characters is a wrong token, never an error). Without a token (``feedmesh reflector`` given
none, the embedded hub's reflectors, which have no API) whoever reaches the address reads every
held entry: bind it to a loopback or private address that only the hub's processes reach
(docs/distributed.md) either way.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable

import msgspec
from aiohttp import web

from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector_api import (
    MAX_BATCH,
    MSGPACK,
    PREFIX,
    FeedVersion,
    ReflectorStatus,
    bearer,
    decode_pairs,
    pack,
)
from feedmesh.hub.tiers.reflector import Reflector

__all__ = ["MAX_BODY_REQUEST", "reflector_routes", "token_required"]

log = logging.getLogger("feedmesh.hub.reflector")

MAX_BODY_REQUEST = 32 * MAX_BATCH
"""A batch of versions is the one body the API reads: ~20 bytes a pair."""


def token_required(token: bytes) -> Callable:
    """A middleware answering 401 (a few bytes, nothing looked up) to every request without
    ``Authorization: Bearer TOKEN``."""
    expected = bearer(token)

    @web.middleware
    async def authenticated(request: web.Request, handler):  # type: ignore[no-untyped-def]
        # aiohttp decoded the header as UTF-8 with surrogate escapes: these are its bytes
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, expected):
            raise web.HTTPUnauthorized(text="a bearer token is required",
                                       headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    return authenticated


def reflector_routes(reflector: Reflector, metrics: HubMetrics) -> list[web.RouteDef]:
    """The internal API of one reflector (its process answers 503 while it is loading)."""

    def packed(value: object) -> web.Response:
        return web.Response(body=pack(value), content_type=MSGPACK)

    def answered(value: object) -> web.Response:
        """A poll's answer (a feed's version, its items): counted as the reflector's bytes out,
        what readers' polling costs it (the provisioner's reflector out-bandwidth)."""
        response = packed(value)
        metrics.bytes_out.labels("reflector").inc(len(response.body))  # type: ignore[arg-type]
        return response

    def ids(request: web.Request, *names: str) -> list[int]:
        try:
            return [int(request.match_info[name]) for name in names]
        except ValueError:
            raise web.HTTPBadRequest(text=f"{', '.join(names)}: whole numbers expected") from None

    async def version(request: web.Request) -> web.Response:
        sub_id, generation = ids(request, "sub_id", "generation")
        if not reflector.serves(sub_id, generation):
            raise web.HTTPNotFound(text=f"reflector {reflector.number} serves no feed "
                                   f"{sub_id}/{generation}")
        return answered(FeedVersion(*reflector.version(sub_id)))

    async def versions(request: web.Request) -> web.Response:
        body = await request.content.read(MAX_BODY_REQUEST + 1)
        if len(body) > MAX_BODY_REQUEST:
            raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY_REQUEST,
                                                actual_size=len(body))
        try:
            pairs = decode_pairs(body)
        except msgspec.DecodeError as exc:
            raise web.HTTPBadRequest(text=f"a msgpack list of [sub_id, generation] pairs "
                                     f"expected: {exc}") from None
        if len(pairs) > MAX_BATCH:
            raise web.HTTPBadRequest(text=f"{len(pairs)} feeds asked at once; at most "
                                     f"{MAX_BATCH}")
        return answered([FeedVersion(*reflector.version(sub_id))
                         if reflector.serves(sub_id, generation) else None
                         for sub_id, generation in pairs])

    async def items(request: web.Request) -> web.Response:
        (sub_id,) = ids(request, "sub_id")
        if not reflector.subs.is_active(sub_id):
            return answered([])
        return answered(await reflector.items(sub_id))

    async def watermarks(_: web.Request) -> web.Response:
        return packed(await asyncio.to_thread(reflector.log.watermarks))

    async def status(_: web.Request) -> web.Response:
        return packed(ReflectorStatus(number=reflector.number,
                                      subscriptions=reflector.subs.count(),
                                      memory_bytes=reflector.memory_bytes(),
                                      applied_seq=reflector.applied_seq))

    return [web.post(PREFIX + "/versions", versions),
            web.get(PREFIX + "/feeds/{sub_id}/items", items),
            web.get(PREFIX + "/feeds/{sub_id}/{generation}", version),
            web.get(PREFIX + "/watermarks", watermarks),
            web.get(PREFIX + "/status", status)]
