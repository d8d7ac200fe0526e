"""The mesh's roles: a person's peer (``feedmesh peer``), the tracker peers meet at (``feedmesh
tracker``) and the stand-alone republisher (``feedmesh republish``), each run by
:func:`~feedmesh.compose.lifecycle.run_roles` like the hub's roles.

* **peer**: fetches the person's feeds itself on a ``schedule/`` policy, exchanges new entries
  with neighbours (FeedEx), joins the signed multicast of the feeds that advertise a
  ``<subscribe>`` element (SCRIBE-RSS), archives everything and serves it to the reader on
  loopback (:class:`feedmesh.mesh.peer.Peer`);
* **tracker**: the list server FeedEx peers find each other through (3.1);
* **republisher**: polls legacy feeds and multicasts what is new, signed, on the overlay; with an
  HTTP address, serves them with their ``<subscribe>`` element (``/feeds/N``, N from 1, and
  ``/opml``, each feed under its own title).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Sequence
from pathlib import Path

import msgspec
from aiohttp import web

from feedmesh.clock import SystemClock
from feedmesh.compose.engines import open_archive
from feedmesh.compose.lifecycle import HttpPart, Tasks, cancel
from feedmesh.feeds.opml import OpmlOutline, render_opml
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.mesh.feedex import FeedExSettings, Tracker
from feedmesh.mesh.keys import KeyFileError, KeyStore
from feedmesh.mesh.peer import Peer, PeerSettings, TrackerServer, check_loopback
from feedmesh.mesh.peer.daemon import PEER_FILE, fetch_headers
from feedmesh.mesh.peer.multicast import MulticastSettings
from feedmesh.mesh.peer.trust import TRUST_POLICIES, TrustSettings
from feedmesh.mesh.republish import Republisher
from feedmesh.mesh.transport import UdpNode, handle_at
from feedmesh.schedule import SchedulerSettings

__all__ = ["PEER_FILE", "TRUST_POLICIES", "PeerRole", "RepublisherRole", "TrackerRole",
           "open_republisher",
           "peer_settings", "republisher_outlines"]

log = logging.getLogger("feedmesh.mesh.republish")

Address = tuple[str, int]


def peer_settings(*, listen: Address, local: Address, tracker: Address | None, data: str,
                  policy: str, budget: float, scribe: Address | None,
                  scribe_bootstrap: Sequence[Address], trust: str,
                  trust_keys: Sequence[str]) -> PeerSettings:
    """A peer's settings; ValueError saying which flag is wrong. ``scribe`` None: FeedEx only."""
    if listen[1] == 0 or listen[0] in ("0.0.0.0", "::"):  # noqa: S104 - refused, not bound
        raise ValueError("--listen needs the address and port neighbours reach this node at "
                         "(it is the node's identity), not a wildcard or port 0")
    check_loopback(local[0])
    # the scheduler's seed sets the phases of the first fetches: one per node, or every peer
    # started with the same list would fetch each feed at the same moments
    seed = zlib.crc32(f"{listen[0]}:{listen[1]}".encode())
    schedule = SchedulerSettings(policy=policy, budget_per_feed_per_day=budget, seed=seed)
    multicast = None
    if scribe is not None:
        if trust_keys and trust != "listed":
            raise ValueError("--trust-key is for --trust listed (first-use pins keys by itself)")
        multicast = MulticastSettings(address=scribe, bootstrap=tuple(scribe_bootstrap),
                                      trust=TrustSettings(trust, frozenset(trust_keys)))
    return PeerSettings(listen=listen, local=local, tracker=tracker, data=Path(data),
                        feedex=FeedExSettings(), schedule=schedule, multicast=multicast)


class PeerRole:
    """One person's peer (see the module): ``urls`` added to what its archive follows."""

    def __init__(self, settings: PeerSettings, fetch: FetchSettings, urls: Sequence[str], *,
                 tell_publishers: bool = False) -> None:
        self.settings = settings
        self.name = "peer"
        self.ready = asyncio.Event()
        self.urls = list(urls)
        if tell_publishers:
            fetch = msgspec.structs.replace(fetch,
                                            headers=fetch.headers + fetch_headers(settings.listen))
        self._fetch = fetch
        self.peer: Peer | None = None
        self.feeds = 0

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return None

    def http(self) -> HttpPart:
        return HttpPart()  # the peer serves its reader on its own loopback proxy

    async def start(self, tasks: Tasks) -> None:
        self.settings.data.mkdir(parents=True, exist_ok=True)
        clock = SystemClock()
        self._store = open_archive(self.settings.data / "archive.db")
        self._fetcher = Fetcher(self._fetch, clock=clock)
        self.peer = Peer(self.settings, self._store, self._fetcher, clock)
        await self.peer.start(self.urls)
        self.feeds = len(self.peer.archive.urls())
        self.ready.set()

    async def stop(self) -> None:
        try:
            if self.peer is not None:
                await self.peer.stop()
        finally:
            await self._fetcher.close()
            self._store.close()


