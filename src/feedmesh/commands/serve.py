"""``feedmesh serve``: every hub tier and the web server in one process, on SQLite."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

import msgspec
from aiohttp import web
from aiohttp.abc import AbstractResolver
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from feedmesh import runloop
from feedmesh.bus import BusError
from feedmesh.commands.crawl import add_fetch_arguments, fetch_settings, load_opml
from feedmesh.commands.filter import parse_shard
from feedmesh.commands.push_flags import add_push_arguments, push_settings
from feedmesh.compose import embedded_hub
from feedmesh.crawl import CrawlSettings
from feedmesh.feeds.opml import OpmlError
from feedmesh.hub.app import Hub, HubSettings
from feedmesh.hub.reflector import ReflectorSettings
from feedmesh.hub.web import WebLimits, build_app
from feedmesh.logs import setup_logging
from feedmesh.memory import release_memory
from feedmesh.schedule import POLICY_NAMES, SchedulerSettings
from feedmesh.store import StoreError

if TYPE_CHECKING:
    from feedmesh.commands.hub_republish import HubRepublisher

__all__ = ["configure", "run", "running_hub", "settings_from"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=os.environ.get("FEEDMESH_DATA", "var"),
                        help="directory of the SQLite files (default $FEEDMESH_DATA or ./var)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address the web server listens on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8080,
                        help="port the web server listens on (0: any free one)")
    parser.add_argument("--base-url", default="",
                        help="public URL of this hub, used in feed links (default http://HOST:PORT)")
    parser.add_argument("--public-url", default=os.environ.get("FEEDMESH_PUBLIC_URL", ""),
                        metavar="URL", help="URL at which publishers' WebSub hubs reach this "
                        "server (callbacks PUBLIC_URL/websub/ID); without it feeds are only "
                        "polled (docs/websub.md)")
    parser.add_argument("--policy", default="feedmesh",
                        choices=("interval", *sorted(POLICY_NAMES)),
                        help="when to fetch each feed: a learned policy (default feedmesh, see "
                             "docs/scheduling.md) or 'interval' (every feed every --interval)")
    parser.add_argument("--budget", type=float, default=96.0,
                        help="fetches per feed per day for a learned policy (96: Cobra's 15 min)")
    parser.add_argument("--interval", type=float, default=900.0,
                        help="seconds between crawl cycles with --policy interval")
    parser.add_argument("--filters", type=int, default=1, help="filter shards")
    parser.add_argument("--reflectors", type=int, default=1,
                        help="reflectors, each serving the feeds of part of the accounts")
    parser.add_argument("--delivery", choices=("ids", "article"), default="ids",
                        help="filter -> reflector: matching ids, or the article to re-match")
    parser.add_argument("--opml", default="", metavar="FILE_OR_URL",
                        help="source feeds to add at start-up")
    parser.add_argument("--soft-memory-mb", type=int, default=0,
                        help="above this resident size, reflectors drop entry bodies")
    parser.add_argument("--hard-memory-mb", type=int, default=0,
                        help="above this resident size, reflectors drop new entries")
    parser.add_argument("--no-backlog", action="store_true",
                        help="do not match the entries a source held before it was followed")
    parser.add_argument("--feed-rate", type=float, default=WebLimits().feed_rate_per_s,
                        help="polls per second allowed per personalized feed")
    parser.add_argument("--feed-burst", type=int, default=WebLimits().feed_burst,
                        help="polls of one personalized feed allowed at once, above the rate")
    parser.add_argument("--hub-rate", type=float, default=WebLimits().hub_rate_per_s,
                        help="WebSub subscription requests (POST /hub) per second per client "
                        "address")
    parser.add_argument("--hub-burst", type=int, default=WebLimits().hub_burst,
                        help="WebSub subscription requests allowed at once, above the rate")
    parser.add_argument("--bus", default=os.environ.get("FEEDMESH_BUS", "memory"),
                        metavar="URL", help="where the tiers meet: 'memory' (this process) or a "
                        "NATS JetStream server, nats://HOST:PORT")
    parser.add_argument("--store", default=os.environ.get("FEEDMESH_STORE", ""), metavar="URL",
                        help="keep the hub's state in this PostgreSQL database "
                        "(postgresql://...) instead of SQLite files in --data")
    parser.add_argument("--external-filters", action="store_true",
                        help="run no filter here: the --filters shards are `feedmesh filter` "
                        "processes on the same --bus (NATS)")
    parser.add_argument("--external-reflectors", default="", metavar="URL,URL,...",
                        help="run no reflector here: the --reflectors are `feedmesh reflector` "
                        "processes on the same --bus (NATS), answering at these URLs, in order")
    parser.add_argument("--bus-namespace", default="feedmesh", metavar="NAME",
                        help="prefix of this hub's streams on a shared NATS server")
    parser.add_argument("--log-level", default="info",
                        choices=("debug", "info", "warning", "error"),
                        help="the least severe log lines written to standard error")
    parser.add_argument("--republish", default="", metavar="KEY_DIR",
                        help="multicast what the crawler finds new on the SCRIBE-RSS mesh, "
                             "signed with this key folder (`feedmesh keys make --dir`) and "
                             "marked as republications; source feeds with their <subscribe> "
                             "element at /mesh/opml")
    parser.add_argument("--republish-listen", default="127.0.0.1:7000", metavar="HOST:PORT",
                        help="with --republish: the hub's UDP address on the overlay")
    parser.add_argument("--republish-bootstrap", default="", metavar="HOST:PORT",
                        help="with --republish: an overlay node to join through (default: "
                             "start a new ring)")
    add_push_arguments(parser)
    add_fetch_arguments(parser)


def settings_from(args: argparse.Namespace) -> HubSettings:
    fetch = fetch_settings(args)
    if getattr(args, "source_address", ""):
        fetch = msgspec.structs.replace(fetch, source_address=args.source_address)
    return HubSettings(
        data_dir=args.data, filters=args.filters, reflectors=args.reflectors,
        external_filters=args.external_filters,
        crawler_shard=parse_shard(getattr(args, "shard", None) or "0/1"),
        crawler_name=getattr(args, "name", ""),
        external_reflectors=tuple(url.strip() for url in args.external_reflectors.split(",")
                                  if url.strip()),
        crawl_interval_s=args.interval, delivery=args.delivery, fetch=fetch,
        schedule=(None if args.policy == "interval" else
                  SchedulerSettings(policy=args.policy, budget_per_feed_per_day=args.budget)),
        forward_backlog=not args.no_backlog,
        public_url=args.public_url,
        # A PostgreSQL transaction is round trips: fetches that found nothing new share one
        # for up to a quarter second (what is new is still committed at once).
        crawl=CrawlSettings(quiet_batch_interval_s=0.25 if getattr(args, "store", "")
                            else 0.0),
        push=push_settings(args),
        reflector=ReflectorSettings(soft_memory_bytes=args.soft_memory_mb << 20,
                                    hard_memory_bytes=args.hard_memory_mb << 20))


@contextlib.asynccontextmanager
async def running_hub(settings: HubSettings, host: str, port: int, base_url: str = "",
                      limits: WebLimits | None = None,
                      resolver: AbstractResolver | None = None, bus: str = "memory",
                      bus_namespace: str = "feedmesh",
                      store: str = "", web_layer: bool = True,
                      prepare: Callable[[Hub], None] | None = None,
                      routes: Sequence[web.RouteDef] = ()) -> AsyncIterator[tuple[Hub, str]]:
    """A started hub with its web server listening (without ``web_layer``: only its
    ``/metrics``, as ``feedmesh crawler``); stopped cleanly on exit. ``prepare(hub)`` runs
    before the hub starts; ``routes`` are added to its web server."""
    if store and not store.startswith(("postgresql://", "postgres://")):
        raise ValueError(f"--store {store!r}: give a postgresql:// URL (or nothing, for "
                         "SQLite files in --data)")
    hub = embedded_hub(settings, resolver=resolver, bus=bus, bus_namespace=bus_namespace,
                       store_url=store)
    if prepare is not None:
        prepare(hub)
    await hub.start()
    if port == 0:  # let the OS choose, then build the URLs from the port it chose
        with socket.socket() as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
    base = base_url or f"http://{host}:{port}"
    app = build_app(hub, base_url=base, limits=limits) if web_layer else metrics_app(hub)
    app.add_routes(routes)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        yield hub, base
    finally:
        await runner.cleanup()
        await hub.stop()


def metrics_app(hub: Hub) -> web.Application:
    """The crawling hub's only HTTP: its Prometheus figures and its ``/api/stats`` (what
    ``feedmesh stats`` reads: feeds, crawl cycles, queues)."""

    async def figures(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(hub.metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(await hub.stats())

    app = web.Application()
    app.router.add_get("/metrics", figures)
    app.router.add_get("/api/stats", stats)
    return app


def run(args: argparse.Namespace, *, web_layer: bool = True) -> int:
    setup_logging(args.log_level)
    os.umask(0o077)  # what it writes (databases, snapshots, keys) is its owner's alone
    name = "serve" if web_layer else "crawler"
    try:
        return runloop.run(_serve(args, web_layer))
    except (OSError, OpmlError, ValueError, StoreError, BusError) as exc:
        print(f"feedmesh {name}: {exc}", file=sys.stderr)
        return 2


async def _serve(args: argparse.Namespace, web_layer: bool) -> int:
    limits = WebLimits(feed_rate_per_s=args.feed_rate, feed_burst=args.feed_burst,
                       hub_rate_per_s=args.hub_rate, hub_burst=args.hub_burst)
    republisher = await _republisher(args) if getattr(args, "republish", "") else None
    try:
        async with running_hub(settings_from(args), args.host, args.port, args.base_url,
                               limits, bus=args.bus, bus_namespace=args.bus_namespace,
                               store=args.store, web_layer=web_layer,
                               prepare=(lambda hub: republisher.attach(hub.crawler))
                               if republisher else None,
                               routes=republisher.routes() if republisher else ()) as (hub, url):
            if args.opml:
                outlines = (await load_opml(args.opml, hub.settings.fetch)).outlines
                await hub.add_feeds([o.url for o in outlines])
                del outlines
                release_memory()
            if web_layer:
                print(f"feedmesh hub on {url}/ (API: {url}/api/openapi.json, metrics: "
                      f"{url}/metrics)", file=sys.stderr, flush=True)
            else:
                print(f"feedmesh crawler: {hub.crawler.feed_count()} feeds, metrics at "
                      f"{url}/metrics", file=sys.stderr, flush=True)
            if republisher is not None:
                print(f"republishing on the mesh: overlay node {republisher.bootstrap}, key "
                      f"{republisher.republisher.identity}, feeds at {url}/mesh/opml",
                      file=sys.stderr, flush=True)
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
            print("stopping: finishing in-flight work", file=sys.stderr)
    finally:
        if republisher is not None:
            republisher.endpoint.close()
    return 0


async def _republisher(args: argparse.Namespace) -> HubRepublisher:
    """The overlay node and key of ``--republish``; a bad key folder or address fails here,
    before the hub starts. (Imported here: a hub that does not republish loads no mesh code.)"""
    from feedmesh.commands.peer import parse_address
    from feedmesh.mesh.keys import KeyFileError, KeyStore
    from feedmesh.mesh.transport import UdpNode, handle_at
    keys = KeyStore(args.republish)
    try:
        keys.signing_key()
    except KeyFileError as error:
        raise ValueError(f"--republish: {error}") from None
    listen = parse_address(args.republish_listen, "--republish-listen")
    endpoint = UdpNode(*listen)
    await endpoint.open()
    bootstrap = (handle_at(*parse_address(args.republish_bootstrap, "--republish-bootstrap"))
                 if args.republish_bootstrap else None)
    await endpoint.start(bootstrap)
    from feedmesh.commands.hub_republish import HubRepublisher
    return HubRepublisher(endpoint, keys)
