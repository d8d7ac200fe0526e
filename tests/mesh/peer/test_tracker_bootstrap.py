"""A peer learns where to join the overlay from the FeedEx tracker (issue 14): the feed it follows
names no bootstrap node and no ``--scribe-bootstrap`` is given, yet it joins through a peer the
tracker told it of and gets the republisher's records. Real sockets: the tracker on HTTP, the
peers' FeedEx APIs, their UDP overlay nodes, the republisher's node and its feed document.
Also on the peer: a feed followed after its key rotated is followed under the current key, from
the signed rotation its element carries."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from feedmesh.clock import SystemClock
from feedmesh.compose import open_archive
from feedmesh.feeds.render import render_feed
from feedmesh.fetch import Fetcher
from feedmesh.mesh.peer import MulticastSettings, Peer, PeerSettings
from feedmesh.mesh.peer.tracker import TrackerServer
from feedmesh.model import Entry, FeedInfo, MeshSubscribe
from tests.eventually import eventually
from tests.mesh.peer.conftest import free_port
from tests.mesh.peer.test_multicast_peer import LEGACY, SOON, site
from tests.mesh.republish.test_republish import LOOPBACK


@contextlib.asynccontextmanager
async def peer(tmp_path: Path, host: str, fetcher: Fetcher, urls: list[str],
               tracker: tuple[str, int]) -> AsyncIterator[Peer]:
    address = (host, free_port(host))
    data = tmp_path / host
    data.mkdir(exist_ok=True)
    settings = PeerSettings(listen=address, data=data, local=(host, 0), schedule=SOON,
                            tracker=tracker, multicast=MulticastSettings(address=address))
    store = open_archive(data / "archive.db")
    running = Peer(settings, store, fetcher, SystemClock())
    await running.start(urls)
    try:
        yield running
    finally:
        await running.stop()
        store.close()


@pytest.mark.timeout(120)
async def test_a_peer_joins_the_overlay_through_a_peer_the_tracker_named(tmp_path: Path) -> None:
    tracker = TrackerServer("127.0.4.77", 0, SystemClock())
    await tracker.start()
    bare = web.Application()
    async with Fetcher(LOOPBACK) as fetcher, site(tmp_path, "keys") as republisher:
        identity = republisher.republisher.identity

        async def without_bootstrap(request: web.Request) -> web.Response:
            info = FeedInfo(title="republished", link=LEGACY, subscribe=MeshSubscribe(
                group=LEGACY, public_key=identity, republication=True))
            return web.Response(body=render_feed(info, [], "rss2.0"),
                                content_type="application/rss+xml")

        bare.router.add_get("/feed.xml", without_bootstrap)
        runner = web.AppRunner(bare, access_log=None)
        await runner.setup()
        port = free_port("127.0.4.78")
        await web.TCPSite(runner, "127.0.4.78", port).start()
        bare_url = f"http://127.0.4.78:{port}/feed.xml"
        try:
            # the first peer joins through the republisher its feed's element names
            async with peer(tmp_path, "127.0.4.75", fetcher, [republisher.url],
                            tracker.address) as first:
                await eventually(lambda: [f["pushed"] for f in first.multicast.status()["feeds"]]
                                 == [True], timeout=30)
                assert first.multicast.status()["bootstrap_from"] == "element"
                # the second follows a document that names no bootstrap node
                async with peer(tmp_path, "127.0.4.76", fetcher, [bare_url],
                                tracker.address) as second:
                    await eventually(lambda: [f["pushed"] for f in
                                              second.multicast.status()["feeds"]] == [True],
                                     timeout=30, what="attached through the tracker's peer")
                    status = second.multicast.status()
                    assert status["bootstrap_from"] == "tracker"
                    assert status["bootstrap"] == "{}:{}".format(*first.settings.listen)
                    republisher.republisher.multicast(LEGACY, Entry(
                        key="k1", guid="urn:k1", title="over the mesh", link=LEGACY + "#1"))
                    await eventually(lambda: second.archive.received.get(
                        "scribe:republisher", 0) == 1, timeout=20)
        finally:
            await runner.cleanup()
            await tracker.stop()


@pytest.mark.timeout(120)
async def test_a_peer_that_follows_after_a_rotation_accepts_the_current_key(tmp_path: Path):
    # the republisher rotated its key before the peer ever saw its feed: the element names the
    # identity key and carries the signed rotation, the records are signed by the new key
    tracker = TrackerServer("127.0.4.77", 0, SystemClock())
    await tracker.start()
    try:
        async with Fetcher(LOOPBACK) as fetcher, site(tmp_path, "keys") as republisher:
            keys = republisher.republisher.keys
            keys.rotate(1.0)
            current = keys.keyring()["current"]
            assert current != republisher.republisher.identity
            async with peer(tmp_path, "127.0.4.75", fetcher, [republisher.url],
                            tracker.address) as running:
                await eventually(lambda: [f["pushed"] for f in
                                          running.multicast.status()["feeds"]] == [True],
                                 timeout=30)
                state = running.multicast.followed[republisher.url]
                log = running.multicast.endpoint.node.groups[state.group].log
                assert log.key == republisher.republisher.identity      # not yet moved
                # the archive's own first fetch of the document is done before the record is
                # sent (had it listed the entry first, the record would bring nothing new)
                await eventually(lambda: running.archive.own_fetches >= 1, timeout=20)
                republisher.republisher.multicast(LEGACY, Entry(
                    key="k1", guid="urn:k1", title="signed by the new key", link=LEGACY + "#1"))
                await eventually(lambda: running.archive.received.get(
                    "scribe:republisher", 0) == 1, timeout=20)
                assert log.key == current and not log.refused
    finally:
        await tracker.stop()


@pytest.mark.timeout(120)
async def test_a_bootstrap_that_never_answers_gives_way_to_the_next(tmp_path: Path) -> None:
    # --scribe-bootstrap names a node nobody runs (a silent UDP port): after join_timeout_s the
    # join goes through the next candidate, the bootstrap node the feed's element names
    async with Fetcher(LOOPBACK) as fetcher, site(tmp_path, "keys") as republisher:
        dead = ("127.0.4.74", free_port("127.0.4.74"))
        host = "127.0.4.73"
        address = (host, free_port(host))
        data = tmp_path / "peer"
        data.mkdir()
        settings = PeerSettings(listen=address, data=data, local=(host, 0), schedule=SOON,
                                multicast=MulticastSettings(address=address, bootstrap=(dead,),
                                                            join_timeout_s=1.0))
        store = open_archive(data / "archive.db")
        running = Peer(settings, store, fetcher, SystemClock())
        await running.start([republisher.url])
        try:
            await eventually(lambda: running.multicast.status()["joined"], timeout=30,
                             what="joined through the element's node")
            status = running.multicast.status()
            assert status["bootstrap_from"] == "element"
            assert status["bootstrap"] == "{}:{}".format(*republisher.endpoint.addr)
            assert status["counters"]["bootstrap-changed"] >= 1
            republisher.republisher.multicast(LEGACY, Entry(
                key="k1", guid="urn:k1", title="over the mesh", link=LEGACY + "#1"))

            def came_over_the_mesh() -> bool:
                # live, or recovered from the tree (the first datagrams to a new child wait for
                # its address to be validated; the archive may list the entry from its HTTP
                # fallback first, so its own counter is not the witness)
                (feed,) = running.multicast.status()["feeds"]
                return feed["seq"] == 1 and sum(feed["received"].values()) >= 1

            await eventually(came_over_the_mesh, timeout=20, what="the record over the tree")
            await eventually(lambda: "urn:k1" in {e.entry.guid for e in store.recent_entries(10)},
                             timeout=20, what="the entry in the archive")
        finally:
            await running.stop()
            store.close()
