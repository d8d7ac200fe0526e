"""``feedmesh filter``: one filter shard in a process of its own, on a NATS JetStream bus.

Cobra's filter tier on its own host: the shard matches every article of the ``articles`` stream
against its share of the subscriptions (``--shard i/n``: the subscriptions whose id is ``i``
modulo ``n``, the out-decomposition) and publishes each reflector's matches on
``matches.<r>``. Several processes given the same ``--shard`` are replicas of it: members of one
group, they share the article stream (the in-decomposition). Every filter process of a hub must
be given the same ``n``.

It joins its group of ``control`` before it reads the subscriptions, so that no change made
meanwhile is missed; then it builds its index (from its snapshot in ``--data`` plus the changes
since, else from the stored queries, writing a snapshot), and runs until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from feedmesh import runloop
from feedmesh.bus import BusError
from feedmesh.clock import SystemClock
from feedmesh.compose import existing_hub_state, open_bus
from feedmesh.hub.filter import FilterTier
from feedmesh.hub.metrics import HubMetrics
from feedmesh.hub.supervise import supervise
from feedmesh.logs import setup_logging
from feedmesh.model import Entry
from feedmesh.store import StoreError

__all__ = ["add_role_arguments", "configure", "parse_shard", "run"]

log = logging.getLogger("feedmesh.hub")


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` -> (i, n), with 0 <= i < n <= 64; a ValueError that says so otherwise."""
    try:
        i, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: write it as i/n, e.g. 0/2") from None
    if not 0 <= i < n <= 64:
        raise ValueError(f"--shard {text!r}: need 0 <= i < n <= 64")
    return i, n


def add_role_arguments(parser: argparse.ArgumentParser, *, state: bool = True) -> None:
    """The flags every role in a process of its own takes: where the hub's processes meet
    (``--bus``, ``--bus-namespace``), unless ``state`` is False where its accounts and
    subscriptions are (``--state``), and how much it logs (``--log-level``)."""
    parser.add_argument("--bus", required=True, metavar="URL",
                        help="the NATS JetStream server the hub's processes meet on, "
                        "nats://HOST:PORT")
    parser.add_argument("--bus-namespace", default="feedmesh", metavar="NAME",
                        help="the hub's streams' prefix on that server")
    if state:
        parser.add_argument("--state", required=True, metavar="HUB_DB_OR_URL",
                            help="the hub's accounts and subscriptions: the hub.db of its data "
                            "folder, or its postgresql:// URL")
    parser.add_argument("--log-level", default="info",
                        choices=("debug", "info", "warning", "error"),
                        help="the least severe log lines written to standard error")


def configure(parser: argparse.ArgumentParser) -> None:
    add_role_arguments(parser)
    parser.add_argument("--shard", default="0/1", metavar="I/N",
                        help="which share of the subscriptions: ids equal to I modulo N")
    parser.add_argument("--data", default=os.environ.get("FEEDMESH_DATA", "var"),
                        help="where the shard's index snapshot is kept")
    parser.add_argument("--delivery", choices=("ids", "article"), default="ids",
                        help="what goes to reflectors: the matching ids, or the article alone")
    parser.add_argument("--metrics", default="", metavar="HOST:PORT",
                        help="serve Prometheus figures at http://HOST:PORT/metrics")


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    os.umask(0o077)
    try:
        shard = parse_shard(args.shard)
        return runloop.run(_run(args, *shard))
    except (OSError, ValueError, StoreError, BusError) as exc:
        print(f"feedmesh filter: {exc}", file=sys.stderr)
        return 2


async def _serve_metrics(address: str, metrics: HubMetrics) -> web.AppRunner:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"--metrics {address!r}: write it as HOST:PORT")

    async def figures(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/metrics", figures)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, host, int(port)).start()
    return runner


async def _run(args: argparse.Namespace, shard: int, shards: int) -> int:
    data = Path(args.data)
    data.mkdir(mode=0o700, parents=True, exist_ok=True)
    if args.bus in ("", "memory"):
        raise ValueError("--bus: a filter in its own process needs a NATS server, "
                         "nats://HOST:PORT")
    metrics = HubMetrics()
    bus = open_bus(args.bus, namespace=args.bus_namespace)
    tier = FilterTier(shard, shards, bus, SystemClock(), metrics, delivery=args.delivery)
    metrics.watch_queues(bus.depths)
    runner = None
    state = None
    try:
        await tier.join_control()
        state, reopen = existing_hub_state(args.state)
        columns = state.subscription_columns()
        held = await asyncio.to_thread(tier.load, state, columns, data, reopen)
        del columns
        # The matcher's compiled kernels load on first use: before the first article, not on it.
        await asyncio.to_thread(tier.index.match_entry,
                                Entry(key="warm-up", title="warm up the matcher"), "", "")
        metrics.subscriptions.set(held)
        if args.metrics:
            runner = await _serve_metrics(args.metrics, metrics)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        name = f"filter-{shard}"
        tasks = [asyncio.create_task(supervise(f"{name}.control", tier.run_control, stop)),
                 asyncio.create_task(supervise(name, tier.run, stop))]
        await tier.stream_joined.wait()
        print(f"feedmesh filter shard {shard}/{shards}: {held} subscriptions, on {args.bus} "
              f"(streams {args.bus_namespace}_*)", file=sys.stderr, flush=True)
        await stop.wait()
        print("stopping: the deliveries in hand are finished or handed back", file=sys.stderr)
        # Closing the bus ends both loops; what a loop held unacknowledged goes to another
        # member of the group (or to this shard's next start).
        await bus.close()
        await asyncio.gather(*tasks, return_exceptions=True)
        return 0
    finally:
        await bus.close()
        if runner is not None:
            await runner.cleanup()
        if state is not None:
            state.close()
