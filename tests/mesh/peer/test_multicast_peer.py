"""A peer's multicast side in-process, against a republisher on the UDP overlay and its feed
document served over HTTP (each request counted): whose key the peer follows (first use and
pinned, or listed), that an attached group turns the archive's polling of the feed into a safety
net, and that a known feed's element is read from the archive's last document, not fetched."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from feedmesh.clock import SystemClock
from feedmesh.compose import open_archive
from feedmesh.fetch import Fetcher
from feedmesh.mesh.keys import KeyStore
from feedmesh.mesh.peer import MulticastSettings, Peer, PeerSettings, TrustSettings
from feedmesh.mesh.republish import Republisher
from feedmesh.mesh.transport import UdpNode
from feedmesh.schedule import SchedulerSettings
from tests.eventually import eventually
from tests.mesh.peer.conftest import free_port
from tests.mesh.republish.test_republish import LOOPBACK

LEGACY = "http://127.0.4.79:9/legacy.xml"      # never fetched: the republisher is not polled here
HOST = "127.0.4.70"
# first fetch within a second, then hardly again: the archive's own document of the feed
SOON = SchedulerSettings(policy="uniform", budget_per_feed_per_day=1.0, first_fetch_spread_s=1.0,
                         min_interval_s=86400.0)


class RepublisherSite:
    """A republisher's overlay node, and its feed of ``LEGACY`` with the <subscribe> element."""

    def __init__(self, endpoint: UdpNode, keys: KeyStore) -> None:
        self.endpoint = endpoint
        self.republisher = Republisher(endpoint, keys, None, [LEGACY])  # type: ignore[arg-type]
        self.requests = 0
        self.url = ""

    async def document(self, request: web.Request) -> web.Response:
        self.requests += 1
        host, port = self.endpoint.addr
        return web.Response(body=self.republisher.feed_document(0, f"{host}:{port}", self.url),
                            content_type="application/rss+xml")


@contextlib.asynccontextmanager
async def site(tmp_path: Path, name: str) -> AsyncIterator[RepublisherSite]:
    keys = KeyStore(tmp_path / name)
    keys.make(0.0)
    endpoint = UdpNode(HOST)
    await endpoint.start(None)
    served = RepublisherSite(endpoint, keys)
    app = web.Application()
    app.router.add_get("/feeds/0", served.document)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port(HOST)
    await web.TCPSite(runner, HOST, port).start()
    served.url = f"http://{HOST}:{port}/feeds/0"
    try:
        yield served
    finally:
        await runner.cleanup()
        endpoint.close()


@contextlib.asynccontextmanager
async def peer(tmp_path: Path, index: int, fetcher: Fetcher, urls: list[str],
               trust: TrustSettings | None = None) -> AsyncIterator[Peer]:
    host = f"127.0.4.{71 + index}"
    address = (host, free_port(host))
    data = tmp_path / f"peer{index}"
    data.mkdir(exist_ok=True)
    settings = PeerSettings(listen=address, data=data, local=(host, 0), schedule=SOON,
                            multicast=MulticastSettings(address=address,
                                                        trust=trust or TrustSettings()))
    store = open_archive(data / "archive.db")
    running = Peer(settings, store, fetcher, SystemClock())
    await running.start(urls)
    try:
        yield running
    finally:
        await running.stop()
        store.close()


def scribe(running: Peer) -> dict:
    return running.multicast.status()


@pytest.mark.timeout(120)
async def test_keys_pinned_at_first_use_listed_republishers_and_polling_as_a_safety_net(
        tmp_path: Path) -> None:
    async with Fetcher(LOOPBACK) as fetcher:
        async with site(tmp_path, "keys") as republisher:
            url = republisher.url
            # listed: a republisher nobody listed is not followed
            async with peer(tmp_path, 0, fetcher, [url], TrustSettings("listed")) as wary:
                await eventually(lambda: url in scribe(wary)["not_multicast"])
                assert "is not listed" in scribe(wary)["not_multicast"][url]
                assert scribe(wary)["feeds"] == []
            key = republisher.republisher.identity
            async with peer(tmp_path, 1, fetcher, [url],
                            TrustSettings("listed", frozenset({key}))) as listed:
                await eventually(lambda: [f["pushed"] for f in scribe(listed)["feeds"]] == [True])

            # first use: followed and pinned; attached, so the archive polls it as a safety net
            async with peer(tmp_path, 2, fetcher, [url]) as trusting:
                await eventually(lambda: [f["pushed"] for f in scribe(trusting)["feeds"]] ==
                                 [True], timeout=20)
                feed_id = trusting.archive.feed_id(url)
                assert trusting.archive.scheduled.live == {feed_id}
                assert json.loads((tmp_path / "peer2" / "pinned-keys.json").read_text()) == \
                    {url: key}
                # the archive's own first fetch stores the document, element included
                await eventually(lambda: trusting.archive.own_fetches >= 1, timeout=20)
            requests = republisher.requests
            # a restart reads the element from the archive: no request for it
            async with peer(tmp_path, 2, fetcher, []) as again:
                await eventually(lambda: [f["pushed"] for f in scribe(again)["feeds"]] == [True],
                                 timeout=20)
                assert republisher.requests == requests
        # the same URL now names another key: refused (pinned), not followed
        async with site(tmp_path, "other-keys") as impostor:
            async with peer(tmp_path, 3, fetcher, [impostor.url]) as fresh:
                await eventually(lambda: len(scribe(fresh)["feeds"]) == 1)
            pins = tmp_path / "peer3" / "pinned-keys.json"
            pins.write_text(json.dumps({impostor.url: key}))       # pinned earlier: the old key
            async with peer(tmp_path, 3, fetcher, []) as pinned:
                await eventually(lambda: impostor.url in scribe(pinned)["not_multicast"])
                assert "pinned at first use" in scribe(pinned)["not_multicast"][impostor.url]
                assert scribe(pinned)["feeds"] == []
