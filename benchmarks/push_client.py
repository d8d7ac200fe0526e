"""What one push delivery costs the hub's CPU in its HTTP client: the hub's ``CallbackClient``
(aiohttp's client: pooled keep-alive connections, the address guard) against a bare keep-alive
HTTP/1.1 client written on asyncio streams (the lower bound a cheaper delivery path could reach).

A receiver in a process of its own (so its CPU is not counted) answers every POST ``204`` on
``127.0.1.1``; this process POSTs a feed-sized body (``--body`` bytes) ``--posts`` times with
``--concurrency`` in flight, and counts its own CPU time (``time.process_time``) per POST. The
two clients alternate over ``--rounds`` rounds; medians are quoted, with the ratio.

    .venv/bin/python benchmarks/push_client.py [--posts 5000] [--rounds 5]

Last line: JSON with ``aiohttp_cpu_us_per_post``, ``bare_cpu_us_per_post`` and ``ratio``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time

from feedmesh.fetch.settings import FetchSettings
from feedmesh.hub.push.http import CallbackClient

HOST = "127.0.1.1"


class _Answer204(asyncio.Protocol):
    """Reads requests (headers, then Content-Length bytes) and answers each 204."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            length = 0
            for line in self.buffer[:head_end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < head_end + 4 + length:
                return
            self.buffer = self.buffer[head_end + 4 + length:]
            self.transport.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")  # type: ignore[attr-defined]


def _receiver(port_out: multiprocessing.connection.Connection) -> None:
    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(_Answer204, HOST, 0)
        port_out.send(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(serve())


async def _aiohttp_round(url: str, body: bytes, posts: int, concurrency: int) -> float:
    client = CallbackClient(FetchSettings(allow_networks=("127.0.0.0/8",)))
    headers = {"Content-Type": "application/rss+xml", "X-Hub-Signature": "sha256=" + "0" * 64}
    await client.post(url, body, headers)  # the connection pool is warm, as in the hub
    left = posts

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            answer = await client.post(url, body, headers)
            assert answer.status == 204

    started = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    spent = time.process_time() - started
    await client.close()
    return spent / posts


async def _bare_round(port: int, body: bytes, posts: int, concurrency: int) -> float:
    head = (f"POST /cb HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/rss+xml\r\n"
            f"X-Hub-Signature: sha256={'0' * 64}\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode()
    left = posts

    async def worker() -> None:
        nonlocal left
        reader, writer = await asyncio.open_connection(HOST, port)
        while left > 0:
            left -= 1
            writer.write(head + body)
            status = await reader.readline()
            assert status.split()[1] == b"204", status
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length:
                await reader.readexactly(length)
        writer.close()

    started = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (time.process_time() - started) / posts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--body", type=int, default=12_000, help="bytes per POST (a 10-entry "
                        "RSS feed is 8-15 KB)")
    args = parser.parse_args()
    parent, child = multiprocessing.Pipe()
    receiver = multiprocessing.Process(target=_receiver, args=(child,), daemon=True)
    receiver.start()
    port = parent.recv()
    body = b"x" * args.body
    url = f"http://{HOST}:{port}/cb"
    aiohttp_us, bare_us = [], []
    try:
        for _ in range(args.rounds):
            aiohttp_us.append(1e6 * asyncio.run(_aiohttp_round(url, body, args.posts,
                                                                args.concurrency)))
            bare_us.append(1e6 * asyncio.run(_bare_round(port, body, args.posts,
                                                          args.concurrency)))
    finally:
        receiver.terminate()
    result = {"posts": args.posts, "rounds": args.rounds, "concurrency": args.concurrency,
              "body_bytes": args.body,
              "aiohttp_cpu_us_per_post": round(statistics.median(aiohttp_us), 1),
              "bare_cpu_us_per_post": round(statistics.median(bare_us), 1),
              "aiohttp_rounds": [round(v, 1) for v in aiohttp_us],
              "bare_rounds": [round(v, 1) for v in bare_us]}
    result["ratio"] = round(result["aiohttp_cpu_us_per_post"] / result["bare_cpu_us_per_post"], 2)
    print(f"aiohttp (CallbackClient): {result['aiohttp_cpu_us_per_post']} µs CPU per POST; "
          f"bare keep-alive client: {result['bare_cpu_us_per_post']} µs; ratio {result['ratio']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
