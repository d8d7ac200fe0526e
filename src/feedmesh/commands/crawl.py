"""``feedmesh crawl --opml FILE_OR_URL [--once]``: crawl every feed of a list into the store, with
a live progress bar and a summary of what each cycle fetched, saved and failed on."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from pathlib import Path

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from feedmesh import runloop
from feedmesh.clock import SystemClock
from feedmesh.compose import open_ingest_store
from feedmesh.crawl.pipeline import Crawler, CrawlSettings, CrawlStats
from feedmesh.feeds.opml import OpmlError, OpmlResult, parse_opml
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.fetch.redact import redact_credentials
from feedmesh.logs import setup_logging
from feedmesh.model import FetchOutcome
from feedmesh.store import StoreError

__all__ = ["configure", "run"]

DEFAULT_DB = "var/feedmesh.db"


def add_fetch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-network", action="append", default=[], metavar="CIDR",
                        help="allow fetching from this private block (e.g. 127.0.0.0/8 for a "
                             "local farm); repeatable")
    parser.add_argument("--timeout", type=float, default=5.0, help="per-fetch deadline, seconds")
    parser.add_argument("--per-host", type=int, default=2,
                        help="requests in flight per host (default 2)")


def fetch_settings(args: argparse.Namespace) -> FetchSettings:
    return FetchSettings(allow_networks=tuple(args.allow_network), total_timeout_s=args.timeout,
                         connect_timeout_s=min(5.0, args.timeout),
                         per_host_connections=args.per_host)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opml", required=True, metavar="FILE_OR_URL",
                        help="the list of feeds to crawl (OPML file or http(s) URL)")
    parser.add_argument("--once", action="store_true", help="crawl one cycle, then exit")
    parser.add_argument("--db", default=os.environ.get("FEEDMESH_DB", DEFAULT_DB),
                        help=f"SQLite file or postgresql:// URL (default $FEEDMESH_DB or {DEFAULT_DB})")
    parser.add_argument("--interval", type=float, default=900.0,
                        help="seconds between cycles without --once (Cobra: 15 minutes)")
    parser.add_argument("--concurrency", type=int, default=200,
                        help="fetches in flight at once, over every host")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--json", action="store_true",
                        help="at the end, print one JSON object on standard output: the last "
                             "cycle's figures and every feed that failed, with why")
    add_fetch_arguments(parser)


def run(args: argparse.Namespace) -> int:
    setup_logging("warning")
    os.umask(0o077)  # what it writes (databases, snapshots, keys) is its owner's alone
    console = Console(stderr=True)
    try:
        return runloop.run(_main(args, console))
    except (OpmlError, StoreError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2


OPERATOR_OPML_BYTES = 256 * 1024 * 1024
OPERATOR_OPML_FEEDS = 10_000_000


async def load_opml(source: str, settings: FetchSettings) -> OpmlResult:
    """The feed list an operator gave on the command line (a file or an http(s) URL).

    The operator is trusted with larger lists than web users (100,000 feeds make 21 MB of OPML),
    so this fetch and parse use their own, larger caps.
    """
    if source.startswith(("http://", "https://")):
        roomy = msgspec.structs.replace(settings, max_body_bytes=OPERATOR_OPML_BYTES,
                                        max_decoded_bytes=OPERATOR_OPML_BYTES,
                                        total_timeout_s=max(settings.total_timeout_s, 60.0))
        async with Fetcher(roomy) as fetcher:
            result = await fetcher.fetch(source)
        if not result.ok:
            hint = BLOCKED_HINT if result.outcome == FetchOutcome.BLOCKED else ""
            raise OpmlError(f"cannot fetch the OPML list: {result.error.message}{hint}")
        data = result.body
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise OpmlError(f"cannot read the OPML list {source}: {exc.strerror}") from exc
    return parse_opml(data, max_bytes=OPERATOR_OPML_BYTES, max_outlines=OPERATOR_OPML_FEEDS)


async def _main(args: argparse.Namespace, console: Console) -> int:
    clock = SystemClock()
    store = open_ingest_store(args.db)
    async with Fetcher(fetch_settings(args), clock=clock) as fetcher:
        opml = await load_opml(args.opml, fetch_settings(args))
        for reason in opml.skipped:
            console.print(f"[yellow]skipped[/yellow] {reason}")
        crawler = Crawler(store, fetcher, clock, settings=CrawlSettings(
            concurrency=args.concurrency))
        try:
            ids = await crawler.add_feeds(o.url for o in opml.outlines)
            console.print(f"{len(ids)} feeds from {args.opml} -> {args.db}")
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            cycle = 0
            while True:
                cycle += 1
                stats = await _cycle(crawler, ids, console, args.quiet, cycle)
                console.print(summary_table(stats, f"cycle {cycle}"))
                failed = failures(crawler)
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
                                  "failed": failed}))
        finally:
            await crawler.aclose()
            store.close()
    return 0


BLOCKED_HINT = "; allow it with --allow-network CIDR (e.g. 127.0.0.0/8) if this is intended"


def failures(crawler: Crawler) -> list[dict[str, object]]:
    """Every feed whose last fetch failed: its id, URL (without credentials), outcome and why."""
    failed = []
    for feed_id, state in sorted(crawler.states.items()):
        if not state.last_error:
            continue
        why = state.last_error + (BLOCKED_HINT if state.last_outcome == "blocked" else "")
        failed.append({"id": feed_id, "url": redact_credentials(state.url),
                       "outcome": state.last_outcome, "error": why,
                       "active": state.active})
    return failed


def failure_table(failed: list[dict[str, object]], title: str) -> Table:
    table = Table(title=title)
    for column in ("feed", "outcome", "why"):
        table.add_column(column, overflow="fold")
    for row in failed:
        table.add_row(str(row["url"]), str(row["outcome"]), str(row["error"]))
    return table


async def _cycle(crawler: Crawler, ids: list[int], console: Console, quiet: bool,
                 cycle: int) -> CrawlStats:
    if quiet:
        return await crawler.crawl(ids)
    columns = (TextColumn(f"cycle {cycle}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[detail]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("crawl", total=len(ids), detail="")

        def show(stats: CrawlStats) -> None:
            errors = sum(stats.errors.values())
            bar.update(task, completed=stats.fetched + stats.skipped,
                       detail=f"304s {stats.not_modified}  new {stats.new_entries}  "
                              f"errors {errors}  in {stats.wire_bytes / 1e6:.1f} MB")

        return await crawler.crawl(ids, progress=show)


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
