"""``feedmesh down``: stop what ``feedmesh up --data DIR`` started
(:mod:`feedmesh.compose.processes`)."""

from __future__ import annotations

import argparse

from feedmesh import environment
from feedmesh.compose.processes import down

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default=environment.get("FEEDMESH_DATA", "var-up"),
                        help="the folder `feedmesh up` was given")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for everything to stop")


def run(args: argparse.Namespace) -> int:
    return down(args.data, args.timeout)
