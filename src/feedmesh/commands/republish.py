"""``feedmesh republish --opml FILE_OR_URL --key DIR --listen HOST:PORT``: a standalone
republisher (issue 14, section 4.3.2 of the paper). It joins the overlay on a UDP endpoint (a new
ring, or the one ``--bootstrap HOST:PORT`` is in), polls the listed legacy feeds and multicasts
what is new, signed with the key in DIR (``feedmesh keys make --dir DIR``) and marked as a
republication. It prints one line per feed saying how to subscribe, then ``ready``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys

from aiohttp import web

from feedmesh import runloop
from feedmesh.commands.crawl import add_fetch_arguments, fetch_settings, load_opml
from feedmesh.feeds.opml import OpmlError, OpmlOutline, render_opml
from feedmesh.fetch import Fetcher
from feedmesh.logs import setup_logging
from feedmesh.mesh.keys import KeyFileError, KeyStore
from feedmesh.mesh.republish import Republisher
from feedmesh.mesh.transport import UdpNode, handle_at

__all__ = ["configure", "host_port", "run"]

log = logging.getLogger("feedmesh.mesh.republish")


def host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not host or not 0 <= number < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (e.g. 127.0.4.1:7000)")
    return host, number


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opml", required=True, metavar="FILE_OR_URL",
                        help="the legacy feeds to republish (OPML file or http(s) URL)")
    parser.add_argument("--key", required=True, metavar="DIR",
                        help="key folder made by `feedmesh keys make --dir DIR`")
    parser.add_argument("--listen", required=True, type=host_port, metavar="HOST:PORT",
                        help="UDP address of this overlay node (port 0: any free port)")
    parser.add_argument("--bootstrap", type=host_port, metavar="HOST:PORT",
                        help="an overlay node to join through (default: start a new ring)")
    parser.add_argument("--http", type=host_port, metavar="HOST:PORT",
                        help="also serve the republished feeds with their <subscribe> element: "
                             "/feeds/N (N: the OPML's order) and /opml")
    parser.add_argument("--interval", type=float, default=60.0,
                        help="seconds between polls of every feed")
    parser.add_argument("--log-level", default="info", help="debug, info, warning or error")
    add_fetch_arguments(parser)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    os.umask(0o077)
    try:
        return runloop.run(_main(args))
    except (OpmlError, KeyFileError) as error:
        print(f"feedmesh republish: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"feedmesh republish: cannot listen on {args.listen[0]}:{args.listen[1]}: "
              f"{error.strerror}", file=sys.stderr)
        return 2


async def _main(args: argparse.Namespace) -> int:
    keys = KeyStore(args.key)
    keys.signing_key()   # a missing, corrupt or too-open key fails now, before anything starts
    settings = fetch_settings(args)
    opml = await load_opml(args.opml, settings)
    for reason in opml.skipped:
        log.warning("opml_skipped why=%r", reason)
    endpoint = UdpNode(*args.listen)
    await endpoint.open()
    bootstrap = None
    if args.bootstrap is not None:
        bootstrap = handle_at(*args.bootstrap)
    await endpoint.start(bootstrap)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with Fetcher(settings) as fetcher:
            republisher = Republisher(endpoint, keys, fetcher, (o.url for o in opml.outlines))
            host, port = endpoint.addr
            for url in republisher.urls:
                print(f"feed {url} key={republisher.identity} republication=true "
                      f"bootstrap={host}:{port}", flush=True)
            sent = republisher.send_outbox()
            if sent:
                log.info("outbox_sent records=%d", sent)
            runner = None
            if args.http is not None:
                runner, base = await _serve_feeds(republisher, args.http, f"{host}:{port}")
                print(f"http {base}/opml", flush=True)
            print(f"ready {host}:{port} feeds={len(republisher.urls)}", flush=True)
            try:
                await republisher.run(args.interval, stop)
            finally:
                if runner is not None:
                    await runner.cleanup()
    finally:
        endpoint.close()
    return 0


async def _serve_feeds(republisher: Republisher, address: tuple[str, int],
                       bootstrap: str) -> tuple[web.AppRunner, str]:
    """The republished feeds over HTTP: ``/feeds/N`` (RSS 2.0 with ``<subscribe>``), ``/opml``."""
    app = web.Application()
    base = ""

    async def feed(request: web.Request) -> web.Response:
        try:
            index = int(request.match_info["index"])
            republisher.urls[index]
        except (ValueError, IndexError):
            raise web.HTTPNotFound(text=f"no feed {request.match_info['index']!r}; see /opml\n")
        body = republisher.feed_document(index, bootstrap, f"{base}/feeds/{index}")
        return web.Response(body=body, content_type="application/rss+xml", charset="utf-8")

    async def opml(request: web.Request) -> web.Response:
        outlines = [OpmlOutline(url=f"{base}/feeds/{i}", title=f"{url} (republished)")
                    for i, url in enumerate(republisher.urls)]
        return web.Response(body=render_opml("republished feeds", outlines),
                            content_type="text/x-opml", charset="utf-8")

    app.router.add_get("/feeds/{index}", feed)
    app.router.add_get("/opml", opml)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, address[0], address[1])
    await site.start()
    host, port = runner.addresses[0][:2]
    base = f"http://{host}:{port}"
    return runner, base
