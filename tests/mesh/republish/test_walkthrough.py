"""The README's walk-through on real sockets: a republisher and two peers, each a `feedmesh`
process started with the README's commands, the farm as the legacy publisher, newsboat reading
one peer's local proxy. A farm post reaches the reader within a second of the republisher
multicasting it; tampered and forged records sent to a peer are refused, counted, logged and never
served."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from nacl.signing import SigningKey

from feedmesh.clock import ManualClock
from feedmesh.farm.config import FarmConfig
from feedmesh.farm.server import FarmServer
from feedmesh.feeds import parse_feed
from feedmesh.feeds.opml import OpmlOutline, parse_opml, render_opml
from feedmesh.feeds.render_base import MESH_NAMESPACE
from feedmesh.fetch import Fetcher
from feedmesh.mesh.keys import KeyStore
from feedmesh.mesh.overlay import group_id, republication_topic
from feedmesh.mesh.overlay.scribe import Item
from feedmesh.mesh.overlay.wire import encode_datagram
from feedmesh.mesh.records import FeedWriter
from feedmesh.mesh.republish import RECENT
from tests.eventually import eventually
from tests.hub.test_newsboat import NEWSBOAT, Newsboat
from tests.mesh.republish.test_republish import (
    LOOPBACK,
    ORIGIN,
    document_keys,
    free_tcp_port,
    new_posts,
)
from tests.mesh.transport.conftest import Rogue

pytestmark = pytest.mark.skipif(not Path(NEWSBOAT).exists(),
                                reason="newsboat not installed (scripts/apt-test-packages)")

FEEDS = 4
REPUBLISHER = "127.0.4.40"
PEERS = ("127.0.4.41", "127.0.4.42")
_REPUBLISHED = re.compile(r"ts=(\S+)Z .*event=republished feed=(\S+) seq=(\d+) entry=(\S+) ")


class Process:
    """A `feedmesh` command in its own process; its stdout lines and stderr kept as they come."""

    def __init__(self, name: str, process: asyncio.subprocess.Process) -> None:
        self.name = name
        self.process = process
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        # entry key -> (wall time, url, seq)
        self.multicast: dict[str, tuple[float, str, int]] = {}
        self._readers = [asyncio.create_task(self._read(process.stdout, self.stdout)),
                         asyncio.create_task(self._read(process.stderr, self.stderr))]

    @classmethod
    async def start(cls, name: str, *arguments: str) -> Process:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "feedmesh.cli", *arguments, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return cls(name, process)

    async def _read(self, stream: asyncio.StreamReader, into: list[str]) -> None:
        while line := await stream.readline():
            text = line.decode(errors="replace").rstrip("\n")
            into.append(text)
            found = _REPUBLISHED.search(text)
            if found:
                stamp = datetime.fromisoformat(found[1]).replace(tzinfo=UTC).timestamp()
                self.multicast[found[4]] = (stamp, found[2], int(found[3]))

    async def line_starting(self, prefix: str) -> str:
        def seen() -> str | None:
            assert self.process.returncode is None, (self.name, self.stderr[-20:])
            return next((line for line in self.stdout if line.startswith(prefix)), None)
        return await eventually(seen, timeout=60, what=f"{self.name} prints {prefix!r}")

    async def finish(self) -> int:
        """Wait for a command that ends by itself."""
        code = await asyncio.wait_for(self.process.wait(), 60)
        await asyncio.gather(*self._readers, return_exceptions=True)
        return code

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.terminate()
        code = await asyncio.wait_for(self.process.wait(), 20)
        await asyncio.gather(*self._readers, return_exceptions=True)
        return code


async def status(local: str) -> dict:
    async with aiohttp.ClientSession() as session, \
            session.get(f"{local}/api/status") as response:
        assert response.status == 200
        return json.loads(await response.read())


def multicast_of(figures: dict) -> dict:
    return next(e for e in figures["exchanges"] if e["protocol"] == "scribe")


@pytest.mark.timeout(240)
async def test_two_peers_and_a_republisher_from_the_readme(tmp_path: Path) -> None:
    clock = ManualClock(ORIGIN + 30 * 86400)
    config = FarmConfig(feeds=FEEDS, seed=12, faults="none", origin=ORIGIN)
    processes: list[Process] = []
    async with FarmServer(config, clock=clock) as farm, Fetcher(LOOPBACK) as fetcher:
        urls = [farm.feed_url(i) for i in range(FEEDS)]
        legacy = tmp_path / "legacy.opml"
        legacy.write_bytes(render_opml("legacy", [OpmlOutline(url=u) for u in urls]))
        keys_dir = tmp_path / "repub-keys"
        try:
            # feedmesh keys make --dir var/repub-keys
            made = await Process.start("keys", "keys", "make", "--dir", str(keys_dir))
            assert await made.finish() == 0, made.stderr
            keys = KeyStore(keys_dir)
            udp, http = free_tcp_port(REPUBLISHER), free_tcp_port(REPUBLISHER)
            republisher = await Process.start(
                "republisher", "republish", "--opml", str(legacy), "--key", str(keys_dir),
                "--listen", f"{REPUBLISHER}:{udp}", "--http", f"{REPUBLISHER}:{http}",
                "--interval", "0.2", "--allow-network", "127.0.0.0/8")
            processes.append(republisher)
            await republisher.line_starting("ready")
            opml = f"http://{REPUBLISHER}:{http}/opml"
            locals_ = []
            for i, host in enumerate(PEERS):
                port, local = free_tcp_port(host), free_tcp_port(host)
                # feedmesh peer --opml http://127.0.4.40:8080/opml --listen 127.0.4.41:8400 ...
                peer = await Process.start(
                    f"peer{i}", "peer", "--opml", opml, "--listen", f"{host}:{port}",
                    "--local", f"{host}:{local}", "--data", str(tmp_path / f"peer{i}"),
                    "--allow-network", "127.0.0.0/8")
                processes.append(peer)
                line = await peer.line_starting("point your reader at ")
                locals_.append(line.split()[4].removesuffix("/all.rss"))
                assert locals_[-1] == f"http://{host}:{local}"

            async def attached() -> bool:
                for local in locals_:
                    scribe = multicast_of(await status(local))
                    assert scribe["joined"] and len(scribe["feeds"]) == FEEDS, scribe
                    assert all(f["attached"] and f["pushed"] and f["republication"]
                               and f["key"] == keys.identity() for f in scribe["feeds"]), scribe
                return True
            await eventually(attached, timeout=60, what="both peers in every feed's group")
            await eventually(lambda: all(farm.log.count(feed=i) >= 2 for i in range(FEEDS)),
                             what="every feed polled twice: its first document is behind us")

            # names a reader shows are the feeds' own titles; the same feed has the same
            # number at the republisher and at the peers (issue 32 item 8)
            titles = {}
            for url in urls:
                result = await fetcher.fetch(url)
                titles[url] = parse_feed(result.body, url=url).feed.title
            assert all(titles.values()), titles
            async with aiohttp.ClientSession() as session:
                async with session.get(opml) as response:
                    listed = parse_opml(await response.read()).outlines
                async with session.get(f"{locals_[0]}/") as response:   # started full:
                    index = json.loads(await response.read())          # every feed fetched
            assert [o.title for o in listed] == [titles[u] for u in urls]
            assert [o.url for o in listed] == [f"{opml[:-len('/opml')]}/feeds/{i}"
                                               for i in range(1, FEEDS + 1)]
            numbers = {feed["url"]: feed["id"] for feed in index["feeds"]}
            assert {u: int(u.rpartition("/")[2]) for u in numbers} == numbers
            assert {feed["title"] for feed in index["feeds"]} == set(titles.values())

            # a new peer starts full: before anything is multicast the reader already shows
            # what the feeds hold, marked as their state when followed (issue 32 item 7)
            reader_url = f"{locals_[0]}/all.rss"
            reader = Newsboat(tmp_path / "newsboat", [reader_url])
            await reader.reload()
            held = {url: await document_keys(fetcher, url) for url in urls}
            initial = {guid for guid, _, _ in reader.items(reader_url)}
            assert initial == set().union(*(keys_[:RECENT] for keys_ in held.values()))
            async with aiohttp.ClientSession() as session, session.get(reader_url) as response:
                first = await response.read()
            assert first.count(b"<fm:backlog ") == len(initial)
            assert b"(republished)" not in first and b"republished-by" not in first
            for item in ET.fromstring(first).findall("channel/item"):
                source = item.find("source")
                assert source.text == titles[source.get("url")]

            before = {url: await document_keys(fetcher, url) for url in urls}
            fresh = await new_posts(farm, fetcher, clock, before)   # the farm posts
            expected = set().union(*fresh.values())
            shown_at: dict[str, float] = {}

            reloads: list[float] = []

            async def newsboat_shows_them() -> bool:
                started = time.time()
                await reader.reload()
                now = time.time()
                reloads.append(now - started)
                shown = {guid for guid, _, _ in reader.items(reader_url)}
                for key in shown & expected:
                    shown_at.setdefault(key, now)
                assert expected <= shown, (len(expected - shown), republisher.stderr[-5:])
                return True
            await eventually(newsboat_shows_them, timeout=30, interval=0.0)
            assert set(republisher.multicast) == expected
            delays = sorted(shown_at[key] - republisher.multicast[key][0] for key in expected)
            print(f"\nmulticast -> newsboat shows it: {len(delays)} items, median "
                  f"{delays[len(delays) // 2] * 1000:.0f} ms, max {delays[-1] * 1000:.0f} ms "
                  f"(each newsboat reload took {min(reloads) * 1000:.0f}-"
                  f"{max(reloads) * 1000:.0f} ms)")
            assert delays[-1] < 1.0, delays

            # every entry came by multicast, verified, to both peers; marked as republished
            async def both_peers_kept_them() -> bool:
                for local in locals_:
                    figures = await status(local)
                    scribe = multicast_of(figures)
                    assert figures["entries_by_source"].get("scribe:republisher") == \
                        len(expected), [(f["received"], f["seq"]) for f in scribe["feeds"]]
                    assert scribe["refused"] == {}
                return True
            await eventually(both_peers_kept_them, timeout=20)
            async with aiohttp.ClientSession() as session, session.get(reader_url) as response:
                served = (await response.read()).decode()
            mark = (f'<fm:republishedBy xmlns:fm="{MESH_NAMESPACE}">{keys.identity()}'
                    "</fm:republishedBy>")
            assert served.count(mark) == len(expected)      # a namespaced mark,
            assert "republished-by" not in served            # not a category a reader shows

            # forged records pushed at the second peer: refused, counted, logged, never served
            url = urls[0]
            head = keys.logs()[url]
            genuine = keys.writer(url, republication=True)       # not saved: the head stays
            wire = genuine.append({"key": "forged-1", "title": "TAMPERED entry"})
            tampered = wire.replace(b"TAMPERED", b"TAMPERES")
            other = SigningKey.generate()
            wrong_key = FeedWriter(other, url, republication=True, feed=keys.identity(),
                                   head=(head["seq"], head["prev"])).append(
                {"key": "forged-2", "title": "TAMPERED by another key"})
            fork = FeedWriter(keys.signing_key(), url, republication=True, feed=keys.identity(),
                              head=(head["seq"], "0" * 64)).append(
                {"key": "forged-3", "title": "TAMPERED fork"})
            unsigned = wire[68:]                                    # bare JSON
            gid = group_id(republication_topic(url, keys.identity()))
            scribe = multicast_of(await status(locals_[1]))
            rogue = Rogue()
            try:
                for forged in (tampered, wrong_key, fork, unsigned):
                    rogue.sock.sendto(_datagram(rogue, Item(gid, head["seq"] + 1, forged)),
                                      _udp_of(scribe))
                await eventually(lambda: _refused(locals_[1]), timeout=15)
            finally:
                rogue.close()
            refused = multicast_of(await status(locals_[1]))["refused"]
            assert refused == {"bad-signature": 1, "wrong-key": 1, "out-of-chain": 1,
                               "unsigned": 1}
            assert sum("record_refused" in line for line in processes[2].stderr) == 4
            async with aiohttp.ClientSession() as session, \
                    session.get(f"{locals_[1]}/all.rss") as response:
                assert b"TAMPERED" not in await response.read()
            # feedmesh peer status --data var/peer1
            shown = await Process.start("status", "peer", "status", "--data",
                                        str(tmp_path / "peer1"))
            assert await shown.finish() == 0, shown.stderr
            assert ("records refused: bad-signature=1 out-of-chain=1 unsigned=1 wrong-key=1"
                    in "\n".join(shown.stdout)), shown.stdout
        finally:
            codes = [await p.stop() for p in processes]
        assert codes == [0] * len(processes), [p.stderr[-10:] for p in processes]


def _datagram(rogue: Rogue, message) -> bytes:
    return encode_datagram(rogue.handle, message)


def _udp_of(scribe: dict) -> tuple[str, int]:
    host, _, port = scribe["address"].rpartition(":")
    return host, int(port)


async def _refused(local: str) -> bool:
    return sum(multicast_of(await status(local))["refused"].values()) >= 4
