"""The hub on one machine: every role of the crawling hub in this process (``feedmesh serve``,
``feedmesh demo``; ``feedmesh crawler`` runs the same with some tiers in processes of their own),
on SQLite (or PostgreSQL) and the in-process bus (or a NATS server's), with one
:class:`~feedmesh.hub.front.hub_front.HubFront` that the web role is handed.

The roles, in start order (:mod:`.lifecycle` stops them in the reverse one): the reflectors and
their push worker, the filter shards, the crawler, the web layer. The subscriptions are read once
at start for every tier (a million of them are a few hundred MB while loading).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import msgspec
import numpy as np
from aiohttp import web
from aiohttp.abc import AbstractResolver

from feedmesh.clock import Clock, SystemClock
from feedmesh.compose.crawler import CrawlerRole, crawler_tier
from feedmesh.compose.engines import (
    HubStores,
    open_bus,
    open_hub_state,
    open_hub_stores,
    operator_token,
)
from feedmesh.compose.filter import FilterRole, filter_tier
from feedmesh.compose.lifecycle import bind, started
from feedmesh.compose.reflector import (
    PushRole,
    ReflectorRole,
    push_worker,
    reflectors_with_push,
)
from feedmesh.compose.settings import HubSettings, WebLimits
from feedmesh.compose.web import WebRole
from feedmesh.fetch import Fetcher
from feedmesh.hub.front.holders import LocalHolders, Owners, RemoteHolders
from feedmesh.hub.front.hub_front import HubFront
from feedmesh.hub.front.sources import LocalSources
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.tiers.crawling import LocalWatermarks
from feedmesh.store import HubState, StoreThread

__all__ = ["EmbeddedHub", "embedded_hub", "running_hub"]


class SharedColumns:
    """The subscriptions as every tier of the process loads them at start: read once, for the
    ``users`` that ask, then dropped (and the reflector of each subscription noted in
    ``owners``)."""

    def __init__(self, state: HubState, owners: Owners, metrics: HubMetrics,
                 users: int) -> None:
        self._state = state
        self._owners = owners
        self._metrics = metrics
        self._left = users
        self._columns: dict[str, np.ndarray] | None = None

    def get(self) -> dict[str, np.ndarray]:
        if self._columns is None:
            self._columns = self._state.subscription_columns()
            self._owners.set(self._columns["id"], self._columns["reflector"])
            self._metrics.subscriptions.set(len(self._columns["id"]))
        columns = self._columns
        self._left -= 1
        if self._left <= 0:
            self._columns = None
        return columns


class EmbeddedHub:
    """Every role of the crawling hub in this process (see the module), and their parts, which
    tests and benchmarks reach for: ``crawler`` (the tier), ``filters``, ``reflectors``,
    ``push``, ``front`` (what people are served through), ``desk`` (the feeds they add).
    :meth:`start` and :meth:`stop` run them without a web server (:func:`running_hub` adds it);
    a command hands :attr:`roles` to :func:`~feedmesh.compose.lifecycle.run_roles`."""

    def __init__(self, settings: HubSettings, stores: HubStores, *, bus_url: str,
                 bus_namespace: str, fetcher: Fetcher, clock: Clock,
                 resolver: AbstractResolver | None, bus_credentials: str = "") -> None:
        self.settings = s = settings
        self.stores = stores
        self.clock = clock
        self.metrics = metrics = HubMetrics()
        self.bus = bus = open_bus(bus_url, buffer_bytes=s.bus_buffer_bytes,
                                  namespace=bus_namespace, credentials=bus_credentials)
        metrics.watch_queues(bus.depths)
        self.store, self.state, self.tokens = stores.ingest, stores.state, stores.tokens
        self.fetcher = fetcher
        self.io = io = StoreThread()  # the web layer's reads and writes, off the event loop
        data = Path(s.data_dir)
        owners = Owners()
        local = len(stores.reflector_logs)
        filters = 0 if s.external_filters else s.filters
        columns = SharedColumns(self.state, owners, metrics, users=local + filters)
        open_state = functools.partial(open_hub_state, stores.state_location)

        if local:  # push follows the reflectors' batches, so it runs beside them
            self.reflectors, self.push = reflectors_with_push(
                stores.reflector_logs, bus=bus, clock=clock, metrics=metrics,
                settings=s.reflector, delivery=s.delivery, state=self.state, push=s.push,
                guard=s.fetch, tokens=self.tokens, owner=owners.get, resolver=resolver)
        else:  # the reflectors' processes deliver; this one takes requests (docs/distributed.md)
            self.reflectors = []
            self.push = push_worker(self.state, msgspec.structs.replace(
                s.push, sync_interval_s=s.push.sync_interval_s or 1.0), s.fetch, clock,
                metrics, resolver=resolver)
        self.filters = [filter_tier(n, s.filters, bus, clock, metrics, s.delivery)
                        for n in range(filters)]
        self.crawler = crawler_tier(s, store=self.store, state=self.state, bus=bus,
                                    fetcher=fetcher, clock=clock, metrics=metrics,
                                    data_dir=data, resolver=resolver)
        self.crawler_role = CrawlerRole(
            s, self.crawler, store=self.store, bus=bus, metrics=metrics, fetcher=fetcher,
            io=io, ownership=stores.ownership,
            local_reflectors=[LocalWatermarks(r.log) for r in self.reflectors])
        self.desk = self.crawler_role.desk
        holders = (LocalHolders(self.reflectors, owners) if self.reflectors
                   else RemoteHolders(self.crawler_role.remote_reflectors, self.state, io))
        self.front = HubFront(
            state=self.state, store=self.store, bus=bus, clock=clock, metrics=metrics,
            tokens=self.tokens, holders=holders,
            sources=LocalSources(self.crawler, self.desk.follows_changed),
            reflectors=s.reflectors, starting_entries=s.starting_entries, io=io,
            push=self.push, callbacks=self.crawler.websub, lease_bounds=s.push.lease)
        self.roles: list = [
            *(ReflectorRole(r, state=self.state, metrics=metrics, columns=columns.get)
              for r in self.reflectors),
            PushRole(self.push),
            *(FilterRole(f, state=self.state, data_dir=data, open_state=open_state,
                         metrics=metrics, columns=columns.get, save_on_stop=True)
              for f in self.filters),
            self.crawler_role]
        self._running: contextlib.AsyncExitStack | None = None

    def closers(self) -> list[Callable[[], object]]:
        """What the roles share, closed after they stopped: the bus, the stores."""
        return [self.bus.close, self.front.aclose, self.stores.close]

    def with_web(self, base_url: str, limits: WebLimits | None = None) -> list:
        """The roles and the web layer, served from ``base_url``."""
        return [*self.roles, WebRole(self.front, base_url=base_url, limits=limits,
                                     operator_token=operator_token(self.settings.data_dir))]

    async def start(self, roles: Sequence | None = None, http=None) -> None:  # type: ignore[no-untyped-def]
        """Start the roles (``roles``: these instead, served on the socket ``http``)."""
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(started(roles or self.roles, http=http,
                                                closers=self.closers()))
        self._running = stack

    async def stop(self) -> None:
        """Stop every role (the crawl drains first), then close what they shared."""
        if self._running is not None:
            running, self._running = self._running, None
            await running.aclose()

    @property
    def started(self) -> bool:
        return self._running is not None

    async def add_feeds(self, urls: Sequence[str], *, operator: bool = True) -> list[int]:
        """Crawl these feeds (the operator's, unless ``operator`` is False); their ids."""
        return await self.desk.add_feeds(urls, operator=operator)

    async def stop_crawling(self) -> None:
        """No fetch begins any more (the tiers go on: what was published can be drained)."""
        await self.crawler_role.stop_crawling()

    async def drain(self, timeout: float = 30.0) -> bool:
        return await self.crawler_role.drain(timeout)


def embedded_hub(settings: HubSettings | None = None, *, clock: Clock | None = None,
                 fetcher: Fetcher | None = None, resolver: AbstractResolver | None = None,
                 store_url: str = "", bus: str = "memory",
                 bus_namespace: str = "feedmesh", bus_credentials: str = "") -> EmbeddedHub:
    """Every tier in this process on SQLite files in ``settings.data_dir`` (or, given
    ``store_url``, on that PostgreSQL database, :func:`~.engines.open_hub_stores`) and the
    in-process bus (or, given ``bus``, a NATS server's, whose streams outlive this process).
    ``fetcher`` replaces the polite fetcher built from ``settings.fetch`` (tests give one with a
    fixed resolver); ``resolver`` is the DNS resolver of the one built here."""
    settings = settings or HubSettings()
    if settings.external_filters and bus in ("", "memory"):
        raise ValueError("filters in processes of their own (--external-filters) need a NATS "
                         "bus to meet them on: --bus nats://HOST:PORT")
    if settings.external_reflectors and bus in ("", "memory"):
        raise ValueError("reflectors in processes of their own (--external-reflectors) need a "
                         "NATS bus to meet them on: --bus nats://HOST:PORT")
    clock = clock or SystemClock()
    stores = open_hub_stores(settings.data_dir, store_url,
                             reflectors=0 if settings.external_reflectors else settings.reflectors,
                             named_crawler=bool(settings.crawler_name), now=clock.now())
    try:
        return EmbeddedHub(settings, stores, bus_url=bus, bus_namespace=bus_namespace,
                           bus_credentials=bus_credentials,
                           fetcher=fetcher or Fetcher(settings.fetch, clock=clock,
                                                      resolver=resolver),
                           clock=clock, resolver=resolver)
    except BaseException:
        stores.close()
        raise


@contextlib.asynccontextmanager
async def running_hub(settings: HubSettings, host: str, port: int, base_url: str = "",
                      limits: WebLimits | None = None,
                      resolver: AbstractResolver | None = None, bus: str = "memory",
                      bus_namespace: str = "feedmesh", store: str = "",
                      prepare: Callable[[EmbeddedHub], Awaitable[None]] | None = None,
                      routes: Sequence[web.RouteDef] = (),
                      ) -> AsyncIterator[tuple[EmbeddedHub, str]]:
    """A started hub with its web server listening at ``host:port`` (0: any free port), for
    tests and programs that run a hub inside; stopped cleanly on exit."""
    sock = bind(host, port)
    try:
        base = base_url or f"http://{host}:{sock.getsockname()[1]}"
        hub = embedded_hub(settings, resolver=resolver, bus=bus, bus_namespace=bus_namespace,
                           store_url=store)
    except BaseException:
        sock.close()
        raise
    if prepare is not None:
        await prepare(hub)
    await hub.start(hub.with_web(base, limits), http=sock)
    try:
        yield hub, base
    finally:
        await hub.stop()
