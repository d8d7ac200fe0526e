"""``feedmesh stats``: a running hub's figures (from its ``/api/stats``), for a person."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from feedmesh.procstat import cpu_seconds, rss_bytes
from feedmesh.secret_file import SecretFileError, read_token

__all__ = ["configure", "crawl_line", "run", "stats_table", "topology_rows"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="the hub's base URL")
    parser.add_argument("--up", default="", metavar="DATA",
                        help="every process of a `feedmesh up --data DATA` topology, one row each")
    parser.add_argument("--json", action="store_true", help="print the raw JSON")
    parser.add_argument("--interval", type=float, default=3.0, metavar="S",
                        help="with --up: seconds over which CPU and articles/s are measured "
                             "(articles come in bursts: a short window reads 0)")
    parser.add_argument("--operator-token-file", default="", metavar="FILE",
                        help="the hub's DATA/operator-token: also name the hosts whose fetches "
                             "are paused (others see how many)")


def run(args: argparse.Namespace) -> int:
    if args.up:
        return run_topology(args)
    request = urllib.request.Request(f"{args.url.rstrip('/')}/api/stats")
    if args.operator_token_file:
        try:
            token = read_token(args.operator_token_file, "--operator-token-file")
        except SecretFileError as exc:
            print(f"feedmesh stats: {exc}", file=sys.stderr)
            return 2
        request.add_header("Authorization", "Bearer " + token.decode("ascii"))
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
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
    if stats.get("crawl_mode") == "scheduled":
        table.add_row("crawl, last minute", crawl_line(cycle) if cycle else "nothing fetched")
    elif cycle:
        table.add_row("last crawl", f"{crawl_line(cycle)} in {cycle['elapsed_s']:.1f} s")
    running = stats.get("crawl_running")
    if running:
        table.add_row("crawl running", f"{crawl_line(running)} so far, of "
                      f"{stats['feeds']} feeds")
    paused = stats.get("hosts_paused")
    if isinstance(paused, int) and paused:  # named to the operator only
        table.add_row("hosts paused", f"{paused} (cannot be reached; --operator-token-file "
                      "names them)")
    elif paused:
        shown = ", ".join(sorted(paused)[:5]) + (f" and {len(paused) - 5} more"
                                                 if len(paused) > 5 else "")
        table.add_row("hosts paused", f"{len(paused)} (cannot be reached): {shown}")
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


def crawl_line(cycle: dict) -> str:
    """What a crawl fetched, in parts that add up: documents (the broken among them), 304s,
    fetch errors."""
    errors = cycle.get("errors", {})
    fetch_errors = sum(v for k, v in errors.items() if not k.startswith("parse:"))
    broken = sum(v for k, v in errors.items() if k.startswith("parse:"))
    documents = cycle["ok"] + cycle.get("delta", 0)
    return (f"{cycle['fetched']} fetched = {documents} documents"
            + (f" ({broken} broken)" if broken else "")
            + f" + {cycle['not_modified']} not modified (304) + {fetch_errors} errors; "
            f"{cycle['new_entries']} new entries")


def _figures(url: str, token_file: str = "") -> dict[str, float]:
    """A process's Prometheus figures as ``name{labels}`` -> value (empty when unreachable);
    ``token_file``: the bearer token it asks for (a reflector under ``up``), a file 0600."""
    headers = {}
    if token_file:
        try:
            token = read_token(token_file, "reflector token").decode()
            headers["Authorization"] = f"Bearer {token}"
        except SecretFileError:
            return {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    figures = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            figures[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return figures


def _sum(figures: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in figures.items() if k.startswith(prefix))


def topology_rows(listing: dict, interval: float = 1.0) -> list[dict]:
    """One row per process of a ``feedmesh up`` listing: role, shard, pid, its state (running,
    restarting, down after a crash loop, stopped) and restarts, CPU % and articles in/out per
    second over ``interval`` seconds, RSS, and the queue depth of its bus groups."""
    processes = listing["processes"]
    before = [(cpu_seconds(p["pid"]), _figures(p["metrics"], p.get("token_file", ""))
               if "metrics" in p else {})
              for p in processes]
    started = time.monotonic()
    time.sleep(interval)
    elapsed = time.monotonic() - started
    rows = []
    for process, (cpu0, figures0) in zip(processes, before, strict=True):
        cpu1 = cpu_seconds(process["pid"])
        figures = (_figures(process["metrics"], process.get("token_file", ""))
                   if "metrics" in process else {})
        rate_in = (_sum(figures, "feedmesh_tier_articles_in_total")
                   - _sum(figures0, "feedmesh_tier_articles_in_total")) / elapsed
        rate_out = (_sum(figures, "feedmesh_tier_articles_out_total")
                    - _sum(figures0, "feedmesh_tier_articles_out_total")) / elapsed
        rows.append({
            "role": process["role"], "shard": process.get("shard", ""), "pid": process["pid"],
            "alive": cpu1 is not None,
            # up's supervision (nats and postgres are up's own, not restarted)
            "state": process.get("state", "running" if cpu1 is not None else "gone"),
            "restarts": process.get("restarts", 0),
            "cpu_percent": (round(100 * (cpu1 - cpu0) / elapsed, 1)
                            if cpu0 is not None and cpu1 is not None else None),
            "rss_mb": None if (rss := rss_bytes(process["pid"])) is None else rss / 2**20,
            "queue_messages": (int(_sum(figures, "feedmesh_queue_messages"))
                               if figures else None),
            "articles_in_per_s": round(rate_in, 2) if figures else None,
            "articles_out_per_s": round(rate_out, 2) if figures else None,
            "articles_in_total": (int(_sum(figures, "feedmesh_tier_articles_in_total"))
                                  if figures else None),
            "articles_out_total": (int(_sum(figures, "feedmesh_tier_articles_out_total"))
                                   if figures else None),
        })
    return rows


def run_topology(args: argparse.Namespace) -> int:
    if not 0 < args.interval <= 300:
        print(f"feedmesh stats: --interval {args.interval:g}: give seconds between 0 and 300",
              file=sys.stderr)
        return 2
    path = os.path.join(args.up, "up.json")
    try:
        with open(path) as f:
            listing = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"feedmesh stats: no running topology in {args.up} ({path}: {exc})",
              file=sys.stderr)
        return 2
    rows = topology_rows(listing, args.interval)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    # (compact: ten columns in an 80-column terminal)
    table = Table(title=f"feedmesh topology, web UI at {listing.get('web', '?')}",
                  box=None, padding=(0, 1, 0, 0), pad_edge=False)
    for column in ("role", "shard", "state", "pid", "restarts", "CPU %", "RSS MB", "queued",
                   "in/s", "out/s"):
        table.add_column(column, justify="left" if column in ("role", "shard", "state")
                         else "right")

    def shown(value: object, spec: str = "") -> str:
        return "-" if value is None else format(value, spec)

    def rate(value: float | None) -> str:  # a trickle is not shown as 0
        return shown(value, ".1f" if value is not None and 0 < value < 10 else ".0f")

    for row in rows:
        state = row["state"] if row["alive"] or row["state"] != "running" else "gone"
        table.add_row(row["role"], row["shard"], state, str(row["pid"]), str(row["restarts"]),
                      shown(row["cpu_percent"], ".0f"),
                      shown(row["rss_mb"], ".0f"), shown(row["queue_messages"]),
                      rate(row["articles_in_per_s"]), rate(row["articles_out_per_s"]))
    Console().print(table)
    return 0