class TrackerRole:
    """The tracker at ``host:port``: it learns the address of every node that calls it, and
    nothing else; a node not heard from for ``ttl_s`` is no longer listed."""

    def __init__(self, host: str, port: int, ttl_s: float) -> None:
        if ttl_s <= 0:
            raise ValueError(f"--ttl must be > 0, got {ttl_s}")
        self.server = TrackerServer(host, port, SystemClock(), tracker=Tracker(ttl_s=ttl_s))
        self.name = "tracker"
        self.ready = asyncio.Event()

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return None

    def http(self) -> HttpPart:
        return HttpPart()  # its own server: the peers' calls

    async def start(self, tasks: Tasks) -> None:
        await self.server.start()
        self.ready.set()

    async def stop(self) -> None:
        await self.server.stop()


async def open_republisher(keys_dir: str, listen: Address,
                           bootstrap: Address | None) -> tuple[UdpNode, KeyStore]:
    """A republisher's overlay node and key; a missing, corrupt or too-open key fails here,
    before anything starts (ValueError saying so)."""
    keys = KeyStore(keys_dir)
    try:
        keys.signing_key()
    except KeyFileError as error:
        raise ValueError(f"--republish: {error}") from None
    endpoint = UdpNode(*listen)
    await endpoint.open()
    await endpoint.start(handle_at(*bootstrap) if bootstrap is not None else None)
    return endpoint, keys


def republisher_outlines(republisher: Republisher, base: str) -> list[OpmlOutline]:
    """The republished feeds as an OPML list, each under its own title: ``/feeds/N``, N the
    list's order from 1, as a peer started with this list numbers its local feeds (the same
    feed has the same number at both)."""
    return [OpmlOutline(url=f"{base}/feeds/{i}", title=republisher.title_of(url))
            for i, url in enumerate(republisher.urls, start=1)]


class RepublisherRole:
    """``feedmesh republish``: polls ``urls`` every ``interval_s`` and multicasts what is new;
    ``base``: where its HTTP routes are reached (empty: none served)."""

    def __init__(self, endpoint: UdpNode, keys: KeyStore, fetch: FetchSettings,
                 urls: Sequence[str], *, interval_s: float, base: str = "") -> None:
        self.endpoint = endpoint
        self.keys = keys
        self.name = "republisher"
        self.ready = asyncio.Event()
        self.base = base
        self._fetcher = Fetcher(fetch)
        self.republisher = Republisher(endpoint, keys, self._fetcher, urls)
        self._interval_s = interval_s
        self._loops: list[asyncio.Task] = []

    @property
    def bootstrap(self) -> str:
        return f"{self.endpoint.addr[0]}:{self.endpoint.addr[1]}"

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return None

    def http(self) -> HttpPart:
        if not self.base:
            return HttpPart()
        return HttpPart([web.get("/feeds/{index}", self._feed), web.get("/opml", self._opml)])

    async def start(self, tasks: Tasks) -> None:
        sent = self.republisher.send_outbox()
        if sent:
            log.info("outbox_sent records=%d", sent)
        # one poll before "ready": the feeds served hold what the legacy feeds hold (marked
        # backlog) from the start, so a peer that follows one at once starts full
        await self.republisher.poll_once()
        self._loops = [tasks.spawn(self.name, lambda: self.republisher.run(
            self._interval_s, tasks.stop, poll_first=False))]
        self.ready.set()

    async def stop(self) -> None:
        await cancel(self._loops)
        await self._fetcher.close()
        self.endpoint.close()

    async def _feed(self, request: web.Request) -> web.Response:
        try:
            number = int(request.match_info["index"])
            index = number - 1   # numbered from 1, as a peer numbers its feeds
            if index < 0:
                raise IndexError(number)
            self.republisher.urls[index]
        except (ValueError, IndexError):
            raise web.HTTPNotFound(text=f"no feed {request.match_info['index']!r}; "
                                   "see /opml\n") from None
        body = self.republisher.feed_document(index, self.bootstrap,
                                              f"{self.base}/feeds/{number}")
        return web.Response(body=body, content_type="application/rss+xml", charset="utf-8")

    async def _opml(self, request: web.Request) -> web.Response:
        outlines = republisher_outlines(self.republisher, self.base)
        return web.Response(body=render_opml("republished feeds", outlines),
                            content_type="text/x-opml", charset="utf-8")


