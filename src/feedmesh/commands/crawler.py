"""``feedmesh crawler``: the crawling hub without a web server (``feedmesh web`` processes serve
people): the crawler, and whatever tiers are not given to processes of their own
(``--external-filters``, ``--external-reflectors``). It takes ``feedmesh serve``'s flags; its
HTTP port serves ``/metrics`` only. It applies what web processes tell it on the ``feeds``
subject (feeds to crawl, followers gained or lost).

Not built yet: several crawlers (``--shard``): one crawler process crawls every feed.
"""

from __future__ import annotations

import argparse

from feedmesh.commands import serve

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    serve.configure(parser)


def run(args: argparse.Namespace) -> int:
    return serve.run(args, web_layer=False)
