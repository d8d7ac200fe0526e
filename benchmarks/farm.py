"""How fast is the feed farm? Requests per second (200s and 304s), startup and memory at 100k feeds.

The farm runs in its own process (``FarmProcess``), pinned to one core when the machine has two;
the load generator runs here, pinned to the other: a lean asyncio HTTP/1.1 client with keep-alive
connections (a framework client would measure itself). The farm's CPU time during each run is
read from /proc so the table also says how busy the farm was (near 100 %: farm-bound; lower:
client-bound, and the farm could serve more).

    .venv/bin/python benchmarks/farm.py [--feeds 10000] [--seconds 4] [--connections 64] [--quick]

Last line: JSON with requests_per_s_200, requests_per_s_304, startup_s_100k, rss_mb_100k and more.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import sys
import time
from urllib.parse import urlsplit

from feedmesh.farm import FarmConfig, FarmModel, FarmProcess
from feedmesh.feeds.render import FORMATS, writer_for
from feedmesh.procstat import cpu_seconds


class _LoadClient(asyncio.Protocol):
    """One keep-alive connection sending batches of ``depth`` requests and counting responses.

    A bare protocol, not asyncio streams: the client must cost less per response than the farm,
    or the benchmark measures the client.
    """

    def __init__(self, requests: list[bytes], depth: int, stop_at: float, done: asyncio.Future):
        self.requests, self.depth, self.stop_at, self.done = requests, depth, stop_at, done
        self.buffer = b""
        self.pending = 0
        self.next = 0
        self.count = 0
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self._send()

    def _send(self) -> None:
        if time.perf_counter() >= self.stop_at:
            self.transport.close()
            return
        batch = [self.requests[(self.next + i) % len(self.requests)] for i in range(self.depth)]
        self.next += self.depth
        self.pending = self.depth
        self.transport.write(b"".join(batch))

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data if self.buffer else data
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                break
            at = buffer.find(b"Content-Length: ", 0, end)
            length = int(buffer[at + 16:buffer.index(b"\r\n", at)]) if at >= 0 else 0
            if buffer.startswith(b"HTTP/1.1 304"):
                length = 0
            if len(buffer) < end + 4 + length:
                break
            buffer = buffer[end + 4 + length:]
            self.count += 1
            self.pending -= 1
            if self.pending == 0:
                self._send()
        self.buffer = buffer

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_result(self.count)


async def load(targets: list[tuple[str, int, bytes]], seconds: float, connections: int,
               depth: int) -> int:
    """Send ``targets`` (host, port, request bytes) round-robin for ``seconds``; count responses.

    Each connection keeps ``depth`` requests in flight (HTTP/1.1 pipelining; depth 1 is a plain
    request-response loop) and talks to one host, as a crawler's would.
    """
    loop = asyncio.get_running_loop()
    stop_at = time.perf_counter() + seconds
    by_host: dict[tuple[str, int], list[bytes]] = {}
    for host, port, request in targets:
        by_host.setdefault((host, port), []).append(request)
    hosts = list(by_host)
    waits = []
    for i in range(connections):
        host, port = hosts[i % len(hosts)]
        requests = by_host[(host, port)]
        share = requests[i // len(hosts)::max(1, connections // len(hosts))] or requests
        done = loop.create_future()
        await loop.create_connection(functools.partial(_LoadClient, share, depth, stop_at, done),
                                     host, port)
        waits.append(done)
    return sum(await asyncio.gather(*waits))


def request_bytes(url: str, headers: dict[str, str]) -> tuple[str, int, bytes]:
    parts = urlsplit(url)
    lines = [f"GET {parts.path} HTTP/1.1", f"Host: {parts.netloc}",
             "User-Agent: feedmesh-bench", "Accept-Encoding: gzip, deflate, br"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return parts.hostname, parts.port, ("\r\n".join(lines) + "\r\n\r\n").encode()


async def first_pass(farm: FarmProcess, feeds: int, connections: int) -> tuple[float, dict]:
    """GET every feed once (the farm renders each); returns the rate and each feed's validators."""
    validators: dict[int, dict[str, str]] = {}
    queue = list(range(feeds))

    async def worker() -> None:
        readers: dict[str, tuple] = {}
        while queue:
            feed = queue.pop()
            host, port, request = request_bytes(farm.feed_url(feed), {})
            if host not in readers:
                readers[host] = await asyncio.open_connection(host, port)
            reader, writer = readers[host]
            writer.write(request)
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            fields = dict(line.split(": ", 1) for line in head.split("\r\n")[1:] if ": " in line)
            await reader.readexactly(int(fields.get("Content-Length", "0")))
            found = {}
            if "ETag" in fields:
                found["If-None-Match"] = fields["ETag"]
            if "Last-Modified" in fields:
                found["If-Modified-Since"] = fields["Last-Modified"]
            validators[feed] = found
        for _, writer in readers.values():
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return feeds / (time.perf_counter() - started), validators


def measure_run(farm: FarmProcess, targets, seconds: float, connections: int,
                depth: int) -> tuple[float, float]:
    cpu_before, started = cpu_seconds(farm.pid), time.perf_counter()
    count = asyncio.run(load(targets, seconds, connections, depth))
    elapsed = time.perf_counter() - started
    return count / elapsed, (cpu_seconds(farm.pid) - cpu_before) / elapsed


