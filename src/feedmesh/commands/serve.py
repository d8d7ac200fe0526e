"""``feedmesh serve``: every hub tier and the web server in one process, on SQLite
(:mod:`feedmesh.compose.serve`)."""

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
    flags.add_serve_arguments(parser)


def run(args: argparse.Namespace) -> int:

    setup_logging(args.log_level)
    os.umask(0o077)  # what it writes (databases, snapshots, keys) is its owner's alone
    try:
        return runloop.run(serve(flags.serve_settings(args)))
    except (OSError, ValueError, FeedmeshError) as exc:
        print(f"feedmesh serve: {exc}", file=sys.stderr)
        return 2
