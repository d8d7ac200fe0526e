"""The reflector role (Cobra section 3.3) and its delivery worker: where a reflector meets push.

:func:`reflectors_with_push` is the one place reflectors are made and paired with the push
worker beside them, for the embedded hub (every reflector in one process) and for a reflector in
a process of its own (``feedmesh reflector``, :func:`reflector_process`): each stored batch of
matches is told to push (:meth:`~feedmesh.hub.push.PushService.matched`), and push renders what
it sends from the same reflectors' held entries (:class:`ReflectorFeeds`), as a reader polling
the topic would be served.

A reflector joins ``control`` before it reads the subscriptions (so no change is missed), then
restores its held entries and its feeds' versions from the checkpoint and the log; in a process
of its own it answers its internal API (:mod:`feedmesh.hub.tiers.reflector_service`) with 503
until then. Stopping: the deliveries in hand are finished or handed back, a checkpoint is
written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import msgspec
from aiohttp.abc import AbstractResolver

from feedmesh.bus import Bus
from feedmesh.clock import Clock, SystemClock
from feedmesh.compose.engines import (
    existing_hub_state,
    feed_url_tokens,
    open_bus,
    open_reflector_log,
)
from feedmesh.compose.lifecycle import HttpPart, Tasks, cancel, ended
from feedmesh.compose.settings import ReflectorRoleSettings
from feedmesh.fetch import FetchSettings
from feedmesh.hub.front.feed_document import (
    RenderedItems,
    link_header,
    prev_archive_url,
    render_private_feed,
)
from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.push import PushService, PushSettings
from feedmesh.hub.push.messages import RenderedDocuments
from feedmesh.hub.tiers.reflector import Reflector, ReflectorSettings
from feedmesh.hub.tiers.reflector_service import (
    MAX_BODY_REQUEST,
    reflector_routes,
    token_required,
)
from feedmesh.match import SubscriptionIndex
from feedmesh.secret_file import read_token
from feedmesh.store import HubState, ReflectedItem, ReflectorLog, Subscription

__all__ = ["PushRole", "ReflectorFeeds", "ReflectorRole", "push_worker", "reflector_process",
           "reflectors_with_push"]


class ReflectorFeeds:
    """The private feeds of this process's reflectors, as push renders and resends them
    (:class:`~feedmesh.hub.push.PrivateFeeds`). ``serving(sub_id)`` finds the reflector that
    holds a feed here (None: not here). A document is rendered once per version for every
    subscriber of the topic."""

    def __init__(self, serving: Callable[[int], Reflector | None],
                 tokens: FeedTokens | None = None) -> None:
        self.serving = serving
        self.tokens = tokens
        """Signs the archive key of each document's ``prev-archive`` (the same link as the
        topic's; none without)."""
        self._documents = RenderedDocuments()
        self._items = RenderedItems(16 * 1024 * 1024)

    async def document(self, sub_id: int, sub: Subscription | None, fmt: str, topic: str,
                       known: Mapping[int, ReflectedItem]) -> tuple[bytes, str]:
        reflector = self.serving(sub_id)
        version = reflector.version(sub_id)[0] if reflector is not None else -1
        base = topic.rsplit("/f/", 1)[0]
        key = (sub_id, fmt, version, topic)
        body = self._documents.get(key)
        if body is None:
            items = await reflector.items(sub_id, known) if reflector is not None else []
            sign = self.tokens.sign if self.tokens is not None else None
            body = render_private_feed(sub, items, fmt, base_url=base, self_url=topic,
                                       cache=self._items,
                                       prev_archive=prev_archive_url(sign, sub, items, topic))
            self._documents.put(key, body)
        return body, link_header(base, topic)

    async def held(self, sub_id: int,
                   known: Mapping[int, ReflectedItem]) -> list[ReflectedItem]:
        reflector = self.serving(sub_id)
        return await reflector.items(sub_id, known) if reflector is not None else []


def push_worker(state: HubState, settings: PushSettings, guard: FetchSettings, clock: Clock,
                metrics: HubMetrics, *, feeds: ReflectorFeeds | None = None,
                resolver: AbstractResolver | None = None,
                tokens: FeedTokens | None = None) -> PushService:
    """The one place push is made: delivering the matches of the reflectors beside it
    (``feeds``), or, without them (a web process, a crawling hub whose reflectors run
    elsewhere), taking requests and saving targets, read again every ``sync_interval_s``."""
    return PushService(state, settings, guard, clock, metrics, feeds=feeds, resolver=resolver,
                       tokens=tokens)


def reflectors_with_push(logs: Sequence[ReflectorLog], *, bus: Bus, clock: Clock,
                         metrics: HubMetrics, settings: ReflectorSettings, delivery: str,
                         state: HubState, push: PushSettings, guard: FetchSettings,
                         tokens: FeedTokens | None, owner: Callable[[int], int],
                         resolver: AbstractResolver | None = None,
                         numbers: Sequence[int] | None = None,
                         ) -> tuple[list[Reflector], PushService]:
    """Reflectors on ``logs`` (numbered ``numbers``, else 0, 1, ...) and the push worker that
    delivers their matches. ``owner(sub_id)``: the index in the list of the reflector that
    holds it (-1: none here)."""
    reflectors: list[Reflector] = []

    def serving(sub_id: int) -> Reflector | None:
        at = owner(sub_id)
        if not 0 <= at < len(reflectors):
            return None
        reflector = reflectors[at]
        return reflector if reflector.holds(sub_id) else None

    worker = push_worker(state, push, guard, clock, metrics, feeds=ReflectorFeeds(serving, tokens),
                         resolver=resolver, tokens=tokens)
    for at, log in enumerate(logs):
        number = numbers[at] if numbers is not None else at
        reflectors.append(Reflector(
            number, log, bus, clock, metrics, settings, events=worker,
            index=SubscriptionIndex() if delivery == "article" else None))
    metrics.reflector_memory.set_function(lambda: sum(r.memory_bytes() for r in reflectors))
    return reflectors, worker


