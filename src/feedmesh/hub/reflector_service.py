"""A reflector in a process of its own (``feedmesh reflector``), and how the hub and its web
processes reach it: a small internal HTTP API, msgpack bodies.

The web layer serves private feeds; the held entries and the feeds' versions live in the
reflector that owns each subscription. In one process the hub asks its :class:`Reflector`
directly; across processes it asks this API, one loopback or LAN round trip per request::

    GET /reflector/v1/feeds/{sub_id}/{generation}   -> FeedState (404: not served here)
    POST /reflector/v1/versions  [[sub_id, generation], ...] -> [FeedState or nil, ...]
    GET /reflector/v1/feeds/{sub_id}/items          -> [ReflectedItem], newest first
    GET /reflector/v1/watermarks                    -> {filter shard: newest entry id stored}
    GET /reflector/v1/status                        -> ReflectorStatus
    GET /metrics                                    -> Prometheus figures of the process

Every request (``/metrics`` too) carries ``Authorization: Bearer TOKEN``, the token the
reflector and its callers read from a file 0600 (:func:`feedmesh.secret_file.read_token`); any
other request is answered 401 with a few bytes, before anything is looked up. The token is
compared in constant time, as bytes (so a header of any characters is a wrong token, never an
error). ``token=None`` (the default of :func:`reflector_app` and :class:`ReflectorClient`, kept
only for the callers not yet given a token: ``feedmesh reflector``, the hub, the web processes)
serves and asks without one: then whoever reaches the address reads every held entry. Bind it
to a loopback or private address that only the hub's processes reach (docs/distributed.md)
either way.

A reflector that cannot be reached, or refuses the token, is a :class:`ReflectorUnavailable`
naming it, which the web layer answers with 503 and Retry-After, never a traceback.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable

import aiohttp
import msgspec
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from feedmesh.hub.facade import FeedUnavailable, FeedVersion
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector import Reflector
from feedmesh.store import ReflectedItem

__all__ = ["ReflectorClient", "ReflectorStatus", "ReflectorUnavailable", "reflector_app"]

log = logging.getLogger("feedmesh.hub.reflector")

PREFIX = "/reflector/v1"
TIMEOUT_S = 5.0
"""A reflector slower than this to answer one feed's request is taken as unavailable."""
MAX_BODY_BYTES = 64 << 20
"""The largest answer a client reads: a feed that keeps 10,000 entries of a few KB each."""
MAX_BATCH = 4096
"""Most feeds' versions asked in one request (``POST /versions``)."""


class ReflectorUnavailable(FeedUnavailable):
    """A reflector process could not be reached or answered with an error; says which and why."""


class ReflectorStatus(msgspec.Struct, frozen=True, kw_only=True):
    number: int
    subscriptions: int
    memory_bytes: int
    applied_seq: int


_feed_state = msgspec.msgpack.Encoder()
_decode_version = msgspec.msgpack.Decoder(FeedVersion)
_decode_versions = msgspec.msgpack.Decoder(list[FeedVersion | None])
_decode_pairs = msgspec.msgpack.Decoder(list[tuple[int, int]])
_decode_items = msgspec.msgpack.Decoder(list[ReflectedItem])
_decode_marks = msgspec.msgpack.Decoder(dict[int, int])
_decode_status = msgspec.msgpack.Decoder(ReflectorStatus)
_MSGPACK = "application/msgpack"


def _bearer(token: bytes) -> bytes:
    return b"Bearer " + token


