"""How long a JetStream group member takes to hand out a message once it is published, at a
steady rate it keeps up with: the pull consumer's own share of the hub's latency.

A NATS server of its own (``LocalNats``, a temporary folder, loopback), one ``JetStreamBus``
publishing stamped messages at each rate for some seconds, another consuming them as a group
member (``get``, then a fire-and-forget ack, as the tiers do) and timing each against its stamp.
Each rate runs on the event loop ``feedmesh.runloop`` chooses (``FEEDMESH_LOOP``).

    .venv/bin/python benchmarks/pull_latency.py                 # 50 and 230 messages/s, 8 s each
    .venv/bin/python benchmarks/pull_latency.py --rates 230 --seconds 20

Last line: one JSON object, ``rate_<R>_p50_ms``, ``rate_<R>_p99_ms`` and ``rate_<R>_received``
per rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import tempfile
import time

import numpy as np

from feedmesh import runloop
from feedmesh.bus.jetstream import JetStreamBus
from feedmesh.bus.nats_server import LocalNats

STAMP = struct.Struct("d")
PAD = b"x" * 500  # about an article's size on the bus


async def measure(url: str, rate: float, seconds: float) -> tuple[np.ndarray, int]:
    """(latencies in ms, messages published) for one rate, on a fresh subject."""
    namespace = f"pull{int(rate)}"
    publisher = await JetStreamBus.connect(url, namespace=namespace)
    consumer_bus = await JetStreamBus.connect(url, namespace=namespace)
    consumer = await consumer_bus.consumer("articles", "probe")
    latencies: list[float] = []
    count = int(rate * seconds)

    async def consume() -> None:
        while len(latencies) < count:
            delivery = await consumer.get(5.0)
            if delivery is None:
                return
            (stamp,) = STAMP.unpack_from(delivery.data)
            latencies.append(time.time() - stamp)
            await delivery.ack_async()

    try:
        reader = asyncio.create_task(consume())
        began = time.monotonic()
        for i in range(count):
            await publisher.publish("articles", STAMP.pack(time.time()) + PAD)
            delay = began + (i + 1) / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        await asyncio.wait_for(reader, 30.0)
    finally:
        await consumer.close()
        await publisher.close()
        await consumer_bus.close()
    return np.array(latencies) * 1000.0, count


async def run(url: str, rates: list[float], seconds: float) -> dict[str, float]:
    figures: dict[str, float] = {}
    print(f"event loop: {runloop.loop_name()}")
    print(f"{'messages/s':>10}  {'received':>9}  {'p50 ms':>7}  {'p90 ms':>7}  {'p99 ms':>7}")
    for rate in rates:
        ms, sent = await measure(url, rate, seconds)
        p50, p90, p99 = np.percentile(ms, [50, 90, 99]) if len(ms) else (float("nan"),) * 3
        print(f"{rate:>10.0f}  {len(ms):>4}/{sent:<4}  {p50:>7.1f}  {p90:>7.1f}  {p99:>7.1f}")
        key = f"rate_{int(rate)}"
        figures.update({f"{key}_p50_ms": round(float(p50), 2),
                        f"{key}_p99_ms": round(float(p99), 2), f"{key}_received": len(ms)})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="50,230", help="messages a second, comma-separated")
    parser.add_argument("--seconds", type=float, default=8.0, help="how long each rate runs")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    with tempfile.TemporaryDirectory(prefix="feedmesh-pull-") as folder:
        server = LocalNats(folder).start()
        try:
            figures = runloop.run(run(server.url, rates, args.seconds))
        finally:
            server.stop()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
