"""One peer on a person's machine: the archive, the local proxy and the exchange protocols.

Data flow, in steps:

1. the archive (:mod:`.archive`) fetches the followed feeds itself on a ``schedule/`` policy and
   keeps every entry in SQLite;
2. what a fetch found new goes to each exchange protocol (FeedEx: a bundle to the neighbours
   who follow the feed);
3. what the exchanges bring is kept in the same archive: FeedEx's bundles from neighbours, and
   SCRIBE-RSS's signed records (:mod:`.multicast`: the groups of followed feeds that advertise
   a ``<subscribe>`` element, each record verified before it is kept);
4. the local proxy (:mod:`.proxy`, loopback only) serves the archive to the person's reader.

On disk, in the data folder: ``archive.db`` (entries and fetch state), ``schedule.bin`` (what
the scheduler learned), ``neighbours.json`` (the neighbours of the last run, tried first at the
next start) and ``peer.json`` (where the local API listens, for ``feedmesh peer status``) and,
with multicast, ``pinned-keys.json`` (the feed keys trusted on first use).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from feedmesh.clock import Clock
from feedmesh.fetch import Fetcher
from feedmesh.mesh.feedex import FeedExSettings
from feedmesh.mesh.feedex.messages import Address
from feedmesh.model import Entry, FeedInfo
from feedmesh.schedule import SchedulerSettings
from feedmesh.store import IngestStore
from feedmesh.websub.discovery import parse_link_header

from .archive import Archive
from .exchange import Exchange, FeedExExchange
from .multicast import MulticastSettings, ScribeExchange
from .phasing import FetchPhaser
from .proxy import LocalProxy
from .transport import TransportSettings

__all__ = ["Peer", "PeerSettings", "fetch_headers", "load_neighbours", "publisher_peers"]

log = logging.getLogger("feedmesh.mesh.peer")

PEER_HEADER = "FeedEx-Peer"
"""Request header: this fetch comes from a FeedEx peer listening on the stated port."""
PEER_REL = "feedex-peer"
"""``Link:`` relation by which a publisher lists its recent FeedEx clients."""

FIRST_FETCH_WAIT_S = 5.0
"""How long following a feed through the local API (or starting with never-fetched feeds) waits
for its first fetch (or theirs) before answering."""

NEIGHBOURS_FILE = "neighbours.json"
PEER_FILE = "peer.json"


@dataclass(frozen=True)
class PeerSettings:
    listen: Address
    """The node's address: neighbours call it there, and know it by it."""
    data: Path
    local: Address = ("127.0.0.1", 0)
    """The local API and proxy (loopback only; port 0: any free one)."""
    tracker: Address | None = None
    feedex: FeedExSettings = field(default_factory=FeedExSettings)
    schedule: SchedulerSettings = field(
        default_factory=lambda: SchedulerSettings(policy="adaptive"))
    """Give each peer its own ``seed``: it sets the phases of the first fetches."""
    transport: TransportSettings = field(default_factory=TransportSettings)
    save_interval_s: float = 300.0
    """How often (clock seconds) the neighbour list is written to disk."""
    forward: bool = True
    """False: a free rider (takes, never forwards); for experiments only."""
    multicast: MulticastSettings | None = None
    """SCRIBE-RSS: join the overlay and the groups of followed feeds that advertise one
    (None: FeedEx only)."""


def load_neighbours(data: Path) -> list[Address]:
    """The neighbours kept by the last run (none if the file is missing or unreadable)."""
    path = data / NEIGHBOURS_FILE
    try:
        rows = json.loads(path.read_text())
        return [(str(host), int(port)) for host, port in rows]
    except (OSError, ValueError, TypeError):
        return []


def fetch_headers(listen: Address) -> tuple[tuple[str, str], ...]:
    """Headers a peer's fetcher sends (``FetchSettings.headers``): ``FeedEx-Peer: PORT`` tells a
    publisher that lists its recent clients where this peer listens (the host it sees)."""
    return ((PEER_HEADER, str(listen[1])),)


def publisher_peers(links: str, cap: int = 32) -> list[Address]:
    """The FeedEx peers a publisher listed in its ``Link:`` header (``rel="feedex-peer"``)."""
    peers: list[Address] = []
    for target, rels in parse_link_header(links):
        if PEER_REL not in rels:
            continue
        parts = urlsplit(target)
        try:
            port = parts.port
        except ValueError:
            continue
        if parts.scheme == "http" and parts.hostname and port:
            peers.append((parts.hostname, port))
        if len(peers) >= cap:
            break
    return peers


def _write_json(path: Path, value: object) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(value, indent=1))
    os.replace(temporary, path)


