"""The web role: sign-up, the API, private feeds, the WebSub hub's requests and webhooks
(:mod:`feedmesh.hub.web`) over a :class:`~feedmesh.hub.front.hub_front.HubFront`; in the embedded
hub beside every tier, or in a process of its own (``feedmesh web``, :func:`web_process`).

A web process of its own keeps no state: accounts and subscriptions are in the hub's state,
entries in its ingest store; subscription changes go to the tiers on the bus and the answer
waits until they applied them; a private feed is read from the reflector process that holds it;
feeds a person follows are added to the store and the crawlers are told on ``feeds``. WebSub
subscriptions and webhooks are verified and saved here; the delivery worker beside each
reflector delivers. Several can run side by side behind any load balancer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from aiohttp import web

from feedmesh.bus import Bus
from feedmesh.clock import Clock, SystemClock
from feedmesh.compose.crawler import reflector_token
from feedmesh.compose.engines import existing_operator_token, open_bus, open_web_stores
from feedmesh.compose.lifecycle import HttpPart, Tasks
from feedmesh.compose.reflector import PushRole, push_worker
from feedmesh.compose.settings import WebLimits, WebSettings
from feedmesh.hub.front.holders import RemoteHolders
from feedmesh.hub.front.hub_front import HubFront
from feedmesh.hub.front.sources import RemoteSources
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.reflector_client import ReflectorClient
from feedmesh.hub.web import web_routes
from feedmesh.hub.web.operator import is_operator, shown_stats
from feedmesh.store import StoreThread

__all__ = ["StatsRole", "WebRole", "web_process"]


class WebRole:
    """The web layer over ``front``, its links made from ``base_url``; ``crawlers``: the groups
    of ``feeds`` that must exist before anything is told to them (a web process of its own:
    a feed followed while a crawler is down waits for it)."""

    def __init__(self, front: HubFront, *, base_url: str, limits: WebLimits | None = None,
                 bus: Bus | None = None, crawlers: Sequence[str] = (),
                 close_front: bool = False, operator_token: bytes | None = None) -> None:
        self.front = front
        self.operator_token = operator_token
        self.name = "web"
        self.ready = asyncio.Event()
        self.base_url = base_url
        self._limits = limits
        self._bus = bus
        self._crawlers = crawlers
        self._close_front = close_front

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return self.front.metrics.registry

    def http(self) -> HttpPart:
        routes, middlewares, max_body = web_routes(self.front, base_url=self.base_url,
                                                   limits=self._limits,
                                                   operator_token=self.operator_token)
        return HttpPart(routes, middlewares, max_body)

    async def start(self, tasks: Tasks) -> None:
        for crawler in self._crawlers:
            assert self._bus is not None
            await (await self._bus.consumer("feeds", crawler)).close()
        self.ready.set()

    async def stop(self) -> None:
        if self._close_front:
            await self.front.aclose()


class StatsRole:
    """A crawler's ``/api/stats`` (what ``feedmesh stats`` reads: feeds, crawl cycles, queues)
    where no web layer serves it."""

    def __init__(self, front: HubFront, *, operator_token: bytes | None = None) -> None:
        self.front = front
        self.operator_token = operator_token
        self.name = "stats"
        self.ready = asyncio.Event()

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return None

    def http(self) -> HttpPart:
        async def stats(request: web.Request) -> web.Response:
            return web.json_response(shown_stats(
                await self.front.stats(), operator=is_operator(request, self.operator_token)))

        return HttpPart([web.get("/api/stats", stats)])

    async def start(self, tasks: Tasks) -> None:
        self.ready.set()

    async def stop(self) -> None:
        """Nothing of its own."""


def web_process(settings: WebSettings, *, base_url: str,
                clock: Clock | None = None) -> tuple[list, list[Callable]]:
    """``feedmesh web``: the roles of a web process of its own (its push worker, which takes
    requests and saves targets, and the web layer), and what the process closes after them."""
    stores = open_web_stores(settings.data_dir, settings.store)
    clock = clock or SystemClock()
    metrics = HubMetrics()
    bus = open_bus(settings.bus.url, namespace=settings.bus.namespace,
                   credentials=settings.bus.credentials)
    io = StoreThread()
    token = reflector_token(settings.reflector_token_file)
    clients = [ReflectorClient(n, url, token=token) for n, url in enumerate(settings.reflectors)]
    push = push_worker(stores.state, settings.push, settings.guard, clock, metrics)
    front = HubFront(state=stores.state, store=stores.ingest, bus=bus, clock=clock,
                     metrics=metrics, tokens=stores.tokens,
                     holders=RemoteHolders(clients, stores.state, io),
                     sources=RemoteSources(stores.ingest, bus, clock, io),
                     reflectors=len(clients), starting_entries=settings.starting_entries,
                     io=io, push=push, lease_bounds=settings.push.lease)
    roles = [PushRole(push),
             WebRole(front, base_url=base_url, limits=settings.limits, bus=bus,
                     crawlers=settings.crawlers, close_front=True,
                     operator_token=existing_operator_token(settings.data_dir))]
    return roles, [bus.close, stores.close]
