"""``feedmesh reflector``: one reflector in a process of its own, on a NATS JetStream bus.

Cobra's reflector tier on its own host: it holds the newest entries of its share of the
subscriptions (those the hub gave reflector ``i`` of ``n``: accounts are spread over the
reflectors), stores the filters' matches of ``matches.<i>`` in its log (a SQLite file in
``--data``, or, with ``--store postgresql://...``, tables no disk of its own holds), and answers
the hub and its web processes on a small internal API (``--listen``;
:mod:`feedmesh.hub.tiers.reflector_service`). The hub is started with ``--external-reflectors`` and
these processes' URLs.

Beside the reflector runs its delivery worker (:mod:`feedmesh.hub.push`): the WebSub
subscribers and webhooks of the subscriptions it holds, as web processes saved them in the
hub's state, get its matches, in order per target, resumed from each target's durable mark
after a restart (:mod:`feedmesh.compose.reflector`).
"""

from __future__ import annotations

import argparse
import os
import sys

from feedmesh import environment, runloop
from feedmesh.commands import flags
from feedmesh.compose.lifecycle import bind, run_roles
from feedmesh.compose.reflector import reflector_process
from feedmesh.compose.settings import Listen, ReflectorRoleSettings, ReflectorSettings
from feedmesh.errors import FeedmeshError
from feedmesh.logs import setup_logging

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    flags.add_bus(parser, required=True)
    flags.add_state(parser)
    flags.add_log_level(parser)
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="which reflector this is, of how many (the hub's --reflectors)")
    flags.add_store(parser, help="keep the match log and checkpoint in this PostgreSQL "
                    "database instead of a SQLite file in --data (a replacement on another "
                    "machine then starts where this one stopped)")
    flags.add_data(parser, help="where the SQLite log and checkpoint are kept (without --store)")
    parser.add_argument("--listen", default="127.0.0.1:8301", metavar="HOST:PORT",
                        help="the internal API the hub and web processes ask (no accounts: "
                        "bind it where only they reach)")
    parser.add_argument("--delivery", choices=("ids", "article"), default="ids",
                        help="what the filters send: the matching ids, or the article alone "
                        "(re-matched here); the same as the hub's")
    parser.add_argument("--soft-memory-mb", type=int, default=0,
                        help="above this resident size, drop entry bodies")
    parser.add_argument("--hard-memory-mb", type=int, default=0,
                        help="above this resident size, drop new entries")
    parser.add_argument("--checkpoint-interval", type=float,
                        default=ReflectorSettings().checkpoint_interval_s, metavar="SECONDS",
                        help="how often the held entries are checkpointed and the log truncated")
    parser.add_argument("--token-file", metavar="FILE",
                        default=environment.get("FEEDMESH_REFLECTOR_TOKEN_FILE", ""),
                        help="ask every caller of --listen (its /metrics too) for the bearer "
                        "token in this file 0600 (default $FEEDMESH_REFLECTOR_TOKEN_FILE; none: "
                        "no token asked)")
    flags.add_push_arguments(parser, guard=True)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    os.umask(0o077)
    try:
        settings = ReflectorRoleSettings(
            bus=flags.bus_settings(args), state=args.state, shard=flags.parse_shard(args.shard),
            store=args.store, data_dir=args.data, listen=Listen.parse(args.listen),
            delivery=args.delivery,
            reflector=ReflectorSettings(soft_memory_bytes=args.soft_memory_mb << 20,
                                        hard_memory_bytes=args.hard_memory_mb << 20,
                                        checkpoint_interval_s=args.checkpoint_interval),
            push=flags.worker_settings(args), guard=flags.push_guard(args),
            token_file=args.token_file)
        return runloop.run(_run(settings))
    except (OSError, ValueError, FeedmeshError) as exc:
        print(f"feedmesh reflector: {exc}", file=sys.stderr)
        return 2


async def _run(settings: ReflectorRoleSettings) -> int:
    sock = bind(settings.listen.host, settings.listen.port)
    try:
        roles, closers = reflector_process(settings)
    except BaseException:
        sock.close()
        raise
    reflector, push = roles
    number, count = settings.shard
    host, port = sock.getsockname()[:2]

    def announce() -> None:
        print(f"feedmesh reflector {number}/{count}: {reflector.held} subscriptions, "
              f"{push.targets} push targets, on {settings.bus.url} "
              f"(streams {settings.bus.namespace}_*), answering on http://{host}:{port}/",
              file=sys.stderr, flush=True)

    status = await run_roles(roles, http=sock, closers=closers, announce=announce)
    print("stopped: the deliveries in hand were finished or handed back, a checkpoint "
          "written", file=sys.stderr)
    return status
