"""SCRIBE-RSS on real UDP endpoints on loopback, against the issue's anchors (issue 14, section 6).

The experiment of ``benchmarks/mesh_scribe_sim.py`` (the simulator), with every overlay node a
:class:`~feedmesh.mesh.transport.UdpNode`: its own loopback address (127.4.x.y) and UDP port, 25 ms
+-10% per-pair latency emulated by the transport. The endpoints live in ``--workers`` processes
(:class:`~feedmesh.mesh.transport.fleet.Fleet`); this process is the coordinator and hosts the
publisher. Phases: nodes join one by one (``--join-gap`` apart) through a random earlier node;
every node but the publisher subscribes; the publisher signs and multicasts ``--items`` records
0.5 s apart; a raw socket pushes four forged records (another key, one byte changed, a replay,
unsigned) at up to 50 subscribers; then 20% of the nodes (the group's root among them) are closed
at once while 20 more records go out 0.25 s apart.

Delivery times are taken in the workers on the event loop's clock (``time.monotonic()``, shared by
every process) and compared with publish times taken here. Baselines in the same run: polling costs
the publisher one request per subscriber per poll (``polling_requests_per_update``); ``--sim`` runs
the simulator with the same node code at the same size.

    PYTHONPATH=src .venv/bin/python benchmarks/mesh_scribe.py --nodes 200
    PYTHONPATH=src .venv/bin/python benchmarks/mesh_scribe.py --quick      # 1,000 endpoints

Each worker's event-loop lag (how late a 50 ms sleep wakes) and the CPU each endpoint costs are
printed beside the figures: on a shared machine they say how much of a figure is the machine.
Last line: one JSON object.
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
from feedmesh.mesh.transport.fleet import Fleet, digest, fleet_address, open_publisher

URL = "https://news.example.org/feed.xml"
GOALS = {"publisher_msgs_per_update": 2, "delivery_p99_ms": 400, "duplicates_per_node_item": 0.05,
         "missed_after_churn": 0, "repair_s": 5.0, "tampered_delivered": 0}


async def wait_until(check, timeout: float, every: float = 0.5) -> float | None:
    """Poll ``await check()`` until true or ``timeout``; the seconds it took (None: never)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while not await check():
        if loop.time() - started > timeout:
            return None
        await asyncio.sleep(every)
    return round(loop.time() - started, 1)


async def experiment(count: int, workers: int, seed: int, items: int, join_gap: float,
                     net: str) -> dict:
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    publisher = await open_publisher(URL, net)   # never the root: the churn kills the root
    fleet = Fleet(workers)
    try:
        return await _run(fleet, publisher, count, rng, items, join_gap, net, seed, loop)
    finally:
        publisher.close()
        await fleet.close()


