"""``feedmesh up``: a hub as several processes on this machine, joined by NATS JetStream
(:mod:`feedmesh.compose.processes`); ``feedmesh down`` stops them."""

from __future__ import annotations

import argparse
import os

from feedmesh import environment
from feedmesh.compose.processes import up
from feedmesh.compose.settings import UpSettings

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=environment.get("FEEDMESH_DATA", "var-up"),
                        help="the topology's folder: the hub's data, the filters' snapshots, "
                        "NATS's streams, up.json")
    parser.add_argument("--topology", default="", metavar="PLAN_JSON",
                        help="start the plan `feedmesh provision --json` wrote: its crawlers, "
                        "filter shards and their replicas, and reflectors (instead of "
                        "--crawlers, --filters, --reflectors)")
    parser.add_argument("--filters", type=int, default=2, help="filter shard processes")
    parser.add_argument("--filter-replicas", type=int, default=1,
                        help="processes per filter shard (they share its articles)")
    parser.add_argument("--crawlers", type=int, default=1,
                        help="crawler processes, each fetching its share of the feeds (more "
                        "than 1 needs --store)")
    parser.add_argument("--by-locality", action="store_true",
                        help="crawlers by name, each on a loopback address of its own (the "
                        "plan's hosts with --topology, else 127.1.0.N), the feeds mapped to the "
                        "nearest once they are loaded (`feedmesh map --apply`: latency probed "
                        "from each crawler's address; docs/locality.md)")
    parser.add_argument("--reflectors", type=int, default=1,
                        help="reflector processes (each serves the feeds of part of the accounts)")
    parser.add_argument("--web", type=int, default=1,
                        help="web processes (each serves the UI, the API and private feeds)")
    parser.add_argument("--host", default="127.0.0.1", help="the web processes' address")
    parser.add_argument("--port", type=int, default=8080,
                        help="the first web process's port (0: any; the others take any)")
    parser.add_argument("--nats", default="", metavar="URL",
                        help="a NATS JetStream server to use (default: start one in DATA/nats, "
                        "which lets in only the roles' keys; the roles reach a server given "
                        "here without credentials)")
    parser.add_argument("--nats-cluster", type=int, default=0, metavar="N",
                        help="start N NATS servers (3 to 5, on 127.0.0.1, .2, ...) as one "
                        "JetStream cluster holding every stream on 3 of them: the hub goes on "
                        "when one dies (default: one server)")
    parser.add_argument("--store", default="", metavar="URL",
                        help="the hub's database, which every process reads: a postgresql:// "
                        "URL, or 'sqlite' for SQLite files in DATA/hub (one machine, one "
                        "crawler); default: a PostgreSQL server started in DATA/postgres")
    parser.add_argument("--opml", default="", metavar="FILE_OR_URL",
                        help="feeds to crawl from the start (as `feedmesh serve --opml`)")
    parser.add_argument("--allow-network", action="append", default=[], metavar="CIDR",
                        help="let the crawler fetch from this network (e.g. 127.0.0.0/8 for a "
                        "local farm), and the web processes and reflectors' delivery workers "
                        "push to it")
    parser.add_argument("--republish", default="", metavar="KEY_DIR",
                        help="every crawler multicasts what it finds new on the SCRIBE-RSS "
                        "mesh, signed with this key folder (`feedmesh keys make --dir`), each "
                        "from an overlay node of its own; the feeds at each crawler's "
                        "/mesh/opml (see up.json)")
    crawl = parser.add_argument_group("the crawl and the delivery (as `feedmesh serve`'s)")
    crawl.add_argument("--crawl-interval", type=float, default=0.0, metavar="SECONDS",
                       help="crawl every feed every SECONDS (`--policy interval`); default: the "
                       "crawler's learned policy")
    crawl.add_argument("--per-host", type=int, default=0,
                       help="the crawlers' requests in flight per host (default: theirs)")
    crawl.add_argument("--no-backlog", action="store_true",
                       help="do not match the entries a source held before it was followed")
    crawl.add_argument("--delivery", choices=("ids", "article"), default="ids",
                       help="filter -> reflector: matching ids, or the article to re-match "
                       "(Cobra's final design); given to every crawler, filter and reflector")


def run(args: argparse.Namespace) -> int:
    # Whatever up and its roles write (up.json, the NATS config and log, the filters'
    # snapshots, the credentials) is for this user alone: files 0600, folders 0700.
    os.umask(0o077)
    return up(UpSettings(**{field: getattr(args, field) for field in UpSettings.__struct_fields__}))
