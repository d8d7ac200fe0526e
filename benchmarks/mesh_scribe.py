"""SCRIBE-RSS on real UDP endpoints on loopback, against the issue's anchors (issue 14, section 6).

The same experiment as ``benchmarks/mesh_scribe_sim.py`` (the simulator), but every overlay node is
a :class:`~feedmesh.mesh.transport.UdpNode`: its own socket on 127.0.4.x, several endpoints per
process on one event loop, 25 ms +-10% per-pair latency emulated by the transport. Phases: nodes
join one by one through a random earlier node; every node but the publisher subscribes; the
publisher signs and multicasts ``--items`` records 0.5 s apart; a raw socket pushes four forged
records (another key, one byte changed, a replay, unsigned) at up to 50 subscribers; then 20% of
the nodes (the group's root among them) are closed at once while 20 more records go out 0.25 s
apart.

Baselines in the same run: polling costs the publisher one request per subscriber per poll
(``polling_requests_per_update``); the simulator runs the same node code at the same size
(``--sim``) for comparison.

    PYTHONPATH=src .venv/bin/python benchmarks/mesh_scribe.py --nodes 150
    PYTHONPATH=src .venv/bin/python benchmarks/mesh_scribe.py --quick      # 1,000 endpoints

One process runs every endpoint: on a machine with few cores an overloaded event loop lengthens
every link, so the figures measure the machine as much as the protocol (the script prints the
event loop's lag next to them). Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import time
from collections import Counter

import numpy as np
from nacl.signing import SigningKey

from feedmesh.mesh.overlay import Handle, group_id
from feedmesh.mesh.overlay.scenario import run_experiment
from feedmesh.mesh.overlay.scribe import Item
from feedmesh.mesh.overlay.sim import message_kind
from feedmesh.mesh.overlay.wire import encode_datagram
from feedmesh.mesh.records import FeedWriter
from feedmesh.mesh.transport import UdpNode

URL = "https://news.example.org/feed.xml"
GOALS = {"publisher_msgs_per_update": 2, "delivery_p99_ms": 400, "duplicates_per_node_item": 0.05,
         "missed_after_churn": 0, "repair_s": 5.0, "tampered_delivered": 0}


def address(index: int) -> str:
    """Endpoint ``index`` on 127.0.4.1 .. 127.0.4.250 (ports differ past 250)."""
    return f"127.0.4.{1 + index % 250}"


async def lag_probe(samples: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        before = loop.time()
        await asyncio.sleep(0.05)
        samples.append((loop.time() - before - 0.05) * 1000)


async def experiment(count: int, seed: int, items: int, join_gap: float) -> dict:
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    nodes = [UdpNode(address(i)) for i in range(count)]
    for node in nodes:
        await node.open()
    lag: list[float] = []
    stop = asyncio.Event()
    probe = loop.create_task(lag_probe(lag, stop))
    started = time.perf_counter()
    await nodes[0].start(None)
    for index, node in enumerate(nodes[1:], 1):
        await node.start(nodes[rng.randrange(index)].handle)
        await asyncio.sleep(join_gap)
    await asyncio.sleep(5.0)
    build_s = time.perf_counter() - started
    joined = sum(n.node.pastry.joined for n in nodes)

    publisher, subscribers = nodes[0], nodes[1:]
    publish_sends = Counter()
    take = publisher.node.take

    def counted_take():
        out = take()
        publish_sends.update(message_kind(body) for _, body in out)
        return out
    publisher.node.take = counted_take

    writer = FeedWriter(SigningKey(bytes([seed % 256]) * 32), URL)
    for subscriber in subscribers:
        loop.call_later(rng.random() * 2.0, subscriber.subscribe, URL, writer.feed)
    await asyncio.sleep(5.0)
    gid = group_id(URL)
    attached = sum(1 for s in subscribers if gid in s.node.groups
                   and (s.node.groups[gid].parent is not None or s.node.groups[gid].root))

    published: dict[int, float] = {}
    genuine: set[bytes] = set()

    def publish() -> None:
        wire = writer.append({"id": f"item-{writer.seq + 1}", "title": "news"})
        genuine.add(wire)
        published[writer.seq] = loop.time()
        publisher.publish(URL, writer.seq, wire)

    dup_before = sum(n.node.counters["duplicates"] for n in nodes)
    fwd_before = {id(n): n.node.counters["forwarded"] for n in nodes}
    for _ in range(items):
        publish()
        await asyncio.sleep(0.5)
    await asyncio.sleep(3.0)
    route_publish = publish_sends["Route/Publish"]
    dup_steady = sum(n.node.counters["duplicates"] for n in nodes) - dup_before
    forwarded = np.array([n.node.counters["forwarded"] - fwd_before[id(n)] for n in nodes]) / items

    def seen(node) -> dict[int, tuple[float, bool]]:
        out: dict[int, tuple[float, bool]] = {}
        for d in node.deliveries:
            if d.record.wire in genuine:
                out.setdefault(d.record.seq, (d.at, d.recovered))
        return out

    latencies = [(at - published[seq]) * 1000 for s in subscribers
                 for seq, (at, _) in seen(s).items() if seq in published]
    steady_missed = sum(1 for s in subscribers for seq in published if seq not in seen(s))

    # forged records from a raw socket, as if from a malicious neighbour
    rogue = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rogue.bind(("127.0.4.251", 0))
    me = Handle(1, rogue.getsockname())
    last = next(w for w in genuine if f'"seq":{writer.seq},'.encode() in w)
    other = FeedWriter(SigningKey(b"\x09" * 32), URL, feed=writer.feed,
                       head=(writer.seq, writer.prev))
    position = rng.randrange(68, len(last))
    forged = [other.append({"id": "forged"}),
              last[:position] + bytes([last[position] ^ 1]) + last[position + 1:],
              min(genuine, key=len), last[68:]]
    targets = rng.sample(subscribers, min(50, len(subscribers)))
    for target in targets:
        for wire in forged:
            rogue.sendto(encode_datagram(me, Item(gid, writer.seq + 1, wire)), target.addr)
    await asyncio.sleep(1.0)
    rogue.close()
    tampered_delivered = sum(1 for s in subscribers for d in s.deliveries
                             if d.record.wire not in genuine)

    # churn: 20% die at once, the root among them
    roots = [s for s in subscribers if gid in s.node.groups and s.node.groups[gid].root]
    others = [s for s in subscribers if s not in roots]
    victims = roots[:1] + rng.sample(others, int(0.2 * count) - len(roots[:1]))
    kill_time = loop.time()
    for victim in victims:
        victim.close()
    live = [s for s in subscribers if not s.closed]
    for _ in range(20):
        publish()
        await asyncio.sleep(0.25)
    deadline = loop.time() + 20.0
    while loop.time() < deadline and not all(len(seen(s)) >= writer.seq for s in live):
        await asyncio.sleep(0.5)
    missed = sum(1 for s in live for seq in published if seq not in seen(s))
    after = sorted(seq for seq, at in published.items() if at >= kill_time)
    repaired_from = None
    for seq in reversed(after):
        if all(seq in seen(s) and not seen(s)[seq][1] for s in live):
            repaired_from = seq
        else:
            break
    repair = (round(published[repaired_from] - kill_time, 2) if repaired_from is not None
              else None)
    stop.set()
    await probe
    for node in nodes:
        node.close()
    refused = Counter()
    for s in subscribers:
        refused.update({k: v for k, v in s.node.counters.items() if k.startswith("refused-")})
    return {
        "nodes": count, "subscribers": len(subscribers), "joined": joined, "attached": attached,
        "build_wall_s": round(build_s, 1),
        "publisher_msgs_per_update": route_publish / items,
        "polling_requests_per_update": len(subscribers),
        "delivery_p50_ms": round(float(np.percentile(latencies, 50)), 1) if latencies else None,
        "delivery_p99_ms": round(float(np.percentile(latencies, 99)), 1) if latencies else None,
        "duplicates_per_node_item": round(dup_steady / (len(subscribers) * items), 4),
        "forwarding_max": float(forwarded.max()), "forwarding_mean": round(float(forwarded.mean()), 3),
        "steady_missed": steady_missed, "missed_after_churn": missed, "repair_s": repair,
        "tampered_tried": len(targets) * len(forged), "tampered_delivered": tampered_delivered,
        "refused": dict(refused),
        "loop_lag_p50_ms": round(float(np.percentile(lag, 50)), 1),
        "loop_lag_p99_ms": round(float(np.percentile(lag, 99)), 1),
        "malformed": sum(n.counters["malformed"] for n in nodes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="the 1,000-endpoint case alone")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--sim", action="store_true",
                        help="also run the simulator at the same size (the baseline)")
    args = parser.parse_args()
    count = 1000 if args.quick else args.nodes
    result = asyncio.run(experiment(count, args.seed, args.items, join_gap=0.02))
    load = os.getloadavg()[0]
    print(f"\n== {count} UDP endpoints on 127.0.4.x in one process, 25 ms links, load {load:.1f}")
    print(f"joined {result['joined']}/{count}, attached {result['attached']}/"
          f"{result['subscribers']}, event-loop lag p50 {result['loop_lag_p50_ms']} ms / "
          f"p99 {result['loop_lag_p99_ms']} ms")
    sim = None
    if args.sim:
        sim = run_experiment(count, seed=args.seed)
    print(f"{'figure':<32}{'UDP':>12}{'simulator':>12}  goal")
    for key in ("publisher_msgs_per_update", "delivery_p50_ms", "delivery_p99_ms",
                "duplicates_per_node_item", "missed_after_churn", "repair_s",
                "tampered_delivered"):
        other = getattr(sim, key) if sim is not None else ""
        other = f"{other:.4g}" if isinstance(other, float) else str(other)
        print(f"{key:<32}{result[key]!s:>12}{other:>12}  {GOALS.get(key, '')}")
    print(f"polling: {result['polling_requests_per_update']} requests per update; tampered "
          f"tried {result['tampered_tried']}, refused by reason {result['refused']}")
    if sim is not None:
        result["sim"] = {k: getattr(sim, k) for k in GOALS} | {
            "delivery_p50_ms": sim.delivery_p50_ms}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
