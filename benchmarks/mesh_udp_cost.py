"""What one idle SCRIBE-RSS UDP endpoint costs: CPU per endpoint per second, in one process.

``--nodes`` endpoints on 127.4.x.y join one by one, all but the first subscribe to one feed, then
for ``--seconds`` nothing is published: what remains is the overlay's upkeep (leaf keep-alives,
heartbeats, refreshes) through the transport. The figure that decides how many endpoints a process
(and a core) carries. To compare with an older transport, run the same file with that version's
``src`` on PYTHONPATH (e.g. ``git worktree add /tmp/old <commit>``).

    PYTHONPATH=src .venv/bin/python benchmarks/mesh_udp_cost.py --nodes 150

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

from nacl.signing import SigningKey

from feedmesh.mesh.records import FeedWriter
from feedmesh.mesh.transport import UdpNode

URL = "https://news.example.org/feed.xml"


async def measure(count: int, seconds: float, seed: int) -> dict:
    rng = random.Random(seed)
    nodes = [UdpNode(f"127.4.{i // 250}.{1 + i % 250}") for i in range(count)]
    for node in nodes:
        await node.open()
    await nodes[0].start(None)
    for index, node in enumerate(nodes[1:], 1):
        await node.start(nodes[rng.randrange(index)].handle)
        await asyncio.sleep(0.02)
    await asyncio.sleep(3.0)
    writer = FeedWriter(SigningKey(bytes([seed % 256]) * 32), URL)
    for node in nodes[1:]:
        node.subscribe(URL, writer.feed)
    await asyncio.sleep(5.0)
    sent_before = sum(n.counters["sent"] for n in nodes)
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    cpu, wall = time.process_time() - cpu_before, time.perf_counter() - wall_before
    sent = sum(n.counters["sent"] for n in nodes) - sent_before
    joined = sum(n.node.pastry.joined for n in nodes)
    for node in nodes:
        node.close()
    return {"nodes": count, "joined": joined,
            "cpu_ms_per_endpoint_s": round(cpu / wall / count * 1000, 3),
            "datagrams_per_endpoint_s": round(sent / wall / count, 1),
            "cpu_us_per_datagram": round(cpu / max(1, sent) * 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=150)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    result = asyncio.run(measure(args.nodes, args.seconds, args.seed))
    print(f"{result['nodes']} idle endpoints in one process: {result['cpu_ms_per_endpoint_s']} "
          f"CPU-ms per endpoint per second, {result['datagrams_per_endpoint_s']} datagrams sent "
          f"per endpoint per second, {result['cpu_us_per_datagram']} us of CPU per datagram")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
