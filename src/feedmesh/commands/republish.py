"""``feedmesh republish --opml FILE_OR_URL --key DIR --listen HOST:PORT``: a standalone
republisher (issue 14, section 4.3.2 of the paper). It joins the overlay on a UDP endpoint (a new
ring, or the one ``--bootstrap HOST:PORT`` is in), polls the listed legacy feeds and multicasts
what is new, signed with the key in DIR (``feedmesh keys make --dir DIR``) and marked as a
republication. It prints one line per feed saying how to subscribe, then ``ready``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from feedmesh import runloop
from feedmesh.commands.flags import add_fetch_arguments, fetch_settings
from feedmesh.compose.lifecycle import bind, run_roles
from feedmesh.compose.opml import load_opml
from feedmesh.compose.peer import RepublisherRole, open_republisher
from feedmesh.errors import FeedmeshError
from feedmesh.logs import setup_logging

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
    except (ValueError, FeedmeshError) as error:
        print(f"feedmesh republish: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"feedmesh republish: cannot listen on {args.listen[0]}:{args.listen[1]}: "
              f"{error.strerror or error}", file=sys.stderr)
        return 2


async def _main(args: argparse.Namespace) -> int:
    settings = fetch_settings(args)
    sock = bind(*args.http) if args.http is not None else None
    try:
        opml = await load_opml(args.opml, settings)
        for reason in opml.skipped:
            log.warning("opml_skipped why=%r", reason)
        # a missing, corrupt or too-open key fails now, before anything starts
        endpoint, keys = await open_republisher(args.key, args.listen, args.bootstrap)
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    base = f"http://{args.http[0]}:{sock.getsockname()[1]}" if sock is not None else ""
    role = RepublisherRole(endpoint, keys, settings, [o.url for o in opml.outlines],
                           interval_s=args.interval, base=base)

    def announce() -> None:
        for url in role.republisher.urls:
            print(f"feed {url} key={role.republisher.identity} republication=true "
                  f"bootstrap={role.bootstrap}", flush=True)
        if base:
            print(f"http {base}/opml", flush=True)
        print(f"ready {role.bootstrap} feeds={len(role.republisher.urls)}", flush=True)

    return await run_roles([role], http=sock, announce=announce)
