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
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from feedmesh import runloop
from feedmesh.compose.demo import Demo, run_demo
from feedmesh.errors import FeedmeshError
from feedmesh.logs import setup_logging

__all__ = ["configure", "layout", "run"]

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


class DemoFolderError(FeedmeshError):
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

    def starting(feeds: int) -> None:
        console.print(f"starting a farm of {feeds} synthetic feeds on loopback "
                      f"(clock x{args.speed:g})...")

    async def show(demo: Demo, stop: asyncio.Event) -> None:
        await _live(demo, stop, console, args.seconds)

    try:
        with demo_folder(Path(args.data)):
            return runloop.run(run_demo(data_dir=args.data, feeds=args.feeds, speed=args.speed,
                                        interval_s=args.interval, port=args.port, show=show,
                                        started=starting))
    except (OSError, FeedmeshError) as exc:  # a busy port is an OSError too
        print(f"feedmesh demo: {exc}", file=sys.stderr)
        return 2


async def _live(demo: Demo, stop: asyncio.Event, console: Console, seconds: float) -> None:
    console.print(f"\n[bold]feedmesh is running:[/bold] open {demo.base}/ to sign up and "
                  "subscribe (Ctrl-C stops)")
    console.print("the demo account's private feeds (RSS), for your reader:")
    for query, url in demo.feeds:
        console.print(f"  {query!r:42} {url}")
    started = time.monotonic()
    # The address and the token head the live view itself: in a 24-line terminal the lines
    # printed above scroll away once the table draws, the view's own first lines do not.
    with Live(await _view(demo), console=console, refresh_per_second=2) as live:
        while not stop.is_set():
            if seconds and time.monotonic() - started > seconds:
                break
            live.update(await _view(demo))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    console.print("\nstopping: finishing in-flight work...")


async def _view(demo: Demo) -> Group:
    counts = [len(await demo.hub.feed_items(sub.id)) for sub in demo.subs]
    return layout(demo, await demo.hub.stats(), counts)


def layout(demo: Demo, stats: dict, counts: list[int]) -> Group:
    """The live view: where the hub is and the demo account's token first, then the crawl and
    the tiers, then each demo subscription with the entries its feed holds (``counts``)."""
    metrics = stats["metrics"]
    header = Text.assemble(("feedmesh is running at ", "bold"), f"{demo.base}/",
                           " (Ctrl-C stops)\n", "demo account token: ", demo.token)
    table = Table(title="feedmesh demo (live)", show_header=False, min_width=70)
    cycle, running = stats["last_crawl"], stats.get("crawl_running")
    if cycle:
        errors = cycle["errors"]
        fetch_errors = sum(v for k, v in errors.items() if not k.startswith("parse:"))
        broken = sum(v for k, v in errors.items() if k.startswith("parse:"))
        table.add_row("last crawl", f"{cycle['fetched']} fetched in {cycle['elapsed_s']:.1f} s "
                      f"= {cycle['ok'] + cycle['delta']} documents ({broken} broken) + "
                      f"{cycle['not_modified']} not modified (304) + {fetch_errors} errors")
        table.caption = "errors and broken documents: (the farm injects faults on purpose)"
    if running:
        table.add_row("crawl running", f"{running['fetched']} of {stats['feeds']} feeds "
                      f"fetched so far, {running['new_entries']:,} new entries")
    elif not cycle:
        table.add_row("last crawl", "first crawl starting...")
    table.add_row("entries stored", f"{stats['entries_stored']:,}")
    filtered = metrics.get("feedmesh_tier_articles_in_total{tier=filter}", 0)
    table.add_row("articles matched", f"{filtered:,.0f} "
                  f"filtered -> {metrics.get('feedmesh_matches_total', 0):,.0f} matches")
    count = metrics.get("feedmesh_hub_latency_seconds_count", 0)
    if count:
        mean = metrics["feedmesh_hub_latency_seconds_sum"] / count
        table.add_row("intra-hub latency", f"{mean * 1000:.0f} ms mean (crawler -> reflector)")
    table.add_row("memory", f"{metrics.get('feedmesh_process_memory_bytes', 0) / 2**20:.0f} MB")
    subs = Table(title="demo subscriptions", show_header=True)
    subs.add_column("query")
    subs.add_column("entries in its feed", justify="right")
    for sub, held in zip(demo.subs, counts, strict=True):
        subs.add_row(sub.query, str(held))
    return Group(header, table, subs)
