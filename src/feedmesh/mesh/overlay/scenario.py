"""The SCRIBE-RSS experiment, run in the simulator: build, subscribe, publish, tamper, kill 20%.

Phases (simulated seconds; the same :class:`~feedmesh.mesh.overlay.scribe.ScribeNode` code a real
transport would drive):

1. *build*: nodes join one after another through a random earlier node (Pastry join);
2. *subscribe*: every node but the publisher subscribes to one feed (Scribe join);
3. *steady*: the publisher signs and publishes ``items`` records, ``interval`` apart; an attacker
   sends forged copies (tampered, wrong key, replayed, unsigned) straight to random subscribers;
4. *churn*: ``kill_share`` of the nodes (never the publisher, always the group's root) die at once
   while publishing goes on;
   the run continues until every live subscriber has every record or ``drain`` seconds pass.

Figures: publisher messages per update, delivery latency p50/p99 (steady phase), duplicates per
node per item, forwarding load, messages per join, items missed after churn, repair time (from the
kill to the first record from which on every live subscriber got every record down the tree, not by
recovery), tampered records delivered.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from nacl.signing import SigningKey

from feedmesh.mesh.overlay.ids import Handle, closest, group_id, node_id
from feedmesh.mesh.overlay.pastry import PastryConfig
from feedmesh.mesh.overlay.scribe import Item, ScribeConfig, ScribeNode
from feedmesh.mesh.overlay.sim import LatencyMatrix, Simulator
from feedmesh.mesh.records import FeedWriter

__all__ = ["Outcome", "Overlay", "build_overlay", "route_path", "run_experiment"]

FEED_URL = "https://news.example.org/feed.xml"
JOIN_KINDS = ("Route/JoinPayload", "RouteAck", "StateRows", "JoinDone", "Announce", "Probe", "Pong")


@dataclass
class Overlay:
    sim: Simulator
    nodes: list[ScribeNode]
    rng: random.Random
    build_messages: Counter = field(default_factory=Counter)

    def live(self) -> list[ScribeNode]:
        return [n for n in self.nodes if n.handle.addr not in self.sim.dead]


def build_overlay(count: int, *, seed: int = 1, join_gap: float = 0.02, settle: float = 5.0,
                  latency: LatencyMatrix | None = None, scribe: ScribeConfig | None = None,
                  pastry: PastryConfig | None = None) -> Overlay:
    rng = random.Random(seed)
    sim = Simulator(latency or LatencyMatrix(seed=seed))
    nodes = [ScribeNode(Handle(node_id(f"{seed}-node-{i}".encode()), i), scribe, pastry)
             for i in range(count)]
    for index, node in enumerate(nodes):
        sim.add(node)
        bootstrap = nodes[rng.randrange(index)].handle if index else None
        sim.at(index * join_gap, lambda now, n=node, b=bootstrap: n.start(now, b), node.handle.addr)
    sim.run_until(count * join_gap + settle)
    before = Counter(sim.sent)
    return Overlay(sim, nodes, rng, Counter({k: before[k] for k in JOIN_KINDS}))


def route_path(overlay: Overlay, start: ScribeNode, key: int, limit: int = 64) -> list[ScribeNode]:
    """The nodes a message for ``key`` visits from ``start``, following each node's own state."""
    by_addr = {n.handle.addr: n for n in overlay.nodes}
    path = [start]
    while len(path) < limit:
        hop = path[-1].pastry.next_hop(key)
        if hop is None:
            return path
        path.append(by_addr[hop.addr])
    return path


def expected_root(overlay: Overlay, key: int) -> Handle:
    return closest(key, [n.handle for n in overlay.live()])


@dataclass
class Outcome:
    nodes: int
    subscribers: int
    publisher_msgs_per_update: float
    delivery_p50_ms: float
    delivery_p99_ms: float
    duplicates_per_node_item: float
    forwarding_max: float
    forwarding_mean: float
    pastry_msgs_per_join: float
    scribe_msgs_per_join: float
    missed_after_churn: int
    repair_s: float | None
    tampered_tried: int
    tampered_delivered: int
    steady_missed: int
    root_killed: bool
    message_kinds: dict[str, int]


def _forgeries(writer: FeedWriter, genuine: list[bytes], rng: random.Random) -> list[bytes]:
    """One forged record of each kind, aimed at the seq after ``genuine``."""
    last = genuine[-1]
    upcoming = FeedWriter(SigningKey(b"\x09" * 32), writer.url, feed=writer.feed,
                          head=(writer.seq, writer.prev))
    position = rng.randrange(4 + 64, len(last))
    tampered = last[:position] + bytes([last[position] ^ 0x01]) + last[position + 1:]
    return [upcoming.append({"id": "forged", "title": "wrong key"}), tampered,
            genuine[0], last[4 + 64:]]


