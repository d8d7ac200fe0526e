"""``feedmesh tracker --listen HOST:PORT``: the list server FeedEx peers find each other through
(3.1, like Gnutella's host cache or a BitTorrent tracker). It learns the address of every node
that calls it, and nothing else."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from feedmesh import runloop
from feedmesh.clock import SystemClock
from feedmesh.commands.peer import parse_address
from feedmesh.logs import setup_logging
from feedmesh.mesh.feedex import Tracker
from feedmesh.mesh.peer import TrackerServer

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", default="127.0.0.1:8399", metavar="HOST:PORT",
                        help="where peers reach the tracker")
    parser.add_argument("--ttl", type=float, default=1800.0, metavar="SECONDS",
                        help="a node not heard from this long is no longer listed")


def run(args: argparse.Namespace) -> int:
    setup_logging("warning")
    try:
        host, port = parse_address(args.listen, "--listen")
        if args.ttl <= 0:
            raise ValueError(f"--ttl must be > 0, got {args.ttl}")
        return runloop.run(_main(host, port, args.ttl))
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


async def _main(host: str, port: int, ttl: float) -> int:
    server = TrackerServer(host, port, SystemClock(), tracker=Tracker(ttl_s=ttl))
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"feedmesh tracker on http://{server.host}:{server.port} "
          f"(peers: --tracker http://{server.host}:{server.port})", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()
    return 0
