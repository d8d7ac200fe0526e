"""The republisher's memory (issue 14 section 4): what it multicast is kept in its key folder, so
a restarted republisher sends nothing twice and multicasts what was posted while it was down; an
entry already multicast that changed is multicast again as an edit record; and an entry a peer got
by multicast is the same entry (not an edit) when the peer later reads the feed's document.
Real sockets: a legacy feed on a loopback HTTP server, the overlay on UDP endpoints."""

from __future__ import annotations

from aiohttp import web

from feedmesh.feeds import parse_feed
from feedmesh.feeds.render import render_feed
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.mesh.keys import KeyStore
from feedmesh.mesh.overlay import group_id, republication_topic
from feedmesh.mesh.peer.multicast import entry_from_record
from feedmesh.mesh.republish import MAX_TEXT, Republisher, entry_record
from feedmesh.mesh.transport.subscriber import Subscriber
from feedmesh.model import Entry, FeedInfo
from tests.eventually import eventually
from tests.mesh.transport.conftest import subscribed, udp_ring

HOST = "127.0.4.103"


def post(n: int, summary: str = "") -> Entry:
    return Entry(key=f"k{n}", guid=f"urn:post:{n}", title=f"post {n}",
                 link=f"http://{HOST}/{n}", summary=summary or f"text of post {n}")


async def test_a_restarted_republisher_catches_up_sends_nothing_twice_and_sends_edits(tmp_path):
    posts = [post(1), post(2)]
    app = web.Application()

    async def feed(request: web.Request) -> web.Response:
        body = render_feed(FeedInfo(title="legacy", link=f"http://{HOST}/"), posts[::-1],
                           "rss2.0")
        return web.Response(body=body, content_type="application/rss+xml")

    app.router.add_get("/feed.xml", feed)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, HOST, 0).start()
    url = f"http://{HOST}:{runner.addresses[0][1]}/feed.xml"
    try:
        async with udp_ring(3, first_host=120) as nodes, \
                Fetcher(FetchSettings(allow_networks=("127.0.0.0/8",))) as fetcher:
            keys = KeyStore(tmp_path / "keys")
            keys.make(1.0)
            first = Republisher(nodes[0], keys, fetcher, [url])
            readers = [Subscriber(n, fetcher.fetch) for n in nodes[1:]]
            for reader in readers:
                reader.subscribe(url, first.identity, republication=True)
            await subscribed(nodes[1:], group_id(republication_topic(url, first.identity)))

            assert await first.poll_once() == 0            # learns posts 1 and 2
            posts.append(post(3))
            assert await first.poll_once() == 1            # post 3

            def titles(reader: Subscriber) -> list[tuple[str, bool]]:
                return [(r.entry["title"], bool(r.entry.get("edit"))) for r in reader.received]
            await eventually(lambda: all(titles(r) == [("post 3", False)] for r in readers))

            # the republisher stops; posts 4 and 5 come, post 3 is edited; a new one starts
            posts.append(post(4))
            posts.append(post(5))
            posts[2] = post(3, summary="text of post 3, corrected")
            second = Republisher(nodes[0], KeyStore(tmp_path / "keys"), fetcher, [url])
            assert await second.poll_once() == 3
            assert second.counters["multicast"] == 2 and second.counters["edits"] == 1
            assert await second.poll_once() == 0           # nothing twice
            expected = [("post 3", False), ("post 3", True), ("post 4", False), ("post 5", False)]
            await eventually(lambda: all(titles(r) == expected for r in readers))
            for reader in readers:
                edit = reader.received[1]
                assert edit.entry["summary"] == "text of post 3, corrected" and edit.seq == 2
                assert [r.seq for r in reader.received] == [1, 2, 3, 4]    # one verified chain
                assert reader.endpoint.node.groups[
                    group_id(republication_topic(url, first.identity))].log.refused == {}
    finally:
        await runner.cleanup()


def test_an_entry_from_a_record_matches_the_documents_entry_even_when_cut():
    long = post(7, summary="word " * 3_000)                   # over the record's 4,000 characters
    document = render_feed(FeedInfo(title="legacy", link=f"http://{HOST}/"), [long], "rss2.0")
    parsed = parse_feed(document, url=f"http://{HOST}/feed.xml").entries[0]
    body = entry_record(parsed, f"http://{HOST}/feed.xml")
    assert len(body["summary"]) == MAX_TEXT
    kept = entry_from_record(body, "KEY")
    # the archive compares content hashes: the same hash means the same entry, not an edit
    assert kept.key == parsed.key and kept.content_hash == parsed.content_hash
    assert kept.republished_by == "KEY" and kept.categories == ()
    edited = entry_from_record(entry_record(post(7, summary="changed"), "u"), None)
    assert edited.content_hash != parsed.content_hash
