"""A small WebSub subscriber on its own loopback address, for tests of the hub (websub.rocks'
hub tests as a subscriber sees them): it answers verifications of intent for the subscriptions it
asked for (and only those), and records every delivery with its headers and arrival time."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import msgspec
from aiohttp import web

__all__ = ["Delivery", "LoopbackSubscriber", "loopback_subscriber"]


class Delivery(msgspec.Struct, frozen=True):
    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    status: int = 200
    """What the subscriber answered."""


class Verification(msgspec.Struct, frozen=True):
    path: str
    params: dict[str, str]


class LoopbackSubscriber:
    def __init__(self, host: str) -> None:
        self.host = host
        self.base = ""
        self.wanted: set[tuple[str, str, str]] = set()
        """(mode, topic, callback path) it will confirm."""
        self.verifications: list[Verification] = []
        self.deliveries: list[Delivery] = []
        self.status = 200
        """What deliveries are answered with (a test makes it fail)."""

    def callback(self, path: str = "/cb") -> str:
        return self.base + path

    def want(self, mode: str, topic: str, path: str = "/cb") -> None:
        self.wanted.add((mode, topic, path))

    def to(self, path: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.path == path]

    async def _get(self, request: web.Request) -> web.Response:
        params = dict(request.query)
        self.verifications.append(Verification(request.path, params))
        key = (params.get("hub.mode", ""), params.get("hub.topic", ""), request.path)
        if key not in self.wanted or "hub.challenge" not in params:
            return web.Response(status=404, text="not a subscription of mine")
        return web.Response(text=params["hub.challenge"])

    async def _post(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.deliveries.append(Delivery(request.path, dict(request.headers), body,
                                        time.time(), self.status))
        return web.Response(status=self.status)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._get)
        app.router.add_post("/{tail:.*}", self._post)
        return app


@asynccontextmanager
async def loopback_subscriber(host: str = "127.0.0.2") -> AsyncIterator[LoopbackSubscriber]:
    subscriber = LoopbackSubscriber(host)
    runner = web.AppRunner(subscriber.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    subscriber.base = f"http://{host}:{port}"
    try:
        yield subscriber
    finally:
        await runner.cleanup()
