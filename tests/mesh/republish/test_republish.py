"""The republisher with the farm as the legacy publisher: a new farm post reaches subscribers on
the UDP overlay as a record signed by the republisher's key and marked as a republication; only
subscribers that chose to trust the republisher accept it. Then the same through the command."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from feedmesh.clock import ManualClock
from feedmesh.farm.config import FarmConfig
from feedmesh.farm.server import FarmServer
from feedmesh.feeds import parse_feed
from feedmesh.feeds.opml import OpmlOutline, render_opml
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.mesh.keys import KeyStore
from feedmesh.mesh.overlay import group_id, republication_topic
from feedmesh.mesh.overlay.scribe import Item
from feedmesh.mesh.republish import Republisher
from feedmesh.mesh.transport import UdpNode, handle_at
from feedmesh.mesh.transport.subscriber import NotMulticast, Subscriber, discover
from tests.eventually import eventually
from tests.mesh.transport.conftest import Rogue, subscribed, tree, udp_ring

ORIGIN = 1_760_000_000.0
FEEDS = 6
LOOPBACK = FetchSettings(allow_networks=("127.0.0.0/8",))


async def document_keys(fetcher: Fetcher, url: str) -> list[str]:
    result = await fetcher.fetch(url)
    assert result.ok, result.error
    return [e.key for e in parse_feed(result.body, url=url).entries]


async def new_posts(farm: FarmServer, fetcher: Fetcher, clock: ManualClock,
                    before: dict[str, list[str]]) -> dict[str, set[str]]:
    clock.advance(2 * 86400)   # two farm days: several feeds post
    after = {url: await document_keys(fetcher, url) for url in before}
    fresh = {url: set(after[url]) - set(before[url]) for url in before}
    assert any(fresh.values()), "the farm posted nothing in two days"
    return fresh


async def test_new_farm_posts_reach_trusting_subscribers_verified(tmp_path) -> None:
    clock = ManualClock(ORIGIN + 30 * 86400)
    config = FarmConfig(feeds=FEEDS, seed=11, faults="none", origin=ORIGIN)
    async with FarmServer(config, clock=clock) as farm, Fetcher(LOOPBACK) as fetcher, \
            udp_ring(6, first_host=20) as nodes:
        urls = [farm.feed_url(i) for i in range(FEEDS)]
        keys = KeyStore(tmp_path / "keys")
        keys.make(clock.now())
        republisher = Republisher(nodes[0], keys, fetcher, urls)
        trusting = [Subscriber(n, fetcher.fetch) for n in nodes[1:4]]
        wary = nodes[4]   # follows the publisher's own log: republications are not for it
        for reader in trusting:
            for url in urls:
                reader.subscribe(url, republisher.identity, republication=True)
        for url in urls:
            wary.subscribe(url, republisher.identity)
            await subscribed(nodes[1:4], group_id(republication_topic(url, republisher.identity)))
            await subscribed([wary], group_id(url))
        before = {url: await document_keys(fetcher, url) for url in urls}
        assert await republisher.poll_once() == 0          # the first poll only learns
        fresh = await new_posts(farm, fetcher, clock, before)
        sent = await republisher.poll_once()
        assert sent == sum(len(keys_) for keys_ in fresh.values())
        assert await republisher.poll_once() == 0          # nothing new: nothing sent again

        def got_all(reader: Subscriber) -> bool:
            missing = {url: len(fresh[url] - {e["key"] for e in reader.entries(url)})
                       for url in urls}
            assert not any(missing.values()), (missing, dict(reader.endpoint.node.counters), [
                (n.addr, n.handle.id % 1000, [(g.parent.id % 1000 if g.parent else None, g.root,
                  sorted(c % 1000 for c in g.children), g.newest, g.joining_since)
                 for gid, g in n.node.groups.items() if gid == group_id(url)])
                for n in nodes for url in urls if missing[url]])
            return True
        await eventually(lambda: all(got_all(r) for r in trusting), timeout=15)
        for reader in trusting:
            records = [d.record for d in reader.endpoint.deliveries]
            assert all(r.republication and r.feed == republisher.identity for r in records)
            assert all(r.via == "tree" for r in reader.received)
        assert wary.deliveries == []
        # a republished record pushed into the publisher's own group is refused there
        rogue = Rogue()
        try:
            record = trusting[0].endpoint.deliveries[0].record
            rogue.send(Item(group_id(record.url), record.seq, record.wire), wary)
            await eventually(lambda: wary.node.counters["refused-untrusted-republication"] == 1)
        finally:
            rogue.close()
        assert wary.deliveries == []
        assert all(keys.logs()[url]["seq"] == len(fresh[url]) for url in urls if fresh[url])


def free_tcp_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def free_udp_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@pytest.mark.timeout(120)
async def test_the_republish_command(tmp_path: Path) -> None:
    clock = ManualClock(ORIGIN + 30 * 86400)
    config = FarmConfig(feeds=FEEDS, seed=12, faults="none", origin=ORIGIN)
    async with FarmServer(config, clock=clock) as farm, Fetcher(LOOPBACK) as fetcher:
        urls = [farm.feed_url(i) for i in range(FEEDS)]
        opml = tmp_path / "legacy.opml"
        opml.write_bytes(render_opml("legacy", [OpmlOutline(url=u) for u in urls]))
        keys = KeyStore(tmp_path / "keys")
        keys.make(clock.now())
        port = free_udp_port("127.0.4.30")
        http_port = free_tcp_port("127.0.4.30")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "feedmesh.cli", "republish", "--opml", str(opml),
            "--key", str(keys.folder), "--listen", f"127.0.4.30:{port}",
            "--http", f"127.0.4.30:{http_port}",
            "--interval", "0.3", "--allow-network", "127.0.0.0/8", "--log-level", "warning",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        readers: list[Subscriber] = []
        try:
            lines = []
            while not lines or not lines[-1].startswith("ready"):
                line = await asyncio.wait_for(process.stdout.readline(), 30)
                assert line, (await process.stderr.read()).decode()
                lines.append(line.decode().strip())
            assert lines[0] == (f"feed {urls[0]} key={keys.identity()} republication=true "
                                f"bootstrap=127.0.4.30:{port}")
            base = f"http://127.0.4.30:{http_port}"
            assert f"http {base}/opml" in lines
            # a client bootstraps with one HTTP fetch of the republisher's feed
            found = [await discover(fetcher.fetch, f"{base}/feeds/{i}")
                     for i in range(1, FEEDS + 1)]   # numbered from 1, as a peer numbers them
            assert [f.group for f in found] == urls
            assert {(f.public_key, f.republication, f.bootstrap) for f in found} == \
                {(keys.identity(), True, (f"127.0.4.30:{port}",))}
            host, _, number = found[0].bootstrap[0].rpartition(":")
            nodes = [UdpNode(f"127.0.4.{31 + i}") for i in range(3)]
            for node in nodes:
                await node.start(handle_at(host, int(number)))
                await eventually(lambda node=node: node.node.pastry.joined, timeout=10)
                readers.append(Subscriber(node, fetcher.fetch))
                for element in found:
                    readers[-1].subscribe(element.group, element.public_key,
                                          republication=element.republication)
            for url in urls:
                await subscribed(nodes, group_id(republication_topic(url, keys.identity())))
            # the republisher has polled every feed at least once before the farm posts
            await eventually(lambda: all(farm.log.count(feed=i) >= 1 for i in range(FEEDS)))
            before = {url: await document_keys(fetcher, url) for url in urls}
            fresh = await new_posts(farm, fetcher, clock, before)
            def delivered() -> bool:
                for url in urls:
                    gid = group_id(republication_topic(url, keys.identity()))
                    assert all({e["key"] for e in r.entries(url)} == fresh[url]
                               for r in readers), f"{url}\n{tree(nodes, gid)}"
                return True
            await eventually(delivered, timeout=20)
            for reader in readers:
                assert all(d.record.republication for d in reader.endpoint.deliveries)
            # and the republisher's own feed now lists what it multicast, newest first, then
            # what the feed held at its first poll (marked as backlog, never multicast)
            for i, url in enumerate(urls, start=1):
                republished = await document_keys(fetcher, f"{base}/feeds/{i}")
                assert set(republished[:len(fresh[url])]) == fresh[url]
                assert set(republished[len(fresh[url]):]) <= set(before[url])
            with pytest.raises(NotMulticast, match="no <subscribe> element"):
                await discover(fetcher.fetch, urls[0])        # the legacy feed itself
        finally:
            for reader in readers:
                reader.endpoint.close()
            process.terminate()
            assert await asyncio.wait_for(process.wait(), 10) == 0


def test_bad_key_folder_is_a_clear_error(tmp_path: Path) -> None:
    opml = tmp_path / "x.opml"
    opml.write_bytes(render_opml("x", [OpmlOutline(url="http://127.0.4.99/feed")]))
    done = subprocess.run(check=False,
                          args=[sys.executable, "-m", "feedmesh.cli", "republish",
                                "--opml", str(opml), "--key", str(tmp_path / "nokeys"),
                                "--listen", "127.0.4.29:0"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 2
    assert "secret.key is missing" in done.stderr and "Traceback" not in done.stderr
