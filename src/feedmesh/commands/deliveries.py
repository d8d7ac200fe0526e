"""``feedmesh deliveries``: every push target's delivery log, for the hub's operator.

Reads the hub's state store (a data folder's ``hub.db``, or the ``postgresql://`` URL of a
distributed hub), never a running process: it works when the web is down, which is when an
operator asks. One row per WebSub subscription and webhook, with its last attempts (status
codes, errors); ``--failing`` keeps those whose last attempt failed; ``--json`` prints it raw.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from feedmesh.commands import flags
from feedmesh.compose.tools import delivery_logs
from feedmesh.errors import FeedmeshError

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", default="", metavar="FILE_OR_URL",
                        help="the hub's state: its data folder's hub.db or its postgresql:// "
                             "URL (default: hub.db in --data)")
    flags.add_data(parser, help="the hub's data folder")
    parser.add_argument("--last", type=int, default=5, help="attempts shown per target")
    parser.add_argument("--failing", action="store_true",
                        help="only targets whose last attempt failed")
    parser.add_argument("--json", action="store_true", help="print the raw JSON")


def run(args: argparse.Namespace) -> int:
    location = args.state or str(Path(args.data) / "hub.db")
    try:
        rows = delivery_logs(location, last=args.last, failing=args.failing)
    except FeedmeshError as exc:
        print(f"feedmesh deliveries: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"targets": rows}, indent=2))
        return 0
    table = Table(title=f"push targets: {len(rows)}")
    for column in ("id", "kind", "sub", "url", "last attempts (newest first)"):
        table.add_column(column)
    for row in rows:
        table.add_row(str(row["id"]), row["kind"], str(row["subscription"]), row["url"],
                      "\n".join(_attempt_line(d) for d in row["deliveries"]) or "none yet")
    Console().print(table)
    return 0


def _attempt_line(delivery: dict) -> str:
    at = datetime.fromtimestamp(delivery["at"], UTC).strftime("%Y-%m-%d %H:%M:%S")
    status = str(delivery["status"]) if delivery["status"] else "no answer"
    error = f" {delivery['error']}" if delivery["error"] else ""
    return (f"{at} #{delivery['attempt']} {status} {delivery['entries']} entries "
            f"{delivery['elapsed_ms']:.0f} ms{error}")
