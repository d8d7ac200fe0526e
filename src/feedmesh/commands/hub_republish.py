"""``feedmesh serve --republish DIR``: the hub's crawler is the republisher's poller (issue 14,
section 4; SCRIBE-RSS 4.3.2: "the hub already crawls every feed once for everybody").

Where the hub and the mesh meet, composed here because neither package may import the other:

1. the hub joins the overlay on its own UDP endpoint (``--republish-listen``; a new ring, or
   ``--republish-bootstrap``);
2. every entry the crawler commits as *new* (not an edit, not the backlog of a feed's first
   document) is signed with the key in DIR into the hub's log of that source feed, marked as a
   republication, and multicast to the feed's republication group
   (:meth:`~feedmesh.mesh.republish.Republisher.multicast`): no poll of its own;
3. the hub's web server serves each source feed it crawls as RSS 2.0 with the ``<subscribe>``
   element (its key, the group, its overlay address), ``/mesh/feeds/{id}``, and all of them as
   ``/mesh/opml``: a peer started with ``--opml http://HUB/mesh/opml`` bootstraps from the hub.
"""

from __future__ import annotations

import logging

from aiohttp import web

from feedmesh.feeds.opml import OpmlOutline, render_opml
from feedmesh.hub.crawler_tier import CrawlerTier
from feedmesh.mesh.keys import KeyStore
from feedmesh.mesh.republish import Republisher
from feedmesh.mesh.transport import UdpNode
from feedmesh.store import IngestedEntry

__all__ = ["HubRepublisher"]

log = logging.getLogger("feedmesh.mesh.republish")


class HubRepublisher:
    """Multicasts what the hub's crawler finds new; serves the hub's source feeds with their
    ``<subscribe>`` element. ``attach(tier)`` once the hub has started."""

    def __init__(self, endpoint: UdpNode, keys: KeyStore) -> None:
        self.endpoint = endpoint
        self.republisher = Republisher(endpoint, keys, fetcher=None, urls=())  # type: ignore[arg-type]
        self.tier: CrawlerTier | None = None
        self._url_of: dict[int, str] = {}

    @property
    def bootstrap(self) -> str:
        return f"{self.endpoint.addr[0]}:{self.endpoint.addr[1]}"

    def attach(self, tier: CrawlerTier) -> None:
        """Tap the crawler's commits: the hub's own consumer (the filters) still gets them
        first, and a commit waits for it as before."""
        self.tier = tier
        downstream = tier.crawler.on_ingested

        async def on_ingested(ingested: list[IngestedEntry]) -> None:
            if downstream is not None:
                await downstream(ingested)
            self.committed(ingested)
        tier.crawler.on_ingested = on_ingested
        sent = self.republisher.send_outbox()
        if sent:
            log.info("outbox_sent records=%d", sent)

    def committed(self, ingested: list[IngestedEntry]) -> int:
        """Multicast the new entries of one commit; returns how many."""
        sent = 0
        for item in ingested:
            if item.updated or item.backlog:
                continue
            url = self._source(item.feed_id)
            if url is None:
                continue
            self.republisher.multicast(url, item.entry)
            sent += 1
        return sent

    def _source(self, feed_id: int) -> str | None:
        url = self._url_of.get(feed_id)
        if url is None and self.tier is not None:
            self._url_of = {fid: source for source, fid in self.tier.sources().items()}
            url = self._url_of.get(feed_id)
        return url

    # -- HTTP ------------------------------------------------------------------------------------

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/mesh/opml", self._opml), web.get("/mesh/feeds/{id}", self._feed)]

    async def _opml(self, request: web.Request) -> web.Response:
        base = f"{request.scheme}://{request.host}"
        sources = self.tier.sources() if self.tier is not None else {}
        outlines = [OpmlOutline(url=f"{base}/mesh/feeds/{fid}", title=f"{url} (republished)")
                    for url, fid in sorted(sources.items(), key=lambda item: item[1])]
        return web.Response(body=render_opml("feeds this hub republishes", outlines),
                            content_type="text/x-opml", charset="utf-8")

    async def _feed(self, request: web.Request) -> web.Response:
        text = request.match_info["id"]
        url = self._source(int(text)) if text.isdigit() else None
        if url is None:
            raise web.HTTPNotFound(text=f"no source feed {text!r} here; see /mesh/opml\n")
        body = self.republisher.document_of(url, self.bootstrap, str(request.url))
        return web.Response(body=body, content_type="application/rss+xml", charset="utf-8")
