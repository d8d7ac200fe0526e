"""The storage ports on PostgreSQL against SQLite (the baseline), in the same run.

Each engine gets the same work, through the ports only:

1. ingest: ``--feeds`` feeds, then batches of 20 fetch intents of 5 new entries each (a crawler's
   commit), timed per batch: entries stored per second and the median / p99 batch latency;
2. replay: every stored entry read back with ``entries_after`` in chunks of 500 (the hub's replay);
3. subscriptions: ``--subs`` subscriptions bulk-inserted (``add_subscriptions``), then read back
   as start-up does (``subscription_columns``);
4. reflector: batches of 200 match rows with their items and a watermark (``ReflectorLog.store``).

PostgreSQL is a :class:`~feedmesh.store.pg_server.LocalPostgres` started here with its durable
defaults (fsync on, as SQLite's WAL with ``synchronous=NORMAL`` is durable against a crash), on
loopback TCP: a round trip per statement that SQLite, in process, does not pay.

    .venv/bin/python benchmarks/stores.py [--quick] [--feeds 1000] [--batches 200] [--subs 200000]

Last line: JSON with, per engine (``sqlite``, ``postgresql``): ``<engine>_entries_per_s``,
``<engine>_batch_p50_ms``, ``<engine>_batch_p99_ms``, ``<engine>_replay_entries_per_s``,
``<engine>_subs_insert_per_s``, ``<engine>_subs_columns_s``, ``<engine>_reflector_rows_per_s``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from feedmesh.compose import open_hub_state, open_ingest_store, open_reflector_log
from feedmesh.model import Entry
from feedmesh.store import FeedUpdate, ReflectedItem
from feedmesh.store.pg_server import LocalPostgres

BATCH_FEEDS = 20
ENTRIES_PER_FEED = 5
REFLECTOR_BATCH = 200


def entry(n: int) -> Entry:
    return Entry(key=f"https://example.org/post/{n}", content_hash=f"{n:016x}",
                 title=f"post {n} about the world and its people",
                 summary="a summary of some length " * 8, link=f"https://example.org/post/{n}")


def run_engine(location: Callable[[str], str], feeds: int, batches: int,
               subs: int) -> dict[str, float]:
    out: dict[str, float] = {}
    store = open_ingest_store(location("feedmesh.db"))
    rows = store.add_feeds([f"http://127.0.0.1/feed/{i}" for i in range(feeds)], now=0.0)
    latencies: list[float] = []
    n = 0
    started = time.perf_counter()
    for b in range(batches):
        updates = []
        for k in range(BATCH_FEEDS):
            row = rows[(b * BATCH_FEEDS + k) % feeds]
            updates.append(FeedUpdate(feed_id=row.id, state=row.state, seen_at=float(b),
                                      entries=tuple(entry(n + i) for i in range(ENTRIES_PER_FEED))))
            n += ENTRIES_PER_FEED
        t = time.perf_counter()
        store.apply(updates)
        latencies.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - started
    out["entries_per_s"] = n / elapsed
    out["batch_p50_ms"] = statistics.median(latencies) * 1000
    out["batch_p99_ms"] = float(np.percentile(latencies, 99)) * 1000
    started = time.perf_counter()
    watermark, replayed = 0, 0
    while chunk := store.entries_after(watermark, 500):
        watermark, replayed = chunk[-1].id, replayed + len(chunk)
    out["replay_entries_per_s"] = replayed / (time.perf_counter() - started)
    assert replayed == store.entry_count(), (replayed, store.entry_count())
    store.close()

    state = open_hub_state(location("hub.db"))
    account, _ = state.create_account("bench", 0.0)
    started = time.perf_counter()
    state.add_subscriptions(((account.id, "", f"world OR topic{i % 997}", 10, i % 2)
                             for i in range(subs)), now=0.0)
    out["subs_insert_per_s"] = subs / (time.perf_counter() - started)
    started = time.perf_counter()
    columns = state.subscription_columns()
    out["subs_columns_s"] = time.perf_counter() - started
    assert len(columns["id"]) == subs
    state.close()

    log = open_reflector_log(location("reflector-0.db"), 0)
    stored = 0
    started = time.perf_counter()
    for b in range(batches):
        rows_ = [(ReflectedItem(entry_id=b * REFLECTOR_BATCH + i, feed_id=1,
                                feed_url="http://127.0.0.1/feed/1", feed_title="feed",
                                first_seen_at=1.0, stored_at=2.0,
                                entry=entry(b * REFLECTOR_BATCH + i)), b"\x01\x02\x03", 0)
                 for i in range(REFLECTOR_BATCH)]
        log.store(rows_, {0: (b + 1) * REFLECTOR_BATCH})
        stored += len(rows_)
    out["reflector_rows_per_s"] = stored / (time.perf_counter() - started)
    log.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feeds", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--subs", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true", help="40 batches, 20,000 subscriptions")
    args = parser.parse_args()
    if args.quick:
        args.batches, args.subs = 40, 20_000
    print(f"stores: {args.feeds} feeds, {args.batches} batches of {BATCH_FEEDS} intents x "
          f"{ENTRIES_PER_FEED} entries, {args.subs} subscriptions, "
          f"{args.batches} reflector batches of {REFLECTOR_BATCH} rows")
    results: dict[str, dict[str, float]] = {}
    sqlite_dir = Path(tempfile.mkdtemp(prefix="feedmesh-bench-sqlite-"))
    pg_dir = Path(tempfile.mkdtemp(prefix="feedmesh-bench-pg-"))
    try:
        results["sqlite"] = run_engine(lambda name: str(sqlite_dir / name), args.feeds,
                                       args.batches, args.subs)
        with LocalPostgres(pg_dir) as server:
            results["postgresql"] = run_engine(lambda name: server.url(), args.feeds,
                                               args.batches, args.subs)
    finally:
        shutil.rmtree(sqlite_dir, ignore_errors=True)
        shutil.rmtree(pg_dir, ignore_errors=True)
    names = list(results["sqlite"])
    print(f"{'figure':<24}{'sqlite':>14}{'postgresql':>14}{'pg/sqlite':>11}")
    for name in names:
        a, b = results["sqlite"][name], results["postgresql"][name]
        print(f"{name:<24}{a:>14,.2f}{b:>14,.2f}{b / a:>10.2f}x")
    print(json.dumps({f"{engine}_{name}": round(value, 2)
                      for engine, figures in results.items() for name, value in figures.items()}))


if __name__ == "__main__":
    main()
