"""Names a reader shows (issue 32 item 8): the republisher's feed and its OPML entry carry the
legacy feed's own title (not its URL plus "(republished)"), each item's ``<source>`` names that
feed with its URL in the ``url`` attribute (RSS 2.0), the republication mark is the namespaced
``fm:republishedBy`` element and never a visible category, the feeds are numbered from 1 as a
peer numbers the feeds of that list; and before anything is multicast the feed holds what the
legacy feed held, marked ``fm:backlog`` (item 7: a peer that follows it starts full).
Real sockets: the legacy feed on a loopback HTTP server, the overlay on a UDP endpoint."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from aiohttp import web

from feedmesh.compose.peer import republisher_outlines
from feedmesh.feeds.render import render_feed
from feedmesh.feeds.render_base import MESH_NAMESPACE
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.mesh.keys import KeyStore
from feedmesh.mesh.republish import Republisher
from feedmesh.model import Entry, FeedInfo
from tests.mesh.transport.conftest import udp_ring

HOST = "127.0.4.105"
TITLE = "Legacy Daily"
FM = f"{{{MESH_NAMESPACE}}}"


def post(n: int) -> Entry:
    return Entry(key=f"k{n}", guid=f"urn:post:{n}", title=f"post {n}",
                 link=f"http://{HOST}/{n}", summary=f"text of post {n}", categories=("news",))


def items(body: bytes) -> list[ET.Element]:
    return ET.fromstring(body).findall("channel/item")


async def test_the_republishers_feed_is_named_as_the_legacy_feed_and_marks_in_a_namespace(
        tmp_path):
    posts = [post(1), post(2)]
    app = web.Application()

    async def feed(request: web.Request) -> web.Response:
        body = render_feed(FeedInfo(title=TITLE, link=f"http://{HOST}/"), posts[::-1], "rss2.0")
        return web.Response(body=body, content_type="application/rss+xml")

    app.router.add_get("/feed.xml", feed)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, HOST, 0).start()
    url = f"http://{HOST}:{runner.addresses[0][1]}/feed.xml"
    try:
        async with udp_ring(1, first_host=125) as nodes, \
                Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",))) as fetcher:
            keys = KeyStore(tmp_path / "keys")
            keys.make(1.0)
            republisher = Republisher(nodes[0], keys, fetcher, [url])
            # before the first poll the title is not known: the URL, never "(republished)"
            assert republisher_outlines(republisher, "http://h")[0].title == url
            assert await republisher.poll_once() == 0          # learns posts 1 and 2
            [outline] = republisher_outlines(republisher, f"http://{HOST}:1")
            assert (outline.title, outline.url) == (TITLE, f"http://{HOST}:1/feeds/1")

            body = republisher.document_of(url, f"{HOST}:9", f"http://{HOST}:1/feeds/1")
            assert ET.fromstring(body).findtext("channel/title") == TITLE
            backlog = items(body)
            assert [i.findtext("guid") for i in backlog] == ["urn:post:2", "urn:post:1"]
            for item in backlog:   # the feed's state at the first poll, marked as such
                assert item.findtext(f"{FM}backlog") == "true"
                assert [c.text for c in item.findall("category")] == ["news"]

            posts.append(post(3))
            assert await republisher.poll_once() == 1          # post 3 is news: multicast
            body = republisher.document_of(url, f"{HOST}:9", f"http://{HOST}:1/feeds/1")
            news, *rest = items(body)
            assert news.findtext("guid") == "urn:post:3"
            assert news.find(f"{FM}backlog") is None
            for item in (news, *rest):
                assert item.findtext(f"{FM}republishedBy") == republisher.identity
                source = item.find("source")
                assert (source.text, source.get("url")) == (TITLE, url)
                assert [c.text for c in item.findall("category")] == ["news"]
            assert b"republished-by" not in body and b"(republished)" not in body
    finally:
        await runner.cleanup()
