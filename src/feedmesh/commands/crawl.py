"""``feedmesh crawl --opml FILE_OR_URL [--once]``: crawl every feed of a list into the store, with
a live progress bar and a summary of what each cycle fetched, saved and failed on."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from feedmesh import environment, runloop
from feedmesh.commands.flags import add_fetch_arguments, fetch_settings
from feedmesh.compose.crawl_list import CrawlList, CrawlStats
from feedmesh.compose.lifecycle import stopping
from feedmesh.errors import FeedmeshError
from feedmesh.logs import setup_logging

__all__ = ["configure", "run"]

DEFAULT_DB = "var/feedmesh.db"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opml", required=True, metavar="FILE_OR_URL",
                        help="the list of feeds to crawl (OPML file or http(s) URL)")
    parser.add_argument("--once", action="store_true", help="crawl one cycle, then exit")
    parser.add_argument("--db", default=environment.get("FEEDMESH_DB", DEFAULT_DB),
                        help="SQLite file or postgresql:// URL "
                             f"(default $FEEDMESH_DB or {DEFAULT_DB})")
    parser.add_argument("--interval", type=float, default=900.0,
                        help="seconds between cycles without --once (Cobra: 15 minutes)")
    parser.add_argument("--concurrency", type=int, default=200,
                        help="fetches in flight at once, over every host")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true",
                        help="at the end, print one JSON object on standard output: the last "
                             "cycle's figures and every feed that failed, with why")
    add_fetch_arguments(parser)


EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (or SIGTERM) before the cycles were done: what was fetched is kept."""


def run(args: argparse.Namespace) -> int:
    setup_logging("warning")
    os.umask(0o077)  # what it writes (databases, snapshots, keys) is its owner's alone
    # Not a terminal (a log, a pipe): lines as long as they are, not folded at 80 columns.
    console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)
    try:
        return runloop.run(_main(args, console))
    except FeedmeshError as exc:
        console.print(f"[red]feedmesh crawl:[/red] {exc}", soft_wrap=True)
        return 2


async def _main(args: argparse.Namespace, console: Console) -> int:
    stop = asyncio.Event()
    with stopping(stop):
        async with CrawlList(args.db, fetch_settings(args),
                             concurrency=args.concurrency) as crawl:
            ids = await crawl.add(args.opml)
            for reason in crawl.skipped:
                console.print(f"[yellow]skipped[/yellow] {reason}", soft_wrap=True)
            console.print(f"{len(ids)} feeds from {args.opml} -> {args.db}", soft_wrap=True)
            cycle = 0
            while True:
                cycle += 1
                stats = await _cycle(crawl, len(ids), console, args.quiet, cycle, stop)
                console.print(summary_table(stats, f"cycle {cycle}"))
                failed = crawl.failures()
                if failed:
                    console.print(failure_table(failed, f"cycle {cycle}: {len(failed)} feeds "
                                                        "failed"))
                if args.once or stop.is_set():
                    break
                try:
                    await asyncio.wait_for(stop.wait(), args.interval)
                    break
                except TimeoutError:
                    pass
            if args.json:
                print(json.dumps({"cycles": cycle, "last_cycle": msgspec.to_builtins(stats),
                                  "failed": failed, "interrupted": stop.is_set()}))
    if stop.is_set():
        console.print("stopped: what was fetched is stored", soft_wrap=True)
        return EXIT_INTERRUPTED
    return 0


def failure_table(failed: list[dict[str, object]], title: str) -> Table:
    table = Table(title=title)
    for column in ("feed", "outcome", "why"):
        table.add_column(column, overflow="fold")
    for row in failed:
        table.add_row(str(row["url"]), str(row["outcome"]), str(row["error"]))
    return table


async def _cycle(crawl: CrawlList, feeds: int, console: Console, quiet: bool,
                 cycle: int, stop: asyncio.Event) -> CrawlStats:
    if quiet:
        return await crawl.cycle(stop=stop)
    columns = (TextColumn(f"cycle {cycle}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[detail]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("crawl", total=feeds, detail="")

        def show(stats: CrawlStats) -> None:
            errors = sum(stats.errors.values())
            bar.update(task, completed=stats.fetched + stats.skipped,
                       detail=f"304s {stats.not_modified}  new {stats.new_entries}  "
                              f"errors {errors}  in {stats.wire_bytes / 1e6:.1f} MB")

        return await crawl.cycle(show, stop)


def summary_table(stats: CrawlStats, title: str) -> Table:
    table = Table(title=title, show_header=False)
    rate = stats.fetched / stats.elapsed_s if stats.elapsed_s else 0.0
    rows = [
        ("fetched", f"{stats.fetched} in {stats.elapsed_s:.1f} s ({rate:.0f} feeds/s)"),
        ("200 / 226 / 304", f"{stats.ok} / {stats.delta} / {stats.not_modified}"),
        ("unchanged documents", str(stats.unchanged_documents)),
        ("new / updated entries", f"{stats.new_entries} / {stats.updated_entries}"),
        ("bytes in (wire / decoded)", f"{stats.wire_bytes:,} / {stats.decoded_bytes:,}"),
        ("skipped (backoff, inactive)", str(stats.skipped)),
    ]
    for kind, count in sorted(stats.errors.items()):
        rows.append((f"error: {kind}", str(count)))
    for name, value in rows:
        table.add_row(name, value)
    return table
