"""Cobra Figure 8 on the farm: what each crawler technique saves, inbound and outbound.

Four crawls of the same farm over the same farm-time span, each a fresh farm process with the same
seed, origin and speed, each with cycles every 15 farm minutes (Cobra's interval):

(a) fetch everything: no validators, every document parsed, every entry sent downstream;
(b) conditional GET (ETag / Last-Modified, and RFC 3229 deltas where the server offers them);
(c) + whole-document hash: an identical body is dropped before parsing;
(d) + per-entry hash: only new or updated entries go downstream (the crawler's real output).

(c) and (d) come from one run (the same fetches; (c) counts what would be sent if every entry of a
changed document went on). A fifth run, (b') conditional GET without ``A-IM: feed``, isolates the
delta encoding. Inbound = bytes on the wire (compressed); outbound = the encoded entries handed to
the filter tier. The first cycle (every feed new to the crawler) is excluded, as in a steady crawl.

    .venv/bin/python benchmarks/crawl_bandwidth.py [--feeds 5000] [--cycles 4]

Last line: JSON with ``reduction_out_pct`` (a -> d), ``reduction_in_pct`` (a -> b), and the bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import msgspec

from feedmesh.clock import SystemClock
from feedmesh.crawl import Crawler, CrawlSettings, CrawlStats
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.fetch import Fetcher, FetchSettings
from feedmesh.store.sqlite import SQLiteStore

ORIGIN = 1_760_000_000.0
CYCLE_FARM_S = 900.0


async def crawl_run(feeds: int, cycles: int, spacing_s: float, *, conditional: bool,
                    document_hash: bool, delta: bool) -> list[CrawlStats]:
    config = FarmConfig(feeds=feeds, seed=3, faults="none", hosts=20, origin=ORIGIN,
                        speed=CYCLE_FARM_S / spacing_s)
    with FarmProcess(config) as farm, tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bw.db")
        settings = FetchSettings(allow_networks=("127.0.0.0/8",), per_host_connections=32,
                                 accept_delta=delta)
        clock = SystemClock()
        async with Fetcher(settings, clock=clock) as fetcher:
            crawler = Crawler(store, fetcher, clock, settings=CrawlSettings(
                concurrency=128, conditional=conditional, document_hash=document_hash))
            await crawler.add_feeds([farm.feed_url(i) for i in range(feeds)])
            started = time.monotonic()
            results = []
            for cycle in range(cycles + 1):
                # Cycle k starts k spacings after the farm started, whatever the crawl took.
                await asyncio.sleep(max(0.0, started + cycle * spacing_s - time.monotonic()))
                # The server's Cache-Control is honoured in real crawls; here every variant must
                # fetch every feed each cycle to be comparable, so freshness hints are cleared.
                for fid, state in crawler.states.items():
                    crawler.states[fid] = msgspec.structs.replace(state, min_refresh_at=0.0)
                results.append(await crawler.crawl())
            await crawler.aclose()
        store.close()
    return results[1:]


def totals(stats: list[CrawlStats]) -> dict[str, int]:
    return {"in": sum(s.wire_bytes for s in stats),
            "decoded_in": sum(s.decoded_bytes for s in stats),
            "out_all_entries": sum(s.entries_parsed_bytes for s in stats),
            "out_new_entries": sum(s.out_bytes for s in stats),
            "fetched": sum(s.fetched for s in stats),
            "not_modified": sum(s.not_modified for s in stats),
            "delta": sum(s.delta for s in stats),
            "unchanged": sum(s.unchanged_documents for s in stats),
            "parsed": sum(s.parsed for s in stats),
            "new": sum(s.new_entries for s in stats)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--feeds", type=int, default=5000)
    parser.add_argument("--cycles", type=int, default=4)
    parser.add_argument("--spacing", type=float, default=12.0,
                        help="real seconds between cycles (= 15 farm minutes)")
    args = parser.parse_args()
    runs = {}
    for name, kwargs in (
            ("a", {"conditional": False, "document_hash": False, "delta": False}),
            ("b", {"conditional": True, "document_hash": False, "delta": True}),
            ("b_nodelta", {"conditional": True, "document_hash": False, "delta": False}),
            ("cd", {"conditional": True, "document_hash": True, "delta": True})):
        print(f"run {name}: {kwargs}", flush=True)
        runs[name] = totals(asyncio.run(crawl_run(args.feeds, args.cycles, args.spacing,
                                                  **kwargs)))
        print(f"  {runs[name]}", flush=True)
    a, b, nd, cd = runs["a"], runs["b"], runs["b_nodelta"], runs["cd"]
    rows = [
        ("(a) fetch everything", a["in"], a["out_all_entries"]),
        ("(b') conditional GET, no delta", nd["in"], nd["out_all_entries"]),
        ("(b) conditional GET + RFC 3229", b["in"], b["out_all_entries"]),
        ("(c) + whole-document hash", cd["in"], cd["out_all_entries"]),
        ("(d) + per-entry hash", cd["in"], cd["out_new_entries"]),
    ]
    print(f"\n{args.feeds} feeds, {args.cycles} cycles of 15 farm minutes (first cycle excluded)")
    print(f"{'technique':34} {'bytes in':>14} {'bytes out':>14} {'in vs (a)':>10} "
          f"{'out vs (a)':>11}")
    for label, bytes_in, bytes_out in rows:
        print(f"{label:34} {bytes_in:>14,} {bytes_out:>14,} {100 * bytes_in / a['in']:>9.1f}% "
              f"{100 * bytes_out / a['out_all_entries']:>10.2f}%")
    reduction_out = 100 * (1 - cd["out_new_entries"] / a["out_all_entries"])
    reduction_in = 100 * (1 - b["in"] / a["in"])
    print(f"\ncrawler output reduced by {reduction_out:.2f}% (Cobra: 99.8%); inbound by "
          f"{reduction_in:.1f}% (Cobra, Last-Modified only: 57%)")
    print(json.dumps({"reduction_out_pct": round(reduction_out, 2),
                      "reduction_in_pct": round(reduction_in, 1),
                      "reduction_in_delta_pct": round(100 * (1 - b["in"] / nd["in"]), 1),
                      "feeds": args.feeds, "cycles": args.cycles,
                      "bytes": {"a": a, "b": b, "b_nodelta": nd, "cd": cd}}))


if __name__ == "__main__":
    main()
