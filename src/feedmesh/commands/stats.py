"""``feedmesh stats``: a running hub's figures (from its ``/api/stats``), for a person."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request

from rich.console import Console
from rich.table import Table

__all__ = ["configure", "run", "stats_table"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="the hub's base URL")
    parser.add_argument("--json", action="store_true", help="print the raw JSON")


def run(args: argparse.Namespace) -> int:
    try:
        with urllib.request.urlopen(f"{args.url.rstrip('/')}/api/stats", timeout=10) as answer:
            stats = json.load(answer)
    except OSError as exc:
        print(f"feedmesh stats: cannot read {args.url}/api/stats: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(stats, indent=2))
        return 0
    Console().print(stats_table(stats))
    return 0


def stats_table(stats: dict) -> Table:
    table = Table(title="feedmesh hub", show_header=False)
    table.add_row("source feeds", str(stats["feeds"]))
    table.add_row("subscriptions", str(stats["subscriptions"]))
    table.add_row("entries stored", str(stats["entries_stored"]))
    cycle = stats.get("last_crawl")
    if cycle:
        table.add_row("last crawl", f"{cycle['fetched']} fetched, {cycle['not_modified']} 304, "
                      f"{cycle['new_entries']} new in {cycle['elapsed_s']:.1f} s")
    metrics = stats["metrics"]
    for tier in ("crawler", "filter", "reflector"):
        table.add_row(f"{tier} articles in/out",
                      f"{metrics.get(f'feedmesh_tier_articles_in_total{{tier={tier}}}', 0):.0f} / "
                      f"{metrics.get(f'feedmesh_tier_articles_out_total{{tier={tier}}}', 0):.0f}")
        table.add_row(f"{tier} bytes in/out",
                      f"{metrics.get(f'feedmesh_tier_bytes_in_total{{tier={tier}}}', 0):,.0f} / "
                      f"{metrics.get(f'feedmesh_tier_bytes_out_total{{tier={tier}}}', 0):,.0f}")
    count = metrics.get("feedmesh_hub_latency_seconds_count", 0)
    if count:
        mean = metrics.get("feedmesh_hub_latency_seconds_sum", 0) / count
        table.add_row("intra-hub latency", f"mean {mean * 1000:.1f} ms over {count:.0f} entries")
    for name, depth in stats["queues"].items():
        table.add_row(f"queue {name}", f"{depth['messages']} messages, {depth['bytes']:,} bytes")
    table.add_row("memory", f"{metrics.get('feedmesh_process_memory_bytes', 0) / 2**20:.0f} MB")
    for key, value in sorted(metrics.items()):
        if key.startswith("feedmesh_fetches_total{"):
            table.add_row("fetches " + key.split("=", 1)[1].rstrip("}"), f"{value:.0f}")
    return table