async def _run(fleet: Fleet, publisher: UdpNode, count: int, rng: random.Random, items: int,
               join_gap: float, net: str, seed: int, loop) -> dict:
    workers = fleet.workers
    # endpoint n (1..count-1) lives in worker (n - 1) % workers, at index (n - 1) // workers
    place = {n: ((n - 1) % workers, (n - 1) // workers) for n in range(1, count)}
    shares = [[fleet_address(n, net) for n in range(1, count) if place[n][0] == w]
              for w in range(workers)]
    handles = await fleet.call_all("open", [(share,) for share in shares])
    everyone: list[Handle] = [publisher.handle] + [handles[place[n][0]][place[n][1]]
                                                   for n in range(1, count)]
    sent_before_build = publisher.counters["sent"]
    started = time.perf_counter()
    await publisher.start(None)
    t0 = loop.time() + 0.5
    plans: list[list] = [[] for _ in range(workers)]
    for n in range(1, count):
        w, i = place[n]
        plans[w].append((i, t0 + n * join_gap, everyone[rng.randrange(n)]))
    await fleet.call_all("start", [(plan,) for plan in plans])
    gid = group_id(URL)

    async def statuses() -> list[dict]:
        return await fleet.call_all("status", [(gid,)] * workers)

    await asyncio.sleep(max(0.0, t0 + count * join_gap - loop.time()))
    joined_s = await wait_until(
        lambda: _sum(statuses(), "joined", count - 1), timeout=10.0)
    await asyncio.sleep(5.0)                        # let leaf sets and tables settle
    build_s = time.perf_counter() - started
    status = await statuses()
    joined = 1 + sum(s["joined"] for s in status)
    counters = await fleet.call_all("counters")
    build_sent = (publisher.counters["sent"] - sent_before_build
                  + sum(c.get("udp-sent", 0) for per in counters for c in per))

    publish_sends: Counter[str] = Counter()
    take = publisher.node.take

    def counted_take():
        out = take()
        publish_sends.update(message_kind(body) for _, body in out)
        return out
    publisher.node.take = counted_take

    writer = FeedWriter(SigningKey(bytes([seed % 256]) * 32), URL)
    at = loop.time() + 0.2
    await fleet.call_all("subscribe", [
        (URL, writer.feed, [(i, at + rng.random() * 2.0) for i in range(len(share))])
        for share in shares])
    await asyncio.sleep(2.5)
    attach_s = await wait_until(lambda: _sum(statuses(), "attached", count - 1), timeout=20.0)
    attached = sum(s["attached"] for s in await statuses())

    published: dict[int, float] = {}
    genuine: dict[bytes, bytes] = {}                # digest -> wire

    def publish() -> None:
        wire = writer.append({"id": f"item-{writer.seq + 1}", "title": "news"})
        genuine[digest(wire)] = wire
        published[writer.seq] = loop.time()
        publisher.publish(URL, writer.seq, wire)

    def node_counts(per_worker: list[list[dict]], key: str) -> list[int]:
        return [publisher.node.counters[key]] + [c.get(key, 0) for per in per_worker for c in per]

    before = await fleet.call_all("counters")
    fwd_before = np.array(node_counts(before, "forwarded"), dtype=float)
    dup_before = sum(node_counts(before, "duplicates"))
    cpu_before = await fleet.call_all("usage")
    for _ in range(items):
        publish()
        await asyncio.sleep(0.5)
    await asyncio.sleep(3.0)
    cpu_after = await fleet.call_all("usage")
    after = await fleet.call_all("counters")
    forwarded = (np.array(node_counts(after, "forwarded"), dtype=float) - fwd_before) / items
    dup_steady = sum(node_counts(after, "duplicates")) - dup_before
    route_publish = publish_sends["Route/Publish"]
    cpu_s = sum(a[0] - b[0] for a, b in zip(cpu_after, cpu_before, strict=True))
    wall_s = float(np.mean([a[1] - b[1] for a, b in zip(cpu_after, cpu_before, strict=True)]))

    # forged records from a raw socket, as if from a malicious neighbour
    rogue = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rogue.bind((f"{net}.255.250", 0))
    me = Handle(1, rogue.getsockname())
    last = _last(writer, genuine)
    other = FeedWriter(SigningKey(b"\x09" * 32), URL, feed=writer.feed,
                       head=(writer.seq, writer.prev))
    position = rng.randrange(68, len(last))
    forged = [other.append({"id": "forged"}),
              last[:position] + bytes([last[position] ^ 1]) + last[position + 1:],
              min(genuine.values(), key=len), last[68:]]
    targets = rng.sample(everyone[1:], min(50, count - 1))
    for target in targets:
        for wire in forged:
            rogue.sendto(encode_datagram(me, Item(gid, writer.seq + 1, wire)), target.addr)
    await asyncio.sleep(1.0)
    rogue.close()

    # churn: 20% die at once, the root among them
    roots = [(w, i) for w, s in enumerate(await statuses()) for i in s["roots"]]
    others = [place[n] for n in range(1, count) if place[n] not in roots]
    victims = roots[:1] + rng.sample(others, int(0.2 * count) - len(roots[:1]))
    kill_time = loop.time()
    await fleet.call_all("kill", [([i for v, i in victims if v == w],) for w in range(workers)])
    live = count - 1 - len(victims)
    for _ in range(20):
        publish()
        await asyncio.sleep(0.25)
    await wait_until(lambda: _sum(fleet.call_all("progress", [(writer.seq,)] * workers), None,
                                  live), timeout=20.0)

    reports = await fleet.call_all("report")
    final = await fleet.call_all("counters")
    latencies, missed, tampered, seen_live = [], 0, 0, []
    refused: Counter[str] = Counter()
    for w, report in enumerate(reports):
        for closed, got in zip(report["closed"], report["deliveries"], strict=True):
            first: dict[int, tuple[float, bool]] = {}
            for seq, at_, recovered, dig in got:
                if dig not in genuine:
                    tampered += 1
                    continue
                first.setdefault(seq, (at_, recovered))
            latencies += [(first[seq][0] - published[seq]) * 1000 for seq in range(1, items + 1)
                          if seq in first]
            if not closed:
                missed += sum(1 for seq in published if seq not in first)
                seen_live.append(first)
        for per in final[w]:
            refused.update({k: v for k, v in per.items() if k.startswith("refused-")})
    steady_missed = (count - 1) * items - len(latencies)
    repair = _repair(published, kill_time, seen_live)
    lag = np.concatenate([np.array(r["lag_ms"]) for r in reports])
    return {
        "nodes": count, "workers": workers, "subscribers": count - 1, "joined": joined,
        "attached": attached, "join_wait_s": joined_s, "attach_wait_s": attach_s,
        "build_wall_s": round(build_s, 1),
        "build_datagrams_per_node": round(build_sent / count, 1),
        "publisher_msgs_per_update": route_publish / items,
        "polling_requests_per_update": count - 1,
        "delivery_p50_ms": round(float(np.percentile(latencies, 50)), 1) if latencies else None,
        "delivery_p99_ms": round(float(np.percentile(latencies, 99)), 1) if latencies else None,
        "duplicates_per_node_item": round(dup_steady / ((count - 1) * items), 4),
        "forwarding_max": float(forwarded.max()),
        "forwarding_mean": round(float(forwarded.mean()), 3),
        "steady_missed": steady_missed, "killed": len(victims), "root_killed": bool(roots),
        "missed_after_churn": missed, "repair_s": repair,
        "tampered_tried": len(targets) * len(forged), "tampered_delivered": tampered,
        "refused": dict(refused),
        "cpu_ms_per_endpoint_s": round(cpu_s / wall_s / (count - 1) * 1000, 2),
        "loop_lag_p50_ms": round(float(np.percentile(lag, 50)), 1),
        "loop_lag_p99_ms": round(float(np.percentile(lag, 99)), 1),
        "malformed": sum(c.get("udp-malformed", 0) for per in final for c in per),
    }


async def _sum(awaitable, key: str | None, target: int) -> bool:
    values = await awaitable
    return sum(v[key] if key else v for v in values) >= target


def _last(writer: FeedWriter, genuine: dict[bytes, bytes]) -> bytes:
    return next(w for w in genuine.values() if f'"seq":{writer.seq},'.encode() in w)


def _repair(published: dict[int, float], kill_time: float,
            live: list[dict[int, tuple[float, bool]]]) -> float | None:
    """From the kill to the first record from which on every live subscriber got every record
    down the tree (not by recovery); None if the tree never carried them all again."""
    after = sorted(seq for seq, at in published.items() if at >= kill_time)
    repaired_from = None
    for seq in reversed(after):
        if all(seq in seen and not seen[seq][1] for seen in live):
            repaired_from = seq
        else:
            break
    return round(published[repaired_from] - kill_time, 2) if repaired_from is not None else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="the 1,000-endpoint case alone")
    parser.add_argument("--workers", type=int, default=0,
                        help="worker processes (default: one per 250 endpoints, at least 2)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--join-gap", type=float, default=0.02,
                        help="seconds between two nodes' joins")
    parser.add_argument("--net", default="127.4", help="loopback /16 for the endpoints")
    parser.add_argument("--sim", action="store_true",
                        help="also run the simulator at the same size (the baseline)")
    args = parser.parse_args()
    count = 1000 if args.quick else args.nodes
    if count < 10:
        parser.error(f"--nodes must be at least 10, not {count}")
    workers = args.workers or max(2, count // 250)
    result = asyncio.run(experiment(count, workers, args.seed, args.items, args.join_gap,
                                    args.net))
    result["load_1min"] = round(os.getloadavg()[0], 1)
    print(f"\n== {count} UDP endpoints on {args.net}.x.y in {workers} worker processes "
          f"(+ the publisher here), 25 ms links, load {result['load_1min']}")
    print(f"joined {result['joined']}/{count}, attached {result['attached']}/"
          f"{result['subscribers']}, event-loop lag p50 {result['loop_lag_p50_ms']} ms / "
          f"p99 {result['loop_lag_p99_ms']} ms, {result['cpu_ms_per_endpoint_s']} CPU-ms per "
          f"endpoint per second while publishing")
    sim = run_experiment(count, seed=args.seed) if args.sim else None
    print(f"{'figure':<32}{'UDP':>12}{'simulator':>12}  goal")
    for key in ("publisher_msgs_per_update", "delivery_p50_ms", "delivery_p99_ms",
                "duplicates_per_node_item", "forwarding_max", "forwarding_mean",
                "missed_after_churn", "repair_s", "tampered_delivered"):
        other = getattr(sim, key) if sim is not None else ""
        other = f"{other:.4g}" if isinstance(other, float) else str(other)
        print(f"{key:<32}{result[key]!s:>12}{other:>12}  {GOALS.get(key, '')}")
    print(f"polling: {result['polling_requests_per_update']} requests per update; tampered "
          f"tried {result['tampered_tried']}, refused by reason {result['refused']}; steady "
          f"missed {result['steady_missed']}; killed {result['killed']}")
    if sim is not None:
        result["sim"] = {k: getattr(sim, k) for k in GOALS} | {
            "delivery_p50_ms": sim.delivery_p50_ms}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
