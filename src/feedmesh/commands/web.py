"""``feedmesh web``: the web layer in a process of its own (sign-up, the API, private feeds).

Several can run side by side, on one machine or several, behind any load balancer: they keep no
state of their own. Accounts and subscriptions are in the hub's state, entries in its ingest
store (the crawling hub's SQLite files in ``--data`` on one machine, or ``--store
postgresql://...``); subscription changes go to the tiers on ``--bus`` and the answer waits until
they applied them; a private feed is read from the reflector process that holds it
(``--reflectors``, one URL per reflector, in order); feeds a person follows are added to the
store and the crawler is told on the ``feeds`` subject. A reader's feed URL answers the same
content and validators from every web process. WebSub subscriptions (``POST /hub``) and
webhooks are verified and saved here, in the hub's state; the delivery worker beside each
reflector process delivers (docs/websub-hub.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys

from aiohttp import web

from feedmesh import runloop
from feedmesh.bus import BusError
from feedmesh.commands.filter import add_role_arguments
from feedmesh.commands.push_flags import add_push_arguments, push_guard, worker_settings
from feedmesh.commands.reflector import parse_listen
from feedmesh.compose import web_front
from feedmesh.hub.app import crawler_group
from feedmesh.hub.supervise import supervise
from feedmesh.hub.web import WebLimits, build_app
from feedmesh.logs import setup_logging
from feedmesh.store import StoreError

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    add_role_arguments(parser, state=False)
    parser.add_argument("--data", default=os.environ.get("FEEDMESH_DATA", "var"),
                        help="without --store, the crawling hub's data folder: its hub.db, "
                        "feedmesh.db and feed-secret.key (with --store all three are in the "
                        "database)")
    parser.add_argument("--store", default=os.environ.get("FEEDMESH_STORE", ""), metavar="URL",
                        help="the hub's PostgreSQL database (postgresql://...)")
    parser.add_argument("--reflectors", required=True, metavar="URL,URL,...",
                        help="every reflector process's URL, in order (reflector 0 first)")
    parser.add_argument("--crawlers", default="1", metavar="N|NAME,NAME,...",
                        help="crawler processes (their --shard n, or their --name each): each "
                        "is told of new feeds")
    parser.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT",
                        help="where people and readers reach this web process (port 0: any)")
    parser.add_argument("--base-url", default="",
                        help="the public URL of the hub, used in feed links (default "
                        "http://HOST:PORT); the same for every web process behind one name")
    parser.add_argument("--feed-rate", type=float, default=WebLimits().feed_rate_per_s,
                        help="polls per second allowed per personalized feed (per process)")
    parser.add_argument("--feed-burst", type=int, default=WebLimits().feed_burst,
                        help="polls of one personalized feed allowed at once, above the rate")
    parser.add_argument("--hub-rate", type=float, default=WebLimits().hub_rate_per_s,
                        help="WebSub subscription requests (POST /hub) per second per client "
                        "address (per process)")
    parser.add_argument("--hub-burst", type=int, default=WebLimits().hub_burst,
                        help="WebSub subscription requests allowed at once, above the rate")
    add_push_arguments(parser, guard=True)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    try:
        host, port = parse_listen(args.listen)
        return runloop.run(_run(args, host, port))
    except (OSError, ValueError, StoreError, BusError) as exc:
        print(f"feedmesh web: {exc}", file=sys.stderr)
        return 2


def crawler_groups(crawlers: str) -> list[str]:
    """The ``feeds`` groups of ``--crawlers``: N shards, or the crawlers' names."""
    if crawlers.strip().isdigit():
        count = int(crawlers)
        if not 1 <= count <= 64:
            raise ValueError("--crawlers must be in 1..64")
        return [crawler_group(shard) for shard in range(count)]
    names = [name.strip() for name in crawlers.split(",") if name.strip()]
    if not names:
        raise ValueError(f"--crawlers {crawlers!r}: give a count or the crawlers' names")
    return [crawler_group(name) for name in names]


async def _run(args: argparse.Namespace, host: str, port: int) -> int:
    reflectors = [url.strip() for url in args.reflectors.split(",") if url.strip()]
    front = web_front(args.data, reflectors=reflectors, bus=args.bus, store_url=args.store,
                      bus_namespace=args.bus_namespace, push=worker_settings(args),
                      guard=push_guard(args))
    runner: web.AppRunner | None = None
    stop = asyncio.Event()
    push = front.push
    assert push is not None
    syncing: asyncio.Task | None = None
    try:
        await push.load()  # the targets every web process shows, read again every second
        syncing = asyncio.create_task(supervise("push", lambda: push.run(stop), stop))
        # The crawlers' groups of `feeds` exist before anything is told to them, so a feed
        # followed while a crawler is down waits for it.
        for crawler in crawler_groups(args.crawlers):
            await (await front.bus.consumer("feeds", crawler)).close()
        if port == 0:  # let the OS choose, then build the URLs from the port it chose
            with socket.socket() as probe:
                probe.bind((host, 0))
                port = probe.getsockname()[1]
        base = args.base_url or f"http://{host}:{port}"
        limits = WebLimits(feed_rate_per_s=args.feed_rate, feed_burst=args.feed_burst,
                           hub_rate_per_s=args.hub_rate, hub_burst=args.hub_burst)
        runner = web.AppRunner(build_app(front, base_url=base, limits=limits),
                               handle_signals=False, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        print(f"feedmesh web on {base}/ ({len(reflectors)} reflectors, bus {args.bus})",
              file=sys.stderr, flush=True)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        return 0
    finally:
        stop.set()
        if runner is not None:
            await runner.cleanup()
        if syncing is not None:
            await asyncio.gather(syncing, return_exceptions=True)
        await front.aclose()
