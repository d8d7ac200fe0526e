"""A small mesh on loopback for the peer tests: the farm as the publishers, a tracker and peers,
each on its own 127.0.3.x address, all on one accelerated clock (farm time)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from feedmesh.clock import AcceleratedClock
from feedmesh.compose import open_archive
from feedmesh.farm.config import FarmConfig
from feedmesh.farm.server import FarmServer
from feedmesh.farm.testing import TEST_ORIGIN
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.mesh.feedex import FeedExSettings, Tracker
from feedmesh.mesh.peer import Peer, PeerSettings, TrackerServer, TransportSettings
from feedmesh.mesh.peer.daemon import fetch_headers
from feedmesh.schedule import SchedulerSettings

SPEED = 600.0
"""Farm seconds per real second: a farm hour is 6 s; the busy feeds post every ~1.5 s."""
BUSY = (22, 155)
"""Feeds of the seed-7 farm posting ~4 times an hour at the start (their documents list 6 and
10 entries)."""

# Every 5 farm minutes (0.5 s), and a node that has not fetched since start-up for days.
EAGER = SchedulerSettings(policy="uniform", budget_per_feed_per_day=288.0, min_interval_s=300.0,
                          first_fetch_spread_s=60.0)
LAZY = SchedulerSettings(policy="uniform", budget_per_feed_per_day=1.0, min_interval_s=5 * 86400.0,
                         max_interval_s=7 * 86400.0, max_delay_target_s=7 * 86400.0,
                         first_fetch_spread_s=60.0)
# Timeouts are farm seconds: at 600x the defaults (30 s, 10 s) would be 50 ms and 17 ms of real
# time, shorter than a loaded machine's round trip. A second or more of real time each.
FEEDEX = FeedExSettings(min_neighbours=2, max_neighbours=4, dead_after_s=3600.0,
                        connect_timeout_s=1800.0, reply_timeout_s=1800.0, check_hold_s=600.0,
                        query_timeout_s=600.0,
                        neighbour_prefix_v4=32)  # each 127.0.3.x peer a machine of its own


def linked(a: Peer, b: Peer) -> bool:
    """Both ends hold the link. The side that accepts a connect holds it a round trip before the
    side that asked, so a test that has ``b`` send to ``a`` must wait for ``b``'s end too."""
    return (b.feedex.address in a.feedex.node.neighbours
            and a.feedex.address in b.feedex.node.neighbours)


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


class Mesh:
    """``await mesh.peer(i, feeds, schedule)`` starts peer i on 127.0.3.(10+i)."""

    def __init__(self, root: Path, farm: FarmServer, clock: AcceleratedClock,
                 tracker: TrackerServer) -> None:
        self.root = root
        self.farm = farm
        self.clock = clock
        self.tracker = tracker
        self.peers: dict[int, Peer] = {}
        self._fetchers: dict[int, Fetcher] = {}
        self._stores: dict[int, object] = {}

    def host(self, i: int) -> str:
        return f"127.0.3.{10 + i}"

    def url(self, feed: int) -> str:
        return self.farm.feed_url(feed)

    async def peer(self, i: int, feeds: Sequence[int], schedule: SchedulerSettings = EAGER, *,
                   feedex: FeedExSettings = FEEDEX,
                   transport: TransportSettings | None = None, forward: bool = True,
                   tracker: bool = True, tell_publishers: bool = False,
                   port: int | None = None) -> Peer:
        """``tracker`` False: the peer knows no tracker; ``tell_publishers``: its fetches say
        ``FeedEx-Peer: PORT`` (the farm lists its recent such clients to each other); ``port``:
        listen there (a restart under the same identity), else on a free one."""
        host = self.host(i)
        data = self.root / f"peer{i}"
        port = port or free_port(host)
        if i not in self._fetchers or tell_publishers:
            if i in self._fetchers:
                await self._fetchers.pop(i).close()
            self._fetchers[i] = Fetcher(FetchSettings(
                allow_networks=("127.0.0.0/8",), source_address=host,
                user_agent=f"peer {host}",
                headers=fetch_headers((host, port)) if tell_publishers else ()), clock=self.clock)
        settings = PeerSettings(listen=(host, port), data=data, local=("127.0.0.1", 0),
                                tracker=self.tracker.address if tracker else None,
                                feedex=feedex, schedule=schedule,
                                transport=transport or TransportSettings(), forward=forward)
        store = open_archive(data / "archive.db") if data.exists() else None
        if store is None:
            data.mkdir(parents=True)
            store = open_archive(data / "archive.db")
        peer = Peer(settings, store, self._fetchers[i], self.clock)
        await peer.start([self.url(f) for f in feeds])
        self.peers[i] = peer
        self._stores[i] = store
        return peer

    async def stop_peer(self, i: int) -> None:
        peer = self.peers.pop(i)
        await peer.stop()
        self._stores.pop(i).close()

    def fetches(self, i: int, feed: int) -> list[float]:
        """Farm times at which peer i fetched ``feed`` (the farm's request log)."""
        agent = f"peer {self.host(i)}"
        return [r.farm_time for r in self.farm.requests(feed=feed) if r.user_agent == agent]

    def guid(self, feed: int, post) -> str:
        return self.farm.model.guid(feed, post)

    async def close(self) -> None:
        for i in list(self.peers):
            await self.stop_peer(i)
        for fetcher in self._fetchers.values():
            await fetcher.close()


@pytest.fixture
async def mesh(tmp_path) -> AsyncIterator[Mesh]:
    clock = AcceleratedClock(speed=SPEED, origin=TEST_ORIGIN)
    config = FarmConfig(feeds=160, seed=7, faults="none", origin=TEST_ORIGIN, speed=SPEED)
    async with FarmServer(config, clock=clock) as farm:
        tracker = TrackerServer("127.0.3.1", 0, clock, tracker=Tracker(ttl_s=86400.0))
        await tracker.start()
        mesh = Mesh(tmp_path, farm, clock, tracker)
        try:
            yield mesh
        finally:
            with contextlib.suppress(Exception):
                await mesh.close()
            await tracker.stop()


__all__ = ["BUSY", "EAGER", "FEEDEX", "LAZY", "SPEED", "Mesh", "free_port", "linked",
           "replace"]
