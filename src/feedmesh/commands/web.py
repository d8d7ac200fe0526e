"""``feedmesh web``: the web layer in a process of its own (sign-up, the API, private feeds).

Several can run side by side, on one machine or several, behind any load balancer: they keep no
state of their own (:mod:`feedmesh.compose.web`). A reader's feed URL answers the same content and
validators from every web process. WebSub subscriptions (``POST /hub``) and webhooks are verified
and saved here, in the hub's state; the delivery worker beside each reflector process delivers
(docs/websub-hub.md).
"""

from __future__ import annotations

import argparse
import sys

from feedmesh import runloop
from feedmesh.commands import flags
from feedmesh.compose.lifecycle import bind, run_roles
from feedmesh.compose.settings import Listen, WebSettings, crawler_groups
from feedmesh.compose.web import web_process
from feedmesh.errors import FeedmeshError
from feedmesh.logs import setup_logging

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_bus(parser, required=True)
    flags.add_log_level(parser)
    flags.add_data(parser, help="without --store, the crawling hub's data folder: its hub.db, "
                   "feedmesh.db and feed-secret.key (with --store all three are in the database)")
    flags.add_store(parser, help="the hub's PostgreSQL database (postgresql://...)")
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
    flags.add_reflector_token(parser)
    flags.add_web_limits(parser, per_process=True)
    flags.add_push_arguments(parser, guard=True)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    try:
        settings = WebSettings(
            bus=flags.bus_settings(args),
            reflectors=tuple(u.strip() for u in args.reflectors.split(",") if u.strip()),
            crawlers=tuple(crawler_groups(args.crawlers)), data_dir=args.data,
            store=args.store, listen=Listen.parse(args.listen), base_url=args.base_url,
            limits=flags.web_limits(args), push=flags.worker_settings(args),
            guard=flags.push_guard(args), reflector_token_file=args.reflector_token_file)
        return runloop.run(_run(settings))
    except (OSError, ValueError, FeedmeshError) as exc:
        print(f"feedmesh web: {exc}", file=sys.stderr)
        return 2


async def _run(settings: WebSettings) -> int:
    sock = bind(settings.listen.host, settings.listen.port)
    base = settings.base_url or f"http://{settings.listen.host}:{sock.getsockname()[1]}"
    try:
        roles, closers = web_process(settings, base_url=base)
    except BaseException:
        sock.close()
        raise

    def announce() -> None:
        print(f"feedmesh web on {base}/ ({len(settings.reflectors)} reflectors, bus "
              f"{settings.bus.url})", file=sys.stderr, flush=True)

    return await run_roles(roles, http=sock, closers=closers, announce=announce)