def render_times() -> dict[str, float]:
    """Microseconds to render one 10-entry farm feed, per format (median of 5 x 200 runs)."""
    config = FarmConfig(feeds=1, seed=1, faults="none")
    out = {}
    for fmt in FORMATS:
        model = FarmModel(FarmConfig(feeds=40, seed=1, faults="none", format_mix={fmt: 1.0}),
                          ["http://127.0.0.1:8080"])
        feed = next(i for i in range(40) if len(model.document(i, 1.76e9).posts) == 10)
        maker, posts = model.maker(feed), model.document(feed, 1.76e9).posts
        info, entries = maker.feed_info(posts[0].time), [maker.entry(p) for p in posts]
        writer = writer_for(fmt)
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(200):
                writer.render(info, entries).encode()
            runs.append((time.perf_counter() - started) / 200 * 1e6)
        out[fmt] = statistics.median(runs)
    del config
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feeds", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--depth", type=int, default=8, help="pipelined requests per connection")
    parser.add_argument("--quick", action="store_true", help="skip the 100k-feed full pass")
    args = parser.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    farm_cpu = cores[0] if len(cores) >= 2 else None
    if len(cores) >= 2:
        os.sched_setaffinity(0, {cores[1]})

    renders = render_times()
    config = FarmConfig(feeds=args.feeds, seed=1, faults="none")
    with FarmProcess(config, cpu=farm_cpu) as farm:
        cpu_before = cpu_seconds(farm.pid)
        first_rate, validators = asyncio.run(first_pass(farm, args.feeds, args.connections))
        first_cpu_ms = (cpu_seconds(farm.pid) - cpu_before) / args.feeds * 1000
        plain = [request_bytes(farm.feed_url(i), {}) for i in range(args.feeds)]
        conditional = [request_bytes(farm.feed_url(i), v) for i, v in validators.items() if v]
        runs = {}
        for depth in (1, args.depth):
            runs[depth] = (measure_run(farm, plain, args.seconds, args.connections, depth),
                           measure_run(farm, conditional, args.seconds, args.connections, depth))
        (rate_200, busy_200), (rate_304, busy_304) = runs[args.depth]
        (plain_200, plain_busy_200), (plain_304, plain_busy_304) = runs[1]
        statuses = farm.stats()["by_status"]

    big = FarmConfig(feeds=100_000, seed=1, faults="none")
    with FarmProcess(big, cpu=farm_cpu) as farm100k:
        startup_100k, startup_inner = farm100k.ready_s, farm100k.startup_s
        rss_100k = farm100k.rss_bytes() / 2**20
        full_pass_rate = rss_after = None
        if not args.quick:
            full_pass_rate, _ = asyncio.run(first_pass(farm100k, 100_000, args.connections))
            rss_after = farm100k.rss_bytes() / 2**20

    rows = [
        ("render 10-entry feed, per format (us)",
         ", ".join(f"{k} {v:.0f}" for k, v in renders.items())),
        (f"first pass over {args.feeds} feeds (renders each)",
         f"{first_rate:,.0f} req/s, {first_cpu_ms:.2f} ms of farm CPU per feed"),
        ("200 mix, one request at a time",
         f"{plain_200:,.0f} req/s, farm CPU {plain_busy_200:.0%}"),
        ("304 mix, one request at a time",
         f"{plain_304:,.0f} req/s, farm CPU {plain_busy_304:.0%}"),
        (f"200 mix, {args.depth} pipelined per connection",
         (f"{rate_200:,.0f} req/s, farm CPU {busy_200:.0%} ({rate_200 / max(busy_200, 1e-9):,.0f}"
          " per farm CPU-second)")),
        (f"304 mix, {args.depth} pipelined per connection",
         (f"{rate_304:,.0f} req/s, farm CPU {busy_304:.0%} ({rate_304 / max(busy_304, 1e-9):,.0f}"
          " per farm CPU-second)")),
        ("statuses seen by the farm", json.dumps(statuses)),
        ("100k feeds: spawn -> ready",
         f"{startup_100k:.2f} s (in-process start {startup_inner:.3f} s)"),
        ("100k feeds: farm memory at ready", f"{rss_100k:.0f} MB"),
    ]
    if full_pass_rate is not None:
        rows.append(("100k feeds: first pass over all",
                     f"{full_pass_rate:,.0f} req/s, then {rss_after:.0f} MB"))
    width = max(len(r[0]) for r in rows)
    print(f"farm benchmark: {len(cores)} core(s), farm pinned to {farm_cpu}, "
          f"{args.connections} connections, {args.seconds:.0f} s per run")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    figures = {"requests_per_s_200": round(rate_200), "requests_per_s_304": round(rate_304),
               "startup_s_100k": round(startup_100k, 3), "rss_mb_100k": round(rss_100k, 1),
               "farm_cpu_share_200": round(busy_200, 3), "farm_cpu_share_304": round(busy_304, 3),
               # Capacity per core, robust to a busy machine: responses per second of farm CPU.
               "requests_per_farm_cpu_s_200": round(rate_200 / max(busy_200, 1e-9)),
               "requests_per_farm_cpu_s_304": round(rate_304 / max(busy_304, 1e-9)),
               "first_pass_requests_per_s": round(first_rate),
               "first_pass_farm_cpu_ms_per_feed": round(first_cpu_ms, 3),
               "requests_per_s_200_unpipelined": round(plain_200),
               "requests_per_s_304_unpipelined": round(plain_304),
               "render_us_10_entries": {k: round(v, 1) for k, v in renders.items()},
               "startup_s_100k_in_process": startup_inner}
    if full_pass_rate is not None:
        figures["first_pass_requests_per_s_100k"] = round(full_pass_rate)
        figures["rss_mb_100k_after_full_pass"] = round(rss_after, 1)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