def run_experiment(count: int, *, seed: int = 1, items: int = 10, interval: float = 0.5,
                   churn_items: int = 20, churn_interval: float = 0.25, kill_share: float = 0.2,
                   drain: float = 20.0, join_gap: float | None = None,
                   overlay: Overlay | None = None) -> Outcome:
    overlay = overlay or build_overlay(count, seed=seed,
                                       join_gap=join_gap if join_gap is not None else 0.02)
    sim, nodes, rng = overlay.sim, overlay.nodes, overlay.rng
    publisher = nodes[0]
    subscribers = nodes[1:]
    writer = FeedWriter(SigningKey(bytes([seed % 256]) * 32), FEED_URL)

    # subscribe, spread over 2 s
    t0 = sim.now
    before = Counter(sim.sent)
    for subscriber in subscribers:
        sim.at(t0 + rng.random() * 2.0,
               lambda now, s=subscriber: s.subscribe(now, FEED_URL, writer.feed),
               subscriber.handle.addr)
    sim.run_until(t0 + 5.0)
    joined = Counter(sim.sent) - before
    scribe_join = sum(joined[k] for k in ("Route/Subscribe", "JoinAck", "Redirect", "Adopt")
                      ) / max(1, len(subscribers))

    delivered: dict[int, dict[int, tuple[float, bool]]] = {s.handle.addr: {} for s in subscribers}

    genuine_set: set[bytes] = set()
    forged_delivered = [0]

    def collect(node) -> None:
        for delivery in node.take_deliveries():
            if delivery.record.wire not in genuine_set:
                forged_delivered[0] += 1
                continue
            delivered[node.handle.addr].setdefault(delivery.record.seq,
                                                   (delivery.at, delivery.recovered))
    sim.after_step = collect

    published: dict[int, float] = {}
    genuine: list[bytes] = []

    def publish(now: float) -> None:
        wire = writer.append({"id": f"item-{writer.seq + 1}", "title": "news"})
        genuine.append(wire)
        genuine_set.add(wire)
        published[writer.seq] = now
        publisher.publish(now, FEED_URL, writer.seq, wire)

    # steady phase
    t1 = sim.now
    sent_before = Counter(sim.sent)
    forwarded_before = {n.handle.addr: n.counters["forwarded"] for n in nodes}
    dup_before = sum(n.counters["duplicates"] for n in nodes)
    publisher_sent_before = sim.sent_by_kind[publisher.handle.addr, "Route/Publish"]
    for index in range(items):
        sim.at(t1 + index * interval, publish, publisher.handle.addr)
    sim.run_until(t1 + items * interval + 3.0)
    publisher_route_sends = (sim.sent_by_kind[publisher.handle.addr, "Route/Publish"]
                             - publisher_sent_before)
    steady = Counter(sim.sent) - sent_before
    dup_steady = sum(n.counters["duplicates"] for n in nodes) - dup_before
    forwarded = np.array([n.counters["forwarded"] - forwarded_before[n.handle.addr]
                          for n in nodes], dtype=float) / items
    latencies = [(at - published[seq]) * 1000 for got in delivered.values()
                 for seq, (at, _) in got.items() if seq in published]
    steady_missed = sum(1 for got in delivered.values() for seq in published if seq not in got)

    # tampering: forged records pushed at subscribers as if by their parent (a malicious forwarder)
    forged = _forgeries(writer, genuine, rng)
    targets = rng.sample(subscribers, min(50, len(subscribers)))
    tampered_tried = 0
    for target in targets:
        group = target.groups[next(iter(target.groups))]
        parent = group.parent or publisher.handle
        for wire in forged:
            tampered_tried += 1
            target.receive(sim.now, parent, Item(group.id, writer.seq + 1, wire))
        sim.act(target.handle.addr, lambda node, now: None)
    sim.run_until(sim.now + 1.0)

    # churn: kill a share of the nodes at once, keep publishing
    kill_time = sim.now
    # the group's root is among the dead (unless the publisher is the root): the worst case,
    # a new root must take over
    gid = group_id(FEED_URL)
    roots = [n for n in subscribers if gid in n.groups and n.groups[gid].root]
    others = [n for n in subscribers if n not in roots]
    victims = roots[:1] + rng.sample(others, int(kill_share * count) - len(roots[:1]))
    for victim in victims:
        sim.kill(victim.handle.addr)
    for index in range(churn_items):
        sim.at(kill_time + index * churn_interval, publish, publisher.handle.addr)
    live_subscribers = [s for s in subscribers if s.handle.addr not in sim.dead]
    end = kill_time + churn_items * churn_interval
    deadline = end + drain
    while sim.now < deadline:
        sim.run_until(sim.now + 1.0)
        if sim.now > end and all(len(delivered[s.handle.addr]) >= writer.seq
                                 for s in live_subscribers):
            break
    missed = sum(1 for s in live_subscribers for seq in published
                 if seq not in delivered[s.handle.addr])
    repair = _repair_time(delivered, live_subscribers, published, kill_time)
    return Outcome(
        nodes=count, subscribers=len(subscribers),
        publisher_msgs_per_update=publisher_route_sends / items,
        delivery_p50_ms=float(np.percentile(latencies, 50)) if latencies else float("nan"),
        delivery_p99_ms=float(np.percentile(latencies, 99)) if latencies else float("nan"),
        duplicates_per_node_item=dup_steady / (len(subscribers) * items),
        forwarding_max=float(forwarded.max()), forwarding_mean=float(forwarded.mean()),
        pastry_msgs_per_join=sum(overlay.build_messages.values()) / count,
        scribe_msgs_per_join=scribe_join, missed_after_churn=missed, repair_s=repair,
        tampered_tried=tampered_tried, tampered_delivered=forged_delivered[0],
        steady_missed=steady_missed, root_killed=bool(roots), message_kinds=dict(steady))


def _repair_time(delivered: dict, live: list[ScribeNode], published: dict[int, float],
                 kill_time: float) -> float | None:
    """From the kill to the first record after it from which on every live subscriber got every
    record down the tree (not by recovery); None if the tree never carried them all again."""
    after = sorted(seq for seq, at in published.items() if at >= kill_time)
    repaired_from = None
    for seq in reversed(after):
        if all(seq in delivered[s.handle.addr] and not delivered[s.handle.addr][seq][1]
               for s in live):
            repaired_from = seq
        else:
            break
    if repaired_from is None:
        return None
    return published[repaired_from] - kill_time