def reflector_app(reflector: Reflector, metrics: HubMetrics,
                  ready: Callable[[], bool] = lambda: True, *,
                  token: bytes | None = None) -> web.Application:
    """The internal API of one reflector. ``ready``: False while it is still loading (503).
    ``token``: the bearer token every request must carry (None: no authentication, logged)."""
    expected = _bearer(token) if token is not None else None

    def packed(value: object) -> web.Response:
        return web.Response(body=_feed_state.encode(value), content_type=_MSGPACK)

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

    @web.middleware
    async def authenticated(request: web.Request, handler):  # type: ignore[no-untyped-def]
        if expected is not None:
            # aiohttp decoded the header as UTF-8 with surrogate escapes: these are its bytes
            given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
            if not hmac.compare_digest(given, expected):
                raise web.HTTPUnauthorized(text="a bearer token is required",
                                           headers={"WWW-Authenticate": "Bearer"})
        return await handler(request)

    @web.middleware
    async def loaded(request: web.Request, handler):  # type: ignore[no-untyped-def]
        if request.path.startswith(PREFIX) and not ready():
            raise web.HTTPServiceUnavailable(text="the reflector is still loading",
                                             headers={"Retry-After": "1"})
        return await handler(request)

    async def version(request: web.Request) -> web.Response:
        sub_id, generation = ids(request, "sub_id", "generation")
        if not reflector.serves(sub_id, generation):
            raise web.HTTPNotFound(text=f"reflector {reflector.number} serves no feed "
                                   f"{sub_id}/{generation}")
        return answered(FeedVersion(*reflector.version(sub_id)))

    async def versions(request: web.Request) -> web.Response:
        try:
            pairs = _decode_pairs.decode(await request.read())
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

    async def figures(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    # A batch of versions is the one body the API reads: ~20 bytes a pair.
    app = web.Application(middlewares=[authenticated, loaded], client_max_size=32 * MAX_BATCH)
    app.router.add_post(PREFIX + "/versions", versions)
    app.router.add_get(PREFIX + "/feeds/{sub_id}/items", items)
    app.router.add_get(PREFIX + "/feeds/{sub_id}/{generation}", version)
    app.router.add_get(PREFIX + "/watermarks", watermarks)
    app.router.add_get(PREFIX + "/status", status)
    app.router.add_get("/metrics", figures)
    return app


class ReflectorClient:
    """One reflector process, as the hub and the web processes ask it (a shared session,
    created on first use). ``token``: the reflector's bearer token (None: sent without one)."""

    def __init__(self, number: int, url: str, *, token: bytes | None = None) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"reflector {number} at {url!r}: give an http:// URL such as "
                             "http://127.0.0.1:8301")
        self.number = number
        self.url = url.rstrip("/")
        if token is not None and not all(0x21 <= byte <= 0x7E for byte in token):
            raise ValueError(f"reflector {number}: a token is printable ASCII without spaces")
        self._headers = ({"Authorization": _bearer(token).decode("ascii")}
                         if token is not None else {})
        self._session: aiohttp.ClientSession | None = None

    async def _get(self, path: str, body: bytes | None = None) -> bytes | None:
        """The answer's body (to a POST of ``body`` if given), None on 404;
        ReflectorUnavailable on anything else."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
                connector=aiohttp.TCPConnector(limit=64))
        where = f"reflector {self.number} at {self.url}"
        try:
            async with self._session.request(
                    "GET" if body is None else "POST", self.url + PREFIX + path, data=body,
                    headers=self._headers if body is None else
                    {**self._headers, "Content-Type": _MSGPACK}) as answer:
                if answer.status == 404:
                    return None
                if answer.status != 200:
                    text = (await answer.text())[:200]
                    raise ReflectorUnavailable(f"{where} answered {answer.status}: {text}")
                chunks, size = [], 0
                async for chunk in answer.content.iter_chunked(1 << 16):
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise ReflectorUnavailable(f"{where}: answer larger than "
                                                   f"{MAX_BODY_BYTES >> 20} MB")
                    chunks.append(chunk)
                return b"".join(chunks)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ReflectorUnavailable(f"{where} cannot be reached: "
                                       f"{exc!r}"[:300]) from exc

    async def _decoded(self, path: str, decoder: msgspec.msgpack.Decoder,
                       sent: bytes | None = None) -> object:
        body = await self._get(path, sent)
        if body is None:
            return None
        try:
            return decoder.decode(body)
        except msgspec.DecodeError as exc:
            raise ReflectorUnavailable(f"reflector {self.number} at {self.url} sent an "
                                       f"undecodable answer to {path}: {exc}") from exc

    async def feed_version(self, sub_id: int, generation: int) -> FeedVersion | None:
        return await self._decoded(f"/feeds/{sub_id}/{generation}", _decode_version)  # type: ignore[return-value]

    async def feed_versions(self, pairs: list[tuple[int, int]]) -> list[FeedVersion | None]:
        """Many feeds' versions in one round trip (None: not served there), in order."""
        found: list[FeedVersion | None] = []
        for start in range(0, len(pairs), MAX_BATCH):
            batch = pairs[start:start + MAX_BATCH]
            answer = await self._decoded("/versions", _decode_versions,
                                         _feed_state.encode(batch))
            if not isinstance(answer, list) or len(answer) != len(batch):
                raise ReflectorUnavailable(f"reflector {self.number} at {self.url} answered "
                                           f"{len(batch)} feeds' versions with "
                                           f"{len(answer) if isinstance(answer, list) else 0}")
            found.extend(answer)
        return found

    async def items(self, sub_id: int) -> list[ReflectedItem]:
        return await self._decoded(f"/feeds/{sub_id}/items", _decode_items) or []  # type: ignore[return-value]

    async def watermarks(self) -> dict[int, int]:
        return await self._decoded("/watermarks", _decode_marks) or {}  # type: ignore[return-value]

    async def status(self) -> ReflectorStatus | None:
        return await self._decoded("/status", _decode_status)  # type: ignore[return-value]

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