class Peer:
    """``await start(urls)`` follows ``urls`` (and the feeds the archive already has);
    ``await stop()``. :meth:`status`, :meth:`add_feed`, :meth:`pull` back the local API."""

    def __init__(self, settings: PeerSettings, store: IngestStore, fetcher: Fetcher,
                 clock: Clock) -> None:
        self.settings = settings
        self.clock = clock
        settings.data.mkdir(parents=True, exist_ok=True)
        self.archive = Archive(store, fetcher, clock, settings.schedule,
                               snapshot_path=settings.data / "schedule.bin",
                               on_fetched=self._fetched, on_document=self._document,
                               on_listed=self._listed, on_links=self._links)
        self.feedex = FeedExExchange(settings.listen, clock, self.archive.keep,
                                     archive=self.archive.between, tracker=settings.tracker,
                                     settings=settings.feedex, transport=settings.transport,
                                     candidates=load_neighbours(settings.data),
                                     forward=settings.forward)
        self.exchanges: list[Exchange] = [self.feedex]
        self.multicast: ScribeExchange | None = None
        if settings.multicast is not None:
            self.multicast = ScribeExchange(settings.multicast, self.archive.keep, fetcher.fetch,
                                            settings.data, stored=self.archive.info_of,
                                            on_pushed=self.archive.set_pushed,
                                            peers=lambda: list(self.feedex.node.neighbours),
                                            now=clock.now)
            self.exchanges.append(self.multicast)
        self.proxy = LocalProxy(settings.local[0], settings.local[1], self.archive, self)
        self._saver: asyncio.Task[None] | None = None
        self.phaser: FetchPhaser | None = None
        if self.feedex.node.settings.share_fetch_times:
            self.phaser = FetchPhaser(self.feedex.transport.act, self.archive.scheduled)
        self._phasing: asyncio.Task[None] | None = None

    async def start(self, urls: Iterable[str] = ()) -> None:
        await self.archive.start(urls)
        feeds = self.archive.urls()
        for exchange in self.exchanges:
            await exchange.start(feeds)
        await self.proxy.start()
        # a new peer starts full: its reader is pointed here once the feeds' first fetches
        # (the scheduler's own) are in the archive, or FIRST_FETCH_WAIT_S has passed
        await self.archive.first_fetches(FIRST_FETCH_WAIT_S)
        _write_json(self.settings.data / PEER_FILE,
                    {"local": self.proxy.url, "listen": list(self.settings.listen)})
        self._saver = asyncio.create_task(self._save_loop())
        if self.phaser is not None:
            self._phasing = asyncio.create_task(self._phase_loop())

    async def stop(self) -> None:
        for task in (self._saver, self._phasing):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self.save_neighbours()
        await self.proxy.stop()
        for exchange in self.exchanges:
            await exchange.stop()
        await self.archive.stop()

    def save_neighbours(self) -> None:
        current = [list(a) for a in self.feedex.node.neighbours]
        if current:
            _write_json(self.settings.data / NEIGHBOURS_FILE, current)

    async def _save_loop(self) -> None:
        while True:
            await self.clock.sleep(self.settings.save_interval_s)
            self.save_neighbours()

    async def _phase_loop(self) -> None:
        """The network as one monitor (:mod:`.phasing`): every half advertisement interval."""
        assert self.phaser is not None
        every = self.feedex.node.settings.advertise_interval_s / 2
        while True:
            await self.clock.sleep(every)
            feeds = [(url, feed_id) for url in self.archive.urls()
                     if (feed_id := self.archive.feed_id(url)) is not None]
            self.phaser.step(self.clock.now(), feeds)

    def _document(self, feed: str, info: FeedInfo) -> None:
        if self.multicast is not None:
            self.multicast.document(feed, info)

    def _links(self, feed: str, links: str) -> None:
        listed = publisher_peers(links)
        if listed:
            self.feedex.publisher_listed(listed)

    def _listed(self, feed: str, entries: list[Entry]) -> None:
        self.feedex.listed(feed, entries)

    def _fetched(self, feed: str, entries: list[Entry]) -> None:
        for exchange in self.exchanges:
            exchange.fetched(feed, entries)

    # -- the local API -------------------------------------------------------------------------

    async def add_feed(self, url: str) -> dict[str, object]:
        """Follow ``url``. A new follow starts full: the answer waits (at most
        ``FIRST_FETCH_WAIT_S``) for the feed's first fetch, the scheduler's urgent one (one
        conditional GET, no extra request), so the local feed already holds what the feed holds,
        each entry marked ``backlog`` (``fm:backlog``: the feed's state when followed, not
        news)."""
        feed_id, new = await self.archive.add_feed(url)
        if new:
            for exchange in self.exchanges:
                exchange.subscribe(url)
        fetched = await self.archive.first_fetch(feed_id, FIRST_FETCH_WAIT_S)
        return {"id": feed_id, "url": url, "new": new, "fetched": fetched,
                "entries": await self.archive.count(url),
                **{s: self.proxy.feed_url(feed_id, s) for s in ("rss", "atom", "json")}}

    async def pull(self, url: str, since: float | None = None,
                   until: float | None = None) -> dict[str, object]:
        """Pull old entries of ``url`` from peers (FeedEx 3.6) into the archive."""
        if self.archive.feed_id(url) is None:
            raise ValueError(f"{url} is not followed here; add it first")
        new, holder = await self.feedex.pull(url, since, until)
        return {"url": url, "new_entries": new,
                "holder": f"{holder[0]}:{holder[1]}" if holder else None}

    def status(self) -> dict[str, object]:
        """What ``feedmesh peer status`` shows."""
        received = self.archive.received
        neighbours = self.feedex.neighbours()
        for row in neighbours:
            row["kept"] = received.get(str(row["address"]), 0)
        from_peers = sum(received.values())
        return {
            "listen": f"{self.settings.listen[0]}:{self.settings.listen[1]}",
            "local": self.proxy.url,
            "feeds": len(self.archive.urls()),
            "neighbours": neighbours,
            "own_fetches": self.archive.own_fetches,
            "entries_from_peers": from_peers,
            "entries_by_source": dict(received),
            "reader_requests": self.proxy.reader_requests,
            "fetches_saved": self.proxy.reader_requests,
            "exchanges": [exchange.status() for exchange in self.exchanges],
        }
