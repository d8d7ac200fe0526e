"""A gap no parent can fill is taken from the publisher's HTTP feed (a real server on loopback,
fetched with feedmesh's fetcher), and the signed chain resumes after it. Bootstrapping from a
feed whose ``<publicKey>`` is a URI plus fingerprint."""

from __future__ import annotations

import base64
import hashlib

import pytest
from aiohttp import web
from nacl.signing import SigningKey

from feedmesh.feeds.render import render_feed
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.mesh.keys import KeyStore
from feedmesh.mesh.overlay import group_id
from feedmesh.mesh.records import FeedWriter
from feedmesh.mesh.transport.subscriber import NotMulticast, Subscriber, discover
from feedmesh.model import Entry, FeedInfo, MeshSubscribe
from tests.eventually import eventually
from tests.mesh.transport.conftest import subscribed, udp_ring


async def test_a_gap_missing_from_every_buffer_comes_from_the_http_feed() -> None:
    entries = [Entry(key=f"k{n}", guid=f"urn:e{n}", title=f"entry {n}",
                     link=f"http://127.0.4.100/{n}") for n in (1, 2, 3)]
    app = web.Application()
    served: list[int] = []

    async def feed(request: web.Request) -> web.Response:
        served.append(1)
        body = render_feed(FeedInfo(title="pub", link="http://127.0.4.100/"), entries[::-1],
                           "rss2.0")
        return web.Response(body=body, content_type="application/rss+xml")

    app.router.add_get("/feed.xml", feed)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.4.100", 0)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://127.0.4.100:{port}/feed.xml"
    try:
        async with udp_ring(5) as nodes, \
                Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",))) as fetcher:
            writer = FeedWriter(SigningKey.generate(), url)
            readers = [Subscriber(n, fetcher.fetch, http_after=1.0) for n in nodes[1:]]
            for reader in readers:
                reader.subscribe(url, writer.feed)
                reader.start()
            await subscribed(nodes[1:], group_id(url))
            records = [writer.append({"key": e.key, "guid": e.guid, "title": e.title,
                                      "link": e.link}) for e in entries]
            nodes[0].publish(url, 1, records[0])
            nodes[0].publish(url, 3, records[2])          # record 2 is lost before the root

            def whole(reader: Subscriber) -> bool:
                return sorted(r.entry["title"] for r in reader.received) == \
                    ["entry 1", "entry 2", "entry 3"]
            await eventually(lambda: all(whole(r) for r in readers), timeout=20)
            for reader in readers:
                via = {r.entry["title"]: r.via for r in reader.received}
                assert via == {"entry 1": "tree", "entry 2": "http", "entry 3": "recovered"}
                assert reader.counters["skipped-seqs"] == 1 and reader.counters["http-fetches"] >= 1
                node = reader.endpoint.node
                if node.groups[group_id(url)].parent is not None:       # the root has none
                    # the parent was asked first
                    assert node.counters["recover-asked"] >= 1
            assert served
            # the chain goes on from record 3: record 4 arrives down the tree as usual
            nodes[0].publish(url, 4, writer.append({"key": "k4", "title": "entry 4"}))
            await eventually(lambda: all(r.received[-1].entry["title"] == "entry 4"
                                         and r.received[-1].via == "tree" for r in readers))
            for reader in readers:
                await reader.stop()
    finally:
        await runner.cleanup()


async def test_discover_fetches_a_key_named_by_uri_and_checks_its_fingerprint() -> None:
    key = SigningKey.generate().verify_key
    text = base64.b64encode(bytes(key)).decode()
    good = "sha256:" + hashlib.sha256(bytes(key)).hexdigest()
    app = web.Application()
    base = ""

    async def feed(request: web.Request) -> web.Response:
        fingerprint = good if request.match_info["which"] == "good" else "sha256:" + "0" * 64
        info = FeedInfo(title="pub", self_link=f"{base}/feed/good",
                        subscribe=MeshSubscribe(key_url=f"{base}/key", fingerprint=fingerprint))
        return web.Response(body=render_feed(info, [], "atom1.0"),
                            content_type="application/atom+xml")

    async def key_document(request: web.Request) -> web.Response:
        return web.Response(text=text + "\n")

    app.router.add_get("/feed/{which}", feed)
    app.router.add_get("/key", key_document)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.4.101", 0).start()
    base = f"http://127.0.4.101:{runner.addresses[0][1]}"
    try:
        async with Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",))) as fetcher:
            found = await discover(fetcher.fetch, f"{base}/feed/good")
            assert found.public_key == text and found.group == f"{base}/feed/good"
            with pytest.raises(NotMulticast, match=r"has fingerprint .* refused"):
                await discover(fetcher.fetch, f"{base}/feed/bad")
            with pytest.raises(NotMulticast, match="cannot fetch"):
                await discover(fetcher.fetch, f"{base}/nothing")
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("rotations", [True, False], ids=["with-rotations", "without"])
async def test_the_http_documents_rotations_bridge_a_gap_that_held_the_rotate_record(
        tmp_path, rotations: bool) -> None:
    # records 1-3 by the identity key, 4 the rotate record (lost), 5-7 by the new key; the
    # HTTP document the gap is filled from carries the signed rotation (or, as a control, not)
    app = web.Application()
    document: list[bytes] = []

    async def serve(request: web.Request) -> web.Response:
        return web.Response(body=document[0], content_type="application/rss+xml")

    app.router.add_get("/feed.xml", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.4.102", 0).start()
    url = f"http://127.0.4.102:{runner.addresses[0][1]}/feed.xml"
    store = KeyStore(tmp_path / "keys")
    store.make(1.0)
    writer = store.writer(url)
    wires = [writer.append({"key": f"k{n}", "title": f"entry {n}"}) for n in (1, 2, 3)]
    store.save_head(writer)
    store.rotate(2.0)
    for path in store.outbox():            # the rotate record (seq 4), never received
        path.unlink()
    writer = store.writer(url)
    wires += [writer.append({"key": f"k{n}", "title": f"entry {n}"}) for n in (5, 6, 7)]
    element = MeshSubscribe(public_key=store.identity(),
                            rotations=store.rotations() if rotations else ())
    document.append(render_feed(FeedInfo(title="pub", link=url, subscribe=element),
                                [Entry(key=f"k{n}", guid=f"urn:k{n}", title=f"entry {n}")
                                 for n in (6, 5)], "rss2.0"))
    try:
        async with udp_ring(2, first_host=110) as nodes, \
                Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",))) as fetcher:
            reader = Subscriber(nodes[1], fetcher.fetch, http_after=0.0)
            gid = reader.subscribe(url, store.identity())
            await subscribed(nodes[1:], gid)
            feed_log = nodes[1].node.groups[gid].log
            for wire in wires[:3]:
                assert feed_log.receive(wire).refused is None
            feed_log.announce(6)                      # a parent says records up to 6 exist
            assert feed_log.missing == (4, 5, 6)
            await reader.check()                      # the gap goes to the HTTP feed
            assert reader.counters["http-fetches"] == 1
            assert sorted(r.entry["title"] for r in reader.received) == ["entry 5", "entry 6"]
            verdict = feed_log.receive(wires[5])      # seq 7, by the new key
            if rotations:
                assert reader.counters["rotations-read"] == 1
                assert [r.seq for r in verdict.delivered] == [7]
                assert feed_log.key == store.keyring()["current"]
            else:
                assert verdict.refused == "wrong-key" and not reader.counters["rotations-read"]
    finally:
        await runner.cleanup()
