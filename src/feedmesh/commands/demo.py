"""``feedmesh demo``: the main job on the embedded default, with nothing to set up.

A farm of synthetic feeds runs in a child process on loopback (its clock accelerated, so feeds post
every few seconds); one feedmesh process runs every hub tier and the web server on SQLite, crawls
the farm, and serves a demo account's subscriptions as private feeds. A live table shows the crawl,
the tiers and each demo subscription filling up; open the printed address to sign up and
subscribe yourself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import shutil
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from feedmesh.commands.serve import running_hub
from feedmesh.crawl import CrawlSettings
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.feeds.opml import parse_opml
from feedmesh.fetch import FetchSettings
from feedmesh.hub.app import HubSettings
from feedmesh.hub.facade import HubFacade
from feedmesh.logs import setup_logging
from feedmesh.store import StoreError, Subscription

__all__ = ["configure", "run"]

EXAMPLE_QUERIES = ("(people AND time) OR government", "market OR economy", '"new york" OR london')


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--feeds", type=int, default=2000, help="synthetic feeds in the farm")
    parser.add_argument("--speed", type=float, default=120.0,
                        help="farm clock speed (120: two farm hours per real minute)")
    parser.add_argument("--interval", type=float, default=20.0, help="seconds between crawls")
    parser.add_argument("--port", type=int, default=8080, help="web port of the hub")
    parser.add_argument("--data", default="var/demo",
                        help="the demo's own folder (default var/demo): created and marked as "
                             "the demo's, emptied at each start; a folder holding anything else "
                             "is refused")
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="stop after this many seconds (0: run until Ctrl-C)")


MARK = ".feedmesh-demo"
"""The file that marks a folder as the demo's own (and, locked, as in use by a running demo)."""


class DemoFolderError(Exception):
    """The demo's folder cannot be used (someone else's files, or a demo running on it)."""


@contextlib.contextmanager
def demo_folder(path: Path) -> Iterator[Path]:
    """``path`` emptied for a demo that starts from nothing, and held while it runs.

    Only a folder the demo made (it holds the mark) is ever emptied, and never while another
    demo holds it; a folder with anything else in it is refused."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = sorted(p.name for p in path.iterdir())
    except OSError as exc:
        raise DemoFolderError(f"cannot use {path}: {exc.strerror or exc}") from exc
    if found and MARK not in found:
        raise DemoFolderError(
            f"{path} holds files the demo did not put there ({len(found)}, e.g. {found[0]!r}); "
            "the demo empties its folder at each start, so give --data a new or empty folder")
    descriptor = os.open(path / MARK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise DemoFolderError(f"another feedmesh demo is running on {path}; stop it or "
                                  "give --data another folder") from exc
        # Ours, and nobody runs on it: start from nothing, so what it shows is what a new
        # user gets.
        for entry in path.iterdir():
            if entry.name == MARK:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        yield path
    finally:
        os.close(descriptor)  # and with it the lock


def run(args: argparse.Namespace) -> int:
    setup_logging("warning")
    os.umask(0o077)  # what it writes (databases, snapshots, keys) is its owner's alone
    console = Console()
    try:
        with demo_folder(Path(args.data)):
            console.print(f"starting a farm of {args.feeds} synthetic feeds on loopback "
                          f"(clock x{args.speed:g})...")
            with FarmProcess(FarmConfig(feeds=args.feeds, seed=1, speed=args.speed)) as farm:
                return asyncio.run(_demo(args, farm, console))
    except (DemoFolderError, OSError, StoreError) as exc:  # a busy port is an OSError too
        print(f"feedmesh demo: {exc}", file=sys.stderr)
        return 2


async def _demo(args: argparse.Namespace, farm: FarmProcess, console: Console) -> int:
    settings = HubSettings(
        # Every feed every interval: the farm's clock runs 120x, the hub's is real, and a
        # learned schedule on real time would wait hours for feeds that post every minute.
        data_dir=args.data, crawl_interval_s=args.interval, schedule=None,
        fetch=FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=8),
        crawl=CrawlSettings())
    async with running_hub(settings, "127.0.0.1", args.port) as (hub, base):
        token, subs = await _demo_account(hub, farm)
        feeds = [(sub.query, f"{base}/f/{hub.feed_token(sub)}.rss") for sub in subs]
        console.print(f"\n[bold]feedmesh is running:[/bold] open {base}/ to sign up and "
                      "subscribe (Ctrl-C stops)")
        console.print(f"demo account token: {token}")
        for query, url in feeds:
            console.print(f"  {query!r:42} {url}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        started = time.monotonic()
        with Live(await _view(hub, subs), console=console, refresh_per_second=2) as live:
            while not stop.is_set():
                if args.seconds and time.monotonic() - started > args.seconds:
                    break
                live.update(await _view(hub, subs))
                try:
                    await asyncio.wait_for(stop.wait(), 1.0)
                except TimeoutError:
                    pass
        console.print("\nstopping: finishing in-flight work...")
    return 0


async def _demo_account(hub: HubFacade, farm: FarmProcess) -> tuple[str, list[Subscription]]:
    """A demo account following every farm feed, with example subscriptions."""
    account, token = await hub.create_account("demo")
    opml = parse_opml(await asyncio.to_thread(_read, farm.opml_url))
    await hub.follow_sources(account.id, opml.outlines)
    subs = [await hub.add_subscription(account.id, name="", query=query, keep=10)
            for query in EXAMPLE_QUERIES]
    return token, subs


def _read(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return answer.read()


async def _view(hub: HubFacade, demo_subs: list[Subscription]) -> Group:
    stats = await hub.stats()
    metrics = stats["metrics"]
    table = Table(title="feedmesh demo (live)", show_header=False, min_width=70)
    cycle = stats["last_crawl"]
    table.add_row("source feeds", str(stats["feeds"]))
    if cycle:
        errors = sum(cycle["errors"].values())
        table.add_row("last crawl", f"{cycle['fetched']} fetched: {cycle['ok']} new documents, "
                      f"{cycle['not_modified']} not modified (304), {errors} errors "
                      "(the farm injects faults on purpose), "
                      f"{cycle['elapsed_s']:.1f} s")
    else:
        table.add_row("last crawl", "first crawl running...")
    table.add_row("entries stored", f"{stats['entries_stored']:,}")
    table.add_row("articles matched", f"{metrics.get('feedmesh_tier_articles_in_total{tier=filter}', 0):,.0f} "
                  f"filtered -> {metrics.get('feedmesh_matches_total', 0):,.0f} matches")
    count = metrics.get("feedmesh_hub_latency_seconds_count", 0)
    if count:
        mean = metrics["feedmesh_hub_latency_seconds_sum"] / count
        table.add_row("intra-hub latency", f"{mean * 1000:.0f} ms mean (crawler -> reflector)")
    table.add_row("memory", f"{metrics.get('feedmesh_process_memory_bytes', 0) / 2**20:.0f} MB")
    subs = Table(title="demo subscriptions", show_header=True)
    subs.add_column("query")
    subs.add_column("entries in its feed", justify="right")
    for sub in demo_subs:
        subs.add_row(sub.query, str(len(await hub.feed_items(sub.id))))
    return Group(table, subs)
