"""A tiny driver for FeedEx node tests: nodes on the mesh's one event loop
(:class:`~feedmesh.mesh.sansio.EventLoop`), messages delivered after a fixed latency, in order.
Not FeedEx's simulation: small enough to read next to each test."""

from __future__ import annotations

import random
from dataclasses import replace

from feedmesh.mesh.feedex import Deliver, FeedExNode, FeedExSettings, QueryResult, Tracker
from feedmesh.mesh.feedex.messages import Address, Entry, Message, decode, encode
from feedmesh.mesh.sansio import EventLoop

TRACKER: Address = ("127.0.9.1", 9000)


def address(i: int) -> Address:
    return (f"127.0.8.{i}", 8400)


def entry(key: str, published: float = 0.0) -> Entry:
    return Entry(key, published, f"title {key}", f"http://pub.test/{key}")


class Net:
    def __init__(self, settings: FeedExSettings | None = None, latency: float = 0.05) -> None:
        # the nodes share the loopback /24 127.0.8.x: each address is a machine of its own
        self.settings = replace(settings or FeedExSettings(), neighbour_prefix_v4=32)
        self.latency = latency
        self.loop = EventLoop()
        self.nodes: dict[Address, FeedExNode] = {}
        self.tracker = Tracker()
        self.down: set[Address] = set()
        self.sent: list[tuple[Address, Address, Message]] = []  # (from, to, message)
        self.delivered: dict[Address, list[Deliver]] = {}
        self.results: list[QueryResult] = []

    @property
    def now(self) -> float:
        return self.loop.now

    def add(self, i: int, feeds: list[str], *, tracker: bool = False,
            rng: random.Random | None = None, **settings) -> FeedExNode:
        """A started node (its timers run) subscribed to ``feeds``."""
        s = replace(self.settings, **settings)
        node = FeedExNode(address(i), s, weights=dict.fromkeys(feeds, 1.0),
                          tracker=TRACKER if tracker else None, rng=rng)
        self.nodes[node.address] = node
        self.delivered[node.address] = []
        node.start(self.now)
        self.carry(node)
        return node

    def carry(self, node: FeedExNode) -> None:
        """Send what ``node`` made (``take``), keep what it delivered (``take_deliveries``)."""
        for to, message in node.take():
            # every message crosses the codec, as on a real wire
            body = decode(encode(message, node.address[1])).body
            self.sent.append((node.address, to, body))
            self.loop.at(self.now + self.latency, self._arrive, node.address, to, body)
        for output in node.take_deliveries():
            if isinstance(output, Deliver):
                self.delivered[node.address].append(output)
            elif isinstance(output, QueryResult):
                self.results.append(output)
        deadline = node.next_deadline()
        if deadline is not None:
            self.loop.wake(node.address, deadline, self._fire)

    def connect(self, a: FeedExNode, b: FeedExNode) -> None:
        """Make a and b neighbours through the real handshake."""
        a.connect(self.now, b.address)
        self.carry(a)
        self.run(1.0)

    def run(self, seconds: float) -> None:
        """Deliver messages and fire timers until ``seconds`` from now."""
        self.loop.run_until(self.now + seconds)

    def _arrive(self, now: float, src: Address, dst: Address, body: Message, _d: object) -> None:
        if dst == TRACKER:
            reply = self.tracker.receive(now, src, body)
            self.loop.at(now + self.latency, self._arrive, TRACKER, src, reply)
            return
        if dst in self.down or dst not in self.nodes:
            sender = self.nodes.get(src)
            if sender is not None and src not in self.down:
                sender.unreachable(now, dst)
                self.carry(sender)
            return
        node = self.nodes[dst]
        node.receive(now, src, body)
        self.carry(node)

    def _fire(self, now: float, at: Address) -> None:
        node = self.nodes.get(at)
        if node is not None and at not in self.down:
            node.fire(now)
            self.carry(node)

    def fetch(self, node: FeedExNode, feed: str, entries: list[Entry]) -> None:
        node.fetched(self.now, feed, entries)
        self.carry(node)

    def calls(self, kind: type, to: Address | None = None) -> list:
        return [m for s, d, m in self.sent if isinstance(m, kind) and (to is None or d == to)]

    def keys(self, node: FeedExNode) -> list[str]:
        return [e.key for d in self.delivered[node.address] for e in d.entries]
