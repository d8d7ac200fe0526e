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
"""

from __future__ import annotations

import argparse

from feedmesh.commands import serve

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    serve.configure(parser)
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="which share of the feeds: ids equal to I modulo N")


def run(args: argparse.Namespace) -> int:
    return serve.run(args, web_layer=False)
