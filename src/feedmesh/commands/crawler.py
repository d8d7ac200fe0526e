"""``feedmesh crawler``: the crawling hub without a web server (``feedmesh web`` processes serve
people): the crawler, and whatever tiers are not given to processes of their own
(``--external-filters``, ``--external-reflectors``). It takes ``feedmesh serve``'s flags; its
HTTP port serves ``/metrics`` only. It applies what web processes tell it on the ``feeds``
subject (feeds to crawl, followers gained or lost).

``--shard i/n``: this crawler fetches the feeds whose id is ``i`` modulo ``n`` (Cobra's split
of the feeds over crawlers); run one process per share, on one ingest store (PostgreSQL, or the
same SQLite file on one machine), each with ``--external-filters`` and ``--external-reflectors``
(the tiers are shared). A feed added by a web process reaches every crawler on ``feeds``; the
one whose share it is crawls it.

``--name NAME``: this crawler fetches the feeds the feed ownership table (in the ingest store:
``--store`` or ``DATA/feedmesh.db``) gives NAME, and follows the table while it runs: ``feedmesh
map --apply`` moves feeds between running crawlers without stopping them (hub/owners.py,
docs/locality.md). New feeds get an owner near their server. ``--source-address`` makes every
fetch of this crawler leave from that local address (a crawler playing its own site on one
machine: 127.0.1.x). ``--name`` and ``--shard`` are exclusive.
"""

from __future__ import annotations

import argparse
import sys

from feedmesh.commands import serve

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    serve.configure(parser)
    parser.add_argument("--shard", default=None, metavar="I/N",
                        help="which share of the feeds: ids equal to I modulo N")
    parser.add_argument("--name", default="", metavar="NAME",
                        help="crawl the feeds the ownership table gives NAME (feedmesh map "
                        "--apply assigns and moves them while crawlers run); not with --shard")
    parser.add_argument("--source-address", default="", metavar="IP",
                        help="every fetch leaves from this local address (e.g. 127.0.1.2)")


def run(args: argparse.Namespace) -> int:
    if args.name and args.shard is not None:
        print(f"feedmesh crawler: --name {args.name} and --shard {args.shard} are exclusive: a "
              "crawler takes its feeds from the ownership table by name, or by id modulo n",
              file=sys.stderr)
        return 2
    args.shard = args.shard or "0/1"
    return serve.run(args, web_layer=False)
