"""What a stranger gets out of a SCRIBE-RSS peer's UDP endpoint, on loopback (issue 32).

1. **Amplification**: a small overlay (``--nodes`` endpoints on 127.4.9.x) carries ``--records``
   records of ~1 KB; ``--victims`` sockets, each on an address the nodes never heard from (what a
   forged source names), send a 99-byte ``Recover`` for all of them to a member. Bytes that come
   back to each, over the bytes it sent: ``amplification_ratio`` (also ``amplification_max``:
   the issue's name; the worst victim; goal <= 1:
   only the 25-byte cookie challenge may come back). ``validated_ratio`` is the same ``Recover``
   after the address returned the cookie (the full answer a real peer gets).
2. **Memory under a flood**: a stranger that validated its own address and joined the group as a
   child (the worst case: nothing but the bounds stands in its way) sends ``--flood-mb`` of
   datagrams: ``Recover``/``Vouch`` for seqs far ahead, joins and publishes for random groups,
   records for them, rumours of far-ahead seqs. ``flood_rss_growth_mb``: the process's resident
   memory after the flood (garbage collected, freed memory returned) minus before it (also
   ``stranger_flood_rss_growth_mb``; goal <= 10).
   The process holds the overlay and the attacker's socket; the attacker keeps nothing.
3. **Markup**: a hostile set of entries (scripts, event handlers, ``javascript:``/``data:``
   links, iframes, a date a month ahead) made into archive entries as a neighbour's FeedEx bundle
   and as a record's entry object, then rendered as the local proxy renders them (RSS 2.0 and
   JSON Feed): ``unsanitized_served`` counts hostile constructs that survive (goal 0);
   ``future_dates_served`` the dates more than 5 minutes ahead (goal 0). The same path through a
   real peer's proxy on loopback is ``tests/mesh/peer/test_hostile_entries.py``.
4. **Eviction** (FeedEx): a peer full with ``max_neighbours`` honest neighbours, each on a /24 of
   its own, gets 12 ``connect`` calls stating ``neighbours: 0`` and every feed it follows at hop
   0, from one address (12 stated ports) and again from 12 addresses of one /24.
   ``evicted_honest``: honest neighbours it lost (goal 0). The real node core and codec on one
   in-process event queue (what a ``connect`` carries does not depend on the socket; the
   handshake over loopback is ``tests/mesh/peer``).
5. **Sybils at the tracker**: one /24 registers 1,000 identities (250 addresses x 4 stated ports)
   beside ``--honest`` nodes on /24s of their own; ``sybil_newcomer_share``: the share of a
   newcomer's candidates that are the attacker's, asking for 10 (the issue's figure, goal
   <= 0.2) over 200 newcomers, with ``feedex.Tracker``'s defaults. ``sybil_share_by_honest``
   gives it for other network sizes and for the node's own ask (4 x max_neighbours = 40).

    PYTHONPATH=src .venv/bin/python benchmarks/mesh_attack.py

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import socket
import time
from datetime import UTC, datetime

from nacl.signing import SigningKey

from feedmesh.feeds.render import render_feed
from feedmesh.memory import release_memory
from feedmesh.mesh.feedex import FeedExNode, FeedExSettings, Tracker
from feedmesh.mesh.feedex.messages import Connect, GetNeighbors, decode, encode
from feedmesh.mesh.overlay.ids import group_id
from feedmesh.mesh.overlay.messages import Route
from feedmesh.mesh.overlay.scribe import Item, Publish, Recover, Rumour, Subscribe, Vouch
from feedmesh.mesh.overlay.wire import MAGIC, decode_datagram, encode_datagram
from feedmesh.mesh.peer.entries import from_wire, to_wire
from feedmesh.mesh.peer.multicast import entry_from_record
from feedmesh.mesh.records import FeedWriter
from feedmesh.mesh.transport import UdpNode, handle_at
from feedmesh.mesh.transport.udp import COOKIE_MAGIC
from feedmesh.model import Entry, FeedInfo
from feedmesh.procstat import rss_bytes

URL = "https://attack.example.org/feed.xml"
HOSTILE_SUMMARIES = (
    '<script>alert(1)</script>', '<img src="http://127.0.0.1/x.png" onerror="alert(2)">',
    '<iframe src="http://evil.example/"></iframe>', '<a href="javascript:alert(3)">a</a>',
    '<a href="data:text/html,x">b</a>', '<svg onload="alert(4)"><script>alert(5)</script></svg>',
    '<body onload="alert(6)">', '<object data="http://evil.example/x"></object>',
)
HOSTILE_LINKS = ("javascript:alert(7)", "data:text/html;base64,PHNjcmlwdD4=", " JaVaScRiPt:x")
CONSTRUCTS = ("<script", "&lt;script", "onerror", "onload", "javascript:", "data:text", "iframe",
              "<object", "alert(")


def markup(now: float) -> dict:
    ahead = datetime.fromtimestamp(now + 30 * 86400, UTC)
    raw = [Entry(key=f"urn:h:{i}", title=f"<script>alert(0)</script>t{i}", summary=summary,
                 link=HOSTILE_LINKS[i % len(HOSTILE_LINKS)], published=ahead)
           for i, summary in enumerate(HOSTILE_SUMMARIES)]
    archived = from_wire(to_wire(raw), URL, now)
    for entry in raw:
        record = entry_from_record({"key": entry.key + ":r", "title": entry.title,
                                    "link": entry.link, "summary": entry.summary,
                                    "published": ahead.isoformat()}, "KEY", URL, now)
        if record is not None:
            archived.append(record)
    found = 0
    for fmt in ("rss2.0", "json1.1"):
        text = render_feed(FeedInfo(title="t"), archived, fmt).decode().lower()
        found += sum(text.count(construct) for construct in CONSTRUCTS)
    future = sum(1 for e in archived if e.published and e.published.timestamp() > now + 300)
    return {"unsanitized_served": found, "future_dates_served": future,
            "hostile_entries": len(archived)}


FEED = "https://attack.example.org/feedex/"


def _pump(nodes: dict, queue: list) -> None:
    """Deliver (from, to, message) in order through the codec until nothing is left; messages
    to an address with no node (the attacker's) are dropped."""
    while queue:
        src, dst, message = queue.pop(0)
        node = nodes.get(dst)
        if node is None:
            continue
        node.receive(0.0, src, decode(encode(message, src[1])).body)
        queue.extend((dst, to, m) for to, m in node.take())


def eviction(fresh: int = 12) -> dict:
    """Honest neighbours a full FeedEx peer loses to ``fresh`` connects from one address, and
    from one /24, each stating no neighbours and every feed the peer follows."""
    settings = FeedExSettings()
    feeds = [f"{FEED}{i}" for i in range(5)]
    lost = {}
    for name, attackers in (
            ("one_address", [("127.0.66.1", 9000 + k) for k in range(fresh)]),
            ("one_prefix", [(f"127.0.66.{1 + k}", 8400) for k in range(fresh)])):
        hub = FeedExNode(("127.0.20.1", 8400), settings, weights=dict.fromkeys(feeds, 1.0))
        nodes = {hub.address: hub}
        queue: list = []
        for i in range(settings.max_neighbours):
            node = FeedExNode((f"127.0.{21 + i}.1", 8400), settings,
                              weights={feeds[i % len(feeds)]: 1.0})
            nodes[node.address] = node
            node.connect(0.0, hub.address)
            queue.extend((node.address, to, m) for to, m in node.take())
        _pump(nodes, queue)
        honest = set(hub.neighbours)
        assert len(honest) == settings.max_neighbours
        for attacker in attackers:
            queue.append((attacker, hub.address,
                          Connect(dict.fromkeys(feeds, 0), neighbours=0)))
        _pump(nodes, queue)
        lost[name] = sum(1 for a in honest  # the link gone on either side
                         if a not in hub.neighbours or hub.address not in nodes[a].neighbours)
        lost[name + "_taken"] = sum(1 for a in attackers if a in hub.neighbours)
    return {"evicted_honest": max(lost["one_address"], lost["one_prefix"]),
            "evicted_honest_one_address": lost["one_address"],
            "evicted_honest_one_prefix": lost["one_prefix"],
            "attacker_neighbours_taken": max(lost["one_address_taken"],
                                             lost["one_prefix_taken"])}


def sybil_share(honest: int, want: int, newcomers: int = 200, seed: int = 1) -> float:
    """Share of ``newcomers``' candidates (``want`` each) from one /24 of 1,000 identities."""
    tracker = Tracker(rng=random.Random(seed))
    for i in range(honest):
        tracker.receive(0.0, (f"127.{10 + i // 250}.{i % 250}.1", 8400), GetNeighbors(0))
    for k in range(1000):
        tracker.receive(0.0, (f"127.0.66.{1 + k % 250}", 9000 + k // 250), GetNeighbors(0))
    theirs = total = 0
    for n in range(newcomers):
        newcomer = (f"127.200.{n // 250}.{1 + n % 250}", 8400)
        peers = tracker.receive(1.0, newcomer, GetNeighbors(want)).peers
        tracker.forget(newcomer)
        theirs += sum(1 for host, _ in peers if host.startswith("127.0.66."))
        total += len(peers)
    return round(theirs / max(total, 1), 3)


def sybils(honest: int) -> dict:
    by = {f"{h}_honest_want_{w}": sybil_share(h, w) for h in (3, 10, 20, 100) for w in (10, 40)}
    return {"sybil_newcomer_share": sybil_share(honest, 10), "sybil_honest_nodes": honest,
            "sybil_share_by_honest": by}


class Socket:
    def __init__(self, host: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.bind((host, 0))
        self.sock.setblocking(False)
        self.handle = handle_at(*self.sock.getsockname())
        self.got: list[bytes] = []

    def drain(self) -> list[bytes]:
        while True:
            try:
                self.got.append(self.sock.recvfrom(65_536)[0])
            except BlockingIOError:
                return self.got

    def echo_challenge(self, to: tuple[str, int]) -> bool:
        for data in self.drain():
            if data[:5] == COOKIE_MAGIC + b"?":
                self.sock.sendto(COOKIE_MAGIC + b"!" + data[5:], to)
                return True
        return False


async def until(condition, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.02)
    return False


async def overlay(count: int, records: int) -> tuple[list[UdpNode], int]:
    nodes = [UdpNode(f"127.4.9.{1 + i}") for i in range(count)]
    for node in nodes:
        await node.open()
    await nodes[0].start(None)
    for node in nodes[1:]:
        await node.start(nodes[0].handle)
        await until(lambda node=node: node.node.pastry.joined)
    writer = FeedWriter(SigningKey(b"\x07" * 32), URL)
    gid = group_id(URL)
    for node in nodes:
        node.subscribe(URL, writer.feed)
    await until(lambda: all((g := n.node.groups.get(gid)) is not None and (g.parent or g.root)
                            for n in nodes))
    for _ in range(records):
        nodes[0].publish(URL, writer.seq + 1, writer.append({"id": str(writer.seq + 1),
                                                              "text": "x" * 900}))
    await until(lambda: all(len(n.node.groups[gid].buffer) >= min(records, 32) for n in nodes))
    return nodes, gid


async def amplification(nodes: list[UdpNode], gid: int, victims: int, records: int) -> dict:
    target = nodes[-1]
    ratios, validated = [], []
    for index in range(victims):
        victim = Socket(f"127.4.10.{1 + index}")
        ask = encode_datagram(victim.handle, Recover(gid, tuple(range(1, records + 1))))
        victim.sock.sendto(ask, target.addr)
        # our own probe's echo comes back after anything the Recover caused (a FIFO link)
        victim.sock.sendto(COOKIE_MAGIC + b"?" + bytes(20), target.addr)
        await until(lambda v=victim: any(d[:5] == COOKIE_MAGIC + b"!" for d in v.drain()))
        back = sum(len(d) for d in victim.got if d[:5] != COOKIE_MAGIC + b"!")
        ratios.append(back / len(ask))
        victim.echo_challenge(target.addr)
        await until(lambda v=victim: target.is_validated(v.handle.addr))
        victim.got.clear()
        victim.sock.sendto(ask, target.addr)

        def items(v: Socket = victim) -> int:
            return sum(1 for d in v.drain() if d[:4] == MAGIC
                       and type(decode_datagram(d)[1]) is Item)
        await until(lambda: items() >= min(records, 32), timeout=5.0)
        validated.append(sum(len(d) for d in victim.got) / len(ask))
        victim.sock.close()
    return {"amplification_ratio": round(max(ratios), 3), "recover_bytes": len(ask),
            "validated_ratio": round(min(validated), 1)}


async def flood(nodes: list[UdpNode], gid: int, megabytes: float, seed: int) -> dict:
    target = nodes[-1]
    rng = random.Random(seed)
    stranger = Socket("127.4.11.1")
    stranger.sock.sendto(encode_datagram(stranger.handle, Route(
        gid, Subscribe(gid, stranger.handle), stranger.handle, 1)), target.addr)
    await until(lambda: stranger.echo_challenge(target.addr))
    await until(lambda: target.is_validated(stranger.handle.addr))
    child = await until(lambda: stranger.handle.id in target.node.groups[gid].children,
                        timeout=5.0)
    gc.collect()
    release_memory()
    await asyncio.sleep(0.5)
    before = rss_bytes(os.getpid()) or 0
    received_before = target.counters["received"]
    sent = datagrams = 0
    near = target.handle.id & ~0xFFFFFF
    budget = int(megabytes * 1_000_000)
    while sent < budget:
        kind = datagrams % 6
        group = near | rng.getrandbits(24)
        if kind == 0:
            low = rng.randrange(1, 1 << 40)
            body = Recover(gid, tuple(range(low, low + 6000)))
        elif kind == 1:
            body = Vouch(gid, tuple(range(1, 6001)))
        elif kind == 2:
            body = Route(group, Subscribe(group, handle_at("127.4.12.1", 1 + datagrams % 60000)),
                         stranger.handle, datagrams)
        elif kind == 3:
            body = Route(group, Publish(group, datagrams, rng.randbytes(30_000)),
                         stranger.handle, datagrams)
        elif kind == 4:
            body = Item(group, datagrams, rng.randbytes(30_000))
        else:
            groups = (gid, *(near | rng.getrandbits(24) for _ in range(1500)))
            body = Rumour(groups, (1 << 62,) * len(groups))
        data = encode_datagram(stranger.handle, body)
        stranger.sock.sendto(data, target.addr)
        sent += len(data)
        datagrams += 1
        if datagrams % 8 == 0:
            await asyncio.sleep(0.002)     # let the node read: the kernel drops what overflows
            stranger.got.clear()
            stranger.drain()
    await asyncio.sleep(1.0)
    stranger.drain()
    stranger.got.clear()
    gc.collect()
    release_memory()
    after = rss_bytes(os.getpid()) or 0
    groups = target.node.groups
    stranger.sock.close()
    return {"flood_rss_growth_mb": round((after - before) / 1e6, 2),
            "flood_sent_mb": round(sent / 1e6, 1), "flood_datagrams": datagrams,
            "target_datagrams_during_flood": target.counters["received"] - received_before,
            "stranger_was_child": child, "groups_held": len(groups),
            "waiting_max": max(len(g.waiting) for g in groups.values()),
            "asked_max": max(len(g.asked) for g in groups.values())}


async def measure(args: argparse.Namespace) -> dict:
    nodes, gid = await overlay(args.nodes, args.records)
    try:
        result = await amplification(nodes, gid, args.victims, args.records)
        result |= await flood(nodes, gid, args.flood_mb, args.seed)
        result |= markup(time.time())
        result |= eviction()
        result |= sybils(args.honest)
        # the names for the same figures
        result["amplification_max"] = result["amplification_ratio"]
        result["stranger_flood_rss_growth_mb"] = result["flood_rss_growth_mb"]
    finally:
        for node in nodes:
            node.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--records", type=int, default=32)
    parser.add_argument("--victims", type=int, default=10)
    parser.add_argument("--flood-mb", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--honest", type=int, default=20,
                        help="honest nodes at the tracker, each on its own /24")
    result = asyncio.run(measure(parser.parse_args()))
    print(f"amplification to an unvalidated address: {result['amplification_ratio']}x "
          f"(a {result['recover_bytes']}-byte Recover; {result['validated_ratio']}x once "
          f"validated); RSS growth from {result['flood_sent_mb']} MB of a validated child's "
          f"flood: {result['flood_rss_growth_mb']} MB ({result['groups_held']} groups held, "
          f"waiting <= {result['waiting_max']}, asked <= {result['asked_max']}); hostile "
          f"constructs served: {result['unsanitized_served']} of {result['hostile_entries']} "
          f"hostile entries, future dates {result['future_dates_served']}; honest neighbours "
          f"evicted by 12 connects: {result['evicted_honest']}; attacker's share of a "
          f"newcomer's 10 candidates: {result['sybil_newcomer_share']} "
          f"({result['sybil_honest_nodes']} honest /24s)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
