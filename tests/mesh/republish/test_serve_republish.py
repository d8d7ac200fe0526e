"""`feedmesh serve --republish`: the hub's crawler is the republisher's poller. The hub crawls the
farm; what it finds new is multicast signed with its key, marked as republications; its source
feeds, served with the <subscribe> element at /mesh/opml, are what a peer (its own process)
follows and bootstraps from. A farm post reaches the peer's local proxy by multicast."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

import aiohttp
import feedparser
import pytest

from feedmesh.clock import ManualClock
from feedmesh.farm.config import FarmConfig
from feedmesh.farm.server import FarmServer
from feedmesh.feeds import parse_feed
from feedmesh.feeds.opml import OpmlOutline, parse_opml, render_opml
from feedmesh.fetch import Fetcher
from feedmesh.mesh.keys import KeyStore
from tests.eventually import eventually
from tests.mesh.republish.test_republish import (
    LOOPBACK,
    ORIGIN,
    document_keys,
    free_tcp_port,
    new_posts,
)
from tests.mesh.republish.test_walkthrough import Process, multicast_of, status

FEEDS = 4
FM = "{https://feedmesh.org/ns/scribe-rss/1.0}"
PRIVATE = 5  # a farm feed an account follows, at a URL with its owner's password and token
HUB, PEER = "127.0.4.60", "127.0.4.61"


@pytest.mark.timeout(240)
async def test_the_hub_republishes_what_it_crawls(tmp_path: Path) -> None:
    clock = ManualClock(ORIGIN + 30 * 86400)
    # no polling hints (max-age, ttl, skipHours): the hub polls every feed every cycle
    config = FarmConfig(feeds=PRIVATE + 2, seed=13, faults="none", origin=ORIGIN,
                        max_age_share=0.0, ttl_share=0.0, skip_hours_share=0.0)
    processes: list[Process] = []
    async with FarmServer(config, clock=clock) as farm, Fetcher(LOOPBACK) as fetcher:
        urls = [farm.feed_url(i) for i in range(FEEDS)]
        legacy = tmp_path / "sources.opml"
        # First in the list, a URL with credentials: the hub crawls it, never republishes it,
        # so the republished feeds are not the hub's first feed ids (their numbers still are
        # 1..FEEDS, as the peer numbers them)
        hidden = farm.feed_url(PRIVATE + 1).replace("http://", "http://op:pw@")
        legacy.write_bytes(render_opml("sources", [OpmlOutline(url=u)
                                                   for u in (hidden, *urls)]))
        keys = KeyStore(tmp_path / "hub-keys")
        keys.make(clock.now())
        try:
            web_port, udp = free_tcp_port(HUB), free_tcp_port(HUB)
            hub = await Process.start(
                "hub", "serve", "--data", str(tmp_path / "hub"), "--host", HUB,
                "--port", str(web_port), "--opml", str(legacy), "--policy", "interval",
                "--interval", "0.3", "--republish", str(keys.folder),
                "--republish-listen", f"{HUB}:{udp}", "--allow-network", "127.0.0.0/8",
                "--log-level", "info")
            processes.append(hub)

            def announced() -> str:
                assert hub.process.returncode is None, hub.stderr[-10:]
                return next((line for line in hub.stderr if "republishing on the mesh" in line),
                            None)
            line = await eventually(announced, timeout=60)
            base = f"http://{HUB}:{web_port}"
            assert f"overlay node {HUB}:{udp}" in line and keys.identity() in line
            # An account follows a feed of its own, at a URL with a password and a token: the
            # hub crawls it, and never republishes it (not listed, not multicast, no group).
            private = farm.feed_url(PRIVATE).replace("http://", "http://ann:s3cret@") + \
                "?token=t0ken"
            async with aiohttp.ClientSession() as session:
                async with session.post(f"{base}/api/accounts", json={"name": "ann"}) as answer:
                    token = (await answer.json())["token"]
                async with session.post(f"{base}/api/sources", json={"url": private},
                                        headers={"Authorization": f"Bearer {token}"}) as answer:
                    assert answer.status in (200, 201), await answer.text()
            # the hub has committed every source's first document (its backlog, not multicast)
            await eventually(lambda: all(farm.log.count(feed=i) >= 2
                                         for i in (*range(FEEDS), PRIVATE)),
                             what="every feed fetched twice: its first document is behind us")

            # its source feeds, with the <subscribe> element, are what a peer follows
            async with aiohttp.ClientSession() as session, \
                    session.get(f"{base}/mesh/opml") as response:
                opml = await response.read()
            mesh_feeds = [o.url for o in parse_opml(opml).outlines]
            assert mesh_feeds == [f"{base}/mesh/feeds/{n}" for n in range(1, FEEDS + 1)], opml
            assert b"op:pw" not in opml
            assert b"s3cret" not in opml and b"t0ken" not in opml and b"ann" not in opml
            document = await fetcher.fetch(mesh_feeds[0])
            element = parse_feed(document.body, url=document.final_url).feed.subscribe
            assert element is not None and element.republication
            assert element.public_key == keys.identity() and element.bootstrap == (f"{HUB}:{udp}",)
            assert element.group == urls[0]
            # nothing multicast yet: the document holds the feed's stored entries, as backlog
            held = ElementTree.fromstring(document.body).findall("./channel/item")
            assert held and all(i.findtext(f"{FM}backlog") == "true" for i in held), document.body

            port, local = free_tcp_port(PEER), free_tcp_port(PEER)
            peer = await Process.start(
                "peer", "peer", "--opml", f"{base}/mesh/opml", "--listen", f"{PEER}:{port}",
                "--local", f"{PEER}:{local}", "--data", str(tmp_path / "peer"),
                "--allow-network", "127.0.0.0/8")
            processes.append(peer)
            await peer.line_starting("point your reader at ")
            proxy = f"http://{PEER}:{local}"

            async def attached() -> bool:
                scribe = multicast_of(await status(proxy))
                assert len(scribe["feeds"]) == FEEDS and all(
                    f["attached"] for f in scribe["feeds"]), scribe
                return True
            await eventually(attached, timeout=60)
            # the same feed has the same number at the hub and at the peer
            async with aiohttp.ClientSession() as session, \
                    session.get(f"{proxy}/feeds.opml") as response:
                local = parse_opml(await response.read()).outlines
            hub_titles = [o.title for o in parse_opml(opml).outlines]
            assert [o.title for o in local] == hub_titles, (local, hub_titles)
            assert [o.url.rsplit("/", 1)[-1] for o in local][:1] == ["1.rss"], local

            before = {url: await document_keys(fetcher, url) for url in urls}
            fresh = await new_posts(farm, fetcher, clock, before)
            expected = set().union(*fresh.values())

            async def served() -> bool:
                async with aiohttp.ClientSession() as session, \
                        session.get(f"{proxy}/all.rss") as response:
                    feed = feedparser.parse(await response.read())
                assert expected <= {e.id for e in feed.entries}, [
                    line for line in hub.stderr if "feeds/3" in line or "warn" in line][-8:]
                return True
            await eventually(served, timeout=30)
            figures = await status(proxy)
            assert figures["entries_by_source"].get("scribe:republisher") == len(expected)
            assert sum(" event=republished " in line for line in hub.stderr) == len(expected)
            assert not any("s3cret" in line or "t0ken" in line for line in hub.stderr)
        finally:
            codes = [await p.stop() for p in processes]
        assert codes == [0] * len(processes), [p.stderr[-10:] for p in processes]
