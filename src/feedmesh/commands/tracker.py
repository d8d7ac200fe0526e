"""``feedmesh tracker --listen HOST:PORT``: the list server FeedEx peers find each other through
(3.1, like Gnutella's host cache or a BitTorrent tracker). It learns the address of every node
that calls it, and nothing else (:mod:`feedmesh.compose.peer`)."""

from __future__ import annotations

import argparse
import sys

from feedmesh import runloop
from feedmesh.commands.flags import parse_address
from feedmesh.compose.lifecycle import run_roles
from feedmesh.compose.peer import TrackerRole
from feedmesh.logs import setup_logging

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
        role = TrackerRole(host, port, args.ttl)
        return runloop.run(run_roles([role], announce=lambda: _ready(role)))
    except (ValueError, OSError) as error:
        print(f"feedmesh tracker: {_said(error)}", file=sys.stderr)
        return 2


def _ready(role: TrackerRole) -> None:
    server = role.server
    print(f"feedmesh tracker on http://{server.host}:{server.port} "
          f"(peers: --tracker http://{server.host}:{server.port})", flush=True)


def _said(error: BaseException) -> str:
    """An error as one line for a person (an OSError's own words, without its number)."""
    return (error.strerror or str(error)) if isinstance(error, OSError) else str(error)
