"""``feedmesh crawler``: the crawling hub without a web server (``feedmesh web`` processes serve
people): the crawler, and whatever tiers are not given to processes of their own
(``--external-filters``, ``--external-reflectors``). It takes ``feedmesh serve``'s flags; its
HTTP port serves ``/metrics`` and ``/api/stats`` only. It applies what web processes tell it on
the ``feeds`` subject (feeds to crawl, followers gained or lost).

``--shard i/n``: this crawler fetches the feeds whose id is ``i`` modulo ``n`` (Cobra's split
of the feeds over crawlers); run one process per share, on one ingest store (PostgreSQL, or the
same SQLite file on one machine), each with ``--external-filters`` and ``--external-reflectors``
(the tiers are shared). A feed added by a web process reaches every crawler on ``feeds``; the
one whose share it is crawls it.

``--name NAME``: this crawler fetches the feeds the feed ownership table (in the ingest store:
``--store`` or ``DATA/feedmesh.db``) gives NAME, and follows the table while it runs: ``feedmesh
map --apply`` moves feeds between running crawlers without stopping them (hub/tiers/owners.py,
docs/locality.md). New feeds get an owner near their server. ``--source-address`` makes every
fetch of this crawler leave from that local address (a crawler playing its own site on one
machine: 127.0.1.x). ``--name`` and ``--shard`` are exclusive.
"""

from __future__ import annotations

import argparse
import os
import sys

from feedmesh import runloop
from feedmesh.commands import flags
from feedmesh.compose.serve import serve
from feedmesh.errors import FeedmeshError
from feedmesh.logs import setup_logging

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_serve_arguments(parser, crawler=True)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    os.umask(0o077)
    try:
        return runloop.run(serve(flags.serve_settings(args, web=False)))
    except (OSError, ValueError, FeedmeshError) as exc:
        print(f"feedmesh crawler: {exc}", file=sys.stderr)
        return 2