class ReflectorRole:
    """One reflector: its subscriptions loaded (``columns``: as the embedded hub reads them once
    for every tier, else read here), its loops, and, in a process of its own, its API."""

    def __init__(self, reflector: Reflector, *, state: HubState, metrics: HubMetrics,
                 columns: Callable[[], dict] | None = None, api: bool = False,
                 token: bytes | None = None, own_bus: bool = False,
                 count_subscriptions: bool = False) -> None:
        self.reflector = reflector
        self.name = f"reflector {reflector.number}"
        self.ready = asyncio.Event()
        self.metrics = metrics
        self._state = state
        self._columns = columns
        self._api = api
        self._token = token
        self._count = count_subscriptions
        self._own_bus = own_bus
        self._loops: list[asyncio.Task] = []
        self.held = 0

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return self.metrics.registry

    def http(self) -> HttpPart:
        if not self._api:
            return HttpPart()
        # The token guards the whole process's HTTP, its /metrics too.
        return HttpPart(reflector_routes(self.reflector, self.metrics),
                        middlewares=[token_required(self._token)] if self._token else [],
                        max_body_bytes=MAX_BODY_REQUEST)

    async def start(self, tasks: Tasks) -> None:
        reflector = self.reflector
        await reflector.join_control()  # before reading: no change falls between
        columns = await asyncio.to_thread(self._columns or self._state.subscription_columns)
        queries = None
        if reflector.index is not None:
            queries = await asyncio.to_thread(lambda: list(self._state.queries()))
        self.held = await asyncio.to_thread(reflector.load, columns, queries or ())
        del columns, queries
        if self._count:
            self.metrics.subscriptions.set(self.held)
        name = f"reflector-{reflector.number}"
        self._loops = [tasks.spawn(f"{name}.control", reflector.run_control),
                       tasks.spawn(name, reflector.run)]
        await reflector.stream_joined.wait()
        self.ready.set()

    async def stop(self) -> None:
        """Its loops end (what they held goes to its next start), then a checkpoint.
        ``own_bus`` (a process of its own): closing the bus ends the loops."""
        if self._own_bus:
            await self.reflector.bus.close()
            await ended(self._loops)
        else:
            await cancel(self._loops)
        await self.reflector.close_async()


class PushRole:
    """The delivery worker beside the reflectors (or, in a web process, the one that only takes
    requests and saves targets, read again every ``sync_interval_s``)."""

    def __init__(self, worker: PushService, on_stop: Sequence[Callable[[], object]] = ()) -> None:
        self.worker = worker
        self.name = "push worker"
        self.ready = asyncio.Event()
        self.targets = 0
        self._on_stop = on_stop
        self._loops: list[asyncio.Task] = []

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return None  # its figures are in the registry of the tiers it serves

    def http(self) -> HttpPart:
        return HttpPart()

    async def start(self, tasks: Tasks) -> None:
        self.targets = await self.worker.load()
        worker = self.worker
        self._loops = [tasks.spawn("push", lambda: worker.run(tasks.stop))]
        self.ready.set()

    async def stop(self) -> None:
        await cancel(self._loops)
        await self.worker.close()  # the delivery logs and marks are written
        for close in self._on_stop:
            close()


def reflector_process(settings: ReflectorRoleSettings) -> tuple[list, list[Callable]]:
    """``feedmesh reflector``: the reflector and its delivery worker, and what the process
    closes after them."""
    number, _count = settings.shard
    data = Path(settings.data_dir)
    if not settings.store:
        data.mkdir(mode=0o700, parents=True, exist_ok=True)
    state, _ = existing_hub_state(settings.state)
    push_state, _ = existing_hub_state(settings.state)  # push's reads and writes, its own
    metrics = HubMetrics()
    bus = open_bus(settings.bus.url, namespace=settings.bus.namespace,
                   credentials=settings.bus.credentials)
    metrics.watch_queues(bus.depths)
    log = open_reflector_log(settings.store or data / f"reflector-{number}.db", number)
    worker_settings = settings.push
    if not worker_settings.sync_interval_s:  # web processes save the targets: read them again
        worker_settings = msgspec.structs.replace(worker_settings, sync_interval_s=1.0)
    (reflector,), worker = reflectors_with_push(
        [log], bus=bus, clock=SystemClock(), metrics=metrics, settings=settings.reflector,
        delivery=settings.delivery, state=push_state, push=worker_settings,
        guard=settings.guard, tokens=feed_url_tokens(push_state, settings.state),
        owner=lambda sub_id: 0, numbers=[number])
    token = (read_token(Path(settings.token_file), "reflector token")
             if settings.token_file else None)
    role = ReflectorRole(reflector, state=state, metrics=metrics, api=True, token=token,
                         own_bus=True, count_subscriptions=True)
    return [role, PushRole(worker, on_stop=[push_state.close])], [bus.close, state.close]
