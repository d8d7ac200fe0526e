"""The tracker on a socket: ``POST /feedex/v1`` with a ``get_neighbors`` call, answered in the
response body by the pure :class:`~feedmesh.mesh.feedex.Tracker` (the caller is recorded as
the connection's address and its stated port). Bodies over the cap, undecodable bodies and
floods are refused as a peer refuses them."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from aiohttp import web

from feedmesh.clock import Clock
from feedmesh.mesh.feedex import MessageError, Tracker, decode, encode
from feedmesh.mesh.feedex.messages import Error

from .transport import CONTENT_TYPE, PATH, HostRate, TransportSettings

__all__ = ["TrackerServer"]


class TrackerServer:
    """``await start()`` serves ``tracker`` on ``host:port``; ``await stop()``."""

    def __init__(self, host: str, port: int, clock: Clock, *, tracker: Tracker | None = None,
                 settings: TransportSettings | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.port = port
        self.clock = clock
        self.tracker = tracker or Tracker(rng=random.Random())
        self.settings = settings or TransportSettings()
        self.monotonic = monotonic
        self._rate = HostRate(self.settings.max_requests_per_minute)
        self._runner: web.AppRunner | None = None
        self.stats = {"calls": 0, "refused": 0}

    async def start(self) -> None:
        app = web.Application(client_max_size=self.settings.max_body_bytes + 1)
        app.router.add_post(PATH, self._on_call)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        if self.port == 0:
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def _refuse(self, status: int, code: str, detail: str) -> web.Response:
        self.stats["refused"] += 1
        return web.Response(status=status, body=encode(Error(code, detail[:500]), self.port),
                            content_type=CONTENT_TYPE)

    async def _on_call(self, request: web.Request) -> web.Response:
        host = request.remote or ""
        if not self._rate.allow(host, self.monotonic()):
            return self._refuse(429, "rate_limited", f"too many calls from {host}")
        cap = self.settings.max_body_bytes
        if (request.content_length or 0) > cap:
            return self._refuse(413, "too_large", f"over the {cap}-byte cap")
        body = await request.content.read(cap + 1)
        if len(body) > cap:
            return self._refuse(413, "too_large", f"over the {cap}-byte cap")
        try:
            envelope = decode(body)
        except MessageError as error:
            return self._refuse(400, "malformed", str(error))
        self.stats["calls"] += 1
        reply = self.tracker.receive(self.clock.now(), (host, envelope.port), envelope.body)
        return web.Response(body=encode(reply, self.port), content_type=CONTENT_TYPE)
