"""``feedmesh filter``: one filter shard in a process of its own, on a NATS JetStream bus.

Cobra's filter tier on its own host: the shard matches every article of the ``articles`` stream
against its share of the subscriptions (``--shard i/n``: the subscriptions whose id is ``i``
modulo ``n``, the out-decomposition) and publishes each reflector's matches on
``matches.<r>``. Several processes given the same ``--shard`` are replicas of it: members of one
group, they share the article stream (the in-decomposition). Every filter process of a hub must
be given the same ``n``. It runs until SIGTERM or Ctrl-C (:mod:`feedmesh.compose.filter`).
"""

from __future__ import annotations

import argparse
import os
import sys

from feedmesh import runloop
from feedmesh.commands import flags
from feedmesh.compose.filter import filter_process
from feedmesh.compose.lifecycle import bind, run_roles
from feedmesh.compose.settings import FilterSettings, Listen
from feedmesh.errors import FeedmeshError
from feedmesh.logs import setup_logging

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_bus(parser, required=True)
    flags.add_state(parser)
    flags.add_log_level(parser)
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="which share of the subscriptions: ids equal to I modulo N")
    flags.add_data(parser, help="where the shard's index snapshot is kept")
    parser.add_argument("--delivery", choices=("ids", "article"), default="ids",
                        help="what goes to reflectors: the matching ids, or the article alone")
    parser.add_argument("--metrics", default="", metavar="HOST:PORT",
                        help="serve Prometheus figures at http://HOST:PORT/metrics")


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    os.umask(0o077)
    try:
        settings = FilterSettings(
            bus=flags.bus_settings(args), state=args.state,
            shard=flags.parse_shard(args.shard), data_dir=args.data, delivery=args.delivery,
            metrics=Listen.parse(args.metrics, "--metrics") if args.metrics else None)
        return runloop.run(_run(settings))
    except (OSError, ValueError, FeedmeshError) as exc:
        print(f"feedmesh filter: {exc}", file=sys.stderr)
        return 2


async def _run(settings: FilterSettings) -> int:
    sock = bind(settings.metrics.host, settings.metrics.port) if settings.metrics else None
    role, closers = filter_process(settings)
    shard, shards = settings.shard

    def announce() -> None:
        print(f"feedmesh filter shard {shard}/{shards}: {role.held} subscriptions, on "
              f"{settings.bus.url} (streams {settings.bus.namespace}_*)", file=sys.stderr,
              flush=True)

    status = await run_roles([role], http=sock, closers=closers, announce=announce)
    print("stopped: the deliveries in hand were finished or handed back", file=sys.stderr)
    return status
