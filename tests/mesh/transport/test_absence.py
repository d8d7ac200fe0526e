"""A node back after a long absence whose only evidence of newer records is the seq its parent
announces (it holds none of them), on real UDP endpoints: when no buffer up the tree has them, it
takes them from the publisher's HTTP feed (a real server on loopback) and the signed chain
resumes with the next record down the tree."""

from __future__ import annotations

from dataclasses import replace

from aiohttp import web
from nacl.signing import SigningKey

from feedmesh.feeds.render import render_feed
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.mesh.overlay import group_id
from feedmesh.mesh.overlay.ids import closest
from feedmesh.mesh.records import FeedWriter
from feedmesh.mesh.transport.subscriber import Subscriber
from feedmesh.model import Entry, FeedInfo
from tests.eventually import eventually
from tests.mesh.transport.conftest import subscribed, udp_ring

HOST = "127.0.4.102"


async def test_an_announced_gap_with_nothing_held_is_taken_from_the_http_feed() -> None:
    entries = [Entry(key=f"k{n}", guid=f"urn:e{n}", title=f"entry {n}",
                     link=f"http://{HOST}/{n}") for n in (1, 2, 3)]
    app = web.Application()
    served: list[int] = []

    async def feed(request: web.Request) -> web.Response:
        served.append(1)
        body = render_feed(FeedInfo(title="pub", link=f"http://{HOST}/"), entries[::-1], "rss2.0")
        return web.Response(body=body, content_type="application/rss+xml")

    app.router.add_get("/feed.xml", feed)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, HOST, 0).start()
    url = f"http://{HOST}:{runner.addresses[0][1]}/feed.xml"
    gid = group_id(url)
    try:
        async with udp_ring(4, first_host=110) as nodes, \
                Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",))) as fetcher:
            for node in nodes:   # no buffers: no parent can supply a record it forwarded
                node.node.config = replace(node.node.config, buffer_size=0)
            writer = FeedWriter(SigningKey.generate(), url)
            # the one coming back must not be the group's root (nobody would announce to it)
            root = closest(gid, [n.handle for n in nodes])
            away = next(n for n in nodes[1:] if n.handle != root)
            others = [n for n in nodes[1:] if n is not away]
            present = [Subscriber(n, fetcher.fetch, http_after=1.0) for n in others]
            for reader in present:
                reader.subscribe(url, writer.feed)
                reader.start()
            await subscribed(others, gid)
            for number, entry in enumerate(entries, 1):
                nodes[0].publish(url, number, writer.append(
                    {"key": entry.key, "guid": entry.guid, "title": entry.title,
                     "link": entry.link}))
            await eventually(lambda: all(len(r.received) == 3 for r in present))

            # the absent node comes back: it holds nothing, its parent announces seq 3
            back = Subscriber(away, fetcher.fetch, http_after=1.0)
            back.subscribe(url, writer.feed)
            back.start()
            await subscribed([away], gid)
            await eventually(lambda: len(back.received) == 3, timeout=20,
                             what="the announced records taken from the HTTP feed")
            assert [(r.entry["title"], r.via) for r in back.received] == [
                ("entry 1", "http"), ("entry 2", "http"), ("entry 3", "http")]
            group = away.node.groups[gid]
            if group.parent is not None:
                assert away.node.counters["recover-asked"] >= 1    # the parent was asked first
            assert back.counters["http-fetches"] >= 1 and served
            assert group.log.missing == ()

            # the chain resumes at the next signed record, down the tree, once
            nodes[0].publish(url, 4, writer.append({"key": "k4", "title": "entry 4"}))
            await eventually(lambda: len(back.received) == 4)
            assert (back.received[-1].entry["title"], back.received[-1].via) == ("entry 4", "tree")
            assert group.log.seq == 4 and group.log.skipped == 3
            for reader in (*present, back):
                await reader.stop()
    finally:
        await runner.cleanup()
