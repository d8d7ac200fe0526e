"""Where a running distributed hub's latency goes, from its own bus: joins ``articles`` and each
``matches.N`` as a group of its own (``probe``) for some seconds and times every message against
the stamps it carries: an article's age when it reaches the bus (now - first seen by the
crawler), a match's (now - matched by the filter) and the crawler-to-filter leg (matched - first
seen). The group is deleted at the end (a group left behind would hold every later message).

    .venv/bin/python benchmarks/bus_probe.py nats://127.0.0.1:4222 --seconds 60 --reflectors 2

Run it against a hub under load (``benchmarks/distributed.py`` prints where its NATS server
listens in the server's folder, ``nats.conf``). Reading three streams costs the probe a few
percent of a core: the hub's own figures move a little while it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.hub.messages import Article, Matched, decode


async def probe(url: str, namespace: str, seconds: float, reflectors: int) -> None:
    bus = JetStreamBus(url, namespace=namespace)
    found: dict[str, list[tuple[float, float]]] = {}

    async def watch(subject: str) -> None:
        consumer = await bus.consumer(subject, "probe")
        rows = found.setdefault(subject, [])
        end = time.time() + seconds
        try:
            while time.time() < end:
                delivery = await consumer.get(1.0)
                if delivery is None:
                    continue
                now = time.time()
                message = decode(delivery.data)
                if isinstance(message, Article):
                    rows.append((now - message.first_seen_at, 0.0))
                elif isinstance(message, Matched):
                    rows.append((now - message.matched_at,
                                 message.matched_at - message.article.first_seen_at))
                await delivery.ack()
        finally:  # also when stopped early (Ctrl-C) or a message fails to decode
            await consumer.close()
            await bus.drop_group(subject, "probe")

    try:
        await asyncio.gather(watch("articles"),
                             *(watch(f"matches.{r}") for r in range(reflectors)))
    finally:
        await bus.close()
    for subject, rows in found.items():
        if not rows:
            print(f"{subject}: nothing in {seconds:.0f} s")
            continue
        ms = np.array(rows) * 1000.0
        line = (f"{subject}: {len(ms)} messages, age on arrival p50/p90/p99 "
                f"{' / '.join(f'{v:.1f}' for v in np.percentile(ms[:, 0], [50, 90, 99]))} ms")
        if subject != "articles":
            line += (", first seen -> matched p50/p90/p99 "
                     f"{' / '.join(f'{v:.1f}' for v in np.percentile(ms[:, 1], [50, 90, 99]))}"
                     " ms")
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the hub's NATS server, nats://HOST:PORT")
    parser.add_argument("--namespace", default="feedmesh", help="the hub's --bus-namespace")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--reflectors", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(probe(args.url, args.namespace, args.seconds, args.reflectors))


if __name__ == "__main__":
    main()
