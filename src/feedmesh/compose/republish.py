"""The hub's republisher role (``feedmesh serve --republish DIR``; SCRIBE-RSS 4.3.2: "the hub
already crawls every feed once for everybody"): where the hub and the mesh meet, composed here
because neither package may import the other.

1. the hub joins the overlay on its own UDP endpoint (``--republish-listen``; a new ring, or
   ``--republish-bootstrap``);
2. it reads the ``articles`` stream in a group of its own, as the filters do: every entry the
   crawler committed as *new* (not an edit, not the backlog of a feed's first document) of a
   feed of the operator's own list (``--opml``; never a feed an account follows, whose URL is
   that person's) that this crawler fetches is signed with the key in DIR into the hub's log of that
   source feed, marked as a republication, and multicast to the feed's republication group
   (:meth:`~feedmesh.mesh.republish.Republisher.multicast`): no poll of its own;
3. it serves each source feed it republishes as RSS 2.0 with the ``<subscribe>`` element (its
   key, the group, its overlay address), ``/mesh/feeds/{n}``, and all of them as
   ``/mesh/opml``, each under the source feed's own title: a peer started with
   ``--opml http://HUB/mesh/opml`` bootstraps from the hub. ``n`` is the feed's place in that
   list from 1 (the operator's feeds in the order the hub took them in), which is the number the
   peer gives its local copy: the same feed has the same number at both. Until something is
   multicast a document holds the feed's newest stored entries, each marked as backlog (the
   feed's state, not news), so a peer that follows it starts full.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from urllib.parse import urlsplit

from aiohttp import web
from msgspec.structs import replace

from feedmesh.bus import Bus
from feedmesh.compose.lifecycle import HttpPart, Tasks, cancel
from feedmesh.feeds.opml import OpmlOutline, render_opml
from feedmesh.hub.deliveries import Settle
from feedmesh.hub.messages import Article
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.tiers.crawler import CrawlerTier
from feedmesh.mesh.keys import KeyFileError, KeyStore
from feedmesh.mesh.republish import RECENT, Republisher
from feedmesh.mesh.transport import UdpNode, handle_at

__all__ = ["RepublishRole", "open_republisher"]

log = logging.getLogger("feedmesh.mesh.republish")


async def open_republisher(keys_dir: str, listen: tuple[str, int],
                           bootstrap: tuple[str, int] | None) -> tuple[UdpNode, KeyStore]:
    """The overlay node and key of ``--republish``; a bad key folder or address fails here,
    before the hub starts."""
    keys = KeyStore(keys_dir)
    try:
        keys.signing_key()
    except KeyFileError as error:
        raise ValueError(f"--republish: {error}") from None
    endpoint = UdpNode(*listen)
    await endpoint.open()
    await endpoint.start(handle_at(*bootstrap) if bootstrap is not None else None)
    return endpoint, keys


class RepublishRole:
    """Multicasts what the crawler of this process finds new; serves its source feeds with their
    ``<subscribe>`` element. It reads ``articles`` in the group ``republish-<crawler>``."""

    def __init__(self, endpoint: UdpNode, keys: KeyStore, crawler: CrawlerTier, bus: Bus,
                 metrics: HubMetrics, *, group: str,
                 operator_feeds: Callable[[], Collection[int]]) -> None:
        self.endpoint = endpoint
        self.republisher = Republisher(endpoint, keys, fetcher=None, urls=())  # type: ignore[arg-type]
        self.crawler = crawler
        self.bus = bus
        self.group = group
        self.operator_feeds = operator_feeds
        self.name = "republisher"
        self.ready = asyncio.Event()
        self._settle = Settle(bus, group, metrics)
        self._loops: list[asyncio.Task] = []
        self._url_of: dict[int, str] = {}

    @property
    def bootstrap(self) -> str:
        return f"{self.endpoint.addr[0]}:{self.endpoint.addr[1]}"

    @property
    def registry(self):  # type: ignore[no-untyped-def]
        return None

    def http(self) -> HttpPart:
        return HttpPart([web.get("/mesh/opml", self._opml),
                         web.get("/mesh/feeds/{id}", self._feed)])

    async def start(self, tasks: Tasks) -> None:
        sent = self.republisher.send_outbox()
        if sent:
            log.info("outbox_sent records=%d", sent)
        joined = asyncio.Event()
        self._loops = [tasks.spawn(self.name, lambda: self._run(joined))]
        await joined.wait()  # before the crawler publishes: the bus keeps nothing for no group
        self.ready.set()

    async def _run(self, joined: asyncio.Event) -> None:
        consumer = await self.bus.consumer("articles", self.group)
        joined.set()
        async for delivery in consumer:
            message = await self._settle.decoded(delivery)
            if isinstance(message, Article):
                self.committed(message)
            await delivery.ack()

    def committed(self, article: Article) -> bool:
        """Multicast one committed entry if it is new, of the operator's list and this
        crawler's; whether it was."""
        if article.updated or article.backlog:
            return False
        if not self.crawler.crawler.owns(article.feed_id):
            return False  # another crawler's feed: its republisher multicasts it
        url = self._source(article.feed_id)
        if url is None:
            return False
        self.republisher.learn_title(url, article.feed_title)
        self.republisher.multicast(url, article.entry)
        return True

    def published(self) -> dict[str, int]:
        """The source feeds this republisher puts on the mesh, by URL: the operator's own list
        (``--opml``) only. A feed an account follows is that person's, and its URL may carry
        their password or a query token: it is never published, nor multicast, nor named as a
        group; nor is a URL of the operator's with credentials in it."""
        operator = self.operator_feeds()
        return {url: fid for url, fid in self.crawler.sources().items()
                if fid in operator and not _has_credentials(url)}

    async def stop(self) -> None:
        await cancel(self._loops)
        self.endpoint.close()

    def numbered(self) -> list[tuple[int, str]]:
        """The published feeds as (feed id, URL), in the order of ``/mesh/opml``: by the hub's
        feed id, so that a feed added later comes last and the others keep their number."""
        return sorted(((fid, url) for url, fid in self.published().items()))

    def _source(self, feed_id: int) -> str | None:
        url = self._url_of.get(feed_id)
        if url is None:
            self._url_of = {fid: source for source, fid in self.published().items()}
            url = self._url_of.get(feed_id)
        return url

    def _title(self, feed_id: int, url: str) -> str:
        """The source feed's own title (as the crawler last parsed it), else its URL."""
        meta = self.crawler.feed_meta.get(feed_id)
        if meta is not None:
            self.republisher.learn_title(url, meta.title)
        return self.republisher.title_of(url)

    # -- HTTP ------------------------------------------------------------------------------------

    def _backlog(self, feed_id: int, url: str) -> None:
        """Nothing multicast yet for ``url``: show the feed's newest stored entries, marked as
        backlog, as the stand-alone republisher shows its first poll."""
        recent = self.republisher.recent.get(url)
        if recent:
            return
        self.republisher.add(url)
        stored = self.crawler.store.entries(feed_id, limit=RECENT)
        self.republisher.recent[url].extend(replace(row.entry, backlog=True) for row in stored)

    async def _opml(self, request: web.Request) -> web.Response:
        base = f"{request.scheme}://{request.host}"
        outlines = [OpmlOutline(url=f"{base}/mesh/feeds/{n}", title=self._title(fid, url))
                    for n, (fid, url) in enumerate(self.numbered(), start=1)]
        return web.Response(body=render_opml("feeds this hub republishes", outlines),
                            content_type="text/x-opml", charset="utf-8")

    async def _feed(self, request: web.Request) -> web.Response:
        text = request.match_info["id"]
        numbered = self.numbered()
        place = int(text) if text.isdigit() and len(text) < 10 else 0
        if not 1 <= place <= len(numbered):
            raise web.HTTPNotFound(text=f"no source feed {text!r} here; see /mesh/opml\n")
        feed_id, url = numbered[place - 1]
        self._title(feed_id, url)
        self._backlog(feed_id, url)
        body = self.republisher.document_of(url, self.bootstrap, str(request.url))
        return web.Response(body=body, content_type="application/rss+xml", charset="utf-8")


def _has_credentials(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return True  # not a URL we can vouch for
    return bool(parts.username or parts.password)
