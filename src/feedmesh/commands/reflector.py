"""``feedmesh reflector``: one reflector in a process of its own, on a NATS JetStream bus.

Cobra's reflector tier on its own host: it holds the newest entries of its share of the
subscriptions (those the hub gave reflector ``i`` of ``n``: accounts are spread over the
reflectors), stores the filters' matches of ``matches.<i>`` in its log (a SQLite file in
``--data``, or, with ``--store postgresql://...``, tables no disk of its own holds), and answers
the hub and its web processes on a small internal API (``--listen``;
:mod:`feedmesh.hub.reflector_service`). The hub is started with ``--external-reflectors`` and
these processes' URLs.

Beside the reflector runs its delivery worker (:mod:`feedmesh.hub.push`): the WebSub
subscribers and webhooks of the subscriptions it holds, as web processes saved them in the
hub's state, get its matches, in order per target, resumed from each target's durable mark
after a restart.

It joins ``control`` before it reads the subscriptions (so no change is missed), restores its
held entries and its feeds' versions from the checkpoint and the log, and answers 503 until then.
SIGTERM or Ctrl-C: the deliveries in hand are finished or handed back, a checkpoint is written.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from aiohttp import web

from feedmesh import runloop
from feedmesh.bus import BusError
from feedmesh.clock import SystemClock
from feedmesh.commands.filter import add_role_arguments, parse_shard
from feedmesh.commands.push_flags import add_push_arguments, push_guard, worker_settings
from feedmesh.compose import existing_hub_state, feed_url_tokens, open_bus, open_reflector_log
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.push import PushService
from feedmesh.hub.push_feeds import LocalFeeds
from feedmesh.hub.reflector import Reflector, ReflectorSettings
from feedmesh.hub.reflector_service import reflector_app
from feedmesh.hub.supervise import supervise
from feedmesh.logs import setup_logging
from feedmesh.match import SubscriptionIndex
from feedmesh.store import StoreError

__all__ = ["configure", "parse_listen", "run"]


def parse_listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--listen {text!r}: write it as HOST:PORT, e.g. 127.0.0.1:8301")
    return host.strip("[]"), int(port)


def configure(parser: argparse.ArgumentParser) -> None:
    add_role_arguments(parser)
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="which reflector this is, of how many (the hub's --reflectors)")
    parser.add_argument("--store", default=os.environ.get("FEEDMESH_STORE", ""), metavar="URL",
                        help="keep the match log and checkpoint in this PostgreSQL database "
                        "instead of a SQLite file in --data (a replacement on another machine "
                        "then starts where this one stopped)")
    parser.add_argument("--data", default=os.environ.get("FEEDMESH_DATA", "var"),
                        help="where the SQLite log and checkpoint are kept (without --store)")
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
    add_push_arguments(parser, guard=True)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    os.umask(0o077)
    try:
        number, count = parse_shard(args.shard)
        host, port = parse_listen(args.listen)
        if args.bus in ("", "memory"):
            raise ValueError("--bus: a reflector in its own process needs a NATS server, "
                             "nats://HOST:PORT")
        return runloop.run(_run(args, number, count, host, port))
    except (OSError, ValueError, StoreError, BusError) as exc:
        print(f"feedmesh reflector: {exc}", file=sys.stderr)
        return 2


async def _run(args: argparse.Namespace, number: int, count: int, host: str,
               port: int) -> int:
    data = Path(args.data)
    if not args.store:
        data.mkdir(mode=0o700, parents=True, exist_ok=True)
    metrics = HubMetrics()
    bus = open_bus(args.bus, namespace=args.bus_namespace)
    settings = ReflectorSettings(soft_memory_bytes=args.soft_memory_mb << 20,
                                 hard_memory_bytes=args.hard_memory_mb << 20,
                                 checkpoint_interval_s=args.checkpoint_interval)
    reflector_log = open_reflector_log(args.store or data / f"reflector-{number}.db", number)
    tier = Reflector(number, reflector_log, bus, SystemClock(), metrics, settings,
                     index=SubscriptionIndex() if args.delivery == "article" else None)
    metrics.watch_queues(bus.depths)
    metrics.reflector_memory.set_function(tier.memory_bytes)
    loaded = asyncio.Event()
    runner = web.AppRunner(reflector_app(tier, metrics, loaded.is_set), access_log=None,
                           handle_signals=False)
    tasks: list[asyncio.Task] = []
    try:
        await runner.setup()
        await web.TCPSite(runner, host, port).start()  # 503 until loaded
        await tier.join_control()
        state, _ = existing_hub_state(args.state)
        try:
            columns = state.subscription_columns()
            queries = list(state.queries()) if tier.index is not None else []
        finally:
            state.close()
        held = await asyncio.to_thread(tier.load, columns, queries)
        del columns, queries
        metrics.subscriptions.set(held)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        name = f"reflector-{number}"
        push_state, _ = existing_hub_state(args.state)
        feeds = LocalFeeds(lambda sub_id: tier if tier.subs.is_active(sub_id) else None)
        push = feeds.push = PushService(push_state, worker_settings(args), push_guard(args),
                                        SystemClock(), metrics, document=feeds.document,
                                        held=feeds.held,
                                        tokens=feed_url_tokens(push_state, args.state))
        tier.on_applied = push.matched  # before the load: what it resends is queued once
        targets = await push.load()
        tasks = [asyncio.create_task(supervise(f"{name}.control", tier.run_control, stop)),
                 asyncio.create_task(supervise(name, tier.run, stop)),
                 asyncio.create_task(supervise(f"{name}.push", lambda: push.run(stop), stop))]
        await tier.stream_joined.wait()
        loaded.set()
        print(f"feedmesh reflector {number}/{count}: {held} subscriptions, {targets} push "
              f"targets, on {args.bus} "
              f"(streams {args.bus_namespace}_*), answering on http://{host}:{port}/",
              file=sys.stderr, flush=True)
        await stop.wait()
        print("stopping: the deliveries in hand are finished or handed back, then a "
              "checkpoint", file=sys.stderr)
        await bus.close()  # ends both loops; what they held goes to this reflector's next start
        await asyncio.gather(*tasks, return_exceptions=True)
        await push.close()  # the delivery logs and marks are written
        push_state.close()
        await tier.close_async()
        return 0
    finally:
        for task in tasks:
            task.cancel()
        await bus.close()
        await runner.cleanup()
